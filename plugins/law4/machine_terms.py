"""The machine term a Law 4 run measures for a contribution bundle: the effective η·BW that each
calibrated agreement anchor calibrates on its reference arm, round by round.

Such an anchor prices its reference arm b at 1 GB/s (`detail.prediction.bytes_per_token_b`: its
byte-seconds at that rate ×1e9; `.fixed_seconds_b`: its compute seconds, Law4._calibrated) and
runs it beside arm a; arm b's measured tok/s in round i then gives the rate
c_i = S_b / (1 / tok_s_b,i − F_b) in GB/s (the same c the law uses to predict arm a). Rounds
whose arm-b token is shorter than F_b give none.
"""
from __future__ import annotations

import math
import statistics
from typing import Any, Optional

from lawbench import MachineTerm


def eta_bw(result: Any) -> Optional[MachineTerm]:
    """The η·BW a calibrated agreement result measured, or None for any other result."""
    d = result.detail.get("prediction")
    if not (isinstance(d, dict) and result.detail.get("calibrated_on") and result.measurement):
        return None
    s_b, f_b = d.get("bytes_per_token_b"), d.get("fixed_seconds_b", 0.0)
    if not (isinstance(s_b, (int, float)) and isinstance(f_b, (int, float))):
        return None
    rates = []
    for sample in result.measurement.samples:
        tok_s = sample.raw.get("value_b")
        if isinstance(tok_s, (int, float)) and tok_s > 0 and 1 / tok_s > f_b:
            rates.append(s_b / 1e9 / (1 / tok_s - f_b))
    rates = [c for c in rates if math.isfinite(c)]
    if not rates:
        return None
    pricing = (d.get("arm_b") or {}).get("pricing", {})
    tiers = sorted(pricing.get("weight_bytes", {})) or ["all"]
    return MachineTerm(anchor_id=result.anchor_id, term="eta_bw_gbs", tiers=tiers,
                       value=statistics.median(rates), unit="GB/s", samples=rates,
                       how="arm b's bytes per token over its measured token time, per round")
