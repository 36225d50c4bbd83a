"""Every recorded verdict can be recomputed from its record: PASS iff the interval lies inside the
band, FAIL iff they do not meet, VOID otherwise — and all three are in one unit (docs/verdicts.md).
"""
from __future__ import annotations

import math

import pytest
from _recompute import check_record

from lawbench.core.laws.law import Law, Prediction
from lawbench.core.models import Sample, Verdict
from lawbench.testing import evaluate_anchor, make_anchor


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
    n = r.sampling.n
    gmean = math.exp(sum(math.log(v / 100.0) for v in values[:n]) / n)
    assert r.measured == pytest.approx(gmean)
    assert r.detail["predicted"] == 100.0 and r.detail["measured_unit"] == "tok/s"
    assert r.sampling.looks == [4, 7, 10]
    assert check_record([r]) == 1


# A real run's record, recomputed the same way: every night of tests/test_nightly_gate.py
# (test_every_nights_verdicts_recompute_from_its_record).
