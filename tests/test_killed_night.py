"""A killed night is filed as interrupted (issue 30, item 9, the collect half): GitHub ends a job at
its timeout with SIGTERM to its whole process group; the runner script binds the interrupted record
lawbench wrote, the collect step files it on the data branch marked INTERRUPTED, and the next
night's gate never stands on it. A real `lawbench run` (the stand-in law and its hanging engine,
as tests/test_run_endings.py drives them) under the real scripts/nightly_runner.sh and
scripts/nightly_collect.sh, then a real `lawbench run --gate baseline` against the data branch."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from _engine_fixtures import wait_for
from _nightly_artifacts import fetched
from test_records_truthful import standin_site  # noqa: F401  (the stand-in law, installed)
from test_run_endings import standin  # noqa: F401  (its hanging llama-bench)

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

# lawbench's end by a signal and its engine's process group: alone, as test_run_endings.py runs
pytestmark = [pytest.mark.serial,
              pytest.mark.skipif(shutil.which("bash") is None, reason="the runner and collect scripts are bash")]


def test_a_night_killed_at_its_timeout_is_filed_as_interrupted_and_never_a_baseline(standin, tmp_path):  # noqa: F811
    from lawbench.core.record.reports import git_commit

    env, llama_dir, state = standin
    env = {k: v for k, v in env.items() if not k.startswith(("GITHUB_", "GIT_"))}
    env["PATH"] = f"{BIN}:{env.get('PATH', '/usr/bin:/bin')}"
    head = git_commit() or "a" * 40
    job = tmp_path / "job"
    job.mkdir()
    (job / "scripts").symlink_to(ROOT / "scripts")
    nox = tmp_path / "nox"  # `nox -s anchors -- ARGS` is `lawbench run ARGS` (its check is not at stake)
    nox.write_text(f'#!/bin/bash\nexec "{BIN}/lawbench" run "${{@:4}}"\n', encoding="utf-8")
    nox.chmod(0o755)
    runner_env = dict(env, NOX=str(nox), STANDIN_MODE="hang", GITHUB_RUN_ID="5001", GITHUB_RUN_ATTEMPT="1",
                      GITHUB_JOB="anchors", LAWBENCH_BOX="cpu", GITHUB_SHA=head, GITHUB_REPOSITORY="o/r")
    run_args = ["--law", "standin", "-k", "standin.sum or standin.engine", "--llama-dir", str(llama_dir)]
    proc = subprocess.Popen(["bash", "scripts/nightly_runner.sh", "cpu:nightly:30", "data", "out", *run_args],
                            cwd=job, env=runner_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, encoding="utf-8")
    wait_for(state / "hanging", proc)  # the engine is measuring when the job's timeout comes
    os.killpg(proc.pid, signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, out + err
    record = json.loads((job / "out" / "cpu" / "run.json").read_text(encoding="utf-8"))
    assert record["interrupted"] == "SIGTERM" and record["exit_code"] == 143 and record["gate"] is None
    assert (job / "out" / "cpu" / "binding.json").is_file()

    # the artifact as nightly_fetch.sh leaves it, then the collect step
    artifact = "lawbench-cpu-5001"
    shutil.copytree(job / "out", tmp_path / "tonight" / artifact)
    created = (datetime.now(timezone.utc) - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    fetched(tmp_path / "tonight", artifact, "5001", head, created)
    collect_env = dict(env, GITHUB_STEP_SUMMARY=str(tmp_path / "summary.md"))
    done = subprocess.run(["bash", str(ROOT / "scripts" / "nightly_collect.sh"), "data", "tonight", "site", "quarantine"],
                          cwd=tmp_path, env=collect_env, capture_output=True, text=True, timeout=600, encoding="utf-8")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stdout + done.stderr
    run_id = record["run_id"]
    assert (f"nightly_collect: filed {run_id} ({Path('tonight') / artifact / 'cpu' / 'run.json'}): INTERRUPTED by "
            "SIGTERM, never a baseline") in done.stdout, done.stdout
    filed = tmp_path / "data" / "runs" / "cpu"
    assert sorted(p.name for p in filed.iterdir()) == [f"{run_id}.binding.json", f"{run_id}.json"]
    assert json.loads((filed / f"{run_id}.json").read_text(encoding="utf-8"))["interrupted"] == "SIGTERM"
    summary = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert "1 run record(s) filed (1 interrupted), 0 refused" in summary
    assert "cpu: interrupted by SIGTERM: filed, never a baseline (the gate did not judge it)" in summary

    # the next night, judged against the data branch: the interrupted night is read (not refused)
    # and is no baseline, so tonight starts one; its PASS of standin.sum is no accepted state
    night = subprocess.run([str(BIN / "lawbench"), "run", "--profile", "cpu", *run_args, "--gate", "baseline",
                            "--baseline", str(filed), "--out", "night2"], cwd=tmp_path,
                           env=dict(env, STANDIN_MODE="ok"), capture_output=True, text=True, timeout=300, encoding="utf-8")
    assert "Traceback" not in night.stderr and "left out" not in night.stderr, night.stderr
    gate = json.loads((tmp_path / "night2" / "run.json").read_text(encoding="utf-8"))["gate"]
    assert gate["baseline_run_id"] is None and gate["baseline_runs"] == 0, gate
    assert gate["new_baseline"] == "no accepted night of profile cpu in the history: tonight starts its baseline"
    assert night.returncode == 0, night.stdout + night.stderr
