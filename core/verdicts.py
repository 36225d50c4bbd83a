"""Verdicts from intervals, not points.

PASS when the whole confidence interval of the measured statistic lies inside the band, FAIL when
it lies wholly outside; while it straddles an edge, take more samples up to the anchor's budget,
then VOID. One rule gives honest verdicts on noisy machines and stops early on quiet ones.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np

from lawbench.core.models import Budget, Sample, Verdict


def median(values: Sequence[float]) -> float:
    return float(np.median(np.asarray(values, dtype=float)))


def relative_spread(values: Sequence[float]) -> Optional[float]:
    """IQR over median: the spread people can compare across anchors."""
    if len(values) < 2:
        return None
    arr = np.asarray(values, dtype=float)
    med = float(np.median(arr))
    if med == 0:
        return None
    q1, q3 = np.percentile(arr, [25, 75])
    return float((q3 - q1) / abs(med))


def median_interval(values: Sequence[float], confidence: float = 0.95,
                    n_boot: int = 4000, seed: int = 0) -> tuple[float, float]:
    """Percentile-bootstrap interval of the median.

    Deterministic (fixed seed) so a verdict is reproducible from its recorded samples. With one
    sample the interval is that point: a single reading can only PASS or FAIL if the law is exact,
    which is why budgets start at three samples.
    """
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        raise ValueError("no samples")
    if arr.size == 1 or np.all(arr == arr[0]):
        return (float(arr[0]), float(arr[0]))
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, arr.size, size=(n_boot, arr.size))
    meds = np.median(arr[idx], axis=1)
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(meds, [alpha, 1.0 - alpha])
    return (float(lo), float(hi))


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


def decide_sequential(draw: Callable[[int], list[Sample]],
                      statistic: Callable[[list[Sample]], list[float]],
                      band: tuple[float, float], budget: Budget,
                      clock: Callable[[], float] = time.monotonic) -> Decision:
    """Draw batches until the interval is inside or outside the band, or the budget is spent.

    ``draw`` may raise; samples taken in earlier batches are prepended to the exception's
    ``samples`` attribute (see lawbench.core.law.EngineError) so the record keeps them.
    """
    samples: list[Sample] = []
    start = clock()
    want = max(budget.min_samples, 1)
    while True:
        try:
            batch = draw(want - len(samples) if len(samples) < want else budget.batch)
        except Exception as exc:
            # Nothing is lost: samples from earlier batches ride on the error to the record.
            if hasattr(exc, "samples"):
                exc.samples = samples + list(exc.samples)
            raise
        samples.extend(batch)
        values = [v for v in statistic(samples) if math.isfinite(v)]
        if not values:
            return Decision(Verdict.ERROR, None, None, samples, values, "the engine returned no usable samples")
        interval = median_interval(values, budget.confidence)
        stat = median(values)
        verdict = classify(interval, band)
        if verdict is not None and len(values) >= budget.min_samples:
            return Decision(verdict, stat, interval, samples, values)
        spent = clock() - start
        if len(samples) >= budget.max_samples or spent >= budget.timeout_s or not batch:
            why = (f"{budget.confidence:.0%} interval [{interval[0]:.4g}, {interval[1]:.4g}] of the median "
                   f"straddles the band [{band[0]:.4g}, {band[1]:.4g}] after {len(values)} samples "
                   f"({'time budget' if spent >= budget.timeout_s else 'sample budget'} spent)")
            return Decision(Verdict.VOID, stat, interval, samples, values, why)
        want = len(samples) + budget.batch
