"""A runner's record is bound to the workflow run that made it, and the collect step verifies the
binding before the record may speak for a runner (issue 20: provenance you can check).

Three pieces, written by three parties, none of which can vouch for itself:

* the **runner job** (scripts/nightly_runner.sh) writes ``binding.json`` beside each profile's
  ``run.json``: the workflow run id and attempt, the job, the box, the commit it ran, the profile,
  and the record's run id and sha256;
* **GitHub**, through the API the collect step reads (scripts/nightly_fetch.sh), says which
  artifacts a *scheduled* nightly run uploaded, with the sha256 digest it recorded for each; the
  fetch script downloads each zip, refuses one whose bytes do not match that digest, and writes
  ``<artifact>.fetch.json`` *beside* the extracted folder (outside what the artifact can hold):
  the workflow run id, its commit and creation time, the artifact's name, id and digest;
* the **record** itself.

`verify` holds them against each other: the record's bytes are the ones the binding names, the
binding names the workflow run GitHub says the artifact came from, the artifact is the one its job
uploads (``lawbench-<box>-<workflow run id>``), the job is the nightly's runner job, the box is
the one the record's profile is deployed on, the commit is the one the workflow run ran, and the
record started after the workflow run was created. A record that fails any of these is refused
in one line naming the field (``binding.<field>``); `lawbench history import --require-binding`
refuses a record that has no binding at all. What the collect step verified is filed beside the
record on the data branch (``runs/<profile>/<run_id>.binding.json``) and read back with it when the
history is rebuilt from the branch.
"""
from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any, Optional

from lawbench.core.errors import DataError
from lawbench.core.hardware.profiles import plugin_profiles
from lawbench.core.history.schema import Binding
from lawbench.core.laws.registry import get_registry
from lawbench.core.record.checks import check_shape
from lawbench.core.record.reports import RunRecord, parse_record_time, utc_now

BINDING = "binding.json"  # the runner's, beside each profile's run.json in its artifact
FETCHED = ".fetch.json"  # the collect step's, beside each artifact's extracted folder
FILED = ".binding.json"  # the verified binding, beside the filed record on the data branch
RUNNER_JOB = "anchors"  # nightly.yml's job that runs the profiles
BINDING_VERSION = 1
_MAX_BYTES = 64 * 1024
_DIGITS = re.compile(r"[0-9]{1,20}")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_SHA1 = re.compile(r"[0-9a-f]{40}")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def not_a_record(path: Path) -> bool:
    """Files a folder import passes over: they travel with records, they are not records."""
    return path.name == BINDING or path.name.endswith((FILED, FETCHED))


def _read(path: Path, source: str, what: str) -> dict[str, Any]:
    try:
        raw = path.read_bytes()[:_MAX_BYTES + 1]
    except OSError as exc:
        raise DataError(source, f"cannot read its {what} {path}: {exc.strerror or exc}", field="binding") from None
    if len(raw) > _MAX_BYTES:
        raise DataError(source, f"its {what} {path} is over {_MAX_BYTES // 1024} kB: not one", field="binding")
    check_shape(raw, str(path))
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        data = None
    if not isinstance(data, dict):
        raise DataError(source, f"its {what} {path} is not a JSON object", field="binding")
    return data


def _field(data: dict, name: str, pattern: re.Pattern, source: str, what: str) -> str:
    value = data.get(name)
    value = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise DataError(source, f"its {what} has no valid {name} (got {value!r})", field=f"binding.{name}")
    return value


def _artifact(record_path: Path) -> Optional[tuple[Path, Path]]:
    """The extracted artifact folder holding the record, and the fetch facts beside it. A runner's
    record lies at exactly <artifact>/<profile>/run.json (the runner uploads OUT/, which holds
    <profile>/run.json): a record deeper inside could find facts planted inside the artifact."""
    folder = record_path.absolute().parent.parent
    facts = folder.with_name(folder.name + FETCHED)
    return (folder, facts) if folder.name and facts.is_file() else None


def artifact_records(root: Path) -> tuple[list[Path], list[Path]]:
    """Under a folder of fetched artifacts: the run.json files where a runner's record lies
    (<root>/<artifact>/<profile>/run.json), and every other run.json (never a runner's)."""
    placed = sorted(p for p in root.glob("*/*/run.json") if p.is_file())
    seen = set(placed)
    others = sorted(p for p in root.rglob("run.json") if p.is_file() and p not in seen)
    return placed, others


def find(record_path: Path, record: RunRecord, sha256: str, required: bool) -> Optional[Binding]:
    """The binding of a runner's record, or None where it has none and none is ``required``.

    With ``required`` (the collect step's import of tonight's artifacts) only the artifact's own
    binding counts, verified in full; without it (a rebuild from the data branch), the binding the
    collect step filed beside the record is read back.

    :raises DataError: a binding that does not verify, or none where one is required.
    """
    source = str(record_path)
    if required:
        return verify(record_path, record, sha256)
    filed = record_path.with_name(record_path.stem + FILED)
    return read_filed(filed, record, sha256, source) if filed.is_file() else None


def verify(record_path: Path, record: RunRecord, sha256: str) -> Binding:
    """Hold the runner's binding, GitHub's facts about the artifact and the record against each other."""
    source = str(record_path)
    found = _artifact(record_path)
    if found is None:
        raise DataError(source, "is not inside an artifact the collect step fetched (no <artifact>.fetch.json "
                        "beside its folder): nothing binds it to a nightly workflow run, so it cannot speak "
                        "for a runner", field="binding")
    folder, facts_path = found
    if record_path.name != "run.json":
        raise DataError(source, "is not a run.json where a runner's record lies in its artifact "
                        "(<artifact>/<profile>/run.json)", field="binding")
    facts = _read(facts_path, source, "artifact's fetch facts")
    beside = record_path.parent / BINDING
    if not beside.is_file():
        raise DataError(source, f"has no {BINDING} beside it: a runner's record comes with the binding "
                        "scripts/nightly_runner.sh writes, so this one cannot speak for a runner", field="binding")
    mine = _read(beside, source, BINDING)
    run_id = _field(facts, "workflow_run_id", _DIGITS, source, "artifact's fetch facts")
    digest = facts.get("artifact_digest")
    zip_sha = _field(facts, "zip_sha256", _HEX64, source, "artifact's fetch facts")
    if not isinstance(digest, str) or digest != f"sha256:{zip_sha}":
        raise DataError(source, f"its artifact's zip (sha256 {zip_sha}) is not the one GitHub recorded "
                        f"({digest!r})", field="binding.artifact_digest")
    head = _field(facts, "head_sha", _SHA1, source, "artifact's fetch facts")
    artifact = _field(facts, "artifact_name", _NAME, source, "artifact's fetch facts")
    if folder.name != artifact:
        raise DataError(source, f"lies in {folder.name}, not in the artifact {artifact} its fetch facts name",
                        field="binding.artifact_name")

    def same(name: str, want: Any, why: str) -> None:
        got = mine.get(name)
        got = str(got) if isinstance(got, int) and not isinstance(got, bool) and isinstance(want, str) else got
        if got != want:
            raise DataError(source, f"its {BINDING} says {name} {got!r}, but {why} ({want!r})", field=f"binding.{name}")

    same("binding_version", BINDING_VERSION, "this lawbench reads")
    same("workflow_run_id", run_id, "GitHub says the artifact came from workflow run")
    same("job", RUNNER_JOB, "the nightly's runner job is")
    box = _field(mine, "box", _NAME, source, BINDING)
    same("profile", record.profile, "the record is of profile")
    same("record_run_id", record.run_id, "the record's run id is")
    same("record_sha256", sha256, "the record's bytes hash to")
    same("head_sha", head, "the workflow run ran commit")
    if artifact != f"lawbench-{box}-{run_id}":
        raise DataError(source, f"came in artifact {artifact}, but the job of box {box} in workflow run {run_id} "
                        f"uploads lawbench-{box}-{run_id}", field="binding.box")
    deployed_on = _box_of(record.profile, source)
    if deployed_on != box:
        raise DataError(source, f"is of profile {record.profile}, which runs on box {deployed_on}, not on box "
                        f"{box} whose job made it: one runner never speaks for another", field="binding.box")
    if record.git_commit is not None and record.git_commit != head:
        raise DataError(source, f"ran lawbench commit {record.git_commit}, not the workflow run's {head}",
                        field="git_commit")
    created = facts.get("run_created_at")
    try:
        begun = parse_record_time(str(created).replace("Z", "+00:00"))
    except (ValueError, TypeError):
        raise DataError(source, f"its artifact's fetch facts have no valid run_created_at ({created!r})",
                        field="binding.run_created_at") from None
    if parse_record_time(record.started) < begun:
        raise DataError(source, f"started {record.started}, before its workflow run was created ({created}): an "
                        "older record replayed into tonight's artifact", field="started")
    attempt = mine.get("run_attempt")
    if not isinstance(attempt, int) or isinstance(attempt, bool) or attempt < 1:
        raise DataError(source, f"its {BINDING} has no valid run_attempt ({attempt!r})", field="binding.run_attempt")
    return Binding(workflow_run_id=run_id, run_attempt=attempt, job=RUNNER_JOB, box=box, artifact_name=artifact,
                   artifact_id=_field(facts, "artifact_id", _DIGITS, source, "artifact's fetch facts"),
                   artifact_digest=digest, head_sha=head, verified_at=utc_now())


def _box_of(profile: str, source: str) -> str:
    """The box whose nightly job runs ``profile`` ([nightly] box, else the profile's own id)."""
    known = plugin_profiles(get_registry())
    p = known.get(profile)
    if p is None or p.nightly is None or not p.nightly.deployed:
        raise DataError(source, f"is of profile {profile}, which no nightly job runs (not a deployed profile)",
                        field="binding.profile")
    return p.nightly.box or p.id


def filed_text(binding: Binding, run_id: str, sha256: str) -> str:
    """What the collect step files beside a record on the data branch."""
    return json.dumps({"binding_version": BINDING_VERSION, "record_run_id": run_id, "record_sha256": sha256,
                       **dataclasses.asdict(binding)}, indent=2) + "\n"


def read_filed(path: Path, record: RunRecord, sha256: str, source: str) -> Binding:
    """A binding the collect step filed: read back as verified then, provided it names this record."""
    data = _read(path, source, "filed binding")
    if data.get("record_run_id") != record.run_id or data.get("record_sha256") != sha256:
        raise DataError(source, f"its filed binding {path.name} names another record (run {data.get('record_run_id')!r})",
                        field="binding.record_sha256")
    names = [f.name for f in dataclasses.fields(Binding)]
    try:
        binding = Binding(**{n: data[n] for n in names})
    except (KeyError, TypeError) as exc:
        raise DataError(source, f"its filed binding {path.name} lacks a field ({exc})", field="binding") from None
    if not all(isinstance(getattr(binding, n), str) for n in names if n != "run_attempt") or \
            not isinstance(binding.run_attempt, int):
        raise DataError(source, f"its filed binding {path.name} has a field of the wrong type", field="binding")
    return binding
