"""Run one of llama.cpp's tools in a process group of its own, keep what it printed, and word its
fault in one line.

Every tool lawbench runs (llama-bench, llama-quantize, -perplexity, -batched-bench, -imatrix) goes
through ``run_process``: a fresh process group, ended whole on a timeout, a flood of output or an
interrupt (lawbench.core.procgroup, the one process runner). When lawbench itself is stopped
(SIGINT, or SIGTERM through its handler) the group is ended and waited for, and the caller raises
an EngineInterrupted (``engine_error``) that keeps the finished records. ``process_fault`` words
every other fault — tool missing, non-zero exit, killed by a signal, hang past the timeout — naming
the subject and the command. A law that runs a tool of its own uses the same three (lawbench.engines).
"""
from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

from lawbench.core.errors import EngineError, EngineInterrupted
from lawbench.core.procgroup import GROUP_EXIT_WAIT_S
from lawbench.core.procgroup import group_alive as _group_alive
from lawbench.core.procgroup import kill_group as _kill_group
from lawbench.core.procgroup import wait_group_empty as _wait_group_empty

TAIL_LINES = 30


@dataclass
class _Proc:
    returncode: Optional[int]
    stdout: str
    stderr: str
    wall_s: float
    timed_out: bool = False
    missing: str = ""
    interrupted: str = ""  # the signal that stopped lawbench while this ran (SIGINT, SIGTERM)
    lost_runs: int = 0  # earlier clean runs of the same command whose output came back short
    flooded: str = ""  # the stream that passed MAX_OUTPUT_BYTES: the group was ended


def run_process(cmd: list[str], timeout_s: float, env: Optional[dict] = None,
                monitor: Optional[Callable[[int], Callable[[], None]]] = None,
                cwd: Optional[str] = None, inherit_env: bool = True) -> _Proc:
    """Run in a fresh process group; on timeout or interrupt end the whole group, keep what was
    printed. A KeyboardInterrupt (SIGINT, or SIGTERM through lawbench's handler) is returned as
    ``interrupted`` for the caller to raise as EngineInterrupted with the finished records.
    ``monitor(pid)`` starts watching the process (e.g. its GPU memory) and returns its stop;
    ``cwd`` is the folder it runs in (a register harness's scratch folder);
    ``inherit_env=False``: ``env`` is the whole environment (a caller that unsets variables)."""
    from lawbench.core.procgroup import group_ended, popen_group

    t0 = time.monotonic()
    try:
        proc = popen_group(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           env={**os.environ, **(env or {})} if inherit_env else dict(env or {}), cwd=cwd)
    except OSError as exc:
        return _Proc(None, "", "", 0.0, missing=exc.strerror or str(exc))
    stop = None
    try:
        stop = monitor(proc.pid) if monitor else None
        return _wait(proc, timeout_s, t0)
    except BaseException:
        # a signal that lands before _wait can take it (its drain threads starting, the monitor):
        # the group still ends before the supervisor is told it has, or it would outlive lawbench
        _kill_group(proc)
        proc.wait()
        _wait_group_empty(proc)
        raise
    finally:
        group_ended(proc)
        if stop:
            stop()


# llama.cpp's common logger prints every LOG line (llama-batched-bench's JSON records,
# llama-perplexity's chunk lines) from a worker thread that is never joined: the logger is leaked
# on purpose (common/log.cpp, ggml-org/llama.cpp#22142), so lines still queued when main returns
# are lost with the process. Measured at b11434 through run_process on a tiny MoE (2 readings a
# run): llama-batched-bench lost lines in 1 of 200 verbose and 3 of 200 quiet runs, two of them
# every line; 58 of 300 with stdout piped through grep in a shell (benchmarks/logger_loss.py
# counts it again). Such a run exits 0 and says nothing, so a clean exit with short output is run
# again; any other fault never is.
LOGGER_ATTEMPTS = 3


def run_logged(cmd: list[str], timeout_s: float, env: Optional[dict] = None, *,
               complete: Callable[[str, str], bool], attempts: int = LOGGER_ATTEMPTS) -> _Proc:
    """Run a tool that prints through llama.cpp's common logger; re-run it when it exited 0 but
    ``complete(stdout, stderr)`` says lines are missing, at most ``attempts`` runs within ``timeout_s``
    in all. The runs that came back short are counted in ``lost_runs`` (they are evidence, and
    their readings were never seen, so no reading is chosen by being kept). A fault, timeout or
    interrupt is returned at once, never re-run."""
    deadline = time.monotonic() + timeout_s
    lost = 0
    while True:
        p = run_process(cmd, max(1.0, deadline - time.monotonic()), env)
        p.lost_runs = lost
        clean = p.returncode == 0 and not (p.timed_out or p.missing or p.interrupted)
        if not clean or complete(p.stdout, p.stderr) or lost + 1 >= attempts or time.monotonic() >= deadline:
            return p
        lost += 1


def _wait(proc: subprocess.Popen, timeout_s: float, t0: float) -> _Proc:
    from lawbench.core.procgroup import Drain

    drain = Drain(proc, GROUP_EXIT_WAIT_S)
    deadline = t0 + timeout_s
    timed_out, interrupted = False, ""
    try:
        while not drain.full.is_set():
            if time.monotonic() >= deadline:
                timed_out = True
                break
            try:
                proc.wait(timeout=0.05)  # returns the moment the tool exits
                break
            except subprocess.TimeoutExpired:
                continue
    except KeyboardInterrupt as exc:
        interrupted = EngineInterrupted.signal_of(exc)
    if proc.poll() is None or _group_alive(proc.pid):
        # a timeout, a signal, a flood, or a child the tool left running: the whole group ends
        _kill_group(proc)
        proc.wait()
        _wait_group_empty(proc)
    out, err = drain.text()
    return _Proc(proc.returncode, out, err, time.monotonic() - t0, timed_out=timed_out,
                 interrupted=interrupted, flooded=drain.flooded)


def log_tail(text: str, n: int = TAIL_LINES) -> str:
    """The last ``n`` lines of a tool's output: what an EngineError keeps as its ``log``."""
    return "\n".join(text.strip().splitlines()[-n:])


def _reason(stderr: str) -> str:
    """The most telling stderr line: the last that says error/failed, else the last line."""
    lines = [ln.strip() for ln in stderr.strip().splitlines() if ln.strip()]
    for line in reversed(lines):
        if "error" in line.lower() or "failed" in line.lower():
            return line
    return lines[-1] if lines else "no output on stderr"


def process_fault(p: _Proc, tool: str, subject: str, cmd: list[str], timeout_s: float) -> Optional[str]:
    """The one-line fault of a finished process, or None when it succeeded.

    :param p: what ``run_process`` returned
    :param subject: what the tool worked on, in words (``"model x.gguf"``): the fault names it
    """
    where = f"{tool} on {subject}"
    command = shlex.join(cmd)
    if p.missing:
        return f"{tool} cannot be started ({p.missing}): {cmd[0]}"
    if p.interrupted:
        return (f"{where} was interrupted by {p.interrupted}; its process group was ended; "
                f"command: {command}")
    if p.flooded:
        from lawbench.core.procgroup import MAX_OUTPUT_BYTES

        return (f"{where} printed more than {MAX_OUTPUT_BYTES // 2**20} MiB on {p.flooded} and was killed "
                f"(an engine stuck printing); command: {command}")
    if p.timed_out:
        return f"{where} did not finish within {timeout_s:g} s and was killed; command: {command}"
    if p.returncode is not None and p.returncode < 0:
        try:
            name = signal.Signals(-p.returncode).name
        except ValueError:
            name = f"signal {-p.returncode}"
        hint = " (out of memory?)" if name == "SIGKILL" else ""
        return f"{where} was killed by {name}{hint}; command: {command}"
    if p.returncode != 0:
        return f"{where} exited with code {p.returncode}: {_reason(p.stderr)}; command: {command}"
    return None


def engine_error(p: _Proc, fault: str, **kw: Any) -> EngineError:
    """The error to raise for ``fault``: an EngineInterrupted when lawbench itself was stopped while
    ``p`` ran (the run then ends as stopped, not as an engine failure), else an EngineError.
    ``kw`` goes to the error (``log=log_tail(...)``, ``samples=``)."""
    if p.interrupted:
        return EngineInterrupted(fault, signal_name=p.interrupted, **kw)
    return EngineError(fault, **kw)
