"""What the nightly gate calls news, one rule per kind (lawbench.core.models.gate.RED_NEWS /
NOTE_NEWS; docs/gate.md has the table): an anchor's verdict against its baseline, a skip where it
ran, a VOID that keeps coming back (flapping), an anchor of the accepted night gone tonight and why,
a drift step per series, and whether a person's acknowledgement covers what tonight shows.
core/history/gate.py finds the baseline and applies these rules; nothing here opens a history or a
file of its own."""
from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence

from lawbench.core.history.store import History
from lawbench.core.models import Result, Verdict
from lawbench.core.models.gate import GateNews

if TYPE_CHECKING:
    from lawbench.core.models.run_record import RunRecord

RAN = (Verdict.PASS, Verdict.FAIL, Verdict.VOID)  # a verdict that measured something (SKIP / ERROR did not)
FLAP_WINDOW = 5  # tonight and the anchor's last four accepted nights
FLAP_VOIDS = 2  # VOIDs in that window, beside a verdict that resolved, that make an anchor flapping
# The gate's false-alarm budget is 1 % per runner-night, shared among its rules (docs/gate.md,
# "The whole gate's false alarms"): `slower` (core/history/rates.py, alpha 1 % two-sided, red one
# side) about 0.5 %, `drift` 0.2 % (core/history/gate.py DRIFT_ALPHA), `finding-moved` 0.1 %, and the
# rest for the verdict rules, which have no alpha (their rate is the instrument's VOID rate).
FINDING_ALPHA = 0.001  # finding-moved per runner-night, shared (Bonferroni) among tonight's open findings
FINDING_NIGHTS = 4  # accepted readings of a finding before its own night-to-night spread is its noise
FINDING_WINDOW = 20  # the finding's last accepted readings that spread is taken from
FINDING_SCATTER = 0.05  # until then: night-to-night scatter beyond the intervals assumed (log; drift's
#                         simulation covers up to 0.05), added to both readings' errors


def _lost_labels(base: Result, now: Result) -> list[str]:
    before = base.census_counts or {}
    after = now.census_counts or {}
    return sorted(k for k, v in before.items() if isinstance(v, (int, float)) and v > 0 and not after.get(k))


def counts_of(r: Result) -> dict[str, int]:
    return {k: int(v) for k, v in (r.census_counts or {}).items() if isinstance(v, (int, float))}


def _outside(x: float, band: Optional[tuple[float, float]]) -> float:
    """How far ``x`` lies outside ``band`` (0 inside it, or with no band)."""
    if band is None:
        return 0.0
    lo, hi = band
    return max(lo - x, x - hi, 0.0)


def accepts(ack: Any, n: GateNews, now: Optional[Result]) -> bool:
    """Whether an acknowledgement covers tonight's news on its anchor: the same kind of news, at a
    state no worse than the accepted one. Worse: a census label counting fewer than accepted, or a
    statistic further outside the band than the accepted value by more than tonight's resolvable
    noise (half its interval: what this reading could not tell apart); for a drift step, a level
    that moved from the accepted one by more than that noise, in either direction (another step)."""
    if n.kind != ack.kind:
        return False
    if ack.counts is not None:
        got = n.counts or {}
        if any(got.get(k, 0) < v for k, v in ack.counts.items()):
            return False
    if ack.value is not None:
        if n.measured is None:
            return False  # a value was accepted and tonight has none: not what was seen
        band = now.band if now is not None else None
        noise = (now.interval[1] - now.interval[0]) / 2 if now is not None and now.interval else 0.0
        if n.kind == "drift":  # a step inside the band: the accepted level is the step seen; another level is another step
            if abs(n.measured - ack.value) > noise:
                return False
        elif _outside(n.measured, band) > _outside(ack.value, band) + noise:
            return False
    return True


def _reading(r: Result, log: bool) -> tuple[float, float]:
    """A reading's value and standard error, on logs (``log``) or as measured: the error is its
    interval's half-width over the quantile that made it (Student-t at its per-look confidence and
    sample count, 95 % normal without: core/history/drift.py's rule); 0 without a usable interval."""
    from scipy.special import ndtri, stdtrit

    assert r.measured is not None
    if not r.interval:
        return (math.log(r.measured) if log else r.measured), 0.0
    lo, hi = r.interval
    s = r.sampling
    if s is not None and s.n >= 2 and 0 < s.confidence_per_look < 1:
        q = float(stdtrit(s.n - 1, (1 + s.confidence_per_look) / 2))
    else:
        q = float(ndtri(0.975))
    if not log:
        return r.measured, max(hi - lo, 0.0) / (2 * q)
    ok = 0 < lo <= hi and all(map(math.isfinite, (lo, hi)))
    return math.log(r.measured), (math.log(hi / lo) / (2 * q) if ok else 0.0)


def _moved(base: Result, now: Result, earlier: Sequence[Result] = (), alpha: float = FINDING_ALPHA) -> Optional[str]:
    """``base -> now`` when an open finding's statistic moved beyond its noise at two-sided level
    ``alpha`` (FINDING_ALPHA over tonight's findings); None when it did not or cannot be compared.

    With FINDING_NIGHTS or more accepted readings (``earlier``, the finding's, oldest first; the
    last FINDING_WINDOW count), the noise is their spread night to night: tonight against their
    mean, Student-t with k - 1 degrees of freedom, tonight's own error taking the spread's place
    when tonight is noisier (core/history/rates.py's test). With fewer, tonight against ``base``
    with both readings' errors and FINDING_SCATTER of unexplained scatter on each night added: what
    neither interval shows until the finding's own nights have shown it. On logs when every value
    is positive (a move is a factor), else as measured (the scatter then relative to the base)."""
    from scipy.special import ndtr, stdtr

    if base.measured is None or now.measured is None:
        return None
    seen = [r for r in earlier if r.measured is not None][-FINDING_WINDOW:]
    log = all(r.measured > 0 for r in [base, now, *seen])
    y, se = _reading(now, log)
    if len(seen) >= FINDING_NIGHTS:
        ys = [_reading(r, log)[0] for r in seen]
        k = len(ys)
        mean = sum(ys) / k
        var = sum((v - mean) ** 2 for v in ys) / (k - 1)
        t = abs(y - mean) / math.sqrt(max(var, se * se) + var / k or 1e-300)
        p, centre = float(2 * stdtr(k - 1, -t)), (math.exp(mean) if log else mean)
        what = f"against its {k} accepted nights' spread, t-test"
    else:
        yb, seb = _reading(base, log)
        scatter = FINDING_SCATTER * (1.0 if log else abs(base.measured))
        z = abs(y - yb) / math.sqrt(se * se + seb * seb + 2 * scatter * scatter or 1e-300)
        p, centre = float(2 * ndtr(-z)), base.measured
        what = (f"against {len(seen)} accepted night(s): both intervals and {FINDING_SCATTER:.0%} "
                "night scatter assumed")
    if p >= alpha:
        return None
    return f"{centre:.4g} -> {now.measured:.4g} (p = {p:.2g} < {alpha:.2g}, {what})"


def anchor_news(now: Result, base: Optional[Result], prev: Optional[Result], *,
                earlier: Sequence[Optional[Result]] = (), finding_alpha: float = FINDING_ALPHA) -> Optional[GateNews]:
    """What one anchor's result says against its baseline (None: nothing new). A skip the run
    turned FAIL (--strict, the anchor's own runner) is said as the skip it is, never as "turned".
    ``earlier``: the anchor's results on its accepted nights, oldest first (an open finding's
    statistic is watched against their spread); ``finding_alpha``: finding-moved's level for this
    anchor (FINDING_ALPHA shared among tonight's findings)."""
    v, b = now.verdict.value, (base.verdict.value if base else None)

    def news(kind: str, why: str) -> GateNews:
        return GateNews(anchor_id=now.anchor_id, kind=kind, before=b, after=v, why=why)

    if now.finding_closed:
        return news("finding-closed", "the open finding no longer reproduces: update the register and the anchor")
    if now.verdict is Verdict.ERROR:
        return news("error", f"{b or 'new'} -> ERROR: {now.reason}")
    if base is None:
        return news("new-not-green", f"no accepted baseline and not green: {v}: {now.reason}") if now.blocking \
            else None
    if base.open_finding or now.open_finding:  # a finding's statistic is watched like any other (item 4)
        if not base.open_finding:
            return news("finding-added", f"an open finding appeared on an anchor whose baseline was {b}: "
                                         f"{now.open_finding}")
        if now.verdict is Verdict.SKIP or now.strict_skip:
            return news("finding-unmeasured", f"an open finding's anchor was not measured tonight: {now.reason}")
        if now.verdict is Verdict.VOID:
            if prev is not None and prev.verdict is Verdict.VOID:
                return news("void-twice", f"open finding VOID two nights running: {now.reason}")
            return news("void-once", f"open finding VOID (red if the next night is VOID too): {now.reason}")
        if not now.open_finding and now.verdict is Verdict.FAIL:
            return news("finding-removed", f"the anchor's open finding was removed: its FAIL now blocks: {now.reason}")
        moved = _moved(base, now, [r for r in earlier if r is not None and r.open_finding], finding_alpha)
        if moved:
            return news("finding-moved", f"open finding's statistic moved beyond its noise: {moved}")
        return None
    if now.strict_skip and ran(base):  # not measured tonight: what it skipped on, not a verdict that turned
        return skip_news(now, base, red=True)
    if now.kind == "census" and base.kind == "census":
        lost = _lost_labels(base, now)
        if lost:
            return news("lost-label", f"census lost label(s) its baseline counted: {', '.join(lost)}")
    if b == "PASS" and v == "FAIL":
        return news("turned", f"PASS -> FAIL: {now.reason}")
    if b == "PASS" and v == "VOID":
        if prev is not None and prev.verdict is Verdict.VOID:
            return news("void-twice", f"PASS -> VOID two nights running: {now.reason}")
        return news("void-once", f"PASS -> VOID (red if the next night is VOID too): {now.reason}")
    if base.verdict.bad and now.verdict is Verdict.PASS:
        return news("recovered", f"{b} -> PASS")
    return None


def drift_news(record: RunRecord, baseline: Any, alpha: float) -> list[GateNews]:
    """Drift steps on tonight's series (accepted nights + tonight), known per step, not per anchor
    (issue 30, item 3): a step the accepted nights alone do not show is news; a step they show only
    because a person acknowledged it stays news (shown as acknowledged while the entry holds, red when
    it expires); and after a known step, the segment since that step is tested again, so a second
    step on the same series is news too. ``alpha`` is per runner-night: each series tonight measured
    is tested at alpha / their number (Bonferroni), so a runner with ten measured anchors is not ten
    times as often red as one with one."""
    from lawbench.core.history.drift import find_drifts, series, step_test

    if len(baseline.accepted) < 3:  # a step needs two nights on each side
        return []
    acked = {n.anchor_id for rec in baseline.accepted if rec.gate is not None for n in rec.gate.news
             if n.kind == "drift" and n.acknowledged_until}
    out = []
    now = {r.anchor_id: r for r in record.results}

    def news(anchor_id: str, before: float, after: float, first: str, p: float, runs: int, what: str) -> None:
        r = now.get(anchor_id)
        out.append(GateNews(anchor_id=anchor_id, kind="drift", before=None, after=r.verdict.value if r else None,
                            why=f"{what}drift step: {before:.4g} -> {after:.4g} from run {first[:12]} "
                                f"(p = {p:.2g} < alpha {alpha:g} / {tested} series, {runs} nights)"))

    with tempfile.TemporaryDirectory(prefix="lawbench-gate-") as tmp:
        with History(Path(tmp) / "before.sqlite") as before, History(Path(tmp) / "with.sqlite") as with_tonight:
            for rec in baseline.accepted:
                before.append(rec)
                with_tonight.append(rec)
            with_tonight.append(record.model_copy(update={"exit_code": -1}))  # judged before its exit code exists
            points = {k[0]: v for k, v in series(with_tonight, record.profile).items()}
            tested = sum(1 for pts in points.values() if pts and pts[-1][0].run_id == record.run_id)
            per = alpha / max(tested, 1)
            old = {d.anchor_id: d for d in find_drifts(before, profile=record.profile, alpha=per)}
            found = {d.anchor_id: d for d in find_drifts(with_tonight, profile=record.profile, alpha=per)}
    for anchor_id, d in sorted(found.items()):
        if anchor_id not in old:
            news(anchor_id, d.before, d.after, d.first_run_id, d.p_value, d.runs, "")
    for anchor_id, o in sorted(old.items()):
        if anchor_id not in now:
            continue
        if anchor_id in acked:  # accepted by a date, not by a person seeing it green: comes back on expiry
            news(anchor_id, o.before, o.after, o.first_run_id, o.p_value, o.runs, "acknowledged ")
        pts = points.get(anchor_id) or []
        start = next((i for i, pt in enumerate(pts) if pt[0].run_id == o.first_run_id), None)
        if start is None:
            continue
        seg = pts[start:]
        step = step_test([y for _, y, _ in seg], [se for _, _, se in seg])
        if step is not None and step.p_value < per:
            news(anchor_id, math.exp(step.before), math.exp(step.after), seg[step.index][0].run_id, step.p_value,
                 len(seg), "a second ")
    return out


def ran(r: Optional[Result]) -> bool:
    """Whether a result measured its anchor (PASS / FAIL / VOID), not a skip turned FAIL."""
    return r is not None and r.verdict in RAN and not r.strict_skip


def skip_news(now: Result, seen: Result, *, red: bool) -> GateNews:
    """An anchor that ran on the accepted night (``seen``) and did not tonight (issue 30, item 5),
    with the skip's reason; a scope decision taken at run time (Result.out_of_scope: Law 4's scope
    rules, its cpu-tier probe) that changed is said as such. ``red``: `skipped`, else
    `skipped-off-runner` (a note)."""
    scope = f"scope decision changed: in scope on the accepted night ({seen.verdict.value}), out of scope tonight" \
        if now.out_of_scope else f"ran on the accepted night ({seen.verdict.value}), not measured tonight"
    return GateNews(anchor_id=now.anchor_id, kind="skipped" if red else "skipped-off-runner",
                    before=seen.verdict.value, after=now.verdict.value, why=f"{scope}: {now.reason}")


def scope_news(now: Result, seen: Optional[Result]) -> Optional[GateNews]:
    """Out of scope on the accepted night, measured tonight: the scope decision changed (a note)."""
    if seen is None or not seen.out_of_scope or not ran(now):
        return None
    return GateNews(anchor_id=now.anchor_id, kind="back-in-scope", before=seen.verdict.value, after=now.verdict.value,
                    why=f"scope decision changed: out of scope on the accepted night ({seen.out_of_scope}), "
                        f"measured tonight: {now.verdict.value}")


def flapping_news(now: Result, earlier: list[Optional[Result]]) -> Optional[GateNews]:
    """A VOID tonight that makes FLAP_VOIDS VOIDs among tonight and the anchor's last accepted nights
    (``earlier``, oldest first; the last FLAP_WINDOW - 1 count), beside a verdict that resolved
    (PASS / FAIL): the anchor flips between resolving its band and not (PASS, VOID, PASS, VOID),
    which void-twice, needing two VOIDs running, never sees. VOID every night is standing, not flapping."""
    window = [r for r in earlier[-(FLAP_WINDOW - 1):] if r is not None] + [now]
    voids = sum(r.verdict is Verdict.VOID for r in window)
    if now.verdict is not Verdict.VOID or voids < FLAP_VOIDS or \
            not any(r.verdict in (Verdict.PASS, Verdict.FAIL) for r in window):
        return None
    seq = ", ".join(r.verdict.value for r in window)
    return GateNews(anchor_id=now.anchor_id, kind="flapping", before=window[-2].verdict.value, after="VOID",
                    why=f"{voids} VOIDs in its last {len(window)} nights ({seq}): the anchor flips between "
                        f"resolving its band and not: {now.reason}")


def gone_news(gone: list[str], retired: dict[str, Result],
              roster: Optional[dict[str, tuple[str, str]]]) -> list[GateNews]:
    """Each anchor of the accepted night not run tonight (issue 30, item 7), named with why where it
    is knowable: ``roster`` (RunContext.absences(): the run's anchor set) knows status, cadence,
    profiles and selection, and an id it lacks is no longer in the anchors TOML; without a roster, a
    retired result tonight still says its status. Notes, never red."""
    out = []
    for a in sorted(gone):
        if roster is not None and a in roster:
            kind, why = roster[a]
        elif a in retired:
            kind, why = "retired", retired[a].reason
        elif roster is not None:
            kind, why = "removed", "no longer in the anchors TOML: removed, or renamed (a new id is judged as new)"
        else:
            kind, why = "not-run", "in the last accepted night, not run tonight (the run gave no anchor set to say why)"
        out.append(GateNews(anchor_id=a, kind=kind, why=why))
    return out
