"""Engine process groups that never outlive lawbench, and a box lock never free while one runs.

Every tool lawbench starts runs in a process group of its own (so a timeout or a signal ends the
tool and all its children). That alone does not survive `kill -9` of lawbench: nothing then ends
the group, and the box lock (released by the kernel with lawbench's file descriptors) lets the
next job time the box against a still-running engine. So:

* A **supervisor** — a small Python process of its own session, started once per lawbench process
  on the first group — holds the read end of a pipe whose write end only lawbench holds, and is
  told each group as it starts and ends. When the pipe closes without a goodbye (lawbench died,
  however) it kills every group still open and exits. A parent-death signal (prctl) would reach
  only the group's leader, not the children of a shell script, and fires when the *thread* that
  started it ends; the supervisor has neither limit.
* The box lock's file descriptor is passed to the group (`pass_fds`): a flock is held while any
  process holds its open file, so the lock stays taken until the last engine process is gone.

`popen_group` is the one way to start such a group and `end_group` the one way to end one: every
tool lawbench runs goes through them (core/engines/bench.py, build.py and server.py, and pip's
downloads in core/store/pypi.py).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Optional

# The supervisor: reads "+PGID" / "-PGID" lines; at EOF (lawbench gone) SIGKILLs the groups left.
# "bye" is lawbench's normal exit: nothing is left to kill. Kept free of imports beyond the stdlib.
_SUPERVISOR = r"""
import os, signal, sys
groups = set()
for line in sys.stdin:
    line = line.strip()
    if line == "bye":
        sys.exit(0)
    if line[:1] in "+-" and line[1:].isdigit():
        (groups.add if line[0] == "+" else groups.discard)(int(line[1:]))
for pgid in groups:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
"""

_lock = threading.Lock()
_supervisor: Optional[subprocess.Popen] = None
_held_fds: list[int] = []  # the box lock's fd while it is held (core.lock)


def hold_fd(fd: int) -> None:
    """Pass ``fd`` (the box lock's) to every group started while it is held."""
    _held_fds.append(fd)


def release_fd(fd: int) -> None:
    if fd in _held_fds:
        _held_fds.remove(fd)


def _ensure_supervisor() -> bool:
    """The supervisor runs (started if need be; call under _lock). False when it cannot start."""
    global _supervisor
    if _supervisor is None or _supervisor.poll() is not None:
        try:
            _supervisor = subprocess.Popen([sys.executable, "-I", "-S", "-c", _SUPERVISOR],
                                           stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL, start_new_session=True,
                                           text=True, bufsize=1)
        except OSError:
            return False  # the groups still end with lawbench's own handlers; only kill -9 is uncovered
    return True


def _tell(line: str) -> None:
    with _lock:
        if not _ensure_supervisor():
            return
        try:
            assert _supervisor.stdin is not None
            _supervisor.stdin.write(line + "\n")
            _supervisor.stdin.flush()
        except (OSError, ValueError):
            pass


def popen_group(cmd: list[str], **kwargs: Any) -> subprocess.Popen:
    """subprocess.Popen in a new process group that the supervisor ends if lawbench dies, holding
    the box lock's fd. Call ``group_ended(proc)`` once the group is gone."""
    fds = tuple(fd for fd in _held_fds if _fd_open(fd)) + tuple(kwargs.pop("pass_fds", ()))
    # The supervisor first: started lazily after the tool, its own start-up (a Python process,
    # seconds on a loaded box) was a window in which kill -9 of lawbench left the group unknown to
    # it and running (tests/test_procgroup_users.py, once under load, 2026-12-07)
    with _lock:
        _ensure_supervisor()
    proc = subprocess.Popen(cmd, start_new_session=True, pass_fds=fds, **kwargs)
    _tell(f"+{proc.pid}")
    return proc


def group_ended(proc: subprocess.Popen) -> None:
    """The group is gone (waited for, or killed and emptied): the supervisor forgets it, so a
    later process that reuses the number is never killed."""
    _tell(f"-{proc.pid}")


GROUP_EXIT_WAIT_S = 5.0


def end_group(proc: subprocess.Popen) -> tuple[str, str]:
    """Kill the process group ``proc`` leads, wait for it, and return what it had printed.

    The group was made by popen_group and holds only the tool and its children; a child left
    running would keep timing the box after lawbench has released its lock.
    """
    kill_group(proc)
    out, err = proc.communicate()
    wait_group_empty(proc)
    return out or "", err or ""


def stop_group(proc: subprocess.Popen, grace_s: float = 5.0) -> None:
    """SIGTERM to the whole group first (a server frees its model and exits), then end_group."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=grace_s)
    except (ProcessLookupError, PermissionError, subprocess.TimeoutExpired):
        pass
    end_group(proc)


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def wait_group_empty(proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + GROUP_EXIT_WAIT_S
    while group_alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.02)  # grandchildren are not ours to wait for: watch the group empty


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    # A zombie still counts for killpg, and a container's PID 1 may never reap it. psutil is imported
    # here, not at the top: every `lawbench` command loads this module and most never stop a group.
    import psutil

    for p in psutil.process_iter(["status"]):
        try:
            if os.getpgid(p.pid) == pgid and p.info["status"] != psutil.STATUS_ZOMBIE:
                return True
        except (OSError, psutil.Error):
            continue
    return False


def _fd_open(fd: int) -> bool:
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


# What one tool may print on one stream. llama-bench prints kilobytes, a verbose load log a few
# megabytes; an engine stuck in a print loop would fill lawbench's memory (MemoryError: no record).
MAX_OUTPUT_BYTES = 64 * 1024 * 1024


class Drain:
    """Both pipes read by threads into bounded buffers; ``full`` is set when one overflows."""

    def __init__(self, proc: subprocess.Popen, join_s: float = 5.0):
        self.join_s = join_s
        self.full = threading.Event()
        self.flooded = ""
        self.chunks: dict[str, list[bytes]] = {"stdout": [], "stderr": []}
        self.threads = [threading.Thread(target=self._read, args=(name, getattr(proc, name)), daemon=True)
                        for name in ("stdout", "stderr")]
        for t in self.threads:
            t.start()

    def _read(self, name: str, pipe: Any) -> None:
        size, chunks = 0, self.chunks[name]
        while True:
            data = pipe.read1(1 << 16)
            if not data:
                return
            if size + len(data) > MAX_OUTPUT_BYTES:
                self.flooded = self.flooded or name
                self.full.set()
                while pipe.read1(1 << 16):  # keep the pipe open and empty until the group is ended
                    pass
                return
            size += len(data)
            chunks.append(data)

    def text(self) -> tuple[str, str]:
        for t in self.threads:
            t.join(self.join_s)  # a grandchild that kept a pipe open is not waited for longer
        return tuple(b"".join(self.chunks[n]).decode("utf-8", errors="replace")  # type: ignore[return-value]
                     for n in ("stdout", "stderr"))
