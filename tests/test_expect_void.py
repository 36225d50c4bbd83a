"""An anchor that expects VOID (register C-34: prereg #111's ceiling test came out VOID, 'baseline
23.7% spread'; seed 000: 'too jittery to resolve the ceiling to ±15% even at n=5'): a VOID at the
source's sample count confirms the claim, an interval that resolves the band refutes it, and a run
stopped before that count confirms nothing. Driven through core's evaluate() by a small law."""
import pytest
from pydantic import ValidationError

from lawbench.core.laws.law import Law, Prediction
from lawbench.core.models import Anchor, Sample, Verdict
from lawbench.testing import evaluate_anchor, make_anchor

REASON = "register C-34: 'baseline 23.7% spread'"
BUDGET = {"min_samples": 5, "max_samples": 5, "batch": 5}


class Replay:
    def __init__(self, values, stop_after=None):
        self.values, self.stop_after, self.i = values, stop_after, 0

    def draw(self, n):
        if self.stop_after is not None and self.i >= self.stop_after:
            return []  # the engine gave nothing more: the sampling ends early, as a spent time budget does
        out = [Sample(value=self.values[(self.i + k) % len(self.values)]) for k in range(n)]
        self.i += n
        return out

    def statistic(self, samples):
        return [s.value for s in samples]

    def environment(self):
        return {}

    def protocol(self):
        return {}


class Jitter(Law):
    name = "test"

    def __init__(self, values):
        self.values = list(values)

    def predict(self, anchor, profile, resources=None):
        return Prediction(1.843, {})

    def sampler(self, anchor, profile, resources):
        return Replay(self.values)


def _anchor(**over):
    kw = dict(kind="agreement", value=None, band={"rel": 0.15}, budget=BUDGET, expect="VOID", expect_reason=REASON)
    kw.update(over)
    return make_anchor(**kw)


def test_a_void_at_the_sources_sample_count_confirms_the_claim():
    # measured/priced scattered around the +15 % edge: the interval straddles it at n = 5
    r = evaluate_anchor(_anchor(), Jitter([1.843 * f for f in (0.80, 1.30, 1.05, 0.95, 1.25)]))
    assert r.verdict is Verdict.PASS, r.reason
    assert r.reason.startswith("VOID, as the source found (register C-34") and r.expected_void == REASON


def test_an_interval_that_resolves_the_band_refutes_the_claim_either_way():
    inside = evaluate_anchor(_anchor(), Jitter([1.843 * f for f in (1.00, 1.01, 0.99, 1.00, 1.005)]))
    assert inside.verdict is Verdict.FAIL and "resolved the band (PASS) where the source could not" in inside.reason
    outside = evaluate_anchor(_anchor(), Jitter([1.843 * f for f in (0.50, 0.51, 0.49, 0.50, 0.505)]))
    assert outside.verdict is Verdict.FAIL and "resolved the band (FAIL)" in outside.reason
    assert inside.blocking and outside.blocking


def test_without_expect_the_same_jitter_is_a_plain_void():
    r = evaluate_anchor(_anchor(expect=None, expect_reason=None),
                        Jitter([1.843 * f for f in (0.80, 1.30, 1.05, 0.95, 1.25)]))
    assert r.verdict is Verdict.VOID and r.expected_void is None


def test_a_void_before_the_sources_count_is_not_a_confirmation():
    a = _anchor(budget={"min_samples": 3, "max_samples": 9, "batch": 3})

    class Stops(Jitter):
        def sampler(self, anchor, profile, resources):
            return Replay(self.values, stop_after=3)

    r = evaluate_anchor(a, Stops([1.843 * f for f in (0.80, 1.30, 1.05)]))
    assert r.verdict is Verdict.VOID and "not a confirmation" in r.reason


@pytest.mark.parametrize("over, field", [
    ({"expect_reason": None}, "expect_reason"),
    ({"expect": None}, "expect_reason"),
    ({"kind": "prediction", "value": 1.0}, "expect"),
    ({"finding": "f"}, "expect"),
])
def test_an_expectation_without_its_words_or_on_the_wrong_kind_is_refused(over, field):
    base = make_anchor(kind="agreement", value=None, band={"rel": 0.15}, expect="VOID", expect_reason=REASON)
    data = {**base.model_dump(exclude_none=True), **over}
    data = {k: v for k, v in data.items() if v is not None}
    with pytest.raises(ValidationError) as err:
        Anchor.model_validate(data)
    assert field in str(err.value)
