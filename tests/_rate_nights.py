"""A night of rate series judged by the real gate (core/history/gate.judge) and appended to a real
History: the one way the rate tests (test_rates, test_rates_prove, test_rate_band_plot) make a
night, each with its own series and visits."""
from __future__ import annotations

from typing import Optional, Sequence

from lawbench.core.history.gate import judge
from lawbench.core.history.store import History
from lawbench.core.models import RateSample, RateSeries, Result, Verdict
from lawbench.core.record.reports import RunRecord

MACHINE = {"hostname": "box", "cpu_model": "Test CPU", "cpu_count_logical": 2, "ram_total_gb": 8.0, "gpus": []}
ENGINE = {"name": "llama.cpp", "build_number": 11434, "backend": "cpu"}


def rate(series: RateSeries, v: float, values: Optional[Sequence[float]] = None,
         again: Optional[float] = None) -> RateSample:
    """One series' night around ``v``: three visits unless ``values`` gives them; ``again``: a
    second round (core/run/recheck.py) around that value."""
    return RateSample(series=series, engine="b1", values=list(values or [v * 0.99, v, v * 1.01]), measured=v,
                      interval=(v * 0.98, v * 1.02), recheck=[again * 0.99, again] if again else [])


def gate_night(history: History, day: int, rates: Sequence[RateSample], anchor_id: str = "law4.ratio") -> RunRecord:
    """One nightly run on day ``day`` of November whose one anchor measured ``rates``, judged by the
    gate against ``history`` and appended to it."""
    r = Result(anchor_id=anchor_id, law=anchor_id.split(".")[0], kind="agreement", profile="p", verdict=Verdict.PASS,
               measured=1.0, interval=(0.98, 1.02), band=(0.75, 1.25), rates=list(rates))
    rec = RunRecord.new("p", profile_matches=True, strict=True, cadence="nightly", machine=MACHINE, engine=ENGINE,
                        started=f"2026-11-{day:02d}T02:17:00+00:00")
    rec.finish([r], gate=lambda x: judge(x, history))
    history.append(rec)
    return rec
