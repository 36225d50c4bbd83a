"""`lawbench census run`, for real: the console script runs the stand-in (tests/standin) as a
subprocess, counts its labels, and exits 0 / 1 / 2 by the contract's rules."""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import standin
from _engine_fixtures import alive, wait_for

_SCRIPT = Path(sys.executable).with_name("lawbench")
LAWBENCH = [str(_SCRIPT)] if _SCRIPT.is_file() else [sys.executable, "-m", "lawbench.core.commands.main"]
DEFAULT = "minfer.r54.census.default"
FALLBACK = "in-kernel-expand(fallback!)"


@pytest.fixture
def env(tmp_path) -> dict:
    """This environment without any minfer or stand-in variable a developer may have exported."""
    e = {k: v for k, v in os.environ.items() if not k.startswith(("MINFER_", "LAWBENCH_MINFER"))}
    e["LAWBENCH_CACHE"] = str(tmp_path / "cache")
    return e


def census(args: list[str], env: dict, cwd: Path, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([*LAWBENCH, "census", "run", *args], env={**env, **extra}, cwd=cwd,
                          capture_output=True, text=True, timeout=300, encoding="utf-8")


def json_of(p: subprocess.CompletedProcess) -> dict:
    return json.loads(p.stdout)


def one_line_exit_2(p: subprocess.CompletedProcess) -> str:
    assert p.returncode == 2, p.stdout + p.stderr
    assert "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lawbench: error: "), p.stderr
    return lines[0]


# ------------------------------------------------------------------ PASS and planted FAIL

def test_an_anchor_passes_on_the_stand_in(env, tmp_path):
    p = census(["--anchor", DEFAULT, "--", *standin.argv()], env, tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "PASS: every expectation holds" in p.stdout
    assert "engine revision: r54" in p.stdout  # --anchor asks the probe: the anchor is pinned to r54..r56
    row = next(line for line in p.stdout.splitlines() if "W_exp-cp.async" in line)
    assert "27" in row and "exactly 27" in row and "ok" in row


def test_the_planted_map_key_fault_fails_naming_label_and_counts_while_greedy_holds(env, tmp_path):
    clean = census(["--anchor", DEFAULT, "--json", "--", *standin.argv()], env, tmp_path)
    assert clean.returncode == 0, clean.stderr
    args = ["--anchor", DEFAULT, "--", *standin.argv()]
    planted = census(args, env, tmp_path, MINFER_STANDIN_FAULT="wrong-map-key")
    assert planted.returncode == 1, planted.stdout + planted.stderr
    assert "FAIL W_exp-cp.async: counted 0, expected exactly 27" in planted.stdout
    assert f"FAIL {FALLBACK}: counted 27, must never appear" in planted.stdout
    as_json = census(["--json", *args], env, tmp_path, MINFER_STANDIN_FAULT="wrong-map-key")
    assert as_json.returncode == 1
    got, want = json_of(as_json), json_of(clean)
    assert got["verdict"] == "FAIL" and want["verdict"] == "PASS"
    assert got["counts"][FALLBACK] == 27 and got["problems"][0] == "W_exp-cp.async: counted 0, expected exactly 27"
    assert got["greedy_sha256"] == want["greedy_sha256"]  # the output did not move: only the census saw it


def test_flags_give_the_expectations(env, tmp_path):
    args = ["--exact", "in-kernel-expand(exp=off)=27", "--forbid", FALLBACK, "--", *standin.argv()]
    p = census(args, env, tmp_path, MINFER_MMQ_Q6K_EXP="0")
    assert p.returncode == 0, p.stdout + p.stderr
    p = census(args, env, tmp_path, MINFER_MMQ_Q6K_EXP="0", MINFER_STANDIN_FAULT="exp-ignored")
    assert p.returncode == 1 and "FAIL in-kernel-expand(exp=off): counted 0, expected exactly 27" in p.stdout
    loose = ["--minimum", "W_exp-cp.async=20", "--", *standin.argv()]
    assert census(loose, env, tmp_path, MINFER_STANDIN_FAULT="alloc-fail").returncode == 0  # 26 >= 20
    p = census(["--minimum", "W_exp-cp.async=27", *loose[2:]], env, tmp_path, MINFER_STANDIN_FAULT="alloc-fail")
    assert p.returncode == 1 and "FAIL W_exp-cp.async: counted 26, expected at least 27" in p.stdout
    capped = ["--maximum", f"{FALLBACK}=26", "--", *standin.argv()]
    assert census(capped, env, tmp_path).returncode == 0  # the fallback never ran: 0 <= 26
    p = census(capped, env, tmp_path, MINFER_STANDIN_FAULT="wrong-map-key")
    assert p.returncode == 1 and f"FAIL {FALLBACK}: counted 27, expected at most 26" in p.stdout


def test_a_command_that_prints_no_label_is_void_not_a_pass(env, tmp_path):
    """--maximum / --forbid hold for a command that never spoke the contract: the census could
    not look, so the verdict is VOID (exit 1), never PASS."""
    p = census(["--maximum", "W_exp-cp.async=1", "--", sys.executable, "-c", "pass"], env, tmp_path)
    assert p.returncode == 1 and "PASS" not in p.stdout, p.stdout
    assert "VOID: the command printed no B-path label at all, so no expectation could be checked" in p.stdout
    assert "the command printed no B-path label at all; does it speak" in p.stderr
    p = census(["--json", "--forbid", FALLBACK, "--", sys.executable, "-c", "pass"], env, tmp_path)
    assert p.returncode == 1 and json_of(p)["verdict"] == "VOID"


def test_without_expectations_it_counts_only(env, tmp_path):
    p = census(["--json", "--", *standin.argv()], env, tmp_path, MINFER_STANDIN_FAULT="wrong-map-key")
    assert p.returncode == 0, p.stderr
    out = json_of(p)
    assert out["verdict"] == "COUNTED" and out["counts"][FALLBACK] == 27 and out["expectations"] is None
    assert out["env"] == {"MINFER_MMQ_RAW_NB_DEBUG": "1"} and out["prefill_tok_s"] == 3020.7


def test_an_anchor_brings_its_environment(env, tmp_path):
    # the exp-off anchor sets EXP=0 itself; the default anchor unsets a stray export on the runner
    p = census(["--anchor", "minfer.r54.census.exp-off", "--", *standin.argv()], env, tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    p = census(["--anchor", DEFAULT, "--", *standin.argv()], env, tmp_path, MINFER_MMQ_Q6K_EXP="0")
    assert p.returncode == 0, p.stdout + p.stderr


def test_an_engine_outside_the_anchors_revisions_is_refused_before_the_pass(env, tmp_path):
    p = census(["--anchor", DEFAULT, "--", *standin.argv()], env, tmp_path, MINFER_STANDIN_REVISION="r56")
    line = one_line_exit_2(p)
    assert "is revision r56, outside this anchor's case.revisions (r54 <= revision < r56)" in line
    assert "nothing was run" in line
    assert census(["--", *standin.argv()], env, tmp_path, MINFER_STANDIN_REVISION="r56").returncode == 0


def test_a_failing_command_is_exit_1_with_its_log(env, tmp_path):
    p = census(["--", *standin.argv()], env, tmp_path, MINFER_STANDIN_FAULT="crash")
    assert p.returncode == 1 and "exited with status 3" in p.stderr and "planted fault crash" in p.stderr
    p = census(["--timeout", "1", "--", *standin.argv()], env, tmp_path, MINFER_STANDIN_FAULT="hang")
    assert p.returncode == 1 and "did not finish within 1 s and was killed" in p.stderr
    p = census(["--anchor", DEFAULT, "--", *standin.argv()], env, tmp_path, MINFER_STANDIN_FAULT="future-contract")
    assert p.returncode == 1 and "speaks lawbench minfer contract version 2" in p.stderr


def test_sigterm_ends_the_command_and_its_children_with_143(env, tmp_path):
    """A cancelled job: lawbench stops as on Ctrl-C, ends the command's whole process group
    (the hung stand-in and its child), and exits 128 + 15."""
    import signal
    import time

    pidfile = tmp_path / "child.pid"
    proc = subprocess.Popen([*LAWBENCH, "census", "run", "--", *standin.argv()], cwd=tmp_path, text=True,
                            env={**env, "MINFER_STANDIN_FAULT": "hang", "MINFER_STANDIN_PIDFILE": str(pidfile)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, encoding="utf-8")
    child = int(wait_for(pidfile, proc, timeout_s=60))
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143 and "interrupted by SIGTERM" in err and "Traceback" not in err, out + err
    time.sleep(0.5)
    assert not alive(child), "the command's child outlived lawbench"


# ------------------------------------------------------------------ memory

def test_memory_through_the_per_pid_instrument(env, tmp_path):
    # each pass holds until the stand-in nvidia-smi has read it (a fixed 0.8 s raced a loaded box)
    e = {**env, "PATH": f"{standin.SMI_DIR}{os.pathsep}{env['PATH']}", standin.READ_MARK_ENV: str(tmp_path / "read")}
    p = census(["--memory", "--json", "--", *standin.argv()], e, tmp_path, MINFER_STANDIN_HOLD_S="60")
    assert p.returncode == 0, p.stderr
    mem = json_of(p)["memory"]
    assert mem["verdict"] == "READ" and mem["peak_mib"] == 7636.0, mem
    p = census(["--memory", "--", *standin.argv()], e, tmp_path, MINFER_STANDIN_HOLD_S="60", MINFER_MMQ_Q6K_EXP="0")
    assert "memory: peak 6182 MiB over the command's process tree" in p.stdout, p.stdout


@pytest.mark.skipif(bool(shutil.which("nvidia-smi")) or importlib.util.find_spec("pynvml") is not None,
                    reason="this machine has a per-PID GPU memory instrument")
def test_memory_without_an_instrument_is_a_skip_with_the_reason(env, tmp_path):
    e = {**env, "PATH": str(Path(sys.executable).parent)}
    p = census(["--memory", "--anchor", DEFAULT, "--", *standin.argv()], e, tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr  # the census held; memory was not read, and says why
    assert "memory: SKIP: no per-process GPU memory instrument on this machine" in p.stdout
    assert "nvidia-smi is not on PATH" in p.stdout


# ------------------------------------------------------------------ bad input: one line, exit 2

@pytest.mark.parametrize("args,words", [
    (["--anchor", "minfer.r54.nope", "--", "python3"], "--anchor 'minfer.r54.nope': no such anchor"),
    (["--exact", "W_exp-cp.async", "--", "python3"], "--exact 'W_exp-cp.async': write LABEL=N"),
    (["--exact", "W_exp-cp.async=many", "--", "python3"], "write LABEL=N with N a whole number"),
    (["--exact", "fast=27", "--", "python3"], "--exact 'fast' is not a B-path label"),
    (["--forbid", "fallback", "--", "python3"], "--forbid 'fallback' is not a B-path label"),
    (["--exact", "W_exp-cp.async=1", "--exact", "W_exp-cp.async=2", "--", "python3"], "names 'W_exp-cp.async' twice"),
    (["--exact", "W_exp-cp.async=27"], "no command to run: give it after --"),
    ([], "no command to run"),
    (["--", "/nonexistent/run-minfer"], "command not found: '/nonexistent/run-minfer'"),
    (["--", "/"], "'/' is a folder, not a command"),
    (["--", __file__], "is not a program: no #! line and not an ELF executable"),  # made executable below
    (["--exact", "W_exp-cp.async=27", "--maximum", "W_exp-cp.async=5", "--", "python3"],
     "the expectations on 'W_exp-cp.async' contradict each other (at least 27, at most 5)"),
    (["--minimum", "in-kernel-expand(fallback!)=1", "--forbid", "in-kernel-expand(fallback!)", "--", "python3"],
     "(at least 1, at most 0): no count could pass"),
    (["--anchor", DEFAULT, "--exact", "W_exp-cp.async=1", "--", "python3"], "not both"),
    (["--anchor", DEFAULT, "--maximum", "W_exp-cp.async=1", "--", "python3"], "not both"),
    (["--maximum", "W_exp-cp.async=-1", "--", "python3"], "write LABEL=N with N a whole number"),
    (["--anchor", "minfer.r54.q6k-tensor-set", "--", "python3"], "reads q6k_tensors (the model file's header)"),
    (["--anchor", "minfer.r54.memory.default", "--", "python3"], "a measurement anchor of law 'minfer'"),
])
def test_bad_input_is_one_line_exit_2(env, tmp_path, args, words):
    if args[-1:] == [__file__]:  # an executable file the kernel cannot start: a copy, with the x bit
        script = tmp_path / "not-a-program.py"
        script.write_text(Path(__file__).read_text(encoding="utf-8"), encoding="utf-8")
        script.chmod(0o755)
        args = [*args[:-1], str(script)]
    assert words in one_line_exit_2(census(args, env, tmp_path))
