"""Drift: a step change in an anchor's statistic against its own history, found before it leaves
the band.

A series is one anchor on one profile with one engine build (the join keys of core/history/store.py),
oldest run first, made of the runs' `measured` statistic and its recorded confidence interval.
Only runs whose machine matched the profile count (a mismatched machine is not evidence for the
profile), never a contribution (someone else's machine, whatever its record claims), and SKIP / ERROR rows and rows without a positive measured value are left out.

The method (STEP_METHOD), in the spirit of asv's step detection but with each run's own uncertainty:
on log values, each run's standard error is its interval's half-width over the quantile that made
the interval (Student-t at the per-look confidence and sample count the result records; 95 % normal
when it records none). Every split point with at least two runs on each side is tried: the two
segments' inverse-variance-weighted means are compared against one level. Nights scatter more than
one run's interval says (a busy neighbour, another page-cache state), so a between-run variance τ²
is estimated within the two segments (DerSimonian–Laird) and added to every run's variance, and
the difference is tested the Hartung–Knapp way: its variance scaled up by the residual scatter
when that exceeds what the errors allow, against Student-t with n − 2 degrees of freedom. The
smallest p-value times the number of splits tried (Bonferroni) is the drift's p-value; below
`alpha` it is a drift, dated at the first run after the best split. tests/test_drift.py proves
the false-alarm rate and the power by simulation; docs/history.md gives the measured rates.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from lawbench.core.history.store import History, ResultRow

STEP_METHOD = ("step test on log values: inverse-variance means of two segments at every split "
               "(>= 2 runs a side), SE from each run's interval, DerSimonian-Laird between-run "
               "variance with a Hartung-Knapp t test, Bonferroni over splits")
MIN_SIDE = 2  # runs on each side of a split: one run alone is an outlier, not a level
SE_FLOOR = 1e-4  # in log units (0.01 %): a zero-width interval (a deterministic value) still weighs finitely


@dataclass(frozen=True)
class Drift:
    anchor_id: str
    profile: str
    engine: str            # the engine build key (lawbench.core.history.store.engine_key)
    first_run_id: str      # the first run after the step: "the first run that moved"
    first_started: str
    before: float          # level of the statistic before the step (same unit as Result.measured)
    after: float           # level after
    p_value: float         # corrected for the number of split points tried
    runs: int              # length of the series tested
    method: str            # one line naming the method


@dataclass(frozen=True)
class Step:
    """The best split of one series: index of the first point after it, levels, corrected p."""

    index: int
    before: float  # weighted mean of the log values before
    after: float
    p_value: float


def standard_error(measured: float, lo: float, hi: float, confidence: Optional[float] = None,
                   n: Optional[int] = None) -> Optional[float]:
    """The standard error of log(measured) from its interval; None when the interval has no log."""
    # scipy.special's stdtrit / ndtri are what scipy.stats.t.ppf / norm.ppf compute, imported
    # where used: scipy.stats cost ~0.9 s of every lawbench process's start (core.stats.verdicts says why)
    from scipy.special import ndtri, stdtrit

    if not (0 < lo <= measured <= hi) or not all(map(math.isfinite, (lo, hi))):
        return None
    if confidence is not None and n is not None and n >= 2 and 0 < confidence < 1:
        q = float(stdtrit(n - 1, (1 + confidence) / 2))
    else:
        q = float(ndtri(0.975))
    return max((math.log(hi) - math.log(lo)) / (2 * q), SE_FLOOR)


def step_test(y: Sequence[float], se: Sequence[float]) -> Optional[Step]:
    """The most significant single step in `y` (log values, standard errors `se`); None when the
    series is too short to have a split with MIN_SIDE points on each side.

    All splits at once: row i of each matrix is the split before point MIN_SIDE + i.
    """
    from scipy.special import stdtr  # scipy.stats.t.sf(x, df) is stdtr(df, -x)

    n = len(y)
    ks = np.arange(MIN_SIDE, n - MIN_SIDE + 1)
    if ks.size == 0:
        return None
    yv, var = np.asarray(y, dtype=float), np.asarray(se, dtype=float) ** 2
    left = np.arange(n)[None, :] < ks[:, None]

    def segments(w: np.ndarray) -> tuple[np.ndarray, ...]:
        """Per split: the two weighted means, their weight sums, and the weighted squared
        deviations of every point from its own segment's mean, summed."""
        w_l, w_r = np.where(left, w, 0).sum(1), np.where(left, 0, w).sum(1)
        m_l = np.where(left, w * yv, 0).sum(1) / w_l
        m_r = np.where(left, 0, w * yv).sum(1) / w_r
        dev = (w * (yv - np.where(left, m_l[:, None], m_r[:, None])) ** 2).sum(1)
        return m_l, m_r, w_l, w_r, dev

    w = np.broadcast_to(1 / var, left.shape)
    _, _, w_l, w_r, q = segments(w)
    c = sum(s - np.where(side, w * w, 0).sum(1) / s for s, side in ((w_l, left), (w_r, ~left)))
    tau2 = np.maximum(0.0, (q - (n - 2)) / c)  # DerSimonian-Laird, within the two segments
    m_l, m_r, w_l, w_r, q = segments(1 / (var[None, :] + tau2[:, None]))
    # Hartung-Knapp: scale by the residual scatter when it exceeds what the errors allow (tau2
    # from a few runs is itself uncertain), and read z against Student-t with n - 2 df.
    scale = np.maximum(1.0, q / (n - 2))
    z = (m_r - m_l) / np.sqrt(scale * (1 / w_l + 1 / w_r))
    p = np.minimum(1.0, 2 * stdtr(n - 2, -np.abs(z)) * ks.size)
    i = int(np.argmin(p))
    return Step(index=int(ks[i]), before=float(m_l[i]), after=float(m_r[i]), p_value=float(p[i]))


Point = tuple[ResultRow, float, float]  # the result, log(measured), its standard error


def series(history: History, profile: Optional[str] = None) -> dict[tuple[str, str, str], list[Point]]:
    """Per (anchor, profile, engine build): the runs that count, oldest first, each with its log
    value and that value's standard error."""
    keys = history.run_keys()
    levels = history.interval_levels()
    out: dict[tuple[str, str, str], list[Point]] = {}
    for r in history.measured_results(profile=profile):
        k = keys[r.run_id]
        if not k.profile_matches or k.contribution or r.ci_lo is None or r.ci_hi is None:
            continue  # a contribution is someone else's machine: never a point of a runner's series
        assert r.measured is not None  # measured_results() selects measured rows
        se = standard_error(r.measured, r.ci_lo, r.ci_hi, *levels.get((r.run_id, r.anchor_id),
                                                                      (None, None)))
        if se is not None:  # a positive value with a finite interval: it has a log
            out.setdefault((r.anchor_id, r.profile, r.engine), []).append(
                (r, math.log(r.measured), se))
    return out


def find_drifts(history: History, *, profile: Optional[str] = None,
                alpha: float = 0.01) -> list[Drift]:
    """Every series whose best step has a corrected p-value below `alpha`, most significant first."""
    drifts = []
    for (anchor_id, prof, engine), points in series(history, profile).items():
        step = step_test([y for _, y, _ in points], [se for _, _, se in points])
        if step is None or step.p_value >= alpha:
            continue
        first = points[step.index][0]
        drifts.append(Drift(anchor_id=anchor_id, profile=prof, engine=engine,
                            first_run_id=first.run_id, first_started=first.started,
                            before=math.exp(step.before), after=math.exp(step.after),
                            p_value=step.p_value, runs=len(points), method=STEP_METHOD))
    return sorted(drifts, key=lambda d: (d.p_value, d.anchor_id, d.profile, d.engine))
