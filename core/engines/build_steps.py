"""One step of a llama.cpp build (configure, compile, add a tool): its own process group, its output
appended to the build log, percent progress reported, ended at a deadline
(lawbench.core.engines.build and .tools run every step through it)."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from collections import deque
from typing import Callable, Optional

from lawbench.core.procgroup import end_group, group_ended, popen_group

_PERCENT = re.compile(r"^\[\s*(\d{1,3})%\]")  # make: "[ 37%] Building CXX object ..."
_NINJA = re.compile(r"^\[(\d+)/(\d+)\]")  # ninja: "[12/180] Building CXX object ..."


def _say(progress: Optional[Callable[[str], None]], line: str) -> None:
    if progress is not None:
        progress(line)


def _run_logged(cmd: list[str], log, progress, stage: str, deadline: Optional[float] = None,
                env=None) -> tuple[int, deque, bool]:
    """Run a build step, append its output to the log, report percent changes; keep a tail.
    The step's process group is killed at ``deadline`` (time.monotonic()); the third value says so."""
    log.write(f"$ {' '.join(cmd)}\n")
    log.flush()
    tail: deque = deque(maxlen=40)
    last = -1
    # Its own process group, ended on an interrupt: a compiler left running would load the box
    # after lawbench has released its lock.
    proc = popen_group(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, encoding="utf-8",
                       errors="replace", env=env)  # ended by the supervisor if lawbench dies
    assert proc.stdout is not None
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the whole group: its output pipe closes, the loop ends
        except (ProcessLookupError, PermissionError):
            pass

    timer = None
    if deadline is not None:
        timer = threading.Timer(max(0.0, deadline - time.monotonic()), expire)
        timer.daemon = True
        timer.start()
    try:
        for line in proc.stdout:
            log.write(line)
            log.flush()  # so `tail -f build.log` follows a long build
            tail.append(line.rstrip("\n"))
            m = _PERCENT.match(line)
            n = _NINJA.match(line)
            pct = int(m.group(1)) if m else (100 * int(n.group(1)) // max(1, int(n.group(2))) if n else -1)
            if pct > last:  # make restarts its counter per target; report only forward progress
                last = pct
                _say(progress, f"{stage}: {pct}%")
    except BaseException:
        end_group(proc)
        group_ended(proc)
        raise
    finally:
        if timer is not None:
            timer.cancel()
    if expired.is_set():
        end_group(proc)  # waits until the whole group is gone, not only cmake
    proc.wait()
    group_ended(proc)
    log.flush()
    return proc.returncode, tail, expired.is_set()
