"""Verdicts from intervals, not points.

PASS when the whole confidence interval of the measured statistic lies inside the band, FAIL when
it lies wholly outside; while it straddles an edge, take more samples up to the anchor's budget,
then VOID. One rule gives honest verdicts on noisy machines and stops early on quiet ones.

The interval (docs/verdicts.md has the whole argument and the coverage figures):
  * the sampling unit is one engine visit (one process), or one interleaved round of two arms —
    never a repetition inside a process, which shares that process's luck;
  * the statistic is the geometric mean of the samples, and its interval a Student-t interval on
    their logarithms (exact coverage under lognormal noise, conservative under heavy tails);
    quantities that can be zero or negative (a memory difference) use the plain mean instead;
  * the rule looks at the interval after min_samples and after every batch up to max_samples, and
    each look is taken at confidence 1 - alpha/L for L planned looks (Bonferroni), so looking
    again while the interval straddles an edge cannot push the error rate above alpha.
"""
from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

from lawbench.core.models import Budget, Sample, Verdict

METHOD = "student-t on log(values), Bonferroni over planned looks"
METHOD_LINEAR = "student-t on values, Bonferroni over planned looks"


def median(values: Sequence[float]) -> float:
    import numpy as np  # here, in each: `lawbench history` and its like start without numpy

    return float(np.median(np.asarray(values, dtype=float)))


def relative_spread(values: Sequence[float]) -> Optional[float]:
    """IQR over median: the spread people can compare across anchors."""
    if len(values) < 2:
        return None
    import numpy as np

    arr = np.asarray(values, dtype=float)
    med = float(np.median(arr))
    if med == 0:
        return None
    q1, q3 = np.percentile(arr, [25, 75])
    return float((q3 - q1) / abs(med))


def looks(budget: Budget) -> list[int]:
    """The sample counts at which the sequential rule looks: min, min+batch, …, max."""
    first = max(budget.min_samples, 2)
    last = max(budget.max_samples, first)
    step = max(budget.batch, 1)
    out = list(range(first, last, step))
    return out + [last]


def per_look_confidence(budget: Budget) -> float:
    """Bonferroni: L looks at 1 - alpha/L each keep the chance that any look misses <= alpha."""
    alpha = 1.0 - budget.confidence
    return 1.0 - alpha / len(looks(budget))


def location_interval(values: Sequence[float], confidence: float, log: bool = True
                      ) -> tuple[float, tuple[float, float]]:
    """The point estimate and its Student-t interval: on logarithms (geometric mean) when ``log``.

    Needs two values at least; identical values give a zero-width interval at that value.
    """
    import numpy as np

    arr = np.asarray(values, dtype=float)
    if arr.size < 2:
        raise ValueError("an interval needs at least two samples")
    if log:
        if np.any(arr <= 0):
            raise ValueError("a log-scale interval needs positive values")
        arr = np.log(arr)
    mean = float(arr.mean())
    sd = float(arr.std(ddof=1))
    half = _t_quantile(0.5 + confidence / 2.0, arr.size - 1) * sd / math.sqrt(arr.size)
    lo, hi = mean - half, mean + half
    if log:
        return math.exp(mean), (math.exp(lo), math.exp(hi))
    return mean, (lo, hi)


@functools.lru_cache(maxsize=256)
def _t_quantile(p: float, df: int) -> float:
    # scipy.special.stdtrit is what scipy.stats.t.ppf computes; imported here, not at the top:
    # scipy.stats cost ~0.9 s and scipy.special ~0.25 s of every lawbench process's start
    # (`lawbench history`, `check` and the suite's many CLI calls never compute an interval).
    from scipy.special import stdtrit

    return float(stdtrit(df, p))


def classify(interval: tuple[float, float], band: tuple[float, float]) -> Optional[Verdict]:
    """PASS inside, FAIL wholly outside, None while the interval straddles an edge."""
    lo, hi = interval
    blo, bhi = band
    if lo >= blo and hi <= bhi:
        return Verdict.PASS
    if hi < blo or lo > bhi:
        return Verdict.FAIL
    return None


@dataclass
class Decision:
    verdict: Verdict
    statistic: Optional[float]
    interval: Optional[tuple[float, float]]
    samples: list[Sample] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    reason: str = ""
    method: str = METHOD
    confidence: float = 0.95  # per look


def decide_sequential(draw: Callable[[int], list[Sample]],
                      statistic: Callable[[list[Sample]], list[float]],
                      band: tuple[float, float], budget: Budget, log: bool = True,
                      clock: Callable[[], float] = time.monotonic) -> Decision:
    """Draw samples up to each planned look until the interval is inside or outside the band, or
    the budget (samples or seconds) is spent.

    ``draw`` may raise; samples taken in earlier batches are prepended to the exception's
    ``samples`` attribute (see lawbench.core.laws.law.EngineError) so the record keeps them.
    """
    samples: list[Sample] = []
    start = clock()
    conf = per_look_confidence(budget)
    plan = looks(budget)
    while True:
        target = next((n for n in plan if n > len(samples)), plan[-1])
        try:
            batch = draw(max(target - len(samples), 1))
        except (Exception, KeyboardInterrupt) as exc:
            # Nothing is lost: samples from earlier batches ride on the error to the record — also
            # on a stop signal that lands between two engine visits (a KeyboardInterrupt, core.run.signals).
            if hasattr(exc, "samples") or isinstance(exc, KeyboardInterrupt):
                exc.samples = samples + list(getattr(exc, "samples", []))
            raise
        samples.extend(batch)
        spent = clock() - start
        out_of_budget = len(samples) >= plan[-1] or spent >= budget.timeout_s or not batch
        if len(samples) < target and not out_of_budget:
            continue  # a round gave no sample (an arm read nothing): not a planned look yet
        values = statistic(samples)
        bad = [v for v in values if not (isinstance(v, (int, float)) and math.isfinite(v))]
        if bad:  # never dropped: a NaN or an infinity is a broken instrument or prediction, not noise
            return Decision(Verdict.ERROR, None, None, samples, [],
                            f"{len(bad)} of {len(values)} samples gave a statistic that is not a finite "
                            f"number ({bad[0]!r}): the engine's reading or the law's per-sample "
                            "prediction is broken", METHOD_LINEAR, conf)
        use_log = log and all(v > 0 for v in values)
        method = METHOD if use_log else METHOD_LINEAR
        if len(values) < 2:
            if not out_of_budget:
                continue
            if not values:
                return Decision(Verdict.ERROR, None, None, samples, values,
                                "the engine returned no usable samples", method, conf)
            return Decision(Verdict.VOID, values[0], None, samples, values,
                            "one usable sample cannot give an interval", method, conf)
        stat, interval = location_interval(values, conf, log=use_log)
        verdict = classify(interval, band)
        if verdict is not None:
            return Decision(verdict, stat, interval, samples, values, "", method, conf)
        if out_of_budget:
            why = (f"{conf:.2%} interval [{interval[0]:.4g}, {interval[1]:.4g}] straddles the band "
                   f"[{band[0]:.4g}, {band[1]:.4g}] after {len(values)} samples "
                   f"({'time budget' if spent >= budget.timeout_s else 'sample budget'} spent)")
            return Decision(Verdict.VOID, stat, interval, samples, values, why, method, conf)
