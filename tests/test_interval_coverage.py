"""The verdict interval covers what it claims to, proven by simulation (docs/verdicts.md).

For each noise model a machine shows — lognormal scatter, heavy tails, stalls, slow drift across
a run, repetitions that share their process's luck — draw many runs of the smallest sample count
any anchor may use, form the interval exactly as a verdict does, and count how often it covers the
true value. Coverage must be at or above the nominal level, within Monte-Carlo error (three
standard errors; every draw is seeded, so the figures are the same on every machine).

Each model is also run through a method known to be wrong (repetitions counted as samples, or
the earlier percentile bootstrap of the median): the same harness must catch it, so this test can
fail.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from lawbench.core.claims.loading import load_all
from lawbench.core.models import Budget, Sample, Verdict
from lawbench.core.laws.registry import get_registry
from lawbench.core.stats.verdicts import decide_sequential, location_interval, looks, per_look_confidence

RUNS = 10_000
NOMINAL = 0.95
SE = math.sqrt(NOMINAL * (1 - NOMINAL) / RUNS)
FLOOR = NOMINAL - 3 * SE  # 0.9435 at 10,000 runs


# ---------------------------------------------------------------------------- noise models
# Each returns (samples as the protocol forms them: one per visit or per round, truth).

def lognormal(rng, n):
    return np.exp(rng.normal(math.log(50.0), 0.05, n)), 50.0


def heavy_tails(rng, n):
    # log-speed with Student-t(2) scatter: no finite variance, rare huge excursions both ways
    return np.exp(math.log(50.0) + 0.03 * rng.standard_t(2, n)), 50.0


def stalls(rng, n):
    # One arm: a neighbour stalls one visit in seven to 60 % speed; truth: the visits' median
    return 50.0 * np.exp(rng.normal(0, 0.02, n)) * np.where(rng.random(n) < 1 / 7, 0.6, 1.0), \
        STALLS_MEDIAN


def stalls_two_arms(rng, n):
    # Two arms interleaved: a stall hits arm a or arm b of a round, so it moves a round's a/b
    # down or up alike; truth: the undisturbed ratio 0.8
    a = 40.0 * np.exp(rng.normal(0, 0.02, n)) * np.where(rng.random(n) < 1 / 7, 0.6, 1.0)
    b = 50.0 * np.exp(rng.normal(0, 0.02, n)) * np.where(rng.random(n) < 1 / 7, 0.6, 1.0)
    return a / b, 0.8


def _median_of_stalls() -> float:
    big = np.random.default_rng(99)
    x = 50.0 * np.exp(big.normal(0, 0.02, 400_000)) * np.where(big.random(400_000) < 1 / 7, 0.6, 1.0)
    return float(np.median(x))


STALLS_MEDIAN = _median_of_stalls()


def drift_two_arms(rng, n):
    # The machine slows 30 % across the run, linearly, with 3 % visit scatter; arms a, b are
    # visited A B, B A, … and a round's sample is a/b (truth: the arms' speed ratio, 0.8).
    out = []
    for i in range(n):
        t0, t1 = (2 * i) / (2 * n), (2 * i + 1) / (2 * n)
        first, second = ("a", "b") if i % 2 == 0 else ("b", "a")
        at = {first: t0, second: t1}
        a = 40.0 * (1 - 0.3 * at["a"]) * math.exp(rng.normal(0, 0.03))
        b = 50.0 * (1 - 0.3 * at["b"]) * math.exp(rng.normal(0, 0.03))
        out.append(a / b)
    return np.array(out), 0.8


REPS = 4


def correlated_visits(rng, n):
    # Repetitions inside one engine process share a visit effect (5 %) and differ by 1 %: the
    # protocol's sample is the visit median.
    visit = rng.normal(0, 0.05, n)
    reps = np.exp(visit[:, None] + rng.normal(0, 0.01, (n, REPS))) * 50.0
    return np.median(reps, axis=1), 50.0


def correlated_reps_as_samples(rng, n):
    """The old sampling unit: every repetition a sample (n visits' worth of repetitions)."""
    visit = rng.normal(0, 0.05, n)
    reps = np.exp(visit[:, None] + rng.normal(0, 0.01, (n, REPS))) * 50.0
    return reps.ravel(), 50.0


MODELS = {"lognormal": lognormal, "heavy tails": heavy_tails, "stalls, one arm": stalls,
          "stalls, two arms": stalls_two_arms, "slow drift, two arms": drift_two_arms,
          "correlated repetitions": correlated_visits}
# One-sided stalls pull a geometric mean below the visits' median; at the smallest count the
# interval is wide enough to cover it, with more samples it is not (0.935 at n = 10, measured):
# a known limit for single-arm anchors, documented in docs/verdicts.md. Two-arm rounds turn a
# stall into a symmetric excursion, which is one reason measured cpu anchors are interleaved.
SYMMETRIC = [name for name in MODELS if name != "stalls, one arm"]


def coverage(model, n: int, method=None, runs: int = RUNS, seed: int = 7) -> float:
    rng = np.random.default_rng(seed)
    hit = 0
    for _ in range(runs):
        values, truth = model(rng, n)
        lo, hi = (method or _lawbench_interval)(values)
        hit += lo <= truth <= hi
    return hit / runs


def _lawbench_interval(values):
    return location_interval(values, NOMINAL)[1]


def _old_bootstrap(values, n_boot: int = 400):
    """main before issue 6: percentile bootstrap of the median (fixed seed per call)."""
    rng = np.random.default_rng(0)
    meds = np.median(values[rng.integers(0, values.size, (n_boot, values.size))], axis=1)
    lo, hi = np.quantile(meds, [0.025, 0.975])
    return lo, hi


def smallest_sample_count() -> int:
    """The fewest samples any shipped anchor (or the Budget model itself) lets a verdict use."""
    registry = get_registry()
    anchors = load_all(registry).anchors
    counts = [la.anchor.budget.min_samples for la in anchors
              if la.anchor.kind in ("measurement", "agreement", "ratio")]
    floor = Budget.model_fields["min_samples"].metadata[0].ge
    return min(counts + [floor])


def test_the_smallest_sample_count_is_the_budget_floor():
    assert smallest_sample_count() == 3


@pytest.mark.parametrize("name", list(MODELS))
def test_coverage_at_the_smallest_sample_count(name):
    n = smallest_sample_count()
    got = coverage(MODELS[name], n)
    assert got >= FLOOR, f"{name}: coverage {got:.4f} at n={n} is below {NOMINAL} (floor {FLOOR:.4f})"


@pytest.mark.parametrize("name", SYMMETRIC)
def test_coverage_holds_at_larger_counts(name):
    for n in (4, 7, 10, 13):
        got = coverage(MODELS[name], n, runs=3000, seed=11)
        assert got >= NOMINAL - 3 * math.sqrt(NOMINAL * (1 - NOMINAL) / 3000), (name, n, got)


def test_the_harness_catches_repetitions_counted_as_samples():
    got = coverage(correlated_reps_as_samples, 3, runs=3000)
    assert got < 0.85, f"repetitions as samples covered {got:.3f}: the harness cannot see the flaw"


def test_the_harness_catches_the_old_bootstrap():
    got = coverage(lognormal, 3, method=_old_bootstrap, runs=3000)
    assert got < 0.85, got


# ---------------------------------------------------------------------------- sequential looks


class Draws:
    """A sampler whose samples come from a noise model, one per draw()."""

    def __init__(self, model, rng):
        self.model, self.rng = model, rng

    def draw(self, n: int) -> list[Sample]:
        values, _ = self.model(self.rng, n)
        return [Sample(value=float(v)) for v in values]


def _edge_model(truth: float):
    def model(r, n):
        return np.exp(r.normal(math.log(truth), 0.05, n)), truth
    return model


def _naive_verdict(draws: Draws, band, budget: Budget) -> Verdict:
    """Every look at the family's 95 %: the rule main used before issue 6, for contrast."""
    values: list[float] = []
    for n in looks(budget):
        values += [s.value for s in draws.draw(n - len(values))]
        lo, hi = location_interval(values, budget.confidence)[1]
        if lo >= band[0] and hi <= band[1]:
            return Verdict.PASS
        if hi < band[0] or lo > band[1]:
            return Verdict.FAIL
    return Verdict.VOID


def wrong_verdicts(band, truth: float, budget: Budget, runs: int, seed: int = 3,
                   naive: bool = False) -> float:
    """Share of runs whose verdict contradicts the truth: FAIL with the truth inside the band,
    PASS with it outside."""
    rng = np.random.default_rng(seed)
    inside = band[0] <= truth <= band[1]
    wrong = 0
    for _ in range(runs):
        draws = Draws(_edge_model(truth), rng)
        if naive:
            verdict = _naive_verdict(draws, band, budget)
        else:
            verdict = decide_sequential(draws.draw, lambda xs: [x.value for x in xs], band, budget).verdict
        wrong += (verdict is Verdict.FAIL and inside) or (verdict is Verdict.PASS and not inside)
    return wrong / runs


BUDGET = Budget(min_samples=3, max_samples=15, batch=2)


def test_sequential_looks_do_not_inflate_the_error_rate():
    # The truth sits exactly on the band's lower edge: every FAIL is wrong, and a rule that looks
    # again while the interval straddles gets many chances to be wrong.
    assert len(looks(BUDGET)) == 7
    assert per_look_confidence(BUDGET) == pytest.approx(1 - 0.05 / 7)
    for truth in (50.0, 49.9):  # on the edge (inside), and just outside it
        rate = wrong_verdicts((50.0, 60.0), truth, BUDGET, runs=3000)
        limit = (1 - BUDGET.confidence) + 3 * math.sqrt(0.05 * 0.95 / 3000)
        assert rate <= limit, f"corrected rule: {rate:.4f} wrong verdicts with the truth at {truth}"


def test_uncorrected_looks_would_inflate_it():
    naive = wrong_verdicts((50.0, 60.0), 50.0, BUDGET, runs=3000, naive=True)
    corrected = wrong_verdicts((50.0, 60.0), 50.0, BUDGET, runs=3000)
    assert naive > 1 - BUDGET.confidence and naive > 2 * corrected, (naive, corrected)
