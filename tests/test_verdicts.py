import math

import pytest
from pydantic import ValidationError

from lawbench.core.errors import EngineError
from lawbench.core.models import Budget, Sample, Verdict
from lawbench.core.stats.verdicts import (classify, decide_sequential, location_interval, looks,
                                    per_look_confidence, relative_spread)


def test_classify_inside_outside_straddle():
    assert classify((9.9, 10.1), (9.5, 10.5)) is Verdict.PASS
    assert classify((11.0, 12.0), (9.5, 10.5)) is Verdict.FAIL
    assert classify((8.0, 9.0), (9.5, 10.5)) is Verdict.FAIL
    assert classify((10.0, 11.0), (9.5, 10.5)) is None


def test_location_interval_is_a_t_interval_on_logs():
    vals = [10.0, 10.2, 9.9, 10.1, 10.05]
    point, (lo, hi) = location_interval(vals, 0.95)
    assert point == pytest.approx(math.exp(sum(map(math.log, vals)) / 5))
    assert lo < point < hi and (lo * hi) == pytest.approx(point ** 2)  # symmetric on the log scale
    assert location_interval(vals, 0.95) == (point, (lo, hi))  # deterministic
    p3, (l3, h3) = location_interval([3.0, 3.0, 3.0], 0.95)
    assert p3 == pytest.approx(3.0) and l3 == h3 == p3
    # Wider at higher confidence, narrower with more samples of the same scatter.
    assert location_interval(vals, 0.99)[1][0] < lo
    assert location_interval(vals * 3, 0.95)[1][1] < hi


def test_linear_scale_for_values_that_can_be_negative():
    point, (lo, hi) = location_interval([-1.0, 1.0, 0.0], 0.95, log=False)
    assert point == 0.0 and lo < 0 < hi
    with pytest.raises(ValueError):
        location_interval([-1.0, 1.0, 0.0], 0.95)
    with pytest.raises(ValueError):
        location_interval([1.0], 0.95)


def test_looks_and_bonferroni():
    b = Budget(min_samples=4, max_samples=10, batch=3)
    assert looks(b) == [4, 7, 10]
    assert per_look_confidence(b) == pytest.approx(1 - 0.05 / 3)
    assert looks(Budget(min_samples=3, max_samples=3, batch=1)) == [3]
    assert looks(Budget(min_samples=3, max_samples=8, batch=3)) == [3, 6, 8]


@pytest.mark.parametrize("fields", [dict(min_samples=2), dict(min_samples=5, max_samples=4),
                                    dict(batch=0), dict(confidence=1.0), dict(timeout_s=0)])
def test_budget_refuses_designs_that_cannot_decide(fields):
    with pytest.raises(ValidationError):
        Budget(**fields)


def test_relative_spread():
    assert relative_spread([1.0]) is None
    assert relative_spread([10, 10, 10, 10]) == 0.0
    assert relative_spread([9, 10, 11]) == pytest.approx(0.1)


class Scripted:
    def __init__(self, values, fail_after=None):
        self.values = list(values)
        self.calls = []
        self.fail_after = fail_after
        self.taken = 0

    def draw(self, n):
        self.calls.append(n)
        out = []
        for _ in range(n):
            if self.fail_after is not None and self.taken >= self.fail_after:
                raise EngineError("engine died", samples=out)
            out.append(Sample(value=self.values[self.taken % len(self.values)]))
            self.taken += 1
        return out


def stat(samples):
    return [s.value for s in samples]


def test_quiet_machine_stops_early_with_pass():
    s = Scripted([10.0, 10.01, 9.99])
    d = decide_sequential(s.draw, stat, (9.5, 10.5), Budget(min_samples=3, max_samples=12, batch=3))
    assert d.verdict is Verdict.PASS
    assert s.calls == [3]


def test_noisy_straddle_takes_more_then_void():
    s = Scripted([9.0, 11.0, 10.4, 9.6, 12.0, 8.0])
    d = decide_sequential(s.draw, stat, (9.5, 10.5), Budget(min_samples=3, max_samples=9, batch=3))
    assert d.verdict is Verdict.VOID
    assert s.calls == [3, 3, 3]  # one draw per planned look
    assert len(d.samples) == 9
    assert "straddles" in d.reason and "98.33% interval" in d.reason


def test_clear_miss_is_fail():
    s = Scripted([20.0, 20.5, 19.8])
    d = decide_sequential(s.draw, stat, (9.5, 10.5), Budget())
    assert d.verdict is Verdict.FAIL


def test_fault_keeps_earlier_samples():
    s = Scripted([9.0, 11.0, 10.4, 9.6], fail_after=4)
    with pytest.raises(EngineError) as ei:
        decide_sequential(s.draw, stat, (9.5, 10.5), Budget(min_samples=3, max_samples=9, batch=3))
    assert [x.value for x in ei.value.samples] == [9.0, 11.0, 10.4, 9.6]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_non_finite_sample_is_an_error_never_dropped(bad):
    """A NaN among good readings once left two samples that passed below min_samples."""
    s = Scripted([bad, 1.0, 1.0])
    d = decide_sequential(s.draw, stat, (0.9, 1.1), Budget(min_samples=3, max_samples=3, batch=1))
    assert d.verdict is Verdict.ERROR
    assert "1 of 3 samples" in d.reason and "not a finite number" in d.reason
    assert len(d.samples) == 3  # kept for the record
