"""Run the user's minfer engine command once: environment, timeout, process group, full log.

minfer is the user's private engine; lawbench never builds or finds it. A runner points at it with

    LAWBENCH_MINFER_CMD="/path/to/run-minfer-prefill --model /models/7b-q4_k_m.gguf"

a command line (split with POSIX shell rules and run without a shell: wrap pipelines in a script)
that runs ONE whole-prefill pass of the engine and exits 0. Its contract:

  * stderr: the engine's own eprintln output, unredirected. Under MINFER_MMQ_RAW_NB_DEBUG=1 (set by
    lawbench for census anchors) that carries one B-path label line per q6_K launch.
  * stdout: for throughput anchors, one JSON object on a line of its own holding the whole-prefill
    rate, e.g. {"prefill_tok_s": 3181.0}. The last such line counts; other stdout lines are ignored.
  * the environment lawbench passes (MINFER_MMQ_Q6K_EXP, …) must reach the engine unchanged.

  * revision probe: run with LAWBENCH_MINFER_PROBE=revision in its environment, the command prints
    one JSON line {"minfer_revision": "r54"} on stdout (the campaign's record number the engine
    was built at) and exits 0 without running a pass. lawbench asks it once before each anchor
    pinned to engine revisions (every minfer engine anchor is: lawbench.plugins.minfer.revisions),
    so an anchor published for r54 SKIPs on an r56 engine instead of failing on numbers it never
    claimed.

An anchor may name another variable for one arm (case/arms `command_env`): the vs-llama anchors
run `engine = "llama.cpp"`, read from LAWBENCH_MINFER_LLAMA_CMD, a llama.cpp command printing the
same {"prefill_tok_s": …} line (it answers no revision probe); anchors comparing two minfer
revisions read the older engine from LAWBENCH_MINFER_PREV_CMD, which keeps this same contract.

The model file: LAWBENCH_MINFER_MODEL names the GGUF the engine command loads, for the anchors that
read its header (the q6_K tensor census of seed 002's "14 attn_v + 14 ffn_down + output.weight").

The command runs in a process group of its own, so a timeout kills the engine and its children,
and per-PID memory is read for every process of that group's tree.
"""
from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import Callable, Mapping, Optional, Sequence

import psutil

from lawbench.core.errors import EngineError, NotApplicable
from lawbench.plugins.minfer.revisions import parse_probe, probe_env

CMD_ENV = "LAWBENCH_MINFER_CMD"
LLAMA_CMD_ENV = "LAWBENCH_MINFER_LLAMA_CMD"
MODEL_ENV = "LAWBENCH_MINFER_MODEL"
PROBE_TIMEOUT_S = 60.0
LOG_TAIL = 8000
POLL_S = 0.2


@dataclass
class EngineRun:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    duration_s: float

    def log(self) -> str:
        return tail(self.stdout, self.stderr)


def tail(stdout: str, stderr: str) -> str:
    return f"--- stdout ---\n{stdout[-LOG_TAIL:]}\n--- stderr ---\n{stderr[-LOG_TAIL:]}"


def engine_argv(command_env: str = CMD_ENV, environ: Mapping[str, str] = os.environ) -> list[str]:
    """The engine command line from the environment, or NotApplicable saying how to set it."""
    raw = environ.get(command_env, "").strip()
    if not raw:
        what = "minfer engine" if command_env == CMD_ENV else f"engine command {command_env}"
        raise NotApplicable(f"{what} not configured: set {command_env}")
    try:
        argv = shlex.split(raw)
    except ValueError as exc:
        raise NotApplicable(f"{command_env} is not a valid command line ({exc}): {raw!r}") from None
    return argv


def child_env(env: Mapping[str, str], unset: Sequence[str] = ()) -> dict[str, str]:
    """The runner's environment, minus `unset`, plus the anchor's `env` (the anchor wins)."""
    out = {k: v for k, v in os.environ.items() if k not in set(unset)}
    out.update(env)
    return out


def _tree(pid: int) -> set[int]:
    try:
        root = psutil.Process(pid)
        return {pid, *(c.pid for c in root.children(recursive=True))}
    except psutil.Error:
        return {pid}


def _kill_group(proc: subprocess.Popen) -> None:
    # The group was created by us (start_new_session) and holds only the engine and its children.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def run_engine(argv: list[str], env: Mapping[str, str], timeout_s: float,
               poll: Optional[Callable[[set[int]], None]] = None, what: str = "minfer engine") -> EngineRun:
    """Run once; EngineError (with the log) on a crash, a signal or a timeout.

    ``poll`` is called about every POLL_S seconds with the PIDs of the engine's process tree while it
    runs (per-PID memory readings hang off it).
    """
    with tempfile.TemporaryFile("w+b") as out, tempfile.TemporaryFile("w+b") as err:
        started = time.monotonic()
        try:
            proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                    env=dict(env), start_new_session=True)
        except OSError as exc:
            raise EngineError(f"{what} could not be started ({argv[0]!r}): {exc.strerror or exc}") from None
        timed_out = False
        try:
            while proc.poll() is None:
                if time.monotonic() - started > timeout_s:
                    timed_out = True
                    break
                if poll is not None:
                    poll(_tree(proc.pid))
                time.sleep(POLL_S)
        finally:
            if proc.poll() is None:
                _kill_group(proc)
        duration = time.monotonic() - started
        run = EngineRun(argv, proc.returncode, _read(out), _read(err), duration)
    if timed_out:
        raise EngineError(f"{what} did not finish within {timeout_s:g} s and was killed", log=run.log())
    if run.returncode < 0:
        raise EngineError(f"{what} was killed by signal {-run.returncode} after {duration:.1f} s", log=run.log())
    if run.returncode != 0:
        raise EngineError(f"{what} exited with status {run.returncode} after {duration:.1f} s", log=run.log())
    return run


def _read(f) -> str:
    f.seek(0)
    return f.read().decode("utf-8", errors="replace")


def prefill_tok_s(run: EngineRun, what: str = "minfer engine") -> float:
    """The last {"prefill_tok_s": x} JSON line on stdout (the command's contract, see above)."""
    found: Optional[float] = None
    for line in run.stdout.splitlines():
        line = line.strip()
        if not (line.startswith("{") and "prefill_tok_s" in line):
            continue
        try:
            value = json.loads(line).get("prefill_tok_s")
        except (json.JSONDecodeError, AttributeError):
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            found = float(value)
    if found is None or found <= 0:
        raise EngineError(f'{what} printed no {{"prefill_tok_s": <positive number>}} line on stdout; '
                          "the engine command must print one (contract: lawbench.plugins.minfer.engine)",
                          log=run.log())
    return found


def engine_revision(argv: list[str], env: Mapping[str, str], what: str = "minfer engine") -> str:
    """The revision the engine command reports through the probe (see the contract above)."""
    done = run_engine(argv, probe_env(env), PROBE_TIMEOUT_S, what=f"{what} revision probe")
    return parse_probe(done.stdout, what, log=done.log())
