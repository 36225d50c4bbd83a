"""The nightly gate: a runner's night judged against that runner's last accepted state.

asv's `continuous` and Bencher's per-testbed thresholds, in lawbench's words. The baseline of a
night is the accepted nights (gate green, or before the gate existed: exit 0) of the same profile,
the same machine fingerprint (machine_fingerprint) and the same engine build (engine_key). When
the machine or the engine build changes, the night starts a new baseline and says so: the old
nights are another set-up (compare-llama-bench's rule), and every anchor is then judged as new.

Red news (lawbench.core.models.gate.RED_NEWS): an anchor turned (PASS -> FAIL), PASS -> VOID on
two nights running, any -> ERROR, a census lost a label its baseline counted, a drift step on a
series (core/history/drift.py at `alpha`) that the accepted nights alone do not show, an open finding
closed, a new anchor that is not green, an anchor the night did not reach (--deadline). A red a
person acknowledged (hardware_profiles/acknowledged/<profile>.toml, with a date) is shown, not red;
such an anchor's baseline stays where it was, so the red comes back when the date passes.

Only the exit status changes: every absolute verdict stays in the record, the JUnit file and the
report. The exit code itself is still decided in one place (RunRecord.finish).
"""
from __future__ import annotations

import datetime as dt
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from lawbench.core.models import Result, Verdict
from lawbench.core.models.gate import AcknowledgedFile, GateNews, GateVerdict
from lawbench.core.history.run_keys import engine_key

DRIFT_ALPHA = 0.01  # per series and night; tests/test_gate.py measures the false-alarm rate by simulation


def machine_fingerprint(machine: dict[str, Any]) -> str:
    """What makes two nights the same machine: CPU model and threads, RAM (GiB, rounded), GPUs.
    The hostname is left out on purpose: an ephemeral runner may be renamed, the box is the same."""
    gpus = ", ".join(f"{g.get('name', '?')} cc {g.get('compute_capability') or '?'}"
                     for g in machine.get("gpus") or [])
    ram = machine.get("ram_total_gb")
    return (f"{machine.get('cpu_model') or '?'} x{machine.get('cpu_count_logical') or '?'}"
            f" · {round(ram) if isinstance(ram, (int, float)) else '?'} GiB · {gpus or 'no GPU'}")


def accepted(record: Any) -> bool:
    """A night the baseline may stand on: its gate was green, or (before the gate) it exited 0."""
    if record.interrupted or not record.profile_matches:
        return False
    if record.gate is not None:
        return record.gate.verdict == "green"
    return record.exit_code == 0


@dataclass
class Baseline:
    """The comparable nights of one runner, oldest first, and why a new baseline starts."""

    nights: list[Any]  # RunRecord: same profile, fingerprint and engine build, finished
    accepted: list[Any]
    new_baseline: Optional[str]

    def anchor_base(self, anchor_id: str) -> Optional[Result]:
        """The anchor's result in the newest accepted night where it was not acknowledged."""
        for rec in reversed(self.accepted):
            if rec.gate is not None and (anchor_id in rec.gate.acknowledged or anchor_id in rec.gate.held):
                continue  # its state that night was not accepted: an acknowledged red, a first VOID
            hit = next((r for r in rec.results if r.anchor_id == anchor_id), None)
            if hit is not None and hit.verdict is not Verdict.SKIP:
                return hit
        return None

    def previous(self, anchor_id: str) -> Optional[Result]:
        """The anchor's result on the night before tonight, accepted or not."""
        for rec in reversed(self.nights):
            hit = next((r for r in rec.results if r.anchor_id == anchor_id), None)
            if hit is not None:
                return hit
        return None


def baseline_of(record: Any, history: Any) -> Baseline:
    """Tonight's comparable nights in ``history`` (a lawbench.core.history.store.History)."""
    fp, engine = machine_fingerprint(record.machine), engine_key(record.engine)
    same_profile = [history.record(r.run_id) for r in reversed(history.runs(profile=record.profile, limit=None))
                    if r.run_id != record.run_id and r.finished is not None]
    same_profile = [r for r in same_profile if r.mode == "run"]  # an A/B or a planted-fault proof is no night
    nights = [r for r in same_profile if machine_fingerprint(r.machine) == fp and engine_key(r.engine) == engine
              and not r.interrupted and r.profile_matches]
    ok = [r for r in nights if accepted(r)]
    why = None
    if not ok:
        others = [r for r in same_profile if accepted(r)]
        if not others:
            why = f"no accepted night of profile {record.profile} in the history: tonight starts its baseline"
        else:
            last = others[-1]
            changed = []
            if machine_fingerprint(last.machine) != fp:
                changed.append(f"machine {machine_fingerprint(last.machine)} -> {fp}")
            if engine_key(last.engine) != engine:
                changed.append(f"engine build {engine_key(last.engine)} -> {engine}")
            why = ("; ".join(changed) or "no comparable accepted night") + \
                f": tonight starts a new baseline (last accepted night {last.run_id[:12]})"
    return Baseline(nights=nights, accepted=ok, new_baseline=why)


def _lost_labels(base: Result, now: Result) -> list[str]:
    before = base.census_counts or {}
    after = now.census_counts or {}
    return sorted(k for k, v in before.items() if isinstance(v, (int, float)) and v > 0 and not after.get(k))


def _counts(r: Result) -> dict[str, int]:
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


def _moved(base: Result, now: Result) -> Optional[str]:
    """``base -> now`` when the statistic moved by more than both readings' half-intervals (what
    neither reading could tell apart); None when it did not or cannot be compared."""
    if base.measured is None or now.measured is None:
        return None
    noise = sum((r.interval[1] - r.interval[0]) / 2 for r in (base, now) if r.interval)
    return f"{base.measured:.4g} -> {now.measured:.4g} (noise {noise:.2g})" \
        if abs(now.measured - base.measured) > noise else None


def anchor_news(now: Result, base: Optional[Result], prev: Optional[Result]) -> Optional[GateNews]:
    """What one anchor's result says against its baseline (None: nothing new)."""
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
        moved = _moved(base, now)
        if moved:
            return news("finding-moved", f"open finding's statistic moved beyond its noise: {moved}")
        return None
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


def _drift_news(record: Any, baseline: Baseline, alpha: float) -> list[GateNews]:
    """Drift steps on tonight's series (accepted nights + tonight), known per step, not per anchor
    (issue 30, item 3): a step the accepted nights alone do not show is news; a step they show only
    because a person acknowledged it stays news (shown as acknowledged while the entry holds, red when
    it expires); and after a known step, the segment since that step is tested again, so a second
    step on the same series is news too."""
    import math

    from lawbench.core.history.drift import find_drifts, series, step_test
    from lawbench.core.history.store import History

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
                                f"(p = {p:.2g} < alpha {alpha:g}, {runs} nights)"))

    with tempfile.TemporaryDirectory(prefix="lawbench-gate-") as tmp:
        with History(Path(tmp) / "before.sqlite") as before, History(Path(tmp) / "with.sqlite") as with_tonight:
            for rec in baseline.accepted:
                before.append(rec)
                with_tonight.append(rec)
            with_tonight.append(record.model_copy(update={"exit_code": -1}))  # judged before its exit code exists
            old = {d.anchor_id: d for d in find_drifts(before, profile=record.profile, alpha=alpha)}
            found = {d.anchor_id: d for d in find_drifts(with_tonight, profile=record.profile, alpha=alpha)}
            points = {k[0]: v for k, v in series(with_tonight, record.profile).items()}
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
        if step is not None and step.p_value < alpha:
            news(anchor_id, math.exp(step.before), math.exp(step.after), seg[step.index][0].run_id, step.p_value,
                 len(seg), "a second ")
    return out


def judge(record: Any, history: Any, acks: Optional[AcknowledgedFile] = None, *,
          not_reached: tuple[str, ...] = (), alpha: float = DRIFT_ALPHA) -> GateVerdict:
    """Tonight's record judged against the history of its runner. The record must hold its results."""
    from lawbench.core.record.reports import is_retired, parse_record_time

    baseline = baseline_of(record, history)
    news: list[GateNews] = []
    live = [r for r in record.results if not is_retired(r)]
    for r in live:
        if r.verdict is Verdict.SKIP and not r.blocking:
            continue
        n = anchor_news(r, baseline.anchor_base(r.anchor_id), baseline.previous(r.anchor_id))
        if n is not None:
            news.append(n)
    if baseline.accepted:
        ran = {r.anchor_id for r in live} | set(not_reached)
        last = {r.anchor_id for r in baseline.accepted[-1].results if not is_retired(r)}
        news += [GateNews(anchor_id=a, kind="not-run", before=None, after=None,
                          why="in the last accepted night, not selected tonight") for a in sorted(last - ran)]
    news += [GateNews(anchor_id=a, kind="not-reached", why="not reached before the --deadline: the night does "
                      "not fit its window") for a in not_reached]
    news += _drift_news(record, baseline, alpha)
    # Rate series (issue 31, lawbench.core.history.rates): slower / faster first, before any other news.
    from lawbench.core.history.rates import rate_news

    from lawbench.core.history.upgrade import upgrade_news

    slower_faster, rates_unanalysed = rate_news(record, baseline.accepted)
    upgraded, undecided = upgrade_news(record)  # an engine upgrade: paired against the build it replaces
    news[:0] = upgraded + slower_faster
    rates_unanalysed = rates_unanalysed + undecided
    day = parse_record_time(record.started).date()
    valid = acks.valid_on(day) if acks else {}
    tonight = {r.anchor_id: r for r in record.results}
    acknowledged = []
    for i, n in enumerate(news):
        now = tonight.get(n.anchor_id)
        n = news[i] = n.model_copy(update={"measured": now.measured if now else None,
                                           "counts": _counts(now) if now is not None and now.kind == "census" else None})
        ack = valid.get(n.anchor_id)
        if ack is not None and n.red and accepts(ack, n, now):
            news[i] = n.model_copy(update={"acknowledged_until": ack.until.isoformat(),
                                           "acknowledged_by": ack.accepted_by})
            acknowledged.append(n.anchor_id)
    gone = acks.expired_on(day) if acks else []
    expired = [f"{a.anchor} until {a.until.isoformat()}" for a in gone]
    # Expiry is the gate's business (item 1): only that anchor is red, and no date stops a run.
    news += [GateNews(anchor_id=a.anchor, kind="acknowledgement-expired", before=None,
                      after=tonight[a.anchor].verdict.value if a.anchor in tonight else None,
                      why=f"acknowledgement expired on {a.until.isoformat()} ({a.kind}, accepted by {a.accepted_by}): "
                          "renew it after review, or remove it") for a in gone]
    red = any(n.red for n in news)
    return GateVerdict(verdict="red" if red else "green", profile=record.profile,
                       fingerprint=machine_fingerprint(record.machine), engine=engine_key(record.engine),
                       baseline_run_id=baseline.accepted[-1].run_id if baseline.accepted else None,
                       baseline_runs=len(baseline.accepted), new_baseline=baseline.new_baseline, alpha=alpha,
                       news=news, acknowledged=sorted(set(acknowledged)), expired=expired,
                       held=sorted(n.anchor_id for n in news if n.kind == "void-once"),
                       rates_unanalysed=rates_unanalysed)


# --------------------------------------------------------------------------- where the inputs live


def acknowledged_path(profile: str) -> Any:
    """The profile's reviewed file of standing reds, shipped with the profiles."""
    from importlib.resources import files

    return files("lawbench.hardware_profiles") / "acknowledged" / f"{profile}.toml"


def load_acknowledged(profile: str, path: Optional[str] = None) -> Optional[AcknowledgedFile]:
    """The acknowledgements of ``profile`` (from ``path`` when given); None when there are none.

    :raises DataError: the file is malformed or names another profile (one line: file, field).
    """
    from pydantic import ValidationError

    from lawbench.core.errors import DataError, validation_error
    from lawbench.core.claims.loading import read_toml

    source: Any = Path(path) if path else acknowledged_path(profile)
    if not path and not source.is_file():
        return None
    try:
        ack = AcknowledgedFile.model_validate(read_toml(source))
    except ValidationError as exc:
        raise validation_error(str(source), exc) from None
    if ack.profile != profile:
        raise DataError(str(source), f"acknowledges profile {ack.profile!r}, not {profile!r}", field="profile")
    return ack


def today() -> dt.date:
    return dt.datetime.now(dt.timezone.utc).date()
