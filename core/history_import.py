"""`lawbench history import`: run records and contribution bundles into one history (and
`history export`: a history's runs back out as run.json files, to seed a data branch).

Idempotent, so a nightly job can import every record it has ever kept into a fresh history: a run
already there with the same content is left as it is; the same run id with other content is
refused (a run is recorded once, and the history is append-only). Each imported run keeps where it
came from (the `imports` table: the path as given, the file's sha256, when, and for a bundle who
sent it).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal, Optional, Sequence

from lawbench.core.contribute import is_bundle, read_bundle
from lawbench.core.errors import DataError
from lawbench.core.history import History, Provenance, engine_key
from lawbench.core.reports import RunRecord, parse_record_time, read_json, to_json, utc_now, write_json

Status = Literal["imported", "already", "refused"]


@dataclass(frozen=True)
class ImportOutcome:
    source: str  # the path as given (a file inside a given folder: that folder / its relative path)
    status: Status
    message: str  # one line: what was imported, or why not
    run_id: Optional[str] = None
    kind: Optional[str] = None  # "run" or "contribution"


def expand(paths: Sequence[str]) -> list[Path]:
    """Files as given, and for a folder every *.json below it, sorted (a missing path is kept: it
    is refused with its name when read)."""
    files: list[Path] = []
    for given in paths:
        path = Path(given)
        files.extend(sorted(p for p in path.rglob("*.json") if p.is_file()) if path.is_dir()
                     else [path])
    return files


def _canonical(record: RunRecord) -> str:
    return to_json(record, indent=None)


def _same(a: str, b: str) -> bool:
    """The same record, whatever the key order of its free-form `detail` tables (`jq -S`)."""
    return json.dumps(json.loads(a), sort_keys=True) == json.dumps(json.loads(b), sort_keys=True)


FUTURE_SLACK_S = 3600  # a runner's clock may be a little ahead; a record from next year is not a run


def _not_from_the_future(record: RunRecord, source: str) -> None:
    finished = parse_record_time(record.finished or record.started)
    ahead = (finished - datetime.now(timezone.utc)).total_seconds()
    if ahead > FUTURE_SLACK_S:
        raise DataError(source, f"run {record.run_id} finished {record.finished}, {ahead / 3600:.1f} h "
                        "in the future of this clock: a runner with a wrong clock would hide every later "
                        "night from the stale check; fix the runner's clock", field="finished")


def import_file(history: History, path: Path) -> ImportOutcome:
    """Import one run record or contribution bundle; never raises for a bad file."""
    source = str(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        return ImportOutcome(source, "refused", f"{source}: cannot read: {exc.strerror or exc}")
    try:
        data = json.loads(raw)
    except ValueError as exc:
        return ImportOutcome(source, "refused", f"{source}: not JSON ({exc}); give a run.json or a "
                             "contribution bundle")
    sha = hashlib.sha256(raw).hexdigest()
    try:
        if is_bundle(data):
            bundle = read_bundle(raw, source)
            record = bundle.record
            provenance = Provenance(kind="contribution", source=source, sha256=sha,
                                    imported_at=utc_now(), contributor=bundle.contributor,
                                    bundle_created=bundle.created,
                                    bundle_lawbench_version=bundle.lawbench_version)
        else:
            # RunRecord fills every field but `profile` with a default, so a stray JSON file
            # would read as a fresh, unfinished run: a record must carry its own id and start.
            if not (isinstance(data, dict) and "run_id" in data and "started" in data):
                raise DataError(source, "not a run record or a contribution bundle (no run_id "
                                "and started at its top level); give a run.json that `lawbench "
                                "run` wrote, or a bundle from `lawbench run --contribute`")
            record = read_json(path)
            if record.finished is None or record.exit_code is None:
                raise DataError(source, f"run {record.run_id} is unfinished (finished is null): "
                                "a run still in progress, or one that died before writing its "
                                "end; import the record its run finished", field="finished")
            provenance = Provenance(kind="run", source=source, sha256=sha, imported_at=utc_now())
        _not_from_the_future(record, source)
        return _add(history, record, provenance)
    except DataError as exc:
        return ImportOutcome(source, "refused", str(exc))


def _add(history: History, record: RunRecord, provenance: Provenance) -> ImportOutcome:
    source, kind, run_id = provenance.source, provenance.kind, record.run_id
    stored = history.stored_json(run_id)
    if stored is not None:
        mine = _canonical(record)
        # The stored text is this same writer's output; read it back only when the texts differ
        # (a record appended by another lawbench version may be written differently).
        if stored.rstrip("\n") == mine.rstrip("\n") or \
                _same(_canonical(RunRecord.model_validate_json(stored)), mine):
            return ImportOutcome(source, "already", f"run {run_id} is already in the history",
                                 run_id, kind)
        return ImportOutcome(source, "refused", f"{source}: run {run_id} is already in the history "
                             "with different content; a run is recorded once (is this file edited, "
                             "or a copy of another run?)", run_id, kind)
    history.append(record, provenance)
    return ImportOutcome(source, "imported", f"run {run_id} ({kind}, profile {record.profile}, "
                         f"{engine_key(record.engine)}, started {record.started})", run_id, kind)


def import_paths(history: History, paths: Sequence[str]) -> list[ImportOutcome]:
    """Import every file (folders expanded); the good ones go in even when others are refused.
    An existing folder without records gives nothing (a data branch's first night); a path that
    does not exist is refused."""
    return [import_file(history, f) for f in expand(paths)]


def export_runs(history: History, folder: Path, profile: Optional[str] = None) -> list[ImportOutcome]:
    """Write every run as `<folder>/<profile>/<run_id>.json` (the layout of the data branch),
    byte-for-byte what `lawbench run` wrote as run.json. A file already there with the same
    content is left; one with other content is refused, never overwritten."""
    outcomes = []
    for row in reversed(history.runs(profile=profile, limit=None)):
        record = history.record(row.run_id)
        path = folder / record.profile / f"{record.run_id}.json"
        source = str(path)
        if path.exists():
            same = path.read_text(encoding="utf-8", errors="replace") == to_json(record)
            outcomes.append(ImportOutcome(source, "already", f"run {record.run_id} is already there",
                                          record.run_id) if same else
                            ImportOutcome(source, "refused", f"{source}: holds other content; a "
                                          "record file is never overwritten", record.run_id))
            continue
        try:
            write_json(record, path)
        except OSError as exc:
            outcomes.append(ImportOutcome(source, "refused", f"{source}: cannot write: "
                                          f"{exc.strerror or exc}", record.run_id))
            continue
        outcomes.append(ImportOutcome(source, "imported", f"run {record.run_id} written",
                                      record.run_id))
    return outcomes
