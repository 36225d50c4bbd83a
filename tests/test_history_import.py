"""`lawbench history import`: real run records (from real `lawbench run`s) into one history."""
from __future__ import annotations

import hashlib
import json
import shutil
import time
import uuid

import pytest
from conftest import run_cli

from lawbench.core.history.store import History
from lawbench.core.history.imports import import_paths
from lawbench.core.record.reports import RunRecord, read_json, to_json, write_json


@pytest.fixture(scope="module")
def real_runs(tmp_path_factory, dummy_site):
    """Two real runs of the dummy law (a prediction, a replayed measurement), each in its own
    folder with its own run.json and history — what two runners would upload."""
    import os

    base = tmp_path_factory.mktemp("runs")
    env = dict(os.environ, PYTHONPATH=str(dummy_site), LAWBENCH_CACHE=str(base / "cache"))
    env.pop("LAWBENCH_DISABLE_PLUGIN_AUTOLOAD", None)
    env.pop("GITHUB_STEP_SUMMARY", None)
    for name in ("night1", "night2"):
        p = run_cli(["run", "--profile", "cpu", "--law", "dummy", "--out", name], env, base)
        assert p.returncode == 1, p.stdout + p.stderr  # the dummy law has a FAIL and a VOID
    return base


def outcome_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def test_import_is_idempotent_and_keeps_provenance(real_runs, tmp_path):
    run_json = real_runs / "night1" / "run.json"
    db = tmp_path / "h.sqlite"
    with History(db) as h:
        (first,) = import_paths(h, [str(run_json)])
        record = read_json(run_json)
        assert (first.status, first.run_id, first.kind) == ("imported", record.run_id, "run")
        assert h.record(record.run_id) == record
        p = h.provenance(record.run_id)
        assert (p.kind, p.source) == ("run", str(run_json))
        assert p.sha256 == hashlib.sha256(run_json.read_bytes()).hexdigest()
        (again,) = import_paths(h, [str(run_json)])
        assert again.status == "already" and "already in the history" in again.message
        assert len(h.runs()) == 1


def test_the_run_s_own_history_already_holds_its_record(real_runs):
    """`lawbench run` appended the run with provenance "lawbench run"; importing its run.json
    into that history is a no-op, so the nightly may import everything it has."""
    night = real_runs / "night1"
    with History(night / "history.sqlite") as h:
        (o,) = import_paths(h, [str(night / "run.json")])
        assert o.status == "already"
        assert h.provenance(o.run_id).source == "lawbench run"


def test_folder_import_cli_exit_codes_and_lines(real_runs, cli_env, tmp_path):
    """A folder is read recursively, sorted; a foreign JSON file is refused by name and the
    command exits 2 — after importing the good files."""
    shutil.copytree(real_runs / "night1", tmp_path / "records" / "cpu" / "a")
    shutil.copytree(real_runs / "night2", tmp_path / "records" / "cpu" / "b")
    (tmp_path / "records" / "detect.json").write_text('{"profile": "cpu"}', encoding="utf-8")
    db = tmp_path / "h.sqlite"
    p = run_cli(["history", "import", "records", "--db", str(db)], cli_env, tmp_path)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "Traceback" not in p.stderr
    out = outcome_lines(p.stdout)
    assert [line.split()[0] for line in out[:2]] == ["imported", "imported"]
    assert "records/cpu/a/run.json" in out[0] and "records/cpu/b/run.json" in out[1]
    assert out[-1].startswith("2 imported, 0 already in the history, 1 refused")
    assert out[-1].endswith("fix or drop the refused files (the others are in)")
    (err,) = outcome_lines(p.stderr)
    assert err.startswith("refused") and "records/detect.json" in err
    assert "not a run record or a contribution bundle" in err
    p = run_cli(["history", "import", "records/cpu", "--db", str(db), "--json"], cli_env, tmp_path)
    assert p.returncode == 0 and [o["status"] for o in json.loads(p.stdout)] == ["already", "already"]
    p = run_cli(["history", "--db", str(db), "--json"], cli_env, tmp_path)
    assert len(json.loads(p.stdout)) == 2


def test_same_run_id_with_other_content_is_refused(real_runs, tmp_path):
    record = read_json(real_runs / "night1" / "run.json")
    edited = record.model_copy(update={"profile_matches": not record.profile_matches})
    write_json(edited, tmp_path / "edited.json")
    with History(tmp_path / "h.sqlite") as h:
        import_paths(h, [str(real_runs / "night1" / "run.json")])
        (o,) = import_paths(h, [str(tmp_path / "edited.json")])
        assert o.status == "refused" and "\n" not in o.message
        assert o.message.startswith(str(tmp_path / "edited.json"))
        assert f"run {record.run_id} is already in the history with different content" in o.message
        assert h.record(record.run_id) == record  # the history is append-only


@pytest.mark.parametrize("bad, says", [
    ("unfinished", "is unfinished (finished is null)"),
    ("garbage", "not JSON"),
    ("missing", "cannot read"),
    ("foreign", "not a run record or a contribution bundle"),
    ("schema", "not a valid run record"),
])
def test_bad_files_are_one_line_each(real_runs, tmp_path, bad, says):
    path = tmp_path / f"{bad}.json"
    if bad == "unfinished":
        record = read_json(real_runs / "night1" / "run.json")
        write_json(record.model_copy(update={"finished": None, "exit_code": None}), path)
    elif bad == "garbage":
        path.write_bytes(b"\x00\x01 not json")
    elif bad == "foreign":
        path.write_text("[1, 2, 3]", encoding="utf-8")
    elif bad == "schema":
        data = json.loads((real_runs / "night1" / "run.json").read_text(encoding="utf-8"))
        data["results"][0]["verdict"] = "MAYBE"
        path.write_text(json.dumps(data), encoding="utf-8")
    with History(tmp_path / "h.sqlite") as h:
        (o,) = import_paths(h, [str(path)])
        assert o.status == "refused" and says in o.message and str(path) in o.message
        assert "\n" not in o.message and h.runs() == []


def test_an_empty_folder_imports_nothing_and_a_missing_one_is_refused(cli_env, tmp_path):
    """A data branch's first night has an empty runs/ folder: that is no error; a path that is
    not there (a typo) is."""
    (tmp_path / "empty").mkdir()
    p = run_cli(["history", "import", "empty", "--db", "h.sqlite"], cli_env, tmp_path)
    assert p.returncode == 0 and "no .json files under empty: nothing to import" in p.stdout
    p = run_cli(["history", "import", "emtpy", "--db", "h.sqlite"], cli_env, tmp_path)
    assert p.returncode == 2 and outcome_lines(p.stderr) == [
        "refused   emtpy: cannot read: No such file or directory"]


def copies(record: RunRecord, folder, n: int) -> None:
    """`n` nights of one real record, each its own run (new id, one day apart)."""
    for i in range(n):
        night = record.model_copy(update={"run_id": uuid.UUID(int=i + 1).hex,
                                          "started": f"2025-{1 + i // 28:02d}-{1 + i % 28:02d}T02:00:00+00:00"})
        (folder / f"{night.run_id}.json").write_text(to_json(night), encoding="utf-8")


def test_three_hundred_records_import_quickly(real_runs, tmp_path):
    """The nightly rebuilds the history from every record it keeps: 300 runs must not take long
    (docs/history.md gives the figure measured on the 2-core development machine)."""
    folder = tmp_path / "runs" / "cpu"
    folder.mkdir(parents=True)
    copies(read_json(real_runs / "night1" / "run.json"), folder, 300)
    with History(tmp_path / "h.sqlite") as h:
        start = time.perf_counter()
        outcomes = import_paths(h, [str(tmp_path / "runs")])
        seconds = time.perf_counter() - start
        assert [o.status for o in outcomes] == ["imported"] * 300 and len(h.runs(limit=None)) == 300
    assert seconds < 60, f"300 records took {seconds:.1f} s"


def test_export_writes_the_run_json_byte_for_byte_and_never_overwrites(real_runs, cli_env, tmp_path):
    """`history export` seeds a data branch from an existing history: the file it writes is the
    run.json the run wrote, a second export leaves it, and a file with other content is refused."""
    night = real_runs / "night1"
    record = read_json(night / "run.json")
    p = run_cli(["history", "export", "branch/runs", "--db", str(night / "history.sqlite")], cli_env, tmp_path)
    assert p.returncode == 0 and p.stdout.startswith("1 written, 0 already there, 0 refused")
    exported = tmp_path / "branch" / "runs" / "cpu" / f"{record.run_id}.json"
    assert exported.read_bytes() == (night / "run.json").read_bytes()
    p = run_cli(["history", "export", "branch/runs", "--db", str(night / "history.sqlite")], cli_env, tmp_path)
    assert p.returncode == 0 and p.stdout.startswith("0 written, 1 already there")
    exported.write_text(exported.read_text(encoding="utf-8").replace('"strict": false', '"strict": true'), encoding="utf-8")
    p = run_cli(["history", "export", "branch/runs", "--db", str(night / "history.sqlite")], cli_env, tmp_path)
    assert p.returncode == 2 and "holds other content; a record file is never overwritten" in p.stderr
    assert '"strict": true' in exported.read_text(encoding="utf-8")

