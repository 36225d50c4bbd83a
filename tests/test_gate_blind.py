"""A blind night is not a first night (issue 30, item 6): a baseline that is missing, unreadable,
holds no record, holds only refused records or only another profile's makes the night red with
"cannot judge: …", even when every absolute verdict is green; a first night is declared
(`--first-night`) only where the data branch's fetch proved there is no runs/<profile>/ at all.

Through the real command line (`lawbench run --gate baseline`, `lawbench baseline show`), the real
scripts (scripts/nightly_data.sh against real git remotes, scripts/nightly_runner.sh) and real
prediction anchors of Law 4 (L-33 and the expert ceiling: green here, one an open finding), which
need no engine."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _nightly_artifacts import bound_artifact, record

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
GREEN = ["--profile", "cpu", "-k", "law4.l33 or expert-ceiling", "--no-history"]  # predictions: all green (one open finding)

pytestmark = pytest.mark.skipif(shutil.which("bash") is None or shutil.which("git") is None,
                                reason="the job logic is bash and git")


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAWBENCH_", "GITHUB_", "GIT_"))}
    env.update(PATH=f"{BIN}:{env.get('PATH', '/usr/bin:/bin')}", LAWBENCH_CACHE=str(tmp_path / "cache"),
               GITHUB_STEP_SUMMARY=str(tmp_path / "summary.md"))
    return env


def _run(tmp_path: Path, out: str, *gate: str) -> tuple[subprocess.CompletedProcess, dict]:
    done = subprocess.run([str(BIN / "lawbench"), "run", *GREEN, "--out", out, "--gate", "baseline", *gate],
                          cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True, timeout=300, encoding="utf-8")
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    rec = tmp_path / out / "run.json"
    assert rec.is_file(), done.stdout[-2000:] + done.stderr[-2000:]
    return done, json.loads(rec.read_text(encoding="utf-8"))


def _filed(tmp_path: Path, profile: str) -> Path:
    """The data branch's runs/<profile>/ as the collect step files it: a bound runner's record."""
    box = {"cpu": "cpu", "gtx1060": "ref-desktop"}[profile]
    bound_artifact(tmp_path / f"tonight-{profile}", box, "901", {profile: record(profile)})
    done = subprocess.run([str(BIN / "lawbench"), "history", "import", "--db", str(tmp_path / f"h-{profile}.sqlite"),
                           "--require-binding", "--file-into", str(tmp_path / "data"), str(tmp_path / f"tonight-{profile}")],
                          cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True, timeout=120, encoding="utf-8")
    assert done.returncode == 0, done.stdout + done.stderr
    return tmp_path / "data" / "runs" / profile


def _blind(done: subprocess.CompletedProcess, rec: dict) -> str:
    gate = rec["gate"]
    assert (done.returncode, gate["verdict"], gate["baseline_state"]) == (1, "red", "cannot-judge"), gate
    assert all(r["verdict"] in ("PASS", "FAIL") for r in rec["results"]) and rec["counts"]["PASS"] >= 1
    [blind] = [n for n in gate["news"] if n["kind"] == "cannot-judge"]
    assert blind["anchor_id"] == "(gate)" and blind["why"].startswith("cannot judge: ")
    assert not gate["new_baseline"] and "starts its baseline" not in done.stdout
    return blind["why"]


def test_a_declared_first_night_is_green_and_says_so(tmp_path):
    done, rec = _run(tmp_path, "first", "--first-night")
    gate = rec["gate"]
    assert (done.returncode, gate["verdict"], gate["baseline_state"]) == (0, "green", "first-night"), gate
    assert "declared with --first-night" in gate["new_baseline"]
    show = subprocess.run([str(BIN / "lawbench"), "baseline", "show", "first/run.json"], cwd=tmp_path,
                          env=_env(tmp_path), capture_output=True, text=True, timeout=120, encoding="utf-8")
    assert "**First night:** no run of profile cpu on the data branch" in show.stdout, show.stdout


def test_a_missing_baseline_folder_is_cannot_judge_not_a_first_night(tmp_path):
    why = _blind(*_run(tmp_path, "blind", "--baseline", "data/runs/cpu"))
    assert "data/runs/cpu does not exist" in why and "no first night was declared" in why


def test_an_empty_baseline_folder_is_cannot_judge(tmp_path):
    (tmp_path / "data" / "runs" / "cpu").mkdir(parents=True)
    assert "holds no run record" in _blind(*_run(tmp_path, "blind", "--baseline", "data/runs/cpu"))


def test_an_entirely_corrupt_baseline_is_cannot_judge(tmp_path):
    base = tmp_path / "data" / "runs" / "cpu"
    base.mkdir(parents=True)
    (base / "a.json").write_text('{"run_id": "a", "started": ', encoding="utf-8")
    (base / "b.json").write_text("not json at all", encoding="utf-8")
    why = _blind(*_run(tmp_path, "blind", "--baseline", "data/runs/cpu"))
    assert "every record in the baseline folder data/runs/cpu was refused (2;" in why


def test_an_unreadable_history_file_is_cannot_judge(tmp_path):
    (tmp_path / "history.sqlite").write_bytes(b"this is not an SQLite file" * 100)
    why = _blind(*_run(tmp_path, "blind", "--baseline", "history.sqlite"))
    assert "the history history.sqlite cannot be read" in why


def test_another_profiles_runs_are_cannot_judge(tmp_path):
    _filed(tmp_path, "gtx1060")
    why = _blind(*_run(tmp_path, "blind", "--baseline", "data/runs/gtx1060"))
    assert "holds only runs of another profile: gtx1060 (1), none of cpu" in why


def test_the_profiles_own_bound_runs_are_judged_and_first_night_contradicting_them_is_not(tmp_path):
    """The control: the same folder layout holding this profile's bound night is judged (green);
    a first night declared beside a baseline that exists is a contradiction: cannot judge."""
    _filed(tmp_path, "cpu")
    done, rec = _run(tmp_path, "judged", "--baseline", "data/runs/cpu")
    gate = rec["gate"]
    assert (done.returncode, gate["verdict"], gate["baseline_state"]) == (0, "green", "judged"), gate
    # its one night is another machine's (a made-up record): judged, and it says so
    assert "tonight starts a new baseline (last accepted night" in gate["new_baseline"], gate
    why = _blind(*_run(tmp_path, "both", "--baseline", "data/runs/cpu", "--first-night"))
    assert "--first-night was declared, but the baseline data/runs/cpu exists" in why


def test_neither_baseline_nor_first_night_is_a_usage_error(tmp_path):
    done = subprocess.run([str(BIN / "lawbench"), "run", *GREEN, "--out", "x", "--gate", "baseline"], cwd=tmp_path,
                          env=_env(tmp_path), capture_output=True, text=True, timeout=120, encoding="utf-8")
    assert done.returncode == 2 and "--first-night" in done.stderr and "Traceback" not in done.stderr
    done = subprocess.run([str(BIN / "lawbench"), "run", *GREEN, "--out", "x", "--first-night"], cwd=tmp_path,
                          env=_env(tmp_path), capture_output=True, text=True, timeout=120, encoding="utf-8")
    assert done.returncode == 2 and "give --gate baseline too" in done.stderr


def test_a_forged_green_blind_night_is_refused_by_the_record_checks(tmp_path):
    """A record saying cannot-judge without the red news (or the news with a green verdict) does
    not validate: a blind night cannot be accepted as a baseline by editing its verdict."""
    from lawbench.core.errors import DataError
    from lawbench.core.record.checks import check_record
    from lawbench.core.record.reports import parse_record

    _run(tmp_path, "blind", "--baseline", "nothing-here")
    raw = json.loads((tmp_path / "blind" / "run.json").read_text(encoding="utf-8"))
    check_record(parse_record(json.dumps(raw).encode(), "blind"), "blind")  # as written: valid
    raw["gate"]["news"] = [n for n in raw["gate"]["news"] if n["kind"] != "cannot-judge"]
    raw["gate"]["verdict"], raw["exit_code"] = "green", 0
    with pytest.raises(DataError, match="baseline_state cannot-judge but the gate has no cannot-judge news"):
        check_record(parse_record(json.dumps(raw).encode(), "forged"), "forged")


# --------------------------------------------------------------------------- the job's scripts


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=60, encoding="utf-8")
    assert done.returncode == 0, done.stderr
    return done.stdout


def _data(tmp_path: Path, remote: str) -> str:
    done = subprocess.run(["bash", str(ROOT / "scripts" / "nightly_data.sh"), remote, "data"], cwd=tmp_path,
                          env=_env(tmp_path), capture_output=True, text=True, timeout=120, encoding="utf-8")
    assert done.returncode == 0, done.stdout + done.stderr
    return (tmp_path / "data.fetch").read_text(encoding="utf-8").strip()


def _job(tmp_path: Path) -> tuple[subprocess.CompletedProcess, dict]:
    nox = tmp_path / "nox"
    nox.write_text("#!/bin/bash\n" f'exec "{BIN}/lawbench" run "${{@:4}}"\n', encoding="utf-8")
    nox.chmod(0o755)
    shutil.rmtree(tmp_path / "out", ignore_errors=True)
    done = subprocess.run(["bash", str(ROOT / "scripts" / "nightly_runner.sh"), "cpu:quick:30", "data", "out",
                           "-k", "law4.l33 or expert-ceiling"], cwd=tmp_path, env=dict(_env(tmp_path), NOX=str(nox)),
                          capture_output=True, text=True, timeout=600, encoding="utf-8")
    assert "Traceback" not in done.stdout + done.stderr
    return done, json.loads((tmp_path / "out" / "cpu" / "run.json").read_text(encoding="utf-8"))


def test_only_a_fetch_that_succeeded_declares_a_first_night(tmp_path):
    """The job's two steps: scripts/nightly_data.sh fetches the data branch and says what the fetch
    proved in data.fetch; scripts/nightly_runner.sh passes --first-night only after a fetch that
    answered (no branch yet, or a branch with no runs/cpu/). A remote that cannot be reached used to
    read as "no data branch yet": now cpu's night is red, cannot judge, although every verdict is green."""
    origin = tmp_path / "origin.git"
    _git(tmp_path, "init", "-q", "--bare", str(origin))

    assert _data(tmp_path, str(origin)) == "no-branch"  # the remote answered: nothing was ever filed
    done, rec = _job(tmp_path)
    assert (done.returncode, rec["gate"]["verdict"], rec["gate"]["baseline_state"]) == (0, "green", "first-night"), \
        done.stdout[-2000:] + done.stderr[-2000:]
    assert "--first-night" in rec["argv"]

    state = _data(tmp_path, str(tmp_path / "no-such-remote.git"))  # a fetch that failed
    assert state.startswith("failed cannot ask") and not (tmp_path / "data" / "runs").exists()
    done, rec = _job(tmp_path)
    assert (done.returncode, rec["gate"]["verdict"], rec["gate"]["baseline_state"]) == (1, "red", "cannot-judge")
    assert "the data branch was not fetched (failed cannot ask" in done.stderr
    assert "--first-night" not in rec["argv"]

    seed = tmp_path / "seed"  # the branch exists and holds another profile's runs only: cpu's first night
    _git(tmp_path, "init", "-q", "-b", "lawbench-history", str(seed))
    (seed / "runs" / "gtx1060").mkdir(parents=True)
    (seed / "runs" / "gtx1060" / "x.json").write_text("{}", encoding="utf-8")
    _git(seed, "add", "runs")
    _git(seed, "commit", "-q", "-m", "night")
    _git(seed, "push", "-q", str(origin), "HEAD:lawbench-history")
    state = _data(tmp_path, str(origin))
    assert state == f"fetched {_git(seed, 'rev-parse', 'HEAD').strip()}" and (tmp_path / "data" / "runs").is_dir()
    done, rec = _job(tmp_path)
    assert (done.returncode, rec["gate"]["baseline_state"]) == (0, "first-night")

    (tmp_path / "data.fetch").unlink()  # no word from the fetch at all: nothing is proved
    done, rec = _job(tmp_path)
    assert (done.returncode, rec["gate"]["baseline_state"]) == (1, "cannot-judge")


def test_both_runner_jobs_fetch_the_data_branch_through_the_script_that_says_what_it_proved():
    """The workflow printed any fetch error as "no data branch yet"; its runner jobs now run
    scripts/nightly_data.sh into the very folder they hand the runner script."""
    import yaml

    nightly = yaml.safe_load((ROOT / ".github" / "workflows" / "nightly.yml").read_text(encoding="utf-8"))
    assert "no data branch yet" not in (ROOT / ".github" / "workflows" / "nightly.yml").read_text(encoding="utf-8")
    for name in ("anchors", "anchors-unfiled"):
        runs = [s.get("run", "") for s in nightly["jobs"][name]["steps"]]
        [fetch] = [i for i, r in enumerate(runs) if "scripts/nightly_data.sh" in r]
        [verify] = [i for i, r in enumerate(runs) if "scripts/nightly_runner.sh" in r]
        assert fetch < verify and runs[fetch].strip() == 'bash scripts/nightly_data.sh "$REPO" data'
        assert ' "$PLAN" data ' in runs[verify]


def _collect_data_step(tmp_path: Path, remote: str) -> subprocess.CompletedProcess:
    """collect.yml's data-branch step, its own text, run as the workflow runs it."""
    import yaml

    collect = yaml.safe_load((ROOT / ".github" / "workflows" / "collect.yml").read_text(encoding="utf-8"))
    [step] = [s for s in collect["jobs"]["collect"]["steps"] if "nightly_data.sh" in s.get("run", "")]
    shutil.rmtree(tmp_path / "data", ignore_errors=True)
    if not (tmp_path / "scripts").exists():
        (tmp_path / "scripts").symlink_to(ROOT / "scripts")
    return subprocess.run(["bash", "-e", "-c", step["run"]], cwd=tmp_path, env=dict(_env(tmp_path), REPO=remote),
                          capture_output=True, text=True, timeout=120, encoding="utf-8")


def test_the_collect_job_stops_on_a_failed_fetch_instead_of_starting_the_branch_afresh(tmp_path):
    """collect.yml took any fetch error for "no branch yet" too: it started an orphan branch and
    rebuilt the history and the report from tonight's records alone. Now it stops, red."""
    done = _collect_data_step(tmp_path, str(tmp_path / "no-such-remote.git"))
    assert done.returncode == 1 and "::error::the data branch could not be fetched: failed" in done.stdout
    origin = tmp_path / "origin.git"
    _git(tmp_path, "init", "-q", "--bare", str(origin))
    done = _collect_data_step(tmp_path, str(origin))  # nothing filed yet: the branch starts here
    assert done.returncode == 0, done.stdout + done.stderr
    assert _git(tmp_path / "data", "symbolic-ref", "HEAD").strip() == "refs/heads/lawbench-history"
    (tmp_path / "data" / "runs").mkdir()
    (tmp_path / "data" / "runs" / "a.json").write_text("{}", encoding="utf-8")
    _git(tmp_path / "data", "add", "runs")
    _git(tmp_path / "data", "commit", "-q", "-m", "night 1")
    _git(tmp_path / "data", "push", "-q", "origin", "lawbench-history")
    done = _collect_data_step(tmp_path, str(origin))  # the next hour: the branch, checked out to file into
    assert done.returncode == 0 and (tmp_path / "data" / "runs" / "a.json").is_file(), done.stdout + done.stderr
    assert _git(tmp_path / "data", "symbolic-ref", "HEAD").strip() == "refs/heads/lawbench-history"


def test_a_gate_that_fails_is_cannot_judge_and_its_record_still_validates():
    """The gate's own failure (here: a history that cannot be queried) is a blind night too: red,
    said, and a record the checks accept; nobody can acknowledge it away."""
    from pydantic import ValidationError

    from lawbench.core.history.gate_inputs import GateSetup
    from lawbench.core.models.gate import Acknowledgement
    from lawbench.core.record.checks import check_record
    from lawbench.core.record.reports import RunRecord

    rec = RunRecord.new("cpu", profile_matches=True, strict=True, started="2026-12-05T02:17:00+00:00")
    rec.finish([], gate=GateSetup(history=object(), acks=None).judge)
    assert (rec.gate.verdict, rec.gate.baseline_state, rec.exit_code) == ("red", "cannot-judge", 1)
    assert rec.gate.news[0].why.startswith("cannot judge: the gate failed: AttributeError")
    check_record(rec, "in memory")
    with pytest.raises(ValidationError, match="'cannot-judge' cannot be acknowledged"):
        Acknowledgement(anchor="a", kind="cannot-judge", why="w", claim="c", accepted_by="x", until="2099-01-01")
