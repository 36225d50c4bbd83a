"""The run record and what is written from it: JSON (the data) and the formatting its views share.

The views a person reads after a run (the step summary, the terminal table) are in
lawbench.core.record.summaries; the HTML report is lawbench.core.html.

A run record is data first: everything a later comparison or a bug report needs is in the JSON,
and the tables are views of it. docs/run-record.md documents every field (a test keeps it honest).
"""
from __future__ import annotations

import enum
import json
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Optional, Union

from pydantic import ValidationError

from lawbench.core.errors import DataError
from lawbench.core.models import Result, Verdict
from lawbench.core.models.run_record import (  # noqa: F401  (re-exported: the record's readers import it from here)
    RETIRED_STATUSES,
    RUN_ID,
    SCHEMA_VERSION,
    RunRecord,
    git_commit,
    interrupt_exit_code,
    is_retired,
    lawbench_version,
    parse_record_time,
    utc_now,
)
from lawbench.core.paths import cache_root
from lawbench.core.record.ab_json import OLD_FORMAT, ABRecord, run_record_of

VERDICT_STYLE = {"PASS": "bold green", "FAIL": "bold red", "VOID": "bold yellow",
                 "SKIP": "cyan", "ERROR": "bold magenta"}


def retired_note(r: Result) -> str:
    status, by = r.retired, r.retired_by
    if by:
        return f"{status} by {by}"
    if r.reason.startswith("history:"):
        return r.reason.partition(":")[2].strip()
    return str(status or "history")


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
        old_ab = _old_ab_record(text)
        if old_ab is not None:  # an A/B written before A/Bs were run records: read as one
            return old_ab
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
        return fmt_judged(r.census_judged) if r.census_judged else "-"
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
    findings = sum(1 for r in record.results if r.open_finding)
    if findings:
        parts += f" ({findings} of the FAILs are open findings, which do not fail the build)"
    if counts.get("history"):
        parts += f" (+{counts['history']} history)"
    state = "running" if record.exit_code is None else \
        f"INTERRUPTED by {record.interrupted}" if record.interrupted else ("ok" if record.ok else "FAILED")
    match = "" if record.profile_matches else \
        f" (machine detected as {record.detected_profile or 'unknown'}" + \
        ("; --strict: the wrong runner" if record.strict else "") + ")"
    mode = "" if record.mode == "run" else f" {'A/B' if record.mode == 'ab' else 'planted faults'}"
    return f"lawbench{mode} {state} on profile {record.profile}{match}: {parts}"


def _old_ab_record(text: Union[str, bytes]) -> Optional[RunRecord]:
    """An ab.json of format lawbench-ab/1 (results/cpu-nights/ab-*.json) as the run record it is
    now (lawbench.core.record.ab_json.run_record_of); None when the text is not one."""
    try:
        raw = json.loads(text)
    except ValueError:
        return None
    if not isinstance(raw, dict) or raw.get("format") != OLD_FORMAT:
        return None  # an ab.json of today is a view of its run.json, which is the record

    try:
        return run_record_of(ABRecord.model_validate(raw))
    except (ValidationError, ValueError, KeyError, TypeError):
        return None
