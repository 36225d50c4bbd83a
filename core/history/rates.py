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
to be "cannot analyse" (conbench's word): never green by silence, never red. A series is judged
against its last ``LOOKBACK`` accepted nights of the same engine, not all of them (Bencher's
threshold window and maximum sample size, conbench's lookback): a year of nights would fold the
box's slow seasons into the spread tonight is held against, and each record stores the nights it
was judged by (gate.rate_checks), which must not grow with the history.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Optional, Sequence

from lawbench.core.models.gate import GateNews, RateCheck

if TYPE_CHECKING:
    from lawbench.core.models.run_record import RunRecord

ALPHA = 0.01  # family-wise false-alarm rate per runner-night, over all the night's series
MIN_NIGHTS = 5  # fewer accepted nights than this: the spread is not known well enough to judge
TOLERANCE = 0.01  # slower / faster only when the whole interval lies beyond 1 ∓ 1 %
# A month of nightly runs. The spread from 30 nights is known to about 13 % (1 / sqrt(2 · 29)); at
# the first Holm step (1-18 series) t with 29 degrees of freedom is 7-12 % wider than the normal,
# with 59 3-6 %: twice the nights would narrow the threshold by about 5 % and reach twice as far back.
LOOKBACK = 30


@dataclass(frozen=True)
class Reading:
    """One series' value on one night: the geometric mean and its 95 % interval."""

    series: str
    measured: float
    interval: Optional[tuple[float, float]] = None
    n: int = 0
    engine: str = ""
    run_id: str = ""  # the night's run (its first 12 characters), where the reading came from a record
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


@dataclass(frozen=True)
class SeriesTest:
    """One judged series: what the test compared (log scale) and what it shows as a band."""

    series: str
    nights: tuple[Reading, ...]  # the accepted nights the baseline rests on, oldest first
    tonight: Reading
    mean: float  # the mean of the nights' log readings: log of the baseline (geometric mean)
    se: float  # the standard error of tonight − mean on logs, tonight's own noise included
    df: int
    p: float  # two-sided, against the 1 ∓ tolerance margin (1.0 when tonight lies inside it)

    @property
    def d(self) -> float:
        return math.log(self.tonight.measured) - self.mean

    def band(self, level: float, tolerance: float = TOLERANCE) -> tuple[float, float]:
        """The readings (tok/s) tonight could have had without being news at two-sided ``level``:
        the margin 1 ∓ tolerance widened by the t-quantile times se, around the baseline. At the
        first Holm step (``level`` = alpha / m) a reading outside it is always news."""
        q = _t_quantile(1 - level / 2, self.df) * self.se
        return (math.exp(self.mean + math.log1p(-tolerance) - q), math.exp(self.mean + math.log1p(tolerance) + q))


def _test_series(r: Reading, past: Sequence[Reading], min_nights: int, tolerance: float,
                 lookback: int = LOOKBACK) -> SeriesTest | RateNews:
    """One series' test against its last ``lookback`` nights of tonight's engine (``past`` oldest
    first), or why it cannot be analysed."""
    past = [p for p in past if p.measured > 0]
    same = [p for p in past if p.engine == r.engine][-lookback:]
    if past and not same:
        return RateNews("cannot analyse", r.series, nights=0,
                        reason=f"engine {r.engine or '?'} has no accepted night (the build "
                               "it replaces is measured by the in-night A/B)")
    if len(same) < min_nights or r.measured <= 0:
        return RateNews("cannot analyse", r.series, nights=len(same),
                        reason=f"{len(same)} accepted nights, the test needs {min_nights}")
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
    return SeriesTest(r.series, tuple(same), r, mean, se, k - 1, p)


def judge_series(accepted: dict[str, list[Reading]], tonight: Sequence[Reading], *,
                 alpha: float = ALPHA, min_nights: int = MIN_NIGHTS, tolerance: float = TOLERANCE,
                 lookback: int = LOOKBACK) -> tuple[list[RateNews], list[SeriesTest]]:
    """judge_rates' news and, beside it, each judged series' test (what a band is drawn from), in
    tonight's order; a series that cannot be analysed has news and no test."""
    news: list[RateNews] = []
    tests: list[SeriesTest] = []
    for r in tonight:
        t = _test_series(r, accepted.get(r.series, []), min_nights, tolerance, lookback)
        if isinstance(t, RateNews):
            news.append(t)
        else:
            tests.append(t)
    # Holm: the i-th smallest p-value is held against alpha / (m − i); stop at the first kept.
    m = len(tests)
    for i, t in enumerate(sorted(tests, key=lambda t: t.p)):
        if t.p > alpha / (m - i):
            break
        q = _t_quantile(1 - alpha / 2, t.df) * t.se
        news.append(RateNews("slower" if t.d < 0 else "faster", t.series, size=math.exp(t.d) - 1,
                             interval=(math.exp(t.d - q) - 1, math.exp(t.d + q) - 1), nights=len(t.nights)))
    order = {"slower": 0, "faster": 1, "cannot analyse": 2}
    return sorted(news, key=lambda n: (order[n.kind], n.size or 0.0)), tests


def judge_rates(accepted: dict[str, list[Reading]], tonight: Sequence[Reading], *,
                alpha: float = ALPHA, min_nights: int = MIN_NIGHTS, tolerance: float = TOLERANCE
                ) -> list[RateNews]:
    """News for tonight's readings against each series' accepted nights (oldest first).

    Pure: no history, no clock. Returns one entry per series that is slower, faster or cannot be
    analysed; a series judged and unchanged returns nothing."""
    return judge_series(accepted, tonight, alpha=alpha, min_nights=min_nights, tolerance=tolerance)[0]


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
            run = record.run_id[:12]
            if not fastest:
                r = Reading(rate.series.key, rate.measured, rate.interval, len(rate.values), rate.engine, run)
            elif first_round:
                r = Reading(rate.series.key, rate.first_round_fastest, None, len(rate.values), rate.engine, run)
            else:
                r = Reading(rate.series.key, rate.fastest, None, len(rate.values), rate.engine, run,
                            rechecked=len(rate.recheck))
            if r.series not in out or r.n > out[r.series].n:
                out[r.series] = r
    return out


def accepted_readings(records: Sequence[RunRecord], fastest: bool = True) -> dict[str, list[Reading]]:
    """The accepted nights' readings by series, oldest first (what the test holds tonight against)."""
    accepted: dict[str, list[Reading]] = {}
    for rec in records:
        for key, r in night_readings(rec, fastest=fastest).items():
            accepted.setdefault(key, []).append(r)
    return accepted


def rate_news(record: RunRecord, accepted_records: Sequence[RunRecord], alpha: float = ALPHA
              ) -> tuple[list[GateNews], list[str]]:
    """Tonight's rate news for the gate (GateNews: `slower` red, `faster` said) and the series it
    cannot analyse yet, one line each (said in the verdict, never red)."""
    news, unanalysed, _ = rate_review(record, accepted_records, alpha)
    return news, unanalysed


def rate_review(record: RunRecord, accepted_records: Sequence[RunRecord], alpha: float = ALPHA
                ) -> tuple[list[GateNews], list[str], list[RateCheck]]:
    """rate_news and, beside it, what the test looked at for each series it judged (RateCheck:
    the accepted nights, tonight, the baseline and the band tonight had to leave to be news),
    slower / faster first: what the gate stores on its verdict and the morning view draws."""
    tonight = night_readings(record)
    if not tonight:
        return [], [], []
    accepted = accepted_readings(accepted_records)
    judged, tests = judge_series(accepted, list(tonight.values()), alpha=alpha)
    tested = {t.series: t for t in tests}
    news, unanalysed = [], []
    for n in judged:
        if n.kind == "cannot analyse":
            unanalysed.append(n.line())
            continue
        again = tonight[n.series].rechecked
        if again:
            n = replace(n, reason=f"read again ({again} more visits): still {n.kind}")
        news.append(GateNews(anchor_id=f"rate: {n.series}", kind=n.kind, before=f"{math.exp(tested[n.series].mean):.4g}",
                             after=f"{tonight[n.series].measured:.4g}", why=n.line(), size=n.size,
                             size_interval=n.interval))
    if any(r.rechecked for r in tonight.values()):
        news += _not_confirmed(record, accepted, {n.series for n in judged if n.kind == "slower"}, tonight, alpha)
    kinds = {n.series: n.kind for n in judged if n.kind != "cannot analyse"}
    formats = {rate.series.key: rate.series.format for result in record.results
               for rate in getattr(result, "rates", [])}
    level = alpha / max(1, len(tests))  # the first Holm step: outside the band is news whatever the other series
    checks = [RateCheck(series=t.series, format=formats.get(t.series, ""), nights=[r.measured for r in t.nights],
                        runs=[r.run_id for r in t.nights], tonight=t.tonight.measured, baseline=math.exp(t.mean),
                        band=t.band(level), level=level, kind=kinds.get(t.series)) for t in tests]
    order = {"slower": 0, "faster": 1, None: 2}
    return news, unanalysed, sorted(checks, key=lambda c: (order[c.kind], c.series))


def _not_confirmed(record: RunRecord, accepted: dict[str, list[Reading]], slower: set[str],
                   tonight: dict[str, Reading], alpha: float) -> list[GateNews]:
    """A `not-confirmed` note for each series read again tonight whose first round alone the test
    calls slower and both rounds not: the record shows the night read slower, then did not."""
    first = night_readings(record, first_round=True)
    judged, tests = judge_series(accepted, list(first.values()), alpha=alpha)
    tested = {t.series: t for t in tests}
    out = []
    for n in judged:
        r = tonight.get(n.series)
        if n.kind != "slower" or n.series in slower or r is None or not r.rechecked:
            continue
        out.append(GateNews(anchor_id=f"rate: {n.series}", kind="not-confirmed",
                            before=f"{math.exp(tested[n.series].mean):.4g}", after=f"{r.measured:.4g}",
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
