"""The run record: one run of any measuring command (`lawbench run`, `ab`, `census plant`), where,
with what, every result, and the exit code (docs/run-record.md documents every field).

`RunRecord.finish` with `judged_bad` is the one rule for a run's exit code; lawbench.core.run.Run
is the one caller that finishes a live run, and lawbench.core.record.checks re-applies the rule to
a record from elsewhere.
"""
from __future__ import annotations

import re
import signal
import subprocess
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from lawbench.core.models.gate import GateVerdict
from lawbench.core.models.result import Result, Verdict
from lawbench.core.models.upgrade import EngineUpgrade

# 2 added `interrupted`, 3 `mode` and `settings`, 4 typed `open_finding` / `finding_closed` on each result
# (before: `detail` keys, lifted on read); records of versions 1 to 3 are still read
SCHEMA_VERSION = 4
# Anchors that are kept only as history (the runner may carry them as results whose detail says so).
RETIRED_STATUSES = ("superseded", "refuted", "retired")
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
# What a run did: verify anchors (`lawbench run`), A/B two engines (`lawbench ab`), or prove the
# census anchors with planted faults (`lawbench census plant`).
RunMode = Literal["run", "ab", "plant"]


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# The one form utc_now() writes. Runs order as text in the history (`ORDER BY started`), so a
# week date ("2026-W48-3"), another offset or a missing zone would sort wrongly for ever.
RECORD_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?\+00:00")


def parse_record_time(text: str) -> datetime:
    """A record's time: ISO-8601 in UTC, as utc_now() writes it (2026-12-01T02:17:00+00:00)."""
    if not isinstance(text, str) or not RECORD_TIME.fullmatch(text):
        raise ValueError(f"{text!r} is not a time in the record's one form, UTC as "
                         "2026-12-01T02:17:00+00:00")
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a calendar time (e.g. 2026-12-01T02:17:00+00:00)") from None


def lawbench_version() -> str:
    try:
        from lawbench import __version__
        return __version__
    except ImportError:  # a broken install should still be able to write its record
        return "unknown"


def git_commit(start: Optional[Path] = None) -> Optional[str]:
    """The commit of the lawbench checkout this code runs from; None for a wheel or no git."""
    here = (start or Path(__file__)).resolve()
    for folder in [here, *here.parents]:
        if (folder / ".git").exists() and (folder / "pyproject.toml").exists():
            break
    else:
        return None
    try:
        out = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True,
                             text=True, encoding="utf-8", errors="replace", timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip()
    return commit if out.returncode == 0 and commit else None


def is_retired(r: Result) -> bool:
    """A retired anchor (superseded, refuted, retired …): listed, never scored as a live claim. The
    record counts them under counts["history"], as it always did."""
    return r.retired is not None


def interrupt_exit_code(signal_name: str) -> int:
    """The shell's status for a job stopped by a signal: 128 + its number (SIGINT 130, SIGTERM 143)."""
    try:
        return 128 + signal.Signals[signal_name].value
    except KeyError:  # a KeyboardInterrupt that no signal sent
        return 128 + signal.SIGINT.value


class WeeklySlice(BaseModel):
    """Which slice of a rotating weekly a run took (core/run/slices.py): slice ``index`` of ``count``,
    this week's by the calendar (``week``, ISO) or named with `--slice` (``chosen``)."""

    model_config = ConfigDict(extra="forbid")

    index: int = Field(ge=0)
    count: int = Field(ge=1)
    week: str
    chosen: bool = False  # `lawbench run --slice K`: a re-run, not this week's by the calendar


class CacheRepair(BaseModel):
    """One cache entry this run found changed and made again (lawbench.core.store.repairs)."""

    model_config = ConfigDict(extra="forbid")

    what: Literal["llama.cpp build", "source archive", "synthetic model", "model", "model stamp"]
    path: str
    why: str
    set_aside: Optional[str] = None  # where the failed entry was kept for a person to look at


class RunRecord(BaseModel):
    """One run: where, with what, and every anchor's result."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1, 2, 3, 4] = SCHEMA_VERSION
    run_id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    started: str = Field(default_factory=utc_now)
    finished: Optional[str] = None  # None while the run is in progress
    lawbench_version: str = Field(default_factory=lawbench_version)
    git_commit: Optional[str] = None
    profile: str
    detected_profile: Optional[str] = None
    profile_matches: bool = False
    strict: bool = False
    # which anchors by how often they run (quick / nightly / weekly / full); None in records older than it
    cadence: Optional[Literal["quick", "nightly", "weekly", "full"]] = None
    # a weekly that rotates in slices: the one this run took; None for any other run
    weekly_slice: Optional[WeeklySlice] = None
    # run: anchors verified; ab: engine B against A ("<anchor>~ab" results); plant: census anchors
    # and their planted faults ("<anchor>~<fault>" results). Records older than it are runs.
    mode: RunMode = "run"
    # what an ab or plant run was asked for (pairs, confidence, gate; anchors, parity tolerance)
    settings: dict[str, Any] = Field(default_factory=dict)
    argv: list[str] = Field(default_factory=list)
    machine: dict[str, Any] = Field(default_factory=dict)
    environment: dict[str, Any] = Field(default_factory=dict)
    engine: Optional[dict[str, Any]] = None
    results: list[Result] = Field(default_factory=list)
    counts: dict[str, int] = Field(default_factory=dict)
    exit_code: Optional[int] = None  # None until finish()
    interrupted: Optional[str] = None  # the signal that stopped the run: SIGINT, SIGTERM
    # Anchors selected but not started because the run's --deadline was near (an honest partial record)
    not_reached: list[str] = Field(default_factory=list)
    # `--gate baseline`: the night judged against its runner's last accepted state (core/history/gate.py);
    # None for an absolute run. Only the exit code follows it: every verdict above stays as measured.
    gate: Optional[GateVerdict] = None
    # Cache entries (builds, archives, models, stamps) that failed their check and were made again
    cache_repairs: list[CacheRepair] = Field(default_factory=list)
    # An engine upgrade night under `--gate baseline`: the build the last accepted night ran, paired
    # against tonight's on every rate series (core/run/upgrade.py); None on any other night.
    engine_upgrade: Optional[EngineUpgrade] = None

    @field_validator("run_id", "profile")
    @classmethod
    def _names_a_file(cls, value: str) -> str:
        # Both become a path on the data branch (runs/<profile>/<run_id>.json); the id is also a
        # prefix to look runs up by.
        if not RUN_ID.fullmatch(value):
            raise ValueError("1-128 letters, digits, '.', '_' or '-', starting with a letter or digit "
                             f"(got {value!r})")
        return value

    @field_validator("started", "finished")
    @classmethod
    def _iso_time_with_zone(cls, value: Optional[str]) -> Optional[str]:
        # Runs sort and age by these times (history, stale): a time that cannot be read, or one
        # without a zone, would sort wrongly for ever in an append-only store.
        if value is not None:
            parse_record_time(value)
        return value

    @model_validator(mode="after")
    def _finished_after_started(self) -> "RunRecord":
        if self.finished is not None and parse_record_time(self.finished) < parse_record_time(self.started):
            raise ValueError(f"finished {self.finished} is before started {self.started}")
        return self

    @classmethod
    def new(cls, profile: str, *, detected_profile: Optional[str] = None,
            profile_matches: bool = False, strict: bool = False, cadence: Optional[str] = None,
            argv: Optional[Iterable[str]] = None, machine: Optional[dict[str, Any]] = None,
            environment: Optional[dict[str, Any]] = None,
            engine: Optional[dict[str, Any]] = None, started: Optional[str] = None,
            mode: str = "run", settings: Optional[dict[str, Any]] = None,
            run_id: Optional[str] = None) -> "RunRecord":
        """A record for a run that started at ``started`` (default: now); the version and the
        checkout's commit are filled in here. ``run_id``: the mode's (an A/B's says "ab-…");
        default a fresh one."""
        return cls(profile=profile, detected_profile=detected_profile,
                   profile_matches=profile_matches, strict=strict, cadence=cadence, argv=list(argv or []),
                   machine=dict(machine or {}), environment=dict(environment or {}),
                   engine=None if engine is None else dict(engine), git_commit=git_commit(),
                   mode=mode, settings=dict(settings or {}),
                   **({"started": started} if started else {}),
                   **({"run_id": run_id} if run_id else {}))

    def finish(self, results: Iterable[Result], interrupted: Optional[str] = None,
               not_reached: Iterable[str] = (), gate: Any = None, broke_down: bool = False) -> "RunRecord":
        """Attach the results, count them per verdict and set the exit code (1 on FAIL/ERROR/VOID
        or an anchor not reached; 128 + the signal's number when ``interrupted`` names the signal
        that stopped the run). With ``gate`` (a function of this record returning its GateVerdict:
        `--gate baseline`), the exit code is the gate's instead: 1 when it is red. ``broke_down``:
        the front end itself failed (pytest's internal error): never recorded as a success.

        Retired anchors (superseded/refuted/retired) are counted apart, under "history".

        SKIP is not bad here: the runner already turned skips into failures where policy says so.
        """
        self.results = list(results)
        self.not_reached = list(not_reached)
        self.counts = {v.value: 0 for v in Verdict}
        self.counts["history"] = 0  # carried for the record only: not a SKIP of a live anchor
        for r in self.results:
            self.counts["history" if is_retired(r) else r.verdict.value] += 1
        self.interrupted = interrupted
        self.finished = utc_now()
        if gate is not None and not interrupted:
            self.gate = gate(self)
        if interrupted:
            self.exit_code = interrupt_exit_code(interrupted)
        else:
            self.exit_code = 1 if self.judged_bad() or broke_down else 0
        return self

    def judged_bad(self) -> bool:
        """Whether a finished, uninterrupted run fails: the one rule for its exit code (finish) and
        for a record checked on import (core.record.checks) — its mode's (EXIT_RULES)."""
        # A --strict job on a machine that is not its profile's fails even when nothing it
        # selected measures (-k prediction): it ran on the wrong runner (core.run.session).
        wrong_runner = self.strict and not self.profile_matches
        if self.gate is not None:  # --gate baseline: red or green against the runner's last accepted night
            return wrong_runner or self.gate.verdict == "red"
        return wrong_runner or EXIT_RULES[self.mode](self)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


def any_blocking(record: RunRecord) -> bool:
    """A verification run (`lawbench run`) fails on a blocking result (FAIL / ERROR / VOID that is
    not an open finding, …) or an anchor the --deadline left unreached."""
    return any(r.blocking for r in record.results) or bool(record.not_reached)


def not_every_result_passed(record: RunRecord) -> bool:
    """An A/B or a planted-fault proof passes only when every result passed: a pair not measured or
    a fault not run here proves nothing (SKIP fails too). An anchor listed for the record only (a
    census with no planted fault) is not judged; a run with nothing judged proves nothing."""
    judged = [r for r in record.results if not r.listed_only]
    return not judged or any(r.verdict is not Verdict.PASS for r in judged)


# Each mode's exit rule (lawbench.core.run.mode: every Mode object names its own from here), so
# that a record read from elsewhere is judged by the rule of the mode that made it.
EXIT_RULES: dict[str, Any] = {"run": any_blocking, "ab": not_every_result_passed, "plant": not_every_result_passed}
