"""A runner's record speaks for its runner only when its binding to the workflow run that made it
verifies (issue 20, provenance you can check): each way a binding can fail is refused in one line
naming the field, the genuine records of the same night are filed, and what was verified is filed
beside the record and read back when the history is rebuilt from the data branch."""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from _nightly_artifacts import bound_artifact, record

from lawbench.core.history.store import History
from lawbench.core.history.imports import file_records, import_paths
from lawbench.core.record.reports import write_json

RUN = "9001"


def _import(db: Path, paths, require: bool = True):
    with History(db) as h:
        return import_paths(h, [str(p) for p in paths], require_binding=require)


def test_a_bound_record_is_a_runner_s_and_its_binding_is_filed_and_read_back(tmp_path):
    art = bound_artifact(tmp_path / "tonight", "ref-desktop", RUN, {"cpu-ddr4": record("cpu-ddr4"),
                                                                     "gtx1060": record("gtx1060")})
    outcomes = _import(tmp_path / "h.sqlite", [art.parent])  # the folder of fetched artifacts
    assert [o.status for o in outcomes] == ["imported", "imported"], [o.message for o in outcomes]
    assert all(o.binding and o.binding.workflow_run_id == RUN and o.binding.box == "ref-desktop" for o in outcomes)
    assert "bound to nightly 9001 (ref-desktop)" in outcomes[0].message
    filed = file_records(outcomes, tmp_path / "data")
    assert [o.status for o in filed] == ["imported", "imported"]
    names = sorted(str(p.relative_to(tmp_path / "data")) for p in (tmp_path / "data").rglob("*.json"))
    ids = {o.profile: o.run_id for o in outcomes}
    assert names == sorted([f"runs/cpu-ddr4/{ids['cpu-ddr4']}.json", f"runs/cpu-ddr4/{ids['cpu-ddr4']}.binding.json",
                            f"runs/gtx1060/{ids['gtx1060']}.json", f"runs/gtx1060/{ids['gtx1060']}.binding.json"])
    # the next night rebuilds the history from the branch alone: the bindings come back with it
    rebuilt = _import(tmp_path / "rebuilt.sqlite", [tmp_path / "data" / "runs"], require=False)
    assert [o.status for o in rebuilt] == ["imported", "imported"]  # a .binding.json is never read as a record
    with History(tmp_path / "rebuilt.sqlite", create=False) as h:
        rows = h.runs(limit=None)
        assert {r.binding.artifact_name for r in rows} == {f"lawbench-ref-desktop-{RUN}"}
        assert h.provenance(ids["gtx1060"]).binding.artifact_digest.startswith("sha256:")


def _one(tmp_path: Path, change) -> str:
    """One bound cpu artifact with one thing changed by ``change(artifact, run.json, binding, facts)``;
    the refusal's message."""
    tonight = tmp_path / "tonight"
    art = bound_artifact(tonight, "cpu", RUN, {"cpu": record("cpu")})
    run = art / "cpu" / "run.json"
    change(art, run, json.loads((art / "cpu" / "binding.json").read_text(encoding="utf-8")),
           json.loads((tonight / f"{art.name}.fetch.json").read_text(encoding="utf-8")))
    (o,) = _import(tmp_path / "h.sqlite", [run])
    assert o.status == "refused" and "\n" not in o.message and o.message.startswith(f"{run}: "), o.message
    with History(tmp_path / "h.sqlite", create=False) as h:
        assert h.runs(limit=None) == []
    return o.message


def _rewrite(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data), encoding="utf-8")


CASES = {
    "no binding": (lambda art, run, b, f: (art / "cpu" / "binding.json").unlink(),
                   "field binding: has no binding.json beside it"),
    "not from an artifact": (lambda art, run, b, f: (art.parent / f"{art.name}.fetch.json").unlink(),
                             "not inside an artifact the collect step fetched"),
    "zip not GitHub's": (lambda art, run, b, f: _rewrite(art.parent / f"{art.name}.fetch.json",
                                                         {**f, "artifact_digest": "sha256:" + "e" * 64}),
                         "field binding.artifact_digest: its artifact's zip"),
    "another workflow run": (lambda art, run, b, f: _rewrite(art / "cpu" / "binding.json",
                                                             {**b, "workflow_run_id": "8999"}),
                             "field binding.workflow_run_id"),
    "another job": (lambda art, run, b, f: _rewrite(art / "cpu" / "binding.json", {**b, "job": "slow-tests"}),
                    "field binding.job"),
    "edited after binding": (lambda art, run, b, f: run.write_text(run.read_text(encoding="utf-8").replace('"strict": true',
                                                                                           '"strict": false'), encoding="utf-8"),
                             "field binding.record_sha256"),
    "another box's profile": (lambda art, run, b, f: _rewrite(art / "cpu" / "binding.json",
                                                              {**b, "box": "ref-desktop"}),
                              "field binding.box"),
    "another commit": (lambda art, run, b, f: _rewrite(art / "cpu" / "binding.json", {**b, "head_sha": "1" * 40}),
                       "field binding.head_sha"),
    "replayed": (lambda art, run, b, f: _rewrite(art.parent / f"{art.name}.fetch.json",
                                                 {**f, "run_created_at": (datetime.now(timezone.utc) + timedelta(
                                                     minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")}),
                 "field started: started"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_binding_that_does_not_verify_is_refused_naming_the_field(tmp_path, case):
    change, words = CASES[case]
    assert words in _one(tmp_path, change)


def test_a_record_of_a_profile_no_job_runs_is_refused(tmp_path):
    """A compromised box writes a record and a binding for h200 (no runner): refused by its box."""
    tonight = tmp_path / "tonight"
    bound_artifact(tonight, "cpu", RUN, {"cpu": record("cpu"), "h200": record("h200")})
    outcomes = _import(tmp_path / "h.sqlite", [tonight])
    assert [o.status for o in outcomes] == ["imported", "refused"]
    assert "field binding.profile: is of profile h200, which no nightly job runs" in outcomes[1].message


def test_without_require_binding_a_filed_binding_must_name_its_record(tmp_path):
    """On the data branch a record's binding lies beside it; one that names another record (a
    binding copied beside the wrong file) refuses the record rather than bind it."""
    import hashlib

    from lawbench.core.history.store import Binding
    from lawbench.core.history.binding import filed_text

    rec, other = record("cpu"), record("cpu")
    path = write_json(rec, tmp_path / "runs" / "cpu" / f"{rec.run_id}.json")
    bound = Binding(RUN, 1, "anchors", "cpu", f"lawbench-cpu-{RUN}", "77", "sha256:" + "0" * 64, "0" * 40,
                    "2026-12-01T03:00:00+00:00")
    sidecar = path.with_name(f"{rec.run_id}.binding.json")
    sidecar.write_text(filed_text(bound, other.run_id, hashlib.sha256(path.read_bytes()).hexdigest()), encoding="utf-8")
    (o,) = _import(tmp_path / "h.sqlite", [path], require=False)
    assert o.status == "refused" and "names another record" in o.message and "field binding.record_sha256" in o.message
    sidecar.write_text(filed_text(bound, rec.run_id, hashlib.sha256(path.read_bytes()).hexdigest()), encoding="utf-8")
    (o,) = _import(tmp_path / "h.sqlite", [path], require=False)
    assert o.status == "imported" and o.binding == bound


def test_facts_planted_inside_an_artifact_bind_nothing(tmp_path):
    """A compromised box nests a second artifact inside its own, with fetch facts of its making
    beside it, to speak for another box's profile: a record that does not lie at
    <artifact>/<profile>/run.json is refused, and the box's own record is filed."""
    tonight = tmp_path / "tonight"
    art = bound_artifact(tonight, "cpu", RUN, {"cpu": record("cpu")})
    inner = bound_artifact(art, "ref-desktop", "9002", {"gtx1060": record("gtx1060")})
    assert (art / f"{inner.name}.fetch.json").is_file()  # the plant, inside the artifact
    outcomes = _import(tmp_path / "h.sqlite", [tonight])
    assert [o.status for o in outcomes] == ["imported", "refused"], [o.message for o in outcomes]
    assert f"lies at {art.name}/{inner.name}/gtx1060/run.json, not where a runner's record lies" in outcomes[1].message


def test_contribution_and_require_binding_contradict(tmp_path):
    from conftest import run_cli

    p = run_cli(["history", "import", "--db", str(tmp_path / "h.sqlite"), "--contribution", "--require-binding",
                 str(tmp_path)], None, tmp_path)
    assert p.returncode == 2 and "contradict" in p.stderr and "Traceback" not in p.stderr
