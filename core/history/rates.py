"""The one-night rate test (issue 31): did a runner get slower (or faster) tonight?

Each series (lawbench.core.models.RateSeries: model, format, placement, quantity) is judged on its
own: tonight's value on logs against the mean of the runner's accepted nights of the same engine,
with the spread those nights show from night to night. A night's value is its fastest visit, not
the mean of its visits: a neighbour on the box, a clock that has not ramped, a page-cache miss only
ever slow a visit down, so the fastest visit is the night's best estimate of what the machine and
the engine can do, and the spread the test must beat shrinks. Measured on real nights, night-to-night
sd of the log rate, mean of visits → fastest visit: 2-core CPU 4.6-10.2 % → 3.2-7.3 % (eight series,
results/gate-prove/cpu-nights-2026-12-07), H100 0.35-0.51 % → 0.19-0.38 % (two series,
results/h200/series-2026-12-07*). What the fastest visit cannot see: a change that only slows some
visits (a stall every other visit) while the best is untouched; the anchors' own verdicts and the
in-night A/B still read every visit. A reading that carries an interval (the benchmarks' simulated
nights) widens the threshold when tonight is noisier than the nights were. The
p-values of all series of the night go through Holm's step-down, so the chance of any false alarm
on an unchanged runner-night is at most ``alpha`` (1 %) whatever the number of series. A series is
slower (faster) only when its whole interval lies beyond 1 ∓ TOLERANCE, the margin the in-night
A/B (core/run/upgrade.py) takes from here: one rule for both paths, and a machine's shift of a percent or so between
sessions is not news (seen on an H100, 2026-12-07: nights taken minutes apart spread 0.35 %, and
a later session of the same card ran 1-2 % slower with nothing planted).

A series with fewer than ``MIN_NIGHTS`` accepted nights, or whose engine changed tonight, is said
to be "cannot analyse" (conbench's word): never green by silence, never red.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Optional, Sequence

from lawbench.core.models.gate import GateNews

if TYPE_CHECKING:
    from lawbench.core.models.run_record import RunRecord

ALPHA = 0.01  # family-wise false-alarm rate per runner-night, over all the night's series
MIN_NIGHTS = 5  # fewer accepted nights than this: the spread is not known well enough to judge
TOLERANCE = 0.01  # slower / faster only when the whole interval lies beyond 1 ∓ 1 %


@dataclass(frozen=True)
class Reading:
    """One series' value on one night: the geometric mean and its 95 % interval."""

    series: str
    measured: float
    interval: Optional[tuple[float, float]] = None
    n: int = 0
    engine: str = ""
    rechecked: int = 0  # visits of the night's second round (lawbench.core.run.recheck), 0: none


@dataclass(frozen=True)
class RateNews:
    """What the rate test says about one series tonight."""

    kind: str  # "slower", "faster" or "cannot analyse"
    series: str
    size: Optional[float] = None  # tonight / baseline − 1 (−0.10: 10 % slower)
    interval: Optional[tuple[float, float]] = None  # the size's 99 % interval
    nights: int = 0  # accepted nights the baseline rests on
    reason: str = ""

    def line(self) -> str:
        if self.kind == "cannot analyse":
            return f"cannot analyse {self.series}: {self.reason}"
        lo, hi = self.interval or (self.size, self.size)
        return (f"{self.kind} {self.series}: {self.size:+.1%} (interval {lo:+.1%} … {hi:+.1%}) "
                f"against {self.nights} accepted nights" + (f"; {self.reason}" if self.reason else ""))


def _t_sf2(t: float, df: int) -> float:
    """Two-sided p-value of Student's t."""
    from scipy.special import stdtr

    return float(2.0 * stdtr(df, -abs(t)))


def _t_quantile(p: float, df: int) -> float:
    from scipy.special import stdtrit

    return float(stdtrit(df, p))


def _mean_sd(xs: Sequence[float]) -> tuple[float, float]:
    m = sum(xs) / len(xs)
    return m, math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


def _tonight_se(r: Reading) -> float:
    """The standard error of log(tonight) from its 95 % interval (0 when it has none)."""
    if r.interval is None or r.n < 2 or r.interval[0] <= 0:
        return 0.0
    half = (math.log(r.interval[1]) - math.log(r.interval[0])) / 2.0
    return half / _t_quantile(0.975, r.n - 1)


def judge_rates(accepted: dict[str, list[Reading]], tonight: Sequence[Reading], *,
                alpha: float = ALPHA, min_nights: int = MIN_NIGHTS, tolerance: float = TOLERANCE
                ) -> list[RateNews]:
    """News for tonight's readings against each series' accepted nights (oldest first).

    Pure: no history, no clock. Returns one entry per series that is slower, faster or cannot be
    analysed; a series judged and unchanged returns nothing."""
    news: list[RateNews] = []
    tests: list[tuple[float, RateNews, float, float, int]] = []  # p, draft, d, se, df
    for r in tonight:
        past = [p for p in accepted.get(r.series, []) if p.measured > 0]
        same = [p for p in past if p.engine == r.engine]
        if past and not same:
            news.append(RateNews("cannot analyse", r.series, nights=0,
                                 reason=f"engine {r.engine or '?'} has no accepted night (the build "
                                        "it replaces is measured by the in-night A/B)"))
            continue
        if len(same) < min_nights or r.measured <= 0:
            news.append(RateNews("cannot analyse", r.series, nights=len(same),
                                 reason=f"{len(same)} accepted nights, the test needs {min_nights}"))
            continue
        logs = [math.log(p.measured) for p in same]
        mean, sd = _mean_sd(logs)
        k = len(logs)
        # Tonight's noise is part of the nights' spread, unless tonight is noisier than they were.
        var = max(sd * sd, _tonight_se(r) ** 2) + sd * sd / k
        se = math.sqrt(var) if var > 0 else 1e-12
        d = math.log(r.measured) - mean
        # tested against the margin, not against no change: within 1 ∓ tolerance is never news
        beyond = d - (math.log1p(-tolerance) if d < 0 else math.log1p(tolerance))
        p = _t_sf2(beyond / se, k - 1) if beyond * d > 0 else 1.0
        tests.append((p, RateNews("", r.series, nights=k), d, se, k - 1))
    # Holm: the i-th smallest p-value is held against alpha / (m − i); stop at the first kept.
    m = len(tests)
    for i, (p, draft, d, se, df) in enumerate(sorted(tests, key=lambda t: t[0])):
        if p > alpha / (m - i):
            break
        q = _t_quantile(1 - alpha / 2, df) * se
        news.append(RateNews("slower" if d < 0 else "faster", draft.series, size=math.exp(d) - 1,
                             interval=(math.exp(d - q) - 1, math.exp(d + q) - 1), nights=draft.nights))
    order = {"slower": 0, "faster": 1, "cannot analyse": 2}
    return sorted(news, key=lambda n: (order[n.kind], n.size or 0.0))


# --------------------------------------------------------------------------- the gate's hook


def night_readings(record: RunRecord, fastest: bool = True, first_round: bool = False) -> dict[str, Reading]:
    """A night's rate readings by series, each its fastest visit (``fastest``, what the gate judges:
    over both rounds where the series was read again, over the first only with ``first_round``)
    or the geometric mean of its visits with their interval (what a developer's "since your last
    run" compares): a series several anchors measured keeps the reading with the most visits, so
    one night is one value of each series."""
    out: dict[str, Reading] = {}
    for result in record.results:
        for rate in getattr(result, "rates", []):
            if rate.measured is None:
                continue
            if not fastest:
                r = Reading(rate.series.key, rate.measured, rate.interval, len(rate.values), rate.engine)
            elif first_round:
                r = Reading(rate.series.key, rate.first_round_fastest, None, len(rate.values), rate.engine)
            else:
                r = Reading(rate.series.key, rate.fastest, None, len(rate.values), rate.engine,
                            rechecked=len(rate.recheck))
            if r.series not in out or r.n > out[r.series].n:
                out[r.series] = r
    return out


def rate_news(record: RunRecord, accepted_records: Sequence[Any], alpha: float = ALPHA
              ) -> tuple[list[Any], list[str]]:
    """Tonight's rate news for the gate (GateNews: `slower` red, `faster` said) and the series it
    cannot analyse yet, one line each (said in the verdict, never red)."""
    tonight = night_readings(record)
    if not tonight:
        return [], []
    accepted: dict[str, list[Reading]] = {}
    for rec in accepted_records:
        for key, r in night_readings(rec).items():
            accepted.setdefault(key, []).append(r)
    news, unanalysed = [], []
    judged = judge_rates(accepted, list(tonight.values()), alpha=alpha)
    for n in judged:
        if n.kind == "cannot analyse":
            unanalysed.append(n.line())
            continue
        again = tonight[n.series].rechecked
        if again:
            n = replace(n, reason=f"read again ({again} more visits): still {n.kind}")
        news.append(GateNews(anchor_id=f"rate: {n.series}", kind=n.kind, before=f"{baseline(accepted[n.series]):.4g}",
                             after=f"{tonight[n.series].measured:.4g}", why=n.line(), size=n.size,
                             size_interval=n.interval))
    if any(r.rechecked for r in tonight.values()):
        news += _not_confirmed(record, accepted, {n.series for n in judged if n.kind == "slower"}, tonight, alpha)
    return news, unanalysed


def baseline(readings: Sequence[Reading]) -> float:
    """The geometric mean of a series' accepted readings: what tonight is compared with."""
    return math.exp(sum(math.log(r.measured) for r in readings) / len(readings))


def _not_confirmed(record: RunRecord, accepted: dict[str, list[Reading]], slower: set[str],
                   tonight: dict[str, Reading], alpha: float) -> list[Any]:
    """A `not-confirmed` note for each series read again tonight whose first round alone the test
    calls slower and both rounds not: the record shows the night read slower, then did not."""
    first = night_readings(record, first_round=True)
    out = []
    for n in judge_rates(accepted, list(first.values()), alpha=alpha):
        r = tonight.get(n.series)
        if n.kind != "slower" or n.series in slower or r is None or not r.rechecked:
            continue
        out.append(GateNews(anchor_id=f"rate: {n.series}", kind="not-confirmed",
                            before=f"{baseline(accepted[n.series]):.4g}", after=f"{r.measured:.4g}",
                            why=f"{n.series}: the night's first round read {n.size:+.1%} against {n.nights} "
                                f"accepted nights (fastest visit {first[n.series].measured:.4g}); read again "
                                f"({r.rechecked} more visits) it was not (fastest of both rounds {r.measured:.4g}): "
                                "something slowed the first round, not the engine"))
    return out


def since_last_run(record: RunRecord, last: RunRecord) -> list[str]:
    """A developer's run against their previous run of the same set-up (issue 31: "slower since
    your last run"), one line per series whose 95 % interval tonight lies wholly below (slower) or
    above (faster) the last run's: said, never failed — the absolute gate stays the law's."""
    now, before = night_readings(record, fastest=False), night_readings(last, fastest=False)
    lines = []
    for key, r in sorted(now.items()):
        b = before.get(key)
        if b is None or r.interval is None or b.interval is None or r.engine != b.engine or b.measured <= 0:
            continue
        if r.interval[1] < b.interval[0] or r.interval[0] > b.interval[1]:
            word = "slower" if r.measured < b.measured else "faster"
            lines.append(f"{word} since your last run ({last.run_id[:12]}): {key}: {r.measured:.4g} against "
                         f"{b.measured:.4g} ({r.measured / b.measured - 1:+.1%})")
    return lines
