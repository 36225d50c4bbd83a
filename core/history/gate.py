"""The nightly gate: a runner's night judged against that runner's last accepted state.

asv's `continuous` and Bencher's per-testbed thresholds, in lawbench's words. The baseline of a
night is the accepted nights (gate green, or before the gate existed: exit 0) of the same profile,
the same machine fingerprint (machine_fingerprint) and the same engine build (engine_key). When
the machine or the engine build changes, the night starts a new baseline and says so: the old
nights are another set-up (compare-llama-bench's rule), and every anchor is then judged as new.

What is news, and its colour, is core/history/gate_news.py's (one rule per kind; the kinds are
lawbench.core.models.gate.RED_NEWS / NOTE_NEWS, and docs/gate.md has the table). A red a person
acknowledged (hardware_profiles/acknowledged/<profile>.toml: a kind at a state, until a date) is
shown, not red; such an anchor's baseline stays where it was, so the red comes back when the date
passes.

Only the exit status changes: every absolute verdict stays in the record, the JUnit file and the
report. The exit code itself is still decided in one place (RunRecord.finish).
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from lawbench.core.errors import DataError, validation_error
from lawbench.core.history.rates import rate_review
from lawbench.core.history.upgrade import upgrade_news
from lawbench.core.models import Result, Verdict
from lawbench.core.models.gate import AcknowledgedFile, GateNews, GateVerdict
from lawbench.core.history.gate_news import (FINDING_ALPHA, FINDING_WINDOW, FLAP_WINDOW, accepts, anchor_news,
                                              counts_of, drift_news, flapping_news, gone_news, ran, scope_news,
                                              skip_news)
from lawbench.core.record.reports import is_retired, parse_record_time
from lawbench.core.record.run_keys import engine_key
from lawbench.core.toml_read import read_toml

if TYPE_CHECKING:
    from lawbench.core.history.store import History
    from lawbench.core.models.run_record import RunRecord

# drift's share of the gate's 1 % per runner-night (core/history/gate_news.py says how it is split):
# family-wise over the night, shared (Bonferroni) among the series measured tonight;
# tests/test_gate.py measures the rate by simulation, benchmarks/gate_false_alarms.py the whole gate's
DRIFT_ALPHA = 0.002


def machine_fingerprint(machine: dict[str, Any]) -> str:
    """What makes two nights the same machine: CPU model and threads, RAM (GiB, rounded), GPUs.
    The hostname is left out on purpose: an ephemeral runner may be renamed, the box is the same."""
    gpus = ", ".join(f"{g.get('name', '?')} cc {g.get('compute_capability') or '?'}"
                     for g in machine.get("gpus") or [])
    ram = machine.get("ram_total_gb")
    return (f"{machine.get('cpu_model') or '?'} x{machine.get('cpu_count_logical') or '?'}"
            f" · {round(ram) if isinstance(ram, (int, float)) else '?'} GiB · {gpus or 'no GPU'}")


def accepted(record: RunRecord) -> bool:
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

    def last_seen(self, anchor_id: str) -> Optional[Result]:
        """The anchor's result, any verdict, in the newest accepted night where it was neither
        acknowledged nor held: whether it ran on the accepted night (a skip is news against it)."""
        for rec in reversed(self.accepted):
            if rec.gate is not None and (anchor_id in rec.gate.acknowledged or anchor_id in rec.gate.held):
                continue
            hit = next((r for r in rec.results if r.anchor_id == anchor_id), None)
            if hit is not None:
                return hit
        return None

    def recent(self, anchor_id: str, nights: int) -> list[Optional[Result]]:
        """The anchor's results in the last ``nights`` accepted nights, oldest first (None: not run)."""
        return [next((r for r in rec.results if r.anchor_id == anchor_id), None) for rec in self.accepted[-nights:]]

    def readings(self, anchor_id: str, nights: int) -> list[Result]:
        """The anchor's measured results, oldest first, in the last ``nights`` accepted nights where
        it was neither acknowledged nor held (what its accepted state looked like, night to night)."""
        out = []
        for rec in self.accepted[-nights:]:
            if rec.gate is not None and (anchor_id in rec.gate.acknowledged or anchor_id in rec.gate.held):
                continue
            hit = next((r for r in rec.results if r.anchor_id == anchor_id), None)
            if hit is not None and hit.measured is not None and ran(hit):
                out.append(hit)
        return out

    def previous(self, anchor_id: str) -> Optional[Result]:
        """The anchor's result on the night before tonight, accepted or not."""
        for rec in reversed(self.nights):
            hit = next((r for r in rec.results if r.anchor_id == anchor_id), None)
            if hit is not None:
                return hit
        return None


def baseline_of(record: RunRecord, history: History) -> Baseline:
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


def judge(record: RunRecord, history: History, acks: Optional[AcknowledgedFile] = None, *,
          not_reached: tuple[str, ...] = (), alpha: float = DRIFT_ALPHA, deployed: bool = False,
          roster: Optional[dict[str, tuple[str, str]]] = None) -> GateVerdict:
    """Tonight's record judged against the history of its runner. The record must hold its results.

    :param deployed: the profile has a registered runner (its nightly.deployed): under --strict, a
        skip where the anchor ran on the accepted night is red there, a note elsewhere.
    :param roster: why each anchor of the run's anchor set does not run tonight
        (lawbench.core.run.context.RunContext.absences); None: an anchor of the accepted night gone
        tonight is named without why, unless its retired result says.
    """
    baseline = baseline_of(record, history)
    strict_runner = deployed and bool(record.strict)
    news: list[GateNews] = []
    live = [r for r in record.results if not is_retired(r)]
    # finding-moved's share of the budget, split among the open findings measured tonight
    finding_alpha = FINDING_ALPHA / max(1, sum(1 for r in live if r.open_finding and r.measured is not None))
    for r in live:
        seen = baseline.last_seen(r.anchor_id)
        if r.verdict is Verdict.SKIP and not r.blocking:
            if ran(seen):  # issue 30 item 5: a skip where the anchor ran is news, with its reason
                news.append(skip_news(r, seen, red=strict_runner))
            continue
        n = anchor_news(r, baseline.anchor_base(r.anchor_id), baseline.previous(r.anchor_id),
                        earlier=baseline.readings(r.anchor_id, FINDING_WINDOW), finding_alpha=finding_alpha)
        if r.verdict is Verdict.VOID and (n is None or n.kind == "void-once"):  # item 7: VOIDs that keep coming back
            n = flapping_news(r, baseline.recent(r.anchor_id, FLAP_WINDOW - 1)) or n
        n = n or scope_news(r, seen)
        if n is not None:
            news.append(n)
    # item 7: each anchor of the newest accepted night of tonight's cadence gone tonight, named with
    # why (a weekly night beside the nightlies runs other anchors: that is not news)
    last_night = next((rec for rec in reversed(baseline.accepted) if rec.cadence == record.cadence), None)
    if last_night is not None:
        here = {r.anchor_id for r in live} | set(not_reached)
        last = {r.anchor_id for r in last_night.results if not is_retired(r)}
        news += gone_news(sorted(last - here), {r.anchor_id: r for r in record.results if is_retired(r)}, roster)
    news += [GateNews(anchor_id=a, kind="not-reached", why="not reached before the --deadline: the night does "
                      "not fit its window") for a in not_reached]
    news += drift_news(record, baseline, alpha)
    # Rate series (issue 31, lawbench.core.history.rates): slower / faster first, before any other news;
    # what the test looked at per series is kept so the morning view can draw each against its band.
    slower_faster, rates_unanalysed, rate_checks = rate_review(record, baseline.accepted)
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
                                           "counts": counts_of(now) if now is not None and now.kind == "census" else None})
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
                       rates_unanalysed=rates_unanalysed, rate_checks=rate_checks)


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
