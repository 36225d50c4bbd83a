"""Every recorded verdict can be recomputed from its record: PASS iff the interval lies inside the
band, FAIL iff they do not meet, VOID otherwise — and all three are in one unit (docs/verdicts.md).
"""
from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys

import pytest

from lawbench.core.laws.law import Law, Prediction
from lawbench.core.models import Sample, Verdict
from lawbench.core.record.reports import read_json
from lawbench.core.stats.verdicts import classify
from lawbench.testing import evaluate_anchor, make_anchor


def recomputed(result) -> Verdict:
    if result.interval is None or result.band is None:
        raise AssertionError(f"{result.anchor_id}: a {result.verdict.value} without interval or band")
    return classify(tuple(result.interval), tuple(result.band)) or Verdict.VOID


def check_record(results) -> int:
    checked = 0
    for r in results:
        if r.kind == "census" or r.verdict not in (Verdict.PASS, Verdict.FAIL, Verdict.VOID):
            continue
        if r.detail.get("open_finding") or (r.verdict is Verdict.FAIL and r.reason.startswith("the open finding")):
            continue  # a finding's verdict is inverted by policy after the interval decided it
        if "expected_void" in r.detail:  # an anchor that expects VOID: PASS iff the interval straddles
            assert (recomputed(r) is Verdict.VOID) == (r.verdict is Verdict.PASS), (r.anchor_id, r.interval, r.band)
            continue
        assert recomputed(r) is r.verdict, (r.anchor_id, r.interval, r.band, r.verdict)
        assert r.statistic, f"{r.anchor_id}: the record does not say what its statistic is"
        if r.kind != "prediction":
            lo, hi = r.interval
            assert lo <= r.measured <= hi, f"{r.anchor_id}: statistic {r.measured} outside its interval"
        checked += 1
    return checked


class Scripted(Law):
    """A law whose engine returns the given speeds; predicts 100 tok/s."""

    name = "scripted"

    def __init__(self, values):
        self.values = values

    def predict(self, anchor, profile, resources=None):
        return Prediction(100.0)

    def sampler(self, anchor, profile, resources):
        values = iter(self.values)

        class S:
            log_scale = True

            def draw(self, n):
                return [Sample(value=next(values)) for _ in range(n)]

            def statistic(self, samples):
                return [s.value for s in samples]

            def environment(self):
                return {}

            def protocol(self):
                return {}
        return S()


@pytest.mark.parametrize("values, verdict", [
    ([99.0, 101.0, 100.5, 99.5], Verdict.PASS),
    ([50.0, 51.0, 49.0, 50.5], Verdict.FAIL),
    ([70.0, 90.0, 80.0, 95.0, 65.0, 85.0, 75.0, 92.0, 68.0, 88.0], Verdict.VOID),
])
def test_agreement_results_are_one_statistic_and_recompute(values, verdict):
    anchor = make_anchor(law="scripted", kind="agreement", value=None, band={"rel": 0.25},
                         quantity="decode_tok_s", unit="tok/s",
                         budget={"min_samples": 4, "max_samples": 10, "batch": 3})
    r = evaluate_anchor(anchor, Scripted(values))
    assert r.verdict is verdict, r.reason
    assert r.unit == "x" and "measured/predicted" in r.statistic
    assert r.band == (0.75, 1.25)
    n = r.detail["interval"]["n"]
    gmean = math.exp(sum(math.log(v / 100.0) for v in values[:n]) / n)
    assert r.measured == pytest.approx(gmean)
    assert r.detail["predicted"] == 100.0 and r.detail["measured_unit"] == "tok/s"
    assert r.detail["interval"]["looks"] == [4, 7, 10]
    assert check_record([r]) == 1


@pytest.mark.integration
def test_a_real_cpu_run_recomputes(tmp_path):
    """A real `lawbench run` on this machine: every recorded verdict follows from its record."""
    if not os.environ.get("LAWBENCH_LLAMA_DIR") and not (shutil.which("cmake") and shutil.which("c++")):
        pytest.skip("no C++ toolchain to build llama.cpp and no LAWBENCH_LLAMA_DIR")
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "lawbench.core.commands.main", "run", "--profile", "cpu", "--out", str(out),
         "--no-history", "-k", "l15.syn-100m-q4_0 or bandwidth-term or kv_bytes or expert"],
        capture_output=True, text=True, timeout=1500)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    record = read_json(out / "run.json")
    kinds = {r.kind for r in record.results}
    assert {"prediction", "agreement"} <= kinds
    assert check_record(record.results) >= 3
