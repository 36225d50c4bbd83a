"""Runner artifacts as the nightly leaves them for the collect step: each profile's run.json with the
binding.json scripts/nightly_runner.sh writes beside it, and the <artifact>.fetch.json that
scripts/nightly_fetch.sh writes beside the extracted folder, with the digest of a real zip of it.
(tests/test_nightly_pipeline.py runs both scripts for real; these build the same files quickly.)"""
from __future__ import annotations

import hashlib
import io
import json
import shutil
import zipfile
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Optional, Union

from lawbench.core.record.reports import RunRecord, write_json


def record(profile: str, started: Optional[str] = None) -> RunRecord:
    """A finished runner's record of ``profile`` (no anchors: the checks on results are not at stake)."""
    rec = RunRecord.new(profile, profile_matches=True, strict=True,
                        started=started or datetime.now(timezone.utc).replace(microsecond=0).isoformat())
    rec.finish([])
    return rec


def runner_binding(folder: Path, profile: str, workflow_run_id: str, box: str, head_sha: str,
                   job: str = "anchors", attempt: int = 1) -> dict:
    """What scripts/nightly_runner.sh writes beside OUT/<profile>/run.json."""
    raw = (folder / "run.json").read_bytes()
    binding = {"binding_version": 1, "workflow_run_id": workflow_run_id, "run_attempt": attempt, "job": job,
               "box": box, "head_sha": head_sha, "repository": "o/r", "profile": profile,
               "record_run_id": json.loads(raw).get("run_id"), "record_sha256": hashlib.sha256(raw).hexdigest()}
    (folder / "binding.json").write_text(json.dumps(binding, indent=2), encoding="utf-8")
    return binding


def zip_digest(folder: Path) -> str:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                z.write(p, p.relative_to(folder))
    return hashlib.sha256(buf.getvalue()).hexdigest()


def fetched(tonight: Path, artifact: str, workflow_run_id: str, head_sha: str, created: str,
            digest: Optional[str] = None) -> dict:
    """What scripts/nightly_fetch.sh writes beside tonight/<artifact>/ after the zip verified."""
    sha = zip_digest(tonight / artifact)
    facts = {"workflow_run_id": workflow_run_id, "head_sha": head_sha, "run_created_at": created,
             "artifact_id": "4242", "artifact_name": artifact, "artifact_digest": digest or f"sha256:{sha}",
             "zip_sha256": sha}
    (tonight / f"{artifact}.fetch.json").write_text(json.dumps(facts), encoding="utf-8")
    return facts


def bound_artifact(tonight: Path, box: str, workflow_run_id: str, records: dict[str, Union[RunRecord, Path]],
                   created: Optional[str] = None) -> Path:
    """tonight/lawbench-<box>-<id>/<profile>/run.json with its binding, and the fetch facts beside it.
    The head commit is the records' own (lawbench.core.record.reports.git_commit), or a fixed one."""
    artifact = f"lawbench-{box}-{workflow_run_id}"
    head = "0" * 40
    for profile, rec in records.items():
        folder = tonight / artifact / profile
        folder.mkdir(parents=True, exist_ok=True)
        if isinstance(rec, Path):
            shutil.copyfile(rec, folder / "run.json")
            commit = json.loads(rec.read_text(encoding="utf-8")).get("git_commit")
        else:
            write_json(rec, folder / "run.json")
            commit = rec.git_commit
        head = commit or head
        runner_binding(folder, profile, workflow_run_id, box, head)
    created = created or (datetime.now(timezone.utc) - timedelta(hours=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    fetched(tonight, artifact, workflow_run_id, head, created)
    return tonight / artifact
