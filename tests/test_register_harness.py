"""The register-harness driver on a real stand-in: a git repository made here, holding a small
numpy harness of ours at a commit (it rotates a low-rank matrix, quantizes it, prints a line in the
register's format), run as a real subprocess through core's evaluate: PASS on the right value,
FAIL on a wrong one, refused when the commit, a tracked file or the script's hash differ, ended at
its timeout with an honest record, and a clear ERROR when it exits non-zero or prints no line."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from lawbench.core.models import Verdict
from lawbench.testing import evaluate_anchor, make_anchor, make_profile
from lawbench import Law

# The stand-in harness: the register's shape (an env switch picks the arm, a sibling module of the
# checkout is imported, data are read through a hard-coded relative path and an env folder, a
# tracked results file is appended to, one line carries the figure).
SCRIPT = textwrap.dedent('''\
    import os, sys, time
    import numpy as np
    from probe.codec import quantize

    mode = os.environ.get("PROBE_MODE", "ok")
    counter = os.path.join(os.environ["PROBE_DIR"], "calls")
    calls = int(open(counter).read()) + 1 if os.path.exists(counter) else 1
    open(counter, "w").write(str(calls))
    open(os.path.join(os.environ["PROBE_DIR"], "pid"), "w").write(str(os.getpid()))
    if mode == "hang" or (mode == "hang-second" and calls >= 2):
        time.sleep(600)
    if mode == "crash":
        print("Traceback: CUDA error: out of memory", file=sys.stderr)
        sys.exit(3)
    if mode == "silent":
        print("layer 0/4 (1s)")
        sys.exit(0)
    rank = int(open("D:/probe-data/rank.txt").read())       # a hard-coded Windows path, relative here
    rot = os.environ.get("PROBE_ROT", "identity")
    rng = np.random.default_rng(0)
    W = rng.standard_normal((64, rank)) @ rng.standard_normal((rank, 64))
    R = np.linalg.qr(np.random.default_rng(7).standard_normal((64, 64)))[0] if rot == "orth" else np.eye(64)
    Wq = quantize(W @ R.T) @ R
    err = float(((W - Wq) ** 2).sum() / (W ** 2).sum())
    line = f"PROBE [rot={rot}, 2bit]: relmse={err:.6f} | rank={rank}"
    print("layer 3/4 (2s)")
    print("\\n" + line, flush=True)
    open(os.path.join(os.path.dirname(__file__), "data", "results.txt"), "a").write(line + "\\n")
''')
CODEC = textwrap.dedent('''\
    import numpy as np

    def quantize(W, bits=2):
        q = 2 ** (bits - 1)
        s = np.abs(W).max(axis=1, keepdims=True) / q
        return np.clip(np.round(W / s), -q, q - 1) * s
''')


def expected(rot: str, rank: int = 4) -> float:
    """The stand-in's figure, computed here on its own (the anchor's 'published' value)."""
    rng = np.random.default_rng(0)
    W = rng.standard_normal((64, rank)) @ rng.standard_normal((rank, 64))
    R = np.linalg.qr(np.random.default_rng(7).standard_normal((64, 64)))[0] if rot == "orth" else np.eye(64)
    X = W @ R.T
    s = np.abs(X).max(axis=1, keepdims=True) / 2
    Wq = (np.clip(np.round(X / s), -2, 1) * s) @ R
    return float(f"{float(((W - Wq) ** 2).sum() / (W ** 2).sum()):.6f}")


def git(root: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> dict:
    root = tmp_path / "probe-repo"
    (root / "probe" / "data").mkdir(parents=True)
    (root / "probe" / "__init__.py").write_text("")
    (root / "probe" / "codec.py").write_text(CODEC)
    (root / "probe" / "rotprobe.py").write_text(SCRIPT)
    (root / "probe" / "data" / "results.txt").write_text("")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "stand-in harness")
    data = tmp_path / "data"
    data.mkdir()
    (data / "rank.txt").write_text("4")
    state = tmp_path / "state"
    state.mkdir()
    return {"root": root, "commit": git(root, "rev-parse", "HEAD"), "data": data, "state": state,
            "sha": hashlib.sha256((root / "probe" / "rotprobe.py").read_bytes()).hexdigest()}


def profile(repo: dict, **over):
    entry = {"repository": "lawbench/probe", "checkout": str(repo["root"]), "python": sys.executable,
             "folders": {"data": str(repo["data"]), "state": str(repo["state"])}, **over}
    return make_profile("probe-box", harness_checkouts=[entry])


def harness(repo: dict, **over) -> dict:
    h = {"repository": "lawbench/probe", "commit": repo["commit"], "script": "probe/rotprobe.py",
         "script_sha256": repo["sha"], "env": {"PROBE_ROT": "orth"},
         "env_folders": {"PROBE_DIR": "state"}, "links": {"D:/probe-data": "data"},
         "writes": ["probe/data/results.txt"],
         "line": r"^PROBE \[rot=\w+, 2bit\]: relmse=(?P<relmse>\d+\.\d+) ", "group": "relmse", "timeout_s": 60}
    h.update(over)
    return h


def anchor(repo: dict, value: float, band: dict, budget_s: float = 600, **hover):
    return make_anchor(id="probe.harness", law="toy", kind="measurement", quantity="relmse", unit="1",
                       value=value, band=band, noise="deterministic", harness=harness(repo, **hover),
                       budget={"min_samples": 3, "max_samples": 3, "batch": 3, "timeout_s": budget_s})


class NotMine(Law):
    """Core runs a harness anchor itself: the law's own sampler must never be asked."""

    name = "toy"

    def sampler(self, anchor, profile, resources=None):
        raise AssertionError("a harness anchor reached the law's sampler")


def run(a, prof, **kw):
    return evaluate_anchor(a, NotMine(), profile=prof, **kw)


def test_right_value_passes_wrong_value_fails(repo):
    want = expected("orth")
    good = run(anchor(repo, want, {"abs": 5e-6}), profile(repo))
    assert good.verdict is Verdict.PASS, good.reason
    assert good.measured == pytest.approx(want) and len(good.measurement.samples) == 3
    s = good.measurement.samples[0]
    assert s.raw["runs"]["run"]["commit"] == repo["commit"]
    assert s.raw["runs"]["run"]["line"].startswith("PROBE [rot=orth, 2bit]")
    assert good.measurement.protocol["engine"] == "register-harness"
    # the script ran three times, each a fresh process, and its tracked results file is the only change
    assert (repo["state"] / "calls").read_text() == "3"
    assert git(repo["root"], "diff", "--name-only", "HEAD") == "probe/data/results.txt"
    bad = run(anchor(repo, want * 1.5, {"abs": 5e-6}), profile(repo))
    assert bad.verdict is Verdict.FAIL and "outside the band" in bad.reason


def test_a_figure_over_several_runs(repo):
    # the rotation's cost on a low-rank matrix: orth over identity, one round of both per sample
    want = expected("orth") / expected("identity")
    a = anchor(repo, want, {"rel": 1e-4}, env={}, runs={"orth": {"env": {"PROBE_ROT": "orth"}},
                                                        "identity": {"env": {"PROBE_ROT": "identity"}}},
               figure="orth / identity")
    r = run(a, profile(repo))
    assert r.verdict is Verdict.PASS, r.reason
    s = r.measurement.samples[1]
    assert set(s.raw["runs"]) == {"orth", "identity"} and s.predecessor == "identity"
    wrong = anchor(repo, want, {"rel": 1e-4}, env={}, runs={"orth": {"env": {"PROBE_ROT": "identity"}},
                                                            "identity": {"env": {"PROBE_ROT": "orth"}}},
                   figure="orth / identity")
    assert run(wrong, profile(repo)).verdict is Verdict.FAIL


def test_refused_when_the_commit_differs(repo):
    (repo["root"] / "probe" / "NOTES.md").write_text("later\n")
    git(repo["root"], "add", "-A")
    git(repo["root"], "commit", "-qm", "a later commit")
    r = run(anchor(repo, expected("orth"), {"abs": 5e-6}), profile(repo))
    assert r.verdict is Verdict.ERROR
    assert "anchor probe.harness" in r.reason and "field harness.commit" in r.reason and "refused" in r.reason
    assert not (repo["state"] / "calls").exists()  # nothing ran


def test_refused_when_the_script_hash_differs(repo):
    r = run(anchor(repo, expected("orth"), {"abs": 5e-6}, script_sha256="0" * 64), profile(repo))
    assert r.verdict is Verdict.ERROR and "field harness.script_sha256" in r.reason, r.reason
    assert not (repo["state"] / "calls").exists()


def test_refused_when_a_tracked_file_changed(repo):
    # the imported codec is code the script runs: a local edit is not the published commit
    codec = repo["root"] / "probe" / "codec.py"
    codec.write_text(codec.read_text().replace("bits=2", "bits=3"))
    r = run(anchor(repo, expected("orth"), {"abs": 5e-6}), profile(repo))
    assert r.verdict is Verdict.ERROR and "field harness.writes" in r.reason and "probe/codec.py" in r.reason
    assert not (repo["state"] / "calls").exists()


def test_a_located_refusal_names_the_file(repo):
    from lawbench.core.run.evaluate import RunPolicy, evaluate

    prof = profile(repo)
    policy = RunPolicy(profile=prof, profiles={prof.id: prof}, on_own_runner=True)
    a = anchor(repo, expected("orth"), {"abs": 5e-6}, script_sha256="1" * 64)
    r = evaluate(a, NotMine(), policy, file="anchors/law1/gtx1060-harness.toml")
    assert r.reason.startswith("anchors/law1/gtx1060-harness.toml: anchor probe.harness: field harness.script_sha256")


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_hung_script_is_ended_at_its_timeout_and_the_record_keeps_what_finished(repo):
    a = anchor(repo, expected("orth"), {"abs": 5e-6}, env={"PROBE_ROT": "orth", "PROBE_MODE": "hang-second"},
               timeout_s=3)
    t0 = time.monotonic()
    r = run(a, profile(repo))
    assert time.monotonic() - t0 < 30
    assert r.verdict is Verdict.ERROR
    assert "did not finish within 3 s and was killed" in r.reason
    assert [s.value for s in r.measurement.samples] == [pytest.approx(expected("orth"))]  # round 1 kept
    assert _gone(int((repo["state"] / "pid").read_text()))


def test_a_non_zero_exit_is_a_clear_error(repo):
    r = run(anchor(repo, 0.1, {"abs": 0.1}, env={"PROBE_MODE": "crash"}), profile(repo))
    assert r.verdict is Verdict.ERROR
    assert "exited with code 3: Traceback: CUDA error: out of memory" in r.reason
    assert "probe/rotprobe.py" in r.reason


def test_no_matching_line_is_a_clear_error(repo):
    r = run(anchor(repo, 0.1, {"abs": 0.1}, env={"PROBE_MODE": "silent"}), profile(repo))
    assert r.verdict is Verdict.ERROR
    assert "exited 0 but printed no line matching harness.line" in r.reason
    assert "layer 0/4" in (r.measurement.log or "")


def test_a_missing_checkout_is_a_skip_here_and_a_failure_on_its_runner(repo):
    a = anchor(repo, expected("orth"), {"abs": 5e-6})
    prof = profile(repo, checkout=str(repo["root"]) + "-absent")
    here = run(a, prof, on_own_runner=False)
    assert here.verdict is Verdict.SKIP
    own = run(a, prof, on_own_runner=True)
    assert own.verdict is Verdict.FAIL and "no checkout of lawbench/probe" in own.reason
    none = run(a, make_profile("probe-box"), on_own_runner=True)
    assert none.verdict is Verdict.FAIL and "harness_checkouts" in none.reason
    nofolder = run(a, profile(repo, folders={"state": str(repo["state"])}), on_own_runner=True)
    assert nofolder.verdict is Verdict.FAIL and "no folder 'data'" in nofolder.reason


@pytest.mark.parametrize("over, words", [
    ({"commit": "abc123"}, "full 40 lower-case hex digits"),
    ({"script_sha256": "xyz"}, "64 lower-case hex digits"),
    ({"group": "ppl"}, "'ppl' is not a named group of line"),
    ({"line": "(unclosed"}, "not a regular expression"),
    ({"env": {"PYTHONPATH": "/tmp"}}, "PYTHONPATH is set by lawbench"),
    ({"links": {"../outside": "data"}}, "relative path"),
    ({"script": "/abs/script.py"}, "relative path"),
    ({"runs": {"a": {}, "b": {}}, "figure": "a - c"}, "['c'] are not runs"),
    ({"runs": {"a": {}, "b": {}}, "figure": "a"}, "['b'] are run but not used"),
    ({"runs": {"a": {}}, "figure": "__import__('os')"}, "only + - * /"),
    ({"runs": {"a": {"lines": "x"}}, "figure": "a"}, "unknown field(s) ['lines']"),
    ({"figure": "run * 2"}, "only a harness with runs"),
])
def test_a_bad_harness_table_names_the_field(repo, over, words):
    with pytest.raises(ValidationError) as exc:
        anchor(repo, 0.1, {"abs": 0.1}, **over)
    assert words in str(exc.value)


def test_a_harness_measures_one_figure(repo):
    with pytest.raises(ValidationError, match="kind = \\\\?\"measurement\\\\?\""):
        make_anchor(kind="ratio", value=1.0, band={"rel": 0.1}, arms={"a": {}, "b": {}}, harness=harness(repo))
    with pytest.raises(ValidationError, match="no case or arms"):
        make_anchor(kind="measurement", value=1.0, band={"rel": 0.1}, case={"model": "x"}, harness=harness(repo))


def test_check_names_a_profile_without_the_checkout_or_folder(repo):
    from types import SimpleNamespace

    from lawbench.core.models.harness import profile_problems

    a = make_anchor(id="probe.harness", law="toy", kind="measurement", quantity="relmse", unit="1", value=0.1,
                    band={"abs": 0.1}, harness=harness(repo), profiles=["probe-box"])
    anchors = SimpleNamespace(anchors=[SimpleNamespace(file="anchors/x.toml", anchor=a)])
    assert profile_problems(anchors, {"probe-box": profile(repo)}) == []
    bare = profile_problems(anchors, {"probe-box": make_profile("probe-box")})
    assert bare == ["anchors/x.toml: anchor probe.harness: field harness.repository: profile probe-box names no "
                    "checkout of lawbench/probe (hardware_profiles/probe-box.toml, harness_checkouts)"]
    short = profile_problems(anchors, {"probe-box": profile(repo, folders={"state": "/tmp"})})
    assert len(short) == 1 and "no folder 'data'" in short[0]
    unbound = a.model_copy(update={"profiles": []})
    anchors.anchors[0].anchor = unbound
    assert "field profiles" in profile_problems(anchors, {"probe-box": profile(repo)})[0]


def test_the_shipped_harness_anchors_pin_one_hash_per_script_and_skip_here():
    # Off their runner they SKIP (the gtx1060's checkout and models are not here); two anchors
    # running one script at one commit must pin the same SHA-256, or one of them is wrong.
    from lawbench.core.claims.loading import load_all
    from lawbench.core.hardware.profiles import plugin_profiles
    from lawbench.core.laws.registry import get_registry

    reg = get_registry()
    profiles = plugin_profiles(reg, strict=True)
    anchors = [la.anchor for la in load_all(reg, profiles=profiles.keys()).anchors if la.anchor.harness]
    assert len(anchors) >= 5
    pins: dict[tuple, set] = {}
    for a in anchors:
        assert a.profiles == ["gtx1060"] and a.kind == "measurement"
        for run in a.harness.resolved().values():
            pins.setdefault((run.repository, run.commit, run.script), set()).add(run.script_sha256)
        here = evaluate_anchor(a, reg.law(a.law), profile=profiles["gtx1060"], on_own_runner=False)
        assert here.verdict is Verdict.SKIP, (a.id, here.reason)
        if not Path(os.path.expanduser("~/quantprobe")).exists():  # as on this box: the runner's job fails
            own = evaluate_anchor(a, reg.law(a.law), profile=profiles["gtx1060"], on_own_runner=True, strict=True)
            assert own.verdict is Verdict.FAIL and "no checkout of FedericoTs/quantprobe" in own.reason, own.reason
    assert all(len(shas) == 1 for shas in pins.values()), pins


def test_an_interrupt_ends_the_script_and_keeps_the_finished_round(repo):
    # lawbench stopped (SIGINT) while the script runs: its process group is ended, the round that
    # finished stays in the record, and the error says it was an interrupt, not a fault of the script
    import signal
    import threading

    a = anchor(repo, expected("orth"), {"abs": 5e-6}, env={"PROBE_ROT": "orth", "PROBE_MODE": "hang-second"})
    calls = repo["state"] / "calls"

    def interrupt_second_run():
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if calls.exists() and calls.read_text() == "2":
                time.sleep(0.3)
                os.kill(os.getpid(), signal.SIGINT)
                return
            time.sleep(0.05)

    t = threading.Thread(target=interrupt_second_run)
    t.start()
    r = run(a, profile(repo))
    t.join()
    assert r.verdict is Verdict.ERROR and "was interrupted by SIGINT; its process group was ended" in r.reason
    assert len(r.measurement.samples) == 1
    assert _gone(int((repo["state"] / "pid").read_text()))


@pytest.mark.parametrize("stray", ["numpy.py", "probe/numpy.py"])
def test_refused_when_an_untracked_module_would_shadow_an_import(repo, stray):
    # the checkout's root is first on PYTHONPATH and the script's folder is sys.path[0]: an untracked
    # numpy.py in either would run instead of numpy, though every tracked file is the commit's
    (repo["root"] / stray).write_text("raise SystemExit('shadowed')\n")
    r = run(anchor(repo, expected("orth"), {"abs": 5e-6}), profile(repo))
    assert r.verdict is Verdict.ERROR and "field harness.script" in r.reason and stray in r.reason, r.reason
    assert not (repo["state"] / "calls").exists()
    (repo["root"] / stray).unlink()
    (repo["root"] / "notes.txt").write_text("an untracked text file is not code\n")
    assert run(anchor(repo, expected("orth"), {"abs": 5e-6}), profile(repo)).verdict is Verdict.PASS


def test_a_folder_beside_the_runners_model_files(repo, monkeypatch):
    # "${LAWBENCH_MODEL_DIR}/x", as the catalogue's source.path: unset, the anchor cannot run here
    # and says which variable to set
    prof = profile(repo, folders={"data": "${LAWBENCH_MODEL_DIR}/data", "state": str(repo["state"])})
    monkeypatch.delenv("LAWBENCH_MODEL_DIR", raising=False)
    r = run(anchor(repo, expected("orth"), {"abs": 5e-6}), prof, on_own_runner=True)
    assert r.verdict is Verdict.FAIL and "needs $LAWBENCH_MODEL_DIR" in r.reason
    monkeypatch.setenv("LAWBENCH_MODEL_DIR", str(repo["data"].parent))
    assert run(anchor(repo, expected("orth"), {"abs": 5e-6}), prof).verdict is Verdict.PASS
    with pytest.raises(ValidationError, match="a runner's path is absolute"):
        profile(repo, checkout="relative/dir")


def test_the_budget_holds_every_round_at_its_timeouts(repo):
    # three rounds of two 60-s runs may take 360 s: a 300-s budget would let `lawbench plan` under-price it
    with pytest.raises(ValidationError, match=r"budget.timeout_s: 300 s cannot hold 3 rounds .* \(360 s\)"):
        anchor(repo, 0.1, {"abs": 0.1}, budget_s=300, runs={"a": {}, "b": {}}, figure="a - b")
