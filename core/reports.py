"""The run record and what is written from it: JSON (the data) and the formatting its views share.

The views a person reads after a run (the step summary, the terminal table) are in
lawbench.core.summaries; the HTML report is lawbench.core.html.

A run record is data first: everything a later comparison or a bug report needs is in the JSON,
and the tables are views of it. docs/run-record.md documents every field (a test keeps it honest).
"""
from __future__ import annotations

import enum
import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from lawbench.core.errors import DataError
from lawbench.core.models import Result, Verdict
from lawbench.core.models.gate import GateVerdict
from lawbench.core.paths import cache_root

SCHEMA_VERSION = 2  # 2 added `interrupted`; records of version 1 are still read
# Anchors that are kept only as history (the runner may carry them as results whose detail says so).
HISTORY_STATUSES = ("superseded", "refuted", "retired")
VERDICT_STYLE = {"PASS": "bold green", "FAIL": "bold red", "VOID": "bold yellow",
                 "SKIP": "cyan", "ERROR": "bold magenta"}


RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


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
                             text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip()
    return commit if out.returncode == 0 and commit else None


def is_history(r: Result) -> bool:
    """A superseded/refuted/retired anchor: shown as history, never scored as a live claim."""
    return r.detail.get("history") is True or r.detail.get("status") in HISTORY_STATUSES


def history_note(r: Result) -> str:
    status = r.detail.get("status")
    by = r.detail.get(f"{status}_by")
    if by:
        return f"{status} by {by}"
    if r.reason.startswith("history:"):
        return r.reason.partition(":")[2].strip()
    return str(status or "history")


class RunRecord(BaseModel):
    """One run of `lawbench run`: where, with what, and every anchor's result."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1, 2] = SCHEMA_VERSION
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
    # `--gate baseline`: the night judged against its runner's last accepted state (core/gate.py);
    # None for an absolute run. Only the exit code follows it: every verdict above stays as measured.
    gate: Optional[GateVerdict] = None

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
            engine: Optional[dict[str, Any]] = None, started: Optional[str] = None) -> "RunRecord":
        """A record for a run that started at ``started`` (default: now); the version and the
        checkout's commit are filled in here."""
        return cls(profile=profile, detected_profile=detected_profile,
                   profile_matches=profile_matches, strict=strict, cadence=cadence, argv=list(argv or []),
                   machine=dict(machine or {}), environment=dict(environment or {}),
                   engine=None if engine is None else dict(engine), git_commit=git_commit(),
                   **({"started": started} if started else {}))

    def finish(self, results: Iterable[Result], interrupted: Optional[str] = None,
               not_reached: Iterable[str] = (), gate: Any = None) -> "RunRecord":
        """Attach the results, count them per verdict and set the exit code (1 on FAIL/ERROR/VOID
        or an anchor not reached; 128 + the signal's number when ``interrupted`` names the signal
        that stopped the run). With ``gate`` (a function of this record returning its GateVerdict:
        `--gate baseline`), the exit code is the gate's instead: 1 when it is red.

        History anchors (superseded/refuted/retired) are counted apart, under "history".

        SKIP is not bad here: the runner already turned skips into failures where policy says so.
        """
        self.results = list(results)
        self.not_reached = list(not_reached)
        self.counts = {v.value: 0 for v in Verdict}
        self.counts["history"] = 0  # carried for the record only: not a SKIP of a live anchor
        for r in self.results:
            self.counts["history" if is_history(r) else r.verdict.value] += 1
        self.interrupted = interrupted
        self.finished = utc_now()
        if gate is not None and not interrupted:
            self.gate = gate(self)
        if interrupted:
            self.exit_code = interrupt_exit_code(interrupted)
        else:
            self.exit_code = 1 if self.judged_bad() else 0
        return self

    def judged_bad(self) -> bool:
        """Whether a finished, uninterrupted run fails: the one rule for its exit code (finish) and
        for a record checked on import (core.record_checks)."""
        # A --strict job on a machine that is not its profile's fails even when nothing it
        # selected measures (-k prediction): it ran on the wrong runner (core.session).
        wrong_runner = self.strict and not self.profile_matches
        if self.gate is not None:  # --gate baseline: red or green against the runner's last accepted night
            return wrong_runner or self.gate.verdict == "red"
        return wrong_runner or any(r.blocking for r in self.results) or bool(self.not_reached)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


def interrupt_exit_code(signal_name: str) -> int:
    """The shell's status for a job stopped by a signal: 128 + its number (SIGINT 130, SIGTERM 143)."""
    try:
        return 128 + signal.Signals[signal_name].value
    except KeyError:  # a KeyboardInterrupt that no signal sent
        return 128 + signal.SIGINT.value


# --------------------------------------------------------------------------- JSON


def jsonable(obj: Any) -> Any:
    # Half-open bands hold ±inf; plain JSON has no Infinity, and pydantic would write null (which
    # cannot be read back), so non-finite floats travel as the strings pydantic reads back.
    if isinstance(obj, float):
        if math.isnan(obj):
            return "NaN"
        if math.isinf(obj):
            return "Infinity" if obj > 0 else "-Infinity"
        return obj
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set)):
        return [jsonable(v) for v in obj]
    if obj is None or isinstance(obj, (str, int, bool)):
        return obj
    return str(obj)  # a Path or similar that a plugin left in detail/environment


def to_json(record: RunRecord, indent: Optional[int] = 2) -> str:
    """The record as standard JSON (±inf as the strings "Infinity"/"-Infinity")."""
    return json.dumps(jsonable(record.model_dump(mode="python")), indent=indent,
                      ensure_ascii=False, allow_nan=False) + "\n"


def _umask() -> int:
    # The os module reads the umask only by setting it: set, then put it back at once.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_json(record: RunRecord, path: Union[str, Path]) -> Path:
    """Write the record atomically (temp file + rename): a reader never sees half a record."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = to_json(record)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp's 0600 would hide the record from CI's readers
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def fallback_dirs() -> list[Path]:
    """Where a record goes when its own folder cannot take it: the cache, then the temp folder."""
    return [cache_root() / "records", Path(tempfile.gettempdir()) / "lawbench-records"]


def write_fallback(record: RunRecord) -> Optional[Path]:
    """Keep the record somewhere (``<dir>/run-<run_id>.json``, never overwritten by a later run);
    when no folder takes it, print it to stderr and return None."""
    for folder in fallback_dirs():
        try:
            return write_json(record, folder / f"run-{record.run_id}.json")
        except OSError:
            continue
    sys.stderr.write(to_json(record))
    return None


def read_json(path: Union[str, Path]) -> RunRecord:
    """Read a run record; a missing, malformed or foreign file is a DataError naming it."""
    path = Path(path)
    if path.is_dir():
        hint = "; give the run.json inside it" if (path / "run.json").is_file() else ""
        raise DataError(str(path), f"is a folder, not a run record{hint}")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DataError(str(path), f"cannot read run record: {exc.strerror or exc}") from None
    except UnicodeDecodeError:  # a history.sqlite, an archive: binary, not a JSON run record
        raise DataError(str(path), "not a run record: the file is not UTF-8 text (a history is read with "
                                   "`lawbench report --history --db FILE`)") from None
    return parse_record(text, str(path))


def parse_record(text: Union[str, bytes], source: str) -> RunRecord:
    """A run record from its JSON text; an invalid one is a DataError naming the file and field."""
    try:
        return RunRecord.model_validate_json(text)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or None
        raise DataError(source, f"not a valid run record: {err['msg']}", field=where) from None


# --------------------------------------------------------------------------- formatting


def fmt_num(x: Optional[float], sig: int = 4) -> str:
    """A number to `sig` significant figures, without exponents in the everyday range."""
    if x is None:
        return "-"
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == 0:
        return "0"
    mag = math.floor(math.log10(abs(x)))
    if mag >= 6 or mag < -4:
        return f"{x:.{sig - 1}e}"
    decimals = max(0, sig - 1 - mag)
    text = f"{round(x, decimals):.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def fmt_judged(judged: Optional[dict], most: int = 4) -> str:
    """A census's judged labels with their counts (bytes in MiB), the first ``most`` of them."""
    if not judged:
        return "-"
    from lawbench.core.engines.loadlog import census_amount

    shown = [f"{k} {census_amount(k, v, short=True)}" for k, v in list(judged.items())[:most]]
    more = len(judged) - most
    return ", ".join(shown) + (f" +{more} more" if more > 0 else "")


def fmt_pair(lo: float, hi: float) -> str:
    """An interval with just enough figures that its two ends read differently."""
    sig = 4
    while sig < 10 and lo != hi and fmt_num(lo, sig) == fmt_num(hi, sig):
        sig += 1
    return f"[{fmt_num(lo, sig)}, {fmt_num(hi, sig)}]"


def fmt_measured(r: Result) -> str:
    if r.measured is None:
        return fmt_judged(r.detail.get("judged")) if r.detail else "-"
    text = fmt_num(r.measured)
    if r.interval is not None:
        text += " " + fmt_pair(*r.interval)
    return text


def fmt_band(r: Result) -> str:
    return "-" if r.band is None else fmt_band_edges(*r.band)


def fmt_band_edges(lo: float, hi: float) -> str:
    """A band as people read it: [lo, hi], or ≤ hi / ≥ lo for a half-open one."""
    if math.isinf(lo) and math.isinf(hi):
        return "any"
    if math.isinf(lo):
        return f"≤ {fmt_num(hi)}"
    if math.isinf(hi):
        return f"≥ {fmt_num(lo)}"
    return fmt_pair(lo, hi)


def fmt_quantity(r: Result) -> str:
    if r.quantity and r.unit:
        return f"{r.quantity} ({r.unit})"
    return r.quantity or r.unit or "-"


def headline(record: RunRecord) -> str:
    counts = record.counts or {v.value: 0 for v in Verdict}
    parts = ", ".join(f"{counts.get(v.value, 0)} {v.value}" for v in Verdict)
    findings = sum(1 for r in record.results if r.detail.get("open_finding"))
    if findings:
        parts += f" ({findings} of the FAILs are open findings, which do not fail the build)"
    if counts.get("history"):
        parts += f" (+{counts['history']} history)"
    state = "running" if record.exit_code is None else \
        f"INTERRUPTED by {record.interrupted}" if record.interrupted else ("ok" if record.ok else "FAILED")
    match = "" if record.profile_matches else \
        f" (machine detected as {record.detected_profile or 'unknown'}" + \
        ("; --strict: the wrong runner" if record.strict else "") + ")"
    return f"lawbench {state} on profile {record.profile}{match}: {parts}"
