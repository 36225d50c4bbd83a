"""The history survives the night: scripts/nightly_collect.sh, which the nightly's collect job
runs, carries real run records from one night to the next on the data branch's folder, rebuilds
one history from all of them, and builds the report pages. Three nights are run here for real
(prediction-only runs: real records in seconds), each in an artifact bound to its workflow run as
the runner and fetch scripts leave it (tests/_nightly_artifacts.py)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _nightly_artifacts import bound_artifact

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="the collect step is a bash script")


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAWBENCH_", "GITHUB_"))}
    env["PATH"] = f"{BIN}:{env.get('PATH', '/usr/bin:/bin')}"
    env["GITHUB_STEP_SUMMARY"] = str(tmp_path / "summary.md")
    return env


@pytest.fixture(scope="module")
def nights(tmp_path_factory) -> dict[str, Path]:
    """Three nights' fetched artifact folders, each from a real run bound to its workflow run, made
    once for this module: the collect step only reads them, and each test files them into a data
    folder of its own."""
    base = tmp_path_factory.mktemp("nights")
    made = {}
    for name in ("n1", "n2", "n3"):
        out = base / "runs" / name
        done = subprocess.run([str(BIN / "lawbench"), "run", "--profile", "cpu", "-k", "prediction", "--out",
                               str(out), "--no-history"], capture_output=True, text=True, env=_env(base),
                              cwd=base, timeout=300, encoding="utf-8")
        assert (out / "run.json").is_file(), done.stdout[-2000:] + done.stderr[-2000:]
        tonight = base / "artifacts" / name
        workflow_run = str(int.from_bytes(name.encode(), "big"))  # one workflow run per night
        bound_artifact(tonight, "cpu", workflow_run, {"cpu": out / "run.json"})
        made[name] = tonight
    return made


def _collect(tmp_path: Path, tonight: Path, site: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(ROOT / "scripts" / "nightly_collect.sh"), str(tmp_path / "data"),
                           str(tonight), str(tmp_path / site)], capture_output=True, text=True,
                          env=_env(tmp_path), cwd=tmp_path, timeout=600, encoding="utf-8")


def _filed(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "data" / "runs").rglob("*.json"))


def test_three_nights_carry_one_history_forward(tmp_path, nights):
    ids = []
    for night in ("n1", "n2", "n3"):
        tonight = nights[night]
        ids.append(json.loads(next(tonight.rglob("run.json")).read_text(encoding="utf-8"))["run_id"])
        done = _collect(tmp_path, tonight, f"site-{night}")
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert "Traceback" not in done.stdout + done.stderr
        site = tmp_path / f"site-{night}"
        assert (site / "index.html").is_file() and (site / "runs" / f"{ids[-1]}.html").is_file()
    filed = [p for p in _filed(tmp_path) if not p.name.endswith(".binding.json")]
    assert [p.stem for p in filed] == sorted(ids) and all(p.parent.name == "cpu" for p in filed)
    assert len(_filed(tmp_path)) == 2 * len(ids)  # each beside the binding the collect verified

    # The data branch alone rebuilds the whole history: every night, comparable night to night.
    db = tmp_path / "rebuilt.sqlite"
    run = subprocess.run([str(BIN / "lawbench"), "history", "import", "--db", str(db), str(tmp_path / "data")],
                         capture_output=True, text=True, env=_env(tmp_path), timeout=300, encoding="utf-8")
    assert run.returncode == 0, run.stderr
    listed = subprocess.run([str(BIN / "lawbench"), "history", "--db", str(db), "--json"],
                            capture_output=True, text=True, env=_env(tmp_path), timeout=300, encoding="utf-8")
    assert sorted(r["run_id"] for r in json.loads(listed.stdout)) == sorted(ids)
    compare = subprocess.run([str(BIN / "lawbench"), "history", "--db", str(db), "compare", "latest~1", "latest"],
                             capture_output=True, text=True, env=_env(tmp_path), timeout=300, encoding="utf-8")
    assert compare.returncode == 0, compare.stderr
    assert "nightly" in (tmp_path / "summary.md").read_text(encoding="utf-8")


def test_a_retried_collect_files_nothing_twice_and_a_bad_record_stops_it(tmp_path, nights):
    tonight = nights["n1"]
    assert _collect(tmp_path, tonight, "site").returncode == 0
    before = {p: p.read_bytes() for p in _filed(tmp_path)}
    again = _collect(tmp_path, tonight, "site")  # the job re-run by hand: idempotent
    assert again.returncode == 0, again.stderr[-3000:]
    assert {p: p.read_bytes() for p in _filed(tmp_path)} == before

    broken = tmp_path / "artifacts" / "bad" / "lawbench-h200-x" / "h200"
    broken.mkdir(parents=True)
    (broken / "run.json").write_text('{"profile": "h200", "run_id": "x"}', encoding="utf-8")
    done = _collect(tmp_path, broken.parent.parent, "site2")
    assert done.returncode == 3
    assert f"REFUSED {broken / 'run.json'}" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr
    assert {p: p.read_bytes() for p in _filed(tmp_path)} == before  # nothing filed from a bad night


def test_collect_names_every_file_it_saw(tmp_path, nights):
    """Issue 32 item 4: a runner's run.json that is a link (to a genuine record elsewhere) was
    skipped by the step's search, so the import never ran and the step exited 0 naming it neither
    filed nor refused. Now every file under tonight is named: refused (why), or passed over."""
    tonight = tmp_path / "tonight"
    shutil.copytree(nights["n2"], tonight)
    record = next(tonight.rglob("run.json"))
    elsewhere = tmp_path / "elsewhere.json"
    shutil.move(record, elsewhere)
    record.symlink_to(elsewhere)
    (record.parent / "junit.xml").write_text("<testsuites/>", encoding="utf-8")
    done = _collect(tmp_path, tonight, "site")
    out = done.stdout + done.stderr
    assert done.returncode == 3 and "Traceback" not in out, out
    assert f"REFUSED {record}" in out and "never followed out of" in out, out
    assert "passed over" in out and str(record.parent / "junit.xml") in out, out
    assert not [p for p in _filed(tmp_path) if not p.name.endswith(".binding.json")], out
    summary = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert f"- **refused and quarantined:** `{record}`" in summary, summary
