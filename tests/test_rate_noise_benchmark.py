"""benchmarks/rate_noise.py's analysis (issue 31): which visits make each design's reading of a night,
on hand-built nights (the measuring part runs llama-bench and is a benchmark, not a test)."""
from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("rate_noise", ROOT / "benchmarks" / "rate_noise.py")
rn = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rn)  # type: ignore[union-attr]


def _night(scale: float) -> dict:
    # Q4_0 runs 2x the reference in every round; the whole box is `scale` times as fast tonight,
    # and the 5th-6th rounds (past the default design's 4) are twice as fast again
    a = [200.0 * scale] * 4 + [400.0 * scale] * 2
    b = [100.0 * scale] * 4 + [200.0 * scale] * 2
    return {"started": "t", "engine": "e", "load_before": 1.0,
            "formats": {fmt: {"a": list(a), "b": list(b)} for fmt in rn.FORMATS}}


def test_the_interleaved_ratio_cancels_what_moves_both_arms():
    nights = [_night(1.0), _night(0.8), _night(1.25)]
    d = rn.designs(nights, 4)
    ratio = d["ratio to F16"]["Q4_0 / F16"]
    assert [round(math.exp(v), 9) for v, _ in ratio] == [2.0, 2.0, 2.0]
    absolute = [v for v, _ in d["absolute"]["syn-100m-q4_0"]]
    assert max(absolute) - min(absolute) == pytest.approx(math.log(1.25 / 0.8))
    # the default design reads the first 4 rounds only; the 3x design all of them
    assert math.exp(d["absolute, fastest visit"]["syn-100m-q4_0"][0][0]) == pytest.approx(200.0)
    assert math.exp(rn.designs(nights, 6)["absolute, fastest visit"]["syn-100m-q4_0"][0][0]) == pytest.approx(400.0)
    assert set(d["absolute"]) == {"syn-100m-q8_0", "syn-100m-q4_0", "syn-100m-q2_k", "syn-100m-f16"}


def test_the_table_gives_the_ceiling_of_each_designs_spread():
    nights = [_night(1.0), _night(0.9), _night(1.1)]
    rows = rn.table([("4", rn.designs(nights, 4))])
    sd = rn.statistics.stdev(math.log(s) for s in (1.0, 0.9, 1.1))
    line = next(r for r in rows if r.startswith("| absolute | 4 | syn-100m-q4_0 |"))
    assert f"| {sd:.1%} |" in line and f"{rn.gate_power.ceiling_power(sd, 0.10, 0.01 / 4):.0%} (m = 4)" in line


def test_real_nights_read_rates_and_the_anchors_ratios(tmp_path):
    for i, (v, verdict) in enumerate(((100.0, "green"), (110.0, "green"), (1.0, "red")), start=1):
        rate = {"series": {"model": "syn-100m-q4_0"}, "values": [v, v * 1.1], "measured": v}
        samples = [{"arm": "a/b", "value": 4.0}, {"arm": "a/b", "value": 4.4}]
        (tmp_path / f"night-{i}").mkdir()
        (tmp_path / f"night-{i}" / "run.json").write_text(json.dumps({
            "gate": {"verdict": verdict},
            "results": [{"anchor_id": "x.q4", "rates": [rate], "measurement": {"samples": samples}}]}))
    d = rn.run_designs(tmp_path)
    assert len(d["absolute"]["syn-100m-q4_0"]) == 2  # the red night is left out
    assert math.exp(d["absolute, fastest visit"]["syn-100m-q4_0"][1][0]) == pytest.approx(121.0)
    assert math.exp(d["ratio inside one anchor"]["x.q4"][0][0]) == pytest.approx(math.sqrt(4.0 * 4.4))
