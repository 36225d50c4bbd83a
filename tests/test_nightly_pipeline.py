"""The pipeline never stalls: a box with two profiles runs them one after the other in one job and
one's failure does not stop the other; a refused record is quarantined while the others are filed;
a data branch that moved is fetched, rebased and pushed again. The scripts the workflows run, run
here for real (git, bash, lawbench)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lawbench.core.reports import RunRecord, write_json

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

pytestmark = pytest.mark.skipif(shutil.which("bash") is None or shutil.which("git") is None,
                                reason="the job logic is bash and git")


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAWBENCH_", "GITHUB_", "GIT_"))}
    env["PATH"] = f"{BIN}:{env.get('PATH', '/usr/bin:/bin')}"
    env["GITHUB_STEP_SUMMARY"] = str(tmp_path / "summary.md")
    return env


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_box_runs_its_profiles_one_after_the_other_and_one_failure_stops_nothing(tmp_path):
    """The ref-desktop box's plan on a machine that is neither profile's: each run fails (--strict
    on the wrong runner), each still leaves its record, and the job's exit is the worst of them."""
    (tmp_path / "scripts").symlink_to(ROOT / "scripts")
    nox = tmp_path / "nox"
    nox.write_text("#!/bin/bash\n" f'"{BIN}/lawbench" check && exec "{BIN}/lawbench" run "${{@:4}}"\n')
    nox.chmod(0o755)
    env = dict(_env(tmp_path), NOX=str(nox), LAWBENCH_GPU_DETECT="none")
    done = subprocess.run(["bash", "scripts/nightly_runner.sh", "cpu-ddr4:nightly:60 gtx1060:nightly:150 bad:entry",
                           "data", "out", "-k", "law4.l33"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=900)
    assert "Traceback" not in done.stdout + done.stderr
    order = [line for line in done.stdout.splitlines() if line.startswith("nightly_runner: ") and " exit " in line]
    assert order == ["nightly_runner: cpu-ddr4 exit 1", "nightly_runner: gtx1060 exit 1"], done.stdout
    assert "bad plan entry 'bad:entry'" in done.stderr and done.returncode == 2
    for profile in ("cpu-ddr4", "gtx1060"):
        record = json.loads((tmp_path / "out" / profile / "run.json").read_text())
        assert record["gate"]["new_baseline"] and not record["profile_matches"]


def _record(tmp_path: Path, name: str, profile: str = "cpu") -> Path:
    rec = RunRecord.new(profile, profile_matches=True, started="2026-12-01T02:17:00+00:00")
    rec.finish([])
    return write_json(rec, tmp_path / "tonight" / name / "run.json")


def test_a_refused_record_is_quarantined_and_the_others_are_filed(tmp_path):
    good = _record(tmp_path, "lawbench-cpu")
    bad = tmp_path / "tonight" / "lawbench-ref-desktop" / "gtx1060" / "run.json"
    bad.parent.mkdir(parents=True)
    bad.write_text('{"profile": "gtx1060", "run_id": "../../etc", "results": "<script>"}')
    done = subprocess.run(["bash", str(ROOT / "scripts" / "nightly_collect.sh"), "data", "tonight", "site", "quarantine"],
                          cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True, timeout=600)
    assert done.returncode == 3, done.stdout + done.stderr
    run_id = json.loads(good.read_text())["run_id"]
    assert [p.name for p in (tmp_path / "data" / "runs").rglob("*.json")] == [f"{run_id}.json"]
    assert f"REFUSED {Path('tonight/lawbench-ref-desktop/gtx1060/run.json')}" in done.stdout
    assert len(list((tmp_path / "quarantine").iterdir())) == 1
    assert (tmp_path / "site" / "index.html").is_file() and (tmp_path / "site" / "runs" / f"{run_id}.html").is_file()
    assert "refused and quarantined" in (tmp_path / "summary.md").read_text()


def test_a_moved_data_branch_is_fetched_rebased_and_pushed_again(tmp_path):
    origin = tmp_path / "origin.git"
    _git(tmp_path, "init", "-q", "--bare", str(origin))
    data = tmp_path / "data"
    data.mkdir()
    _git(data, "init", "-q", "-b", "lawbench-history")
    _git(data, "remote", "add", "origin", str(origin))
    (data / "runs" / "cpu").mkdir(parents=True)
    (data / "runs" / "cpu" / "a.json").write_text("{}")
    _git(data, "add", "runs")
    _git(data, "commit", "-q", "-m", "night a")
    _git(data, "push", "-q", "origin", "HEAD:lawbench-history")
    other = tmp_path / "other"  # another collect files its record first: the branch moves
    _git(tmp_path, "clone", "-q", "-b", "lawbench-history", str(origin), str(other))
    (other / "runs" / "gtx1060").mkdir(parents=True)
    (other / "runs" / "gtx1060" / "b.json").write_text("{}")
    _git(other, "add", "runs")
    _git(other, "commit", "-q", "-m", "night b")
    _git(other, "push", "-q", "origin", "HEAD:lawbench-history")
    (data / "runs" / "cpu" / "c.json").write_text("{}")
    done = subprocess.run(["bash", str(ROOT / "scripts" / "nightly_push.sh"), str(data), "night c"], cwd=tmp_path,
                          env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "push refused (attempt 1)" in done.stdout and "pushed (attempt 2)" in done.stdout
    files = _git(origin, "ls-tree", "-r", "--name-only", "lawbench-history").split()
    assert files == ["runs/cpu/a.json", "runs/cpu/c.json", "runs/gtx1060/b.json"]
    again = subprocess.run(["bash", str(ROOT / "scripts" / "nightly_push.sh"), str(data), "nothing"], cwd=tmp_path,
                           env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "no new run records" in again.stdout
