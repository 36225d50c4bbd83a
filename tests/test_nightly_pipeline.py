"""The pipeline never stalls: a box with two profiles runs them one after the other in one job and
one's failure does not stop the other; a refused record is quarantined while the others are filed;
a data branch that moved is fetched, rebased and pushed again. And a night end to end: the runner
script binds its record to the workflow run, the fetch script checks each artifact's digest, the
collect step files the bound records and quarantines the rest by name. The scripts the workflows
run, run here for real (git, bash, lawbench; GitHub's API answered from files by a stand-in `gh`)."""
from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import zipfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from _nightly_artifacts import bound_artifact, record

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
                          text=True, timeout=60, encoding="utf-8")
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_box_runs_its_profiles_one_after_the_other_and_one_failure_stops_nothing(tmp_path):
    """The ref-desktop box's plan on a machine that is neither profile's: each run fails (--strict
    on the wrong runner), each still leaves its record, and the job's exit is the worst of them."""
    (tmp_path / "scripts").symlink_to(ROOT / "scripts")
    nox = tmp_path / "nox"
    nox.write_text("#!/bin/bash\n" f'"{BIN}/lawbench" check && exec "{BIN}/lawbench" run "${{@:4}}"\n', encoding="utf-8")
    nox.chmod(0o755)
    env = dict(_env(tmp_path), NOX=str(nox), LAWBENCH_GPU_DETECT="none")
    (tmp_path / "data.fetch").write_text("no-branch\n", encoding="utf-8")  # scripts/nightly_data.sh's word: nothing filed yet
    done = subprocess.run(["bash", "scripts/nightly_runner.sh", "cpu-ddr4:nightly:60 gtx1060:nightly:150 bad:entry",
                           "data", "out", "-k", "law4.l33"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=900, encoding="utf-8")
    assert "Traceback" not in done.stdout + done.stderr
    order = [line for line in done.stdout.splitlines() if line.startswith("nightly_runner: ") and " exit " in line]
    assert order == ["nightly_runner: cpu-ddr4 exit 1", "nightly_runner: gtx1060 exit 1"], done.stdout
    assert "bad plan entry 'bad:entry'" in done.stderr and done.returncode == 2
    for profile in ("cpu-ddr4", "gtx1060"):
        record = json.loads((tmp_path / "out" / profile / "run.json").read_text(encoding="utf-8"))
        assert record["gate"]["new_baseline"] and not record["profile_matches"]


def test_a_refused_record_is_quarantined_and_the_others_are_filed(tmp_path):
    art = bound_artifact(tmp_path / "tonight", "cpu", "777", {"cpu": record("cpu")})
    good = art / "cpu" / "run.json"
    bad = tmp_path / "tonight" / "lawbench-ref-desktop" / "gtx1060" / "run.json"
    bad.parent.mkdir(parents=True)
    bad.write_text('{"profile": "gtx1060", "run_id": "../../etc", "results": "<script>"}', encoding="utf-8")
    done = subprocess.run(["bash", str(ROOT / "scripts" / "nightly_collect.sh"), "data", "tonight", "site", "quarantine"],
                          cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True, timeout=600, encoding="utf-8")
    assert done.returncode == 3, done.stdout + done.stderr
    run_id = json.loads(good.read_text(encoding="utf-8"))["run_id"]
    assert sorted(p.name for p in (tmp_path / "data" / "runs").rglob("*.json")) == [f"{run_id}.binding.json",
                                                                                     f"{run_id}.json"]
    assert f"REFUSED {Path('tonight/lawbench-ref-desktop/gtx1060/run.json')}" in done.stdout
    kept = sorted(p.name for p in (tmp_path / "quarantine").iterdir())
    assert len(kept) == 2 and kept[1].endswith(".reason.txt")  # the file, and its one-line reason
    assert "not a run record" in (tmp_path / "quarantine" / kept[1]).read_text(encoding="utf-8")
    assert (tmp_path / "site" / "index.html").is_file() and (tmp_path / "site" / "runs" / f"{run_id}.html").is_file()
    assert "refused and quarantined" in (tmp_path / "summary.md").read_text(encoding="utf-8")


def test_a_moved_data_branch_is_fetched_rebased_and_pushed_again(tmp_path):
    origin = tmp_path / "origin.git"
    _git(tmp_path, "init", "-q", "--bare", str(origin))
    data = tmp_path / "data"
    data.mkdir()
    _git(data, "init", "-q", "-b", "lawbench-history")
    _git(data, "remote", "add", "origin", str(origin))
    (data / "runs" / "cpu").mkdir(parents=True)
    (data / "runs" / "cpu" / "a.json").write_text("{}", encoding="utf-8")
    _git(data, "add", "runs")
    _git(data, "commit", "-q", "-m", "night a")
    _git(data, "push", "-q", "origin", "HEAD:lawbench-history")
    other = tmp_path / "other"  # another collect files its record first: the branch moves
    _git(tmp_path, "clone", "-q", "-b", "lawbench-history", str(origin), str(other))
    (other / "runs" / "gtx1060").mkdir(parents=True)
    (other / "runs" / "gtx1060" / "b.json").write_text("{}", encoding="utf-8")
    _git(other, "add", "runs")
    _git(other, "commit", "-q", "-m", "night b")
    _git(other, "push", "-q", "origin", "HEAD:lawbench-history")
    (data / "runs" / "cpu" / "c.json").write_text("{}", encoding="utf-8")
    done = subprocess.run(["bash", str(ROOT / "scripts" / "nightly_push.sh"), str(data), "night c"], cwd=tmp_path,
                          env=_env(tmp_path), capture_output=True, text=True, timeout=120, encoding="utf-8")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "push refused (attempt 1)" in done.stdout and "pushed (attempt 2)" in done.stdout
    files = _git(origin, "ls-tree", "-r", "--name-only", "lawbench-history").split()
    assert files == ["runs/cpu/a.json", "runs/cpu/c.json", "runs/gtx1060/b.json"]
    again = subprocess.run(["bash", str(ROOT / "scripts" / "nightly_push.sh"), str(data), "nothing"], cwd=tmp_path,
                           env=_env(tmp_path), capture_output=True, text=True, timeout=120, encoding="utf-8")
    assert again.returncode == 0 and "no new run records" in again.stdout


# --------------------------------------------------------------------------- one night, end to end

FAKE_GH = """#!/bin/bash
# GitHub's API for nightly_fetch.sh, answered from files (jq applies the script's own --jq filters)
[ "$1" = api ] || exit 9
path=$2; shift 2
case $path in
  */workflows/nightly.yml/runs*) f=$FAKE_GH/runs.json ;;
  */actions/runs/*/artifacts*) id=${path#*/actions/runs/}; f=$FAKE_GH/artifacts-${id%%/*}.json ;;
  */actions/artifacts/*/zip) id=${path#*/actions/artifacts/}; exec cat "$FAKE_GH/${id%%/*}.zip" ;;
  *) exit 9 ;;
esac
if [ "${1:-}" = --jq ]; then exec jq -r "$2" "$f"; fi
cat "$f"
"""


def _zip(folder: Path) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                z.write(p, p.relative_to(folder))
    return buf.getvalue()


@pytest.mark.skipif(shutil.which("jq") is None or shutil.which("unzip") is None, reason="the fetch script needs unzip; "
                    "the stand-in gh applies the script's filters with jq")
def test_a_night_files_the_bound_records_and_quarantines_a_forged_contribution_and_a_malformed_record(tmp_path):
    """The Done-when of issue 20: the runner job (scripts/nightly_runner.sh, a real `lawbench run`)
    binds its record; its artifact also carries, as a compromised box would put them there, a record
    claiming the h200 runner with a binding of its own making and a malformed record; a second
    artifact was changed after GitHub recorded its digest. The fetch and collect scripts file the
    genuine record (with its binding), leave the changed artifact unextracted, quarantine the other
    two by name with their reasons, and the watchdog's view stays true: cpu fresh, h200 stale."""
    from lawbench.core.record.reports import git_commit

    env = _env(tmp_path)
    head = git_commit() or "a" * 40
    nox = tmp_path / "nox"
    nox.write_text("#!/bin/bash\n" f'exec "{BIN}/lawbench" run "${{@:4}}"\n', encoding="utf-8")
    nox.chmod(0o755)
    runner_env = dict(env, NOX=str(nox), GITHUB_RUN_ID="5001", GITHUB_RUN_ATTEMPT="1", GITHUB_JOB="anchors",
                      LAWBENCH_BOX="cpu", GITHUB_SHA=head, GITHUB_REPOSITORY="o/r")
    created = (datetime.now(timezone.utc) - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    job = tmp_path / "job"
    job.mkdir()
    (job / "scripts").symlink_to(ROOT / "scripts")
    (job / "data.fetch").write_text("no-branch\n", encoding="utf-8")  # scripts/nightly_data.sh's word: nothing filed yet
    done = subprocess.run(["bash", "scripts/nightly_runner.sh", "cpu:quick:30", "data", "lawbench-out", "-k",
                           "prediction"], cwd=job, env=runner_env, capture_output=True, text=True, timeout=900, encoding="utf-8")
    out = job / "lawbench-out"
    assert (out / "cpu" / "run.json").is_file() and (out / "cpu" / "binding.json").is_file(), done.stdout + done.stderr
    genuine = json.loads((out / "cpu" / "run.json").read_text(encoding="utf-8"))["run_id"]
    # what a compromised box adds to its own artifact: a record claiming the h200 runner, bound by
    # its own hand to this very job, and a malformed record
    forged = record("h200")
    forged_dir = out / "h200"
    forged_dir.mkdir()
    (forged_dir / "run.json").write_text(forged.model_dump_json(), encoding="utf-8")
    binding = json.loads((out / "cpu" / "binding.json").read_text(encoding="utf-8"))
    raw = (forged_dir / "run.json").read_bytes()
    (forged_dir / "binding.json").write_text(json.dumps({**binding, "profile": "h200", "record_run_id": forged.run_id,
                                                         "record_sha256": hashlib.sha256(raw).hexdigest()}), encoding="utf-8")
    (out / "broken").mkdir()
    (out / "broken" / "run.json").write_text('{"run_id": "x", "started": 3, ', encoding="utf-8")

    gh = tmp_path / "gh-api"
    gh.mkdir()
    (gh / "77.zip").write_bytes(_zip(out))
    digest = hashlib.sha256((gh / "77.zip").read_bytes()).hexdigest()
    changed = tmp_path / "other-box"
    bound_artifact(changed, "ref-desktop", "5002", {"gtx1060": record("gtx1060")})
    (gh / "78.zip").write_bytes(_zip(changed / "lawbench-ref-desktop-5002"))
    (gh / "runs.json").write_text(json.dumps({"workflow_runs": [{"id": 5001, "head_sha": head, "created_at": created},
                                                                {"id": 5002, "head_sha": head, "created_at": created}]}), encoding="utf-8")
    (gh / "artifacts-5001.json").write_text(json.dumps({"artifacts": [
        {"id": 77, "name": "lawbench-cpu-5001", "expired": False, "digest": f"sha256:{digest}"}]}), encoding="utf-8")
    (gh / "artifacts-5002.json").write_text(json.dumps({"artifacts": [  # the zip was changed after upload
        {"id": 78, "name": "lawbench-ref-desktop-5002", "expired": False, "digest": "sha256:" + "0" * 64}]}), encoding="utf-8")
    fake = tmp_path / "bin" / "gh"
    fake.parent.mkdir()
    fake.write_text(FAKE_GH, encoding="utf-8")
    fake.chmod(0o755)
    fenv = dict(env, FAKE_GH=str(gh), PATH=f"{fake.parent}:{env['PATH']}")
    done = subprocess.run(["bash", str(ROOT / "scripts" / "nightly_fetch.sh"), "o/r", "tonight"], cwd=tmp_path, env=fenv,
                          capture_output=True, text=True, timeout=120, encoding="utf-8")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "lawbench-ref-desktop-5002 (run 5002) is not extracted" in done.stderr
    assert sorted(p.name for p in (tmp_path / "tonight").iterdir()) == ["lawbench-cpu-5001", "lawbench-cpu-5001.fetch.json"]

    done = subprocess.run(["bash", str(ROOT / "scripts" / "nightly_collect.sh"), "data", "tonight", "site", "quarantine"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, encoding="utf-8")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert sorted(str(p.relative_to(tmp_path / "data")) for p in (tmp_path / "data").rglob("*.json")) == \
        [f"runs/cpu/{genuine}.binding.json", f"runs/cpu/{genuine}.json"]
    refused = sorted(line for line in done.stdout.splitlines() if "REFUSED" in line)
    assert len(refused) == 2
    assert "lawbench-cpu-5001/broken/run.json" in refused[0] and "not JSON" in refused[0]
    assert "lawbench-cpu-5001/h200/run.json" in refused[1] and "field binding.profile" in refused[1]
    reasons = sorted((tmp_path / "quarantine").glob("*.reason.txt"))
    assert len(reasons) == 2 and len(list((tmp_path / "quarantine").iterdir())) == 4
    assert (tmp_path / "site" / "runs" / f"{genuine}.html").is_file()

    # the watchdog's view, rebuilt from the data branch as watchdog.yml does it
    db = tmp_path / "h.sqlite"
    lb = str(BIN / "lawbench")
    assert subprocess.run([lb, "history", "import", "--db", str(db), str(tmp_path / "data" / "runs")], env=env,
                          capture_output=True, timeout=300).returncode == 0
    stale = subprocess.run([lb, "history", "stale", "--db", str(db), "--profile", "cpu", "--profile", "h200", "--json"],
                           env=env, capture_output=True, text=True, timeout=300, encoding="utf-8")
    assert stale.returncode == 1 and {r["profile"]: r["stale"] for r in json.loads(stale.stdout)} == \
        {"cpu": False, "h200": True}
    runs = json.loads(subprocess.run([lb, "history", "--db", str(db), "--json"], env=env, capture_output=True,
                                     text=True, timeout=300, encoding="utf-8").stdout)
    assert [(r["run_id"], r["source"], r["binding"]["workflow_run_id"], r["binding"]["artifact_digest"]) for r in runs] \
        == [(genuine, "run", "5001", f"sha256:{digest}")]


NOX_KILLED_AT_ITS_TIMEOUT = '''import signal, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from _nightly_artifacts import RunRecord
out = Path(sys.argv[sys.argv.index("--out") + 1])
out.mkdir(parents=True, exist_ok=True)
def stop(signum, frame):  # what `lawbench run` does on SIGTERM: an interrupted record, exit 143
    rec = RunRecord.new("cpu", profile_matches=True, strict=True)
    rec.finish([], interrupted="SIGTERM")
    (out / "run.json").write_text(rec.model_dump_json())
    sys.exit(143)
signal.signal(signal.SIGTERM, stop)
(out.parent / "running").write_text("")
time.sleep(120)
'''


def test_a_job_killed_at_its_timeout_still_binds_its_interrupted_record(tmp_path):
    """Issue 30 item 9: GitHub ends a job at its timeout with SIGTERM to the whole process group.
    The runner script outlives its nox (a trap), binds the interrupted record lawbench wrote, runs
    no later profile and exits 143; before the trap it died first and collect refused the record."""
    import signal
    import time

    job = tmp_path / "job"
    job.mkdir()
    (job / "scripts").symlink_to(ROOT / "scripts")
    (tmp_path / "standin.py").write_text(NOX_KILLED_AT_ITS_TIMEOUT, encoding="utf-8")
    nox = tmp_path / "nox"
    nox.write_text(f'#!/bin/bash\nexec "{sys.executable}" "{tmp_path / "standin.py"}" "{ROOT / "tests"}" "$@"\n', encoding="utf-8")
    nox.chmod(0o755)
    env = dict(_env(tmp_path), NOX=str(nox), GITHUB_RUN_ID="5001", GITHUB_RUN_ATTEMPT="1", GITHUB_JOB="anchors",
               LAWBENCH_BOX="cpu", GITHUB_SHA="a" * 40, GITHUB_REPOSITORY="o/r")
    proc = subprocess.Popen(["bash", "scripts/nightly_runner.sh", "cpu:nightly:30 cpu-ddr4:nightly:60", "data", "out"],
                            cwd=job, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, encoding="utf-8")
    deadline = time.time() + 60
    while not (job / "out" / "running").exists():
        assert proc.poll() is None and time.time() < deadline, proc.communicate()
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, out + err
    raw = (job / "out" / "cpu" / "run.json").read_bytes()
    assert json.loads(raw)["interrupted"] == "SIGTERM"
    binding = json.loads((job / "out" / "cpu" / "binding.json").read_text(encoding="utf-8"))
    assert binding["record_sha256"] == hashlib.sha256(raw).hexdigest() and binding["profile"] == "cpu"
    assert not (job / "out" / "cpu-ddr4").exists() and "stopped by SIGTERM after cpu" in err
