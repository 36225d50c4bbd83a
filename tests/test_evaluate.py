"""Every verdict path of core's evaluate(), driven by small laws defined here."""
import itertools

import pytest

from lawbench.core.errors import EngineError, NotApplicable
from lawbench.core.laws.law import Census, Law, Prediction
from lawbench.core.models import Sample, Verdict
from lawbench.testing import evaluate_anchor, make_anchor


class Replay:
    def __init__(self, values, fail_at=None):
        self.values, self.fail_at, self.i = values, fail_at, 0

    def draw(self, n):
        out = []
        for _ in range(n):
            if self.fail_at is not None and self.i >= self.fail_at:
                raise EngineError("llama-bench was killed by SIGKILL", samples=out, log="load log tail")
            out.append(Sample(value=self.values[self.i % len(self.values)], arm=None))
            self.i += 1
        return out

    def statistic(self, samples):
        return [s.value for s in samples]

    def environment(self):
        return {"free_ram_gb": 1.0}

    def protocol(self):
        return {"warmup": 1}


class ToyLaw(Law):
    name = "test"

    def __init__(self, predicted=4.0, values=(10.0,), fail_at=None, counts=None, boom=False, skip=None):
        self.predicted, self.values, self.fail_at, self.counts, self.boom, self.skip = \
            predicted, list(values), fail_at, counts or {}, boom, skip

    def predict(self, anchor, profile, resources=None):
        if self.boom:
            raise ZeroDivisionError("plugin bug")
        return Prediction(self.predicted, {"how": "toy"})

    def sampler(self, anchor, profile, resources):
        if self.skip:
            raise NotApplicable(self.skip)
        return Replay(self.values, self.fail_at)

    def census(self, anchor, profile, resources):
        return Census(dict(self.counts), log="x")


def test_prediction_pass_and_fail():
    a = make_anchor(value=4.0, band={"abs": 0.1})
    assert evaluate_anchor(a, ToyLaw(predicted=4.05)).verdict is Verdict.PASS
    r = evaluate_anchor(a, ToyLaw(predicted=4.2))
    assert r.verdict is Verdict.FAIL and "outside the published band" in r.reason
    assert r.predicted == 4.2 and r.band == pytest.approx((3.9, 4.1))


def test_prediction_runs_off_runner():
    a = make_anchor(value=4.0, band={"abs": 0.1})
    assert evaluate_anchor(a, ToyLaw(predicted=4.0), on_own_runner=False).verdict is Verdict.PASS


def test_measurement_pass_fail_void():
    a = make_anchor(kind="measurement", value=10.0, band={"rel": 0.05},
                    budget={"min_samples": 3, "max_samples": 6, "batch": 3})
    assert evaluate_anchor(a, ToyLaw(values=[10.0, 10.1, 9.95])).verdict is Verdict.PASS
    assert evaluate_anchor(a, ToyLaw(values=[20.0, 21.0, 20.5])).verdict is Verdict.FAIL
    r = evaluate_anchor(a, ToyLaw(values=[9.0, 11.0, 10.4, 9.6, 12.0, 8.0]))
    assert r.verdict is Verdict.VOID and len(r.measurement.samples) == 6


def test_agreement_is_measured_over_predicted():
    a = make_anchor(kind="agreement", value=None, band={"rel": 0.10})
    r = evaluate_anchor(a, ToyLaw(predicted=100.0, values=[95.0, 96.0, 94.5]))
    assert r.verdict is Verdict.PASS
    # One statistic: measured, interval and band are all measured/predicted (unit "x").
    assert r.unit == "x" and r.band == pytest.approx((0.9, 1.1))
    assert r.measured == pytest.approx((0.95 * 0.96 * 0.945) ** (1 / 3))
    assert r.detail["measured_median"] == pytest.approx(95.0) and r.detail["predicted"] == 100.0
    assert evaluate_anchor(a, ToyLaw(predicted=100.0, values=[70.0, 71.0, 69.0])).verdict is Verdict.FAIL


def test_skip_policy():
    a = make_anchor(kind="measurement", value=10.0, band={"rel": 0.05})
    law = ToyLaw(skip="model file missing")
    off = evaluate_anchor(a, law, on_own_runner=False)
    assert off.verdict is Verdict.SKIP
    own = evaluate_anchor(a, law, on_own_runner=True)
    assert own.verdict is Verdict.FAIL and "own runner" in own.reason
    strict = evaluate_anchor(a, law, on_own_runner=False, strict=True)
    assert strict.verdict is Verdict.FAIL and "--strict" in strict.reason


def test_a_strict_runner_fails_only_skips_of_its_own_anchors():
    # A prediction bound to another profile (it reads a file only that runner holds) skips on a
    # strict job of this profile: the other runner's job runs it (found on the H200, 2026-12-01).
    from lawbench.core.run.evaluate import RunPolicy, evaluate
    from lawbench.testing import make_profile

    class NoHeader(ToyLaw):
        def predict(self, anchor, profile, resources=None):
            raise NotApplicable("catalogue model 'x' is not available here")

    here, there = make_profile("here"), make_profile("there")
    a = make_anchor(value=4.0, band={"abs": 0.1}, profiles=["there"])
    for profile, want in ((here, Verdict.SKIP), (there, Verdict.FAIL)):
        policy = RunPolicy(profile=profile, profiles={"here": here, "there": there}, on_own_runner=True, strict=True)
        assert evaluate(a, NoHeader(), policy).verdict is want, profile.id


def test_off_runner_measurement_is_skipped_not_run():
    a = make_anchor(kind="measurement", value=10.0, band={"rel": 0.05})
    r = evaluate_anchor(a, ToyLaw(values=[10.0]), on_own_runner=False)
    assert r.verdict is Verdict.SKIP and "does not match profile" in r.reason


def test_engine_error_keeps_samples():
    a = make_anchor(kind="measurement", value=10.0, band={"rel": 0.01},
                    budget={"min_samples": 3, "max_samples": 9, "batch": 3})
    r = evaluate_anchor(a, ToyLaw(values=[9.0, 11.0, 10.0, 10.5], fail_at=4))
    assert r.verdict is Verdict.ERROR and "SIGKILL" in r.reason
    assert [s.value for s in r.measurement.samples] == [9.0, 11.0, 10.0, 10.5]


def test_plugin_bug_is_an_error_not_a_crash():
    r = evaluate_anchor(make_anchor(), ToyLaw(boom=True))
    assert r.verdict is Verdict.ERROR and "ZeroDivisionError" in r.reason


def test_census_exact_minimum_forbidden():
    a = make_anchor(kind="census", value=None, band=None,
                    census={"exact": {"fast": 27}, "minimum": {"graphs": 1}, "forbidden": ["fallback!"]})
    ok = ToyLaw(counts={"fast": 27, "graphs": 3})
    assert evaluate_anchor(a, ok).verdict is Verdict.PASS
    bad = evaluate_anchor(a, ToyLaw(counts={"fast": 26, "fallback!": 1}))
    assert bad.verdict is Verdict.FAIL
    assert "fast: counted 26" in bad.reason and "fallback!" in bad.reason and "graphs" in bad.reason


def test_history_is_shown_not_run():
    a = make_anchor(status="refuted", refuted_by="x.y")
    r = evaluate_anchor(a, ToyLaw(boom=True))
    assert r.verdict is Verdict.SKIP and r.retired == "refuted" and r.retired_by == "x.y" and "refuted by x.y" in r.reason


def test_open_finding_fails_without_blocking_and_closing_it_blocks():
    a = make_anchor(value=5.0, band={"abs": 0.01}, finding="the law gives 4, the register printed 5")
    r = evaluate_anchor(a, ToyLaw(predicted=4.0))
    assert r.verdict is Verdict.FAIL and not r.blocking and r.open_finding
    closed = evaluate_anchor(a, ToyLaw(predicted=5.0))
    assert closed.verdict is Verdict.FAIL and closed.blocking and "no longer reproduces" in closed.reason
    plain = evaluate_anchor(make_anchor(value=5.0, band={"abs": 0.01}), ToyLaw(predicted=4.0))
    assert plain.blocking
