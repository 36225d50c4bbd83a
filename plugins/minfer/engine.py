"""Run the user's minfer engine command once: environment, timeout, process group, full log.

minfer is the user's private engine; lawbench never builds or finds it. A runner points at it with
LAWBENCH_MINFER_CMD (a command line, split with POSIX shell rules and run without a shell) that
runs ONE whole-prefill pass. What that command is given, what it prints (the B-path labels on
stderr, the {"prefill_tok_s": …} line on stdout, the revision probe) and how lawbench reads its
per-PID memory is the lawbench minfer contract, version CONTRACT_VERSION: docs/minfer-contract.md
(lawbench's reading of it: lawbench.plugins.minfer.contract). tests/standin/minfer_standin.py is
a command that speaks it exactly.

The command runs in a process group of its own, started and ended by lawbench's one process-group
runner (lawbench.engines.popen_group / end_group: a timeout, a signal or lawbench's own death ends
the engine and its children, and the box lock is held while any of them runs), and per-PID memory
is read for every process of that group's tree.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import Callable, Mapping, Optional, Sequence

from lawbench import EngineError, NotApplicable
from lawbench.plugins.minfer.contract import CONTRACT_DOC, PREFILL_KEY, check_version, json_objects
from lawbench.plugins.minfer.revisions import parse_commit, parse_probe, probe_env

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
    import psutil  # here: every `lawbench` command loads the law, few run minfer

    try:
        root = psutil.Process(pid)
        return {pid, *(c.pid for c in root.children(recursive=True))}
    except psutil.Error:
        return {pid}


def run_engine(argv: list[str], env: Mapping[str, str], timeout_s: float,
               poll: Optional[Callable[[set[int]], None]] = None, what: str = "minfer engine",
               exit_ok: Sequence[int] = (0,)) -> EngineRun:
    """Run once; EngineError (with the log) on a crash, a signal, a timeout or an exit status not
    in ``exit_ok`` (a test suite exits 101 when a test fails, and its counts are still the reading).

    ``poll`` is called about every POLL_S seconds with the PIDs of the engine's process tree while it
    runs (per-PID memory readings hang off it).
    """
    from lawbench.engines import end_group, group_ended, popen_group

    with tempfile.TemporaryFile("w+b") as out, tempfile.TemporaryFile("w+b") as err:
        started = time.monotonic()
        try:
            proc = popen_group(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=dict(env))
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
            end_group(proc)  # the engine, or any child it left running: the whole group ends
            group_ended(proc)
        duration = time.monotonic() - started
        run = EngineRun(argv, proc.returncode, _read(out), _read(err), duration)
    if timed_out:
        raise EngineError(f"{what} did not finish within {timeout_s:g} s and was killed", log=run.log())
    if run.returncode < 0:
        raise EngineError(f"{what} was killed by signal {-run.returncode} after {duration:.1f} s", log=run.log())
    if run.returncode not in exit_ok:
        raise EngineError(f"{what} exited with status {run.returncode} after {duration:.1f} s", log=run.log())
    return run


def _read(f) -> str:
    f.seek(0)
    return f.read().decode("utf-8", errors="replace")


def prefill_tok_s(run: EngineRun, what: str = "minfer engine") -> float:
    """The last {"prefill_tok_s": x} JSON line on stdout (the contract: docs/minfer-contract.md)."""
    found: Optional[float] = None
    for obj in json_objects(run.stdout):
        value = obj.get(PREFILL_KEY)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            found = float(value)
    if found is None or found <= 0:
        raise EngineError(f'{what} printed no {{"{PREFILL_KEY}": <positive number>}} line on stdout; '
                          f"the engine command must print one (contract: {CONTRACT_DOC})", log=run.log())
    return found


def engine_revision(argv: list[str], env: Mapping[str, str], what: str = "minfer engine") -> str:
    """The revision the engine command reports through the probe; an EngineError when it states a
    contract version other than CONTRACT_VERSION (docs/minfer-contract.md)."""
    return engine_identity(argv, env, what)[0]


def engine_identity(argv: list[str], env: Mapping[str, str], what: str = "minfer engine"
                    ) -> tuple[str, Optional[str]]:
    """(revision, commit or None) as the probe reports them (contract §4)."""
    done = run_engine(argv, probe_env(env), PROBE_TIMEOUT_S, what=f"{what} revision probe")
    revision = parse_probe(done.stdout, what, log=done.log())
    check_version(done.stdout, what, log=done.log())
    return revision, parse_commit(done.stdout)
