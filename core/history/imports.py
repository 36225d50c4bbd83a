"""`lawbench history import`: run records and contribution bundles into one history (and
`history export`: a history's runs back out as run.json files, to seed a data branch).

Idempotent, so a nightly job can import every record it has ever kept into a fresh history: a run
already there with the same content is left as it is; the same run id with other content is
refused (a run is recorded once, and the history is append-only). Each imported run keeps where it
came from (the `imports` table: the path as given, the file's sha256, when, and for a bundle who
sent it). A runner's record may carry its binding to the workflow run that made it
(lawbench.core.history.binding); with ``require_binding`` a record without one that verifies is
refused, so it can never speak for a runner.
"""
from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal, Optional, Sequence

from lawbench.core.claims.loading import load_all
from lawbench.core.history import binding as history_binding
from lawbench.core.laws.registry import get_registry
from lawbench.core.models.anchor import CensusSpec
from lawbench.core.record.contribute import is_bundle, read_bundle
from lawbench.core.errors import DataError
from lawbench.core.history.store import Binding, History, Provenance, engine_key
from lawbench.core.record.checks import MAX_RECORD_BYTES, check_record, check_shape
from lawbench.core.record.reports import RunRecord, parse_record, parse_record_time, to_json, utc_now, write_json

Status = Literal["imported", "already", "refused"]


@dataclass(frozen=True)
class ImportOutcome:
    source: str  # the path as given (a file inside a given folder: that folder / its relative path)
    status: Status
    message: str  # one line: what was imported, or why not
    run_id: Optional[str] = None
    kind: Optional[str] = None  # "run" or "contribution"
    profile: Optional[str] = None  # of an imported run: where `--file-into` files it
    binding: Optional[Binding] = None  # a runner's run bound to its workflow run
    sha256: Optional[str] = None  # of the file given
    # the signal that stopped the run (record.interrupted): filed and shown, never a baseline
    interrupted: Optional[str] = None


def expand(paths: Sequence[str]) -> list[Path]:
    """Files as given, and for a folder every *.json below it, sorted (a missing path is kept: it
    is refused with its name when read; a link inside a folder is kept too, and refused unread)."""
    files: list[Path] = []
    for given in paths:
        path = Path(given)
        files.extend(sorted(p for p in path.rglob("*.json") if (p.is_file() or p.is_symlink())
                            and not history_binding.not_a_record(p)) if path.is_dir() else [path])
    return files


@functools.cache
def _census_rules() -> dict[str, CensusSpec]:
    """Every census anchor's rule, from this lawbench's anchors (read once, on the first census
    result a record holds): what a stranger's census verdict is re-derived by."""
    registry = get_registry()
    anchors = load_all(registry, lenient=registry.laws.keys())
    return {la.anchor.id: la.anchor.census for la in anchors.anchors if la.anchor.census is not None}


def census_rule(anchor_id: str) -> Optional[CensusSpec]:
    """The census rule of ``anchor_id`` (None: no census anchor of that id here)."""
    return _census_rules().get(anchor_id)


def _link_refused(path: Path) -> ImportOutcome:
    return ImportOutcome(str(path), "refused", f"{path}: is a link, or lies under one, that leads out of the folder "
                         "given; a stranger's folder is never followed out of (give the file itself if it is yours)")


def _leaves(path: Path, root: Path) -> bool:
    """A file found in a folder that is a link, or lies under one: reading it could read any file
    the importer may read (a stranger's folder is never followed out of)."""
    try:
        return path.is_symlink() or not path.resolve().is_relative_to(root.resolve())
    except OSError:
        return True


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


@dataclass(frozen=True)
class _Candidate:
    """A file that passed every check of its own, waiting for the identity checks of the batch."""

    record: RunRecord
    provenance: Provenance


def read_candidate(path: Path, contribution: bool = False, require_binding: bool = False,
                   named: bool = False, bound_only: bool = False) -> "ImportOutcome | _Candidate":
    """Read and check one run record or contribution bundle; never raises for a bad file.

    :param contribution: mark it a contribution whatever it says (a bundle always is one).
    :param require_binding: a run record must carry a binding to its workflow run that verifies.
    :param named: found in a folder, where a record is filed as ``<run_id>.json`` (the data branch):
        its name must be its run id, or a planted copy could claim another run's id.
    :param bound_only: only a runner's record whose filed binding verifies (a `--baseline` folder):
        whoever can push to the data branch must not be able to plant an accepted night.
    """
    source = str(path)
    try:
        if path.is_file() and path.stat().st_size > MAX_RECORD_BYTES:  # before reading it into memory
            raise DataError(source, f"is {path.stat().st_size / 2**20:.0f} MiB; a run record or bundle is "
                            f"at most {MAX_RECORD_BYTES // 2**20} MiB")
        raw = path.read_bytes()
        check_shape(raw, source)
    except DataError as exc:
        return ImportOutcome(source, "refused", str(exc))
    except OSError as exc:
        return ImportOutcome(source, "refused", f"{source}: cannot read: {exc.strerror or exc}")
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        return ImportOutcome(source, "refused", f"{source}: not JSON ({exc}); give a run.json or a "
                             "contribution bundle")
    sha = hashlib.sha256(raw).hexdigest()
    try:
        if is_bundle(data):
            if require_binding:  # a bundle's binding is never read: where a runner's record lies, it is refused
                raise DataError(source, "is a contribution bundle where a runner's record lies "
                                "(<artifact>/<profile>/run.json): a bundle never speaks for a runner; send it as "
                                "a contribution", field="binding")
            if bound_only:
                raise DataError(source, "is a contribution bundle: only a runner's bound night may count in a baseline")
            bundle = read_bundle(raw, source)
            record = bundle.record
            check_record(record, source, prefix="record.", census_rules=census_rule)
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
            record = parse_record(raw, source)  # the bytes checked above, not a second read
            if record.finished is None or record.exit_code is None:
                raise DataError(source, f"run {record.run_id} is unfinished (finished is null): "
                                "a run still in progress, or one that died before writing its "
                                "end; import the record its run finished", field="finished")
            check_record(record, source, census_rules=census_rule)
            binding = None if contribution else history_binding.find(path, record, sha, require_binding)
            if bound_only and binding is None:
                raise DataError(source, f"run {record.run_id} has no binding that verifies beside it "
                                f"({path.stem}{history_binding.FILED}, filed by the collect step): only a "
                                "runner's bound night may count in a baseline", field="binding")
            provenance = Provenance(kind="contribution" if contribution else "run", source=source,
                                    sha256=sha, imported_at=utc_now(), binding=binding)
        _not_from_the_future(record, source)
        if named and path.name != "run.json" and path.stem != record.run_id:
            raise DataError(source, f"is named {path.name} but holds run {record.run_id}: a record in a folder "
                            "is filed as <run_id>.json (or an artifact's run.json), so a copy under another "
                            "name is not taken", field="run_id")
        return _Candidate(record, provenance)
    except DataError as exc:
        return ImportOutcome(source, "refused", str(exc))


def _shadows(a: str, b: str) -> bool:
    """Two run ids a person could not tell apart by reference: equal but for case, or one a prefix
    of the other (runs are looked up by prefix, so the shorter would become ambiguous)."""
    a, b = a.casefold(), b.casefold()
    return a.startswith(b) or b.startswith(a)


def import_files(history: History, files: Sequence[Path], contribution: bool = False,
                 require_binding: bool = False, named: frozenset[Path] = frozenset(),
                 bound_only: bool = False) -> list[ImportOutcome]:
    """Import files as one batch, so that which of two records with one run id goes in never
    depends on the order they come in: a run already in the history stays; of two new ones, a
    runner's record goes before a contribution, and two of one kind that differ are both refused."""
    read = [read_candidate(f, contribution, require_binding, f in named, bound_only) for f in files]
    cands = [c for c in read if isinstance(c, _Candidate)]
    rank = {"run": 0, "contribution": 1}
    order = sorted(range(len(cands)), key=lambda i: rank.get(cands[i].provenance.kind, 2))
    texts = [_canonical(c.record) for c in cands]
    outcomes: dict[int, ImportOutcome] = {}
    for i in order:
        c = cands[i]
        rivals = [j for j in order if j != i and cands[j].provenance.kind == c.provenance.kind
                  and _shadows(cands[j].record.run_id, c.record.run_id) and texts[j] != texts[i]]
        if rivals:
            others = ", ".join(cands[j].provenance.source for j in rivals)
            outcomes[i] = ImportOutcome(c.provenance.source, "refused", f"{c.provenance.source}: run "
                                        f"{c.record.run_id} is also claimed, with other content, by {others}; "
                                        "none of them is taken, since which one the runner wrote cannot be "
                                        "told here (import the runner's own artifact alone)", c.record.run_id,
                                        c.provenance.kind)
            continue
        outcomes[i] = _add(history, c.record, c.provenance)
    done = iter(outcomes[i] for i in range(len(cands)))
    return [next(done) if isinstance(c, _Candidate) else c for c in read]


def _add(history: History, record: RunRecord, provenance: Provenance) -> ImportOutcome:
    source, kind, run_id = provenance.source, provenance.kind, record.run_id
    shadowed = [other for other in history.run_ids_like(run_id) if other != run_id]
    if shadowed:
        return ImportOutcome(source, "refused", f"{source}: run id {run_id} shadows run {shadowed[0]} "
                             "already in the history (equal but for case, or one a prefix of the other), "
                             "which would make that run's references ambiguous; a run id is a whole, "
                             "exact name", run_id, kind)
    stored = history.stored_json(run_id)
    if stored is not None:
        mine = _canonical(record)
        # The stored text is this same writer's output; read it back only when the texts differ
        # (a record appended by another lawbench version may be written differently).
        if stored.rstrip("\n") == mine.rstrip("\n") or \
                _same(_canonical(RunRecord.model_validate_json(stored)), mine):
            return ImportOutcome(source, "already", f"run {run_id} is already in the history",
                                 run_id, kind, record.profile, provenance.binding, provenance.sha256,
                                 record.interrupted)
        return ImportOutcome(source, "refused", f"{source}: run {run_id} is already in the history "
                             "with different content; a run is recorded once and the one there stays "
                             "(is this file edited, or a copy of another run?)", run_id, kind)
    history.append(record, provenance)
    bound = f", bound to {provenance.binding.short()}" if provenance.binding else ""
    stopped = f", interrupted by {record.interrupted}: never a baseline" if record.interrupted else ""
    return ImportOutcome(source, "imported", f"run {run_id} ({kind}, profile {record.profile}, "
                         f"{engine_key(record.engine)}, started {record.started}{bound}{stopped})", run_id, kind,
                         record.profile, provenance.binding, provenance.sha256, record.interrupted)


def quarantine(outcomes: Sequence[ImportOutcome], folder: Path) -> list[str]:
    """Copy every refused file into ``folder`` beside a ``.reason.txt`` that holds its one-line
    reason, so a night goes on without it and a person can read both later. Returns problems
    (a file that could not be kept), one line each."""
    import shutil

    problems = []
    for n, o in enumerate(x for x in outcomes if x.status == "refused"):
        # a flat, numbered name: refused files may share a base name (run.json) or name no file
        name = f"{n + 1:03d}-" + "".join(c if c.isalnum() or c in "._-" else "_" for c in o.source)[-120:]
        try:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{name}.reason.txt").write_text(o.message + "\n", encoding="utf-8")
            # a link's target may be any file this user can read: only a plain file is kept
            if Path(o.source).is_file() and not Path(o.source).is_symlink():
                shutil.copyfile(o.source, folder / name)
        except OSError as exc:
            problems.append(f"{o.source}: cannot quarantine into {folder}: {exc.strerror or exc}")
    return problems


def file_records(outcomes: Sequence[ImportOutcome], data: Path) -> list[ImportOutcome]:
    """File every record that is in the history as it was given: a runner's under
    ``data/runs/<profile>/<run_id>.json``, a contribution's under ``data/contributions/<profile>/``
    (import that folder with --contribution: a plain run.json there is still someone else's).
    A runner's verified binding goes beside its record (``<run_id>.binding.json``).
    A file already there with the same bytes is left; one with other bytes is never overwritten."""
    filed = []
    for o in outcomes:
        if o.status == "refused" or not (o.run_id and o.profile and o.kind):
            continue
        dest = data / ("contributions" if o.kind == "contribution" else "runs") / o.profile / f"{o.run_id}.json"
        try:
            raw = Path(o.source).read_bytes()
            binding = dest.with_name(dest.stem + history_binding.FILED)
            if dest.exists():
                same = dest.read_bytes() == raw
                if same:
                    _file_binding(o, binding, raw)  # a night that filed the record but not yet its binding
                filed.append(ImportOutcome(str(dest), "already" if same else "refused",
                                           f"{dest}: already filed" if same else
                                           f"{dest}: holds other content; a filed record is never overwritten",
                                           o.run_id, o.kind, o.profile))
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_name(f".{dest.name}.tmp")
            tmp.write_bytes(raw)
            tmp.replace(dest)
            _file_binding(o, binding, raw)
        except OSError as exc:
            filed.append(ImportOutcome(str(dest), "refused", f"{dest}: cannot file {o.source}: "
                                       f"{exc.strerror or exc}", o.run_id, o.kind, o.profile))
            continue
        filed.append(ImportOutcome(str(dest), "imported", f"{o.source} -> {dest}", o.run_id, o.kind, o.profile))
    return filed


def _file_binding(o: ImportOutcome, dest: Path, raw: bytes) -> None:
    """The binding the import verified, beside the record it binds; a binding already filed
    there stays (the first night that verified it), whatever this night's verified_at says."""
    if dest.exists() or o.binding is None or o.run_id is None:
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.tmp")
    tmp.write_text(history_binding.filed_text(o.binding, o.run_id, hashlib.sha256(raw).hexdigest()), encoding="utf-8")
    tmp.replace(dest)


def import_paths(history: History, paths: Sequence[str], contribution: bool = False,
                 require_binding: bool = False, bound_only: bool = False) -> list[ImportOutcome]:
    """Import every file (folders expanded); the good ones go in even when others are refused.
    An existing folder without records gives nothing (a data branch's first night); a path that
    does not exist is refused. With ``contribution`` every run is marked a contribution; with
    ``require_binding`` a run record without a binding to its workflow run that verifies is refused,
    and a given folder is one of fetched artifacts (scripts/nightly_fetch.sh): its run.json files
    where a runner's record lies are read, and every other run.json in it is refused. With
    ``bound_only`` (a `--baseline` folder) a record is read only beside its filed binding that verifies."""
    files, links, named = [], [], set()
    for given in map(Path, paths):
        if not given.is_dir():
            files.append(given)
            continue
        found = expand([str(given)]) if not require_binding else sorted(given.rglob("run.json"))
        links += [_link_refused(p) for p in found if _leaves(p, given)]
        inside = [p for p in found if not _leaves(p, given)]
        files += inside
        named |= set(inside)
    if not require_binding:
        return import_files(history, files, contribution, named=frozenset(named), bound_only=bound_only) + links
    files, misplaced = [], []
    for given in map(Path, paths):
        placed, others = history_binding.artifact_records(given) if given.is_dir() else ([given], [])
        placed = [p for p in placed if not (given.is_dir() and _leaves(p, given))]
        others = [p for p in others if not _leaves(p, given)]
        files += placed
        misplaced += [ImportOutcome(str(p), "refused", f"{p}: lies at {p.relative_to(given)}, not where a runner's "
                                    "record lies in its artifact (<artifact>/<profile>/run.json): it cannot speak "
                                    "for a runner") for p in others]
    return import_files(history, files, contribution, require_binding) + misplaced + links


def export_runs(history: History, folder: Path, profile: Optional[str] = None) -> list[ImportOutcome]:
    """Write every run as `<folder>/<profile>/<run_id>.json` (the layout of the data branch),
    byte-for-byte what `lawbench run` wrote as run.json. A file already there with the same
    content is left; one with other content is refused, never overwritten. Only runners' runs:
    a contribution written there would, imported again, speak for a runner."""
    outcomes = []
    for row in reversed(history.runs(profile=profile, limit=None, contributions=False)):
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
