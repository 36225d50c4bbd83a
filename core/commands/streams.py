"""A run never ends silently because of its own standard streams.

`lawbench run … | head -1` closes stdout after one line: Python then raises BrokenPipeError at the
next print, which used to end the run with exit 0 and no record. And a command started with
stdout closed (`>&-`) has no fd 1 at all: the next file lawbench opens (the history!) would take
fd 1, and every print would go into it. So: the three standard fds always exist (on /dev/null
when they were closed), and during a run a broken stdout is swapped for /dev/null with one line on
stderr — the run goes on, writes its record and exits with its own code.
"""
from __future__ import annotations

import errno
import os
import sys
from typing import Any


def guard_std_fds() -> None:
    """Open /dev/null on every standard fd that is closed, before any file could take its number."""
    for fd, mode, name in ((0, os.O_RDONLY, "stdin"), (1, os.O_WRONLY, "stdout"), (2, os.O_WRONLY, "stderr")):
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        null = os.open(os.devnull, mode)
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
        if getattr(sys, name) is None:  # Python made it None at start-up: give it the fd back
            setattr(sys, name, os.fdopen(fd, "r" if fd == 0 else "w", closefd=False))


class SteadyStdout:
    """sys.stdout for the length of a run: writes go to the real stdout until its reader is gone,
    then to /dev/null (said once on stderr). Everything else is the real stream's."""

    def __init__(self, stream: Any):
        self._stream = stream
        self.broken = False

    def _lost(self) -> None:
        if not self.broken:
            self.broken = True
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, self._stream.fileno())  # later flushes, pytest's and rich's too, are harmless
            except (OSError, ValueError):
                pass
            finally:
                os.close(null)
            self._stream = open(os.devnull, "w", encoding="utf-8")
            print("lawbench: stdout was closed by its reader; the run goes on and writes its record "
                  "as usual (run.json, the history); the exit code is the run's", file=sys.stderr, flush=True)

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as exc:
            if not isinstance(exc, BrokenPipeError) and exc.errno not in (errno.EPIPE, errno.EBADF):
                raise
            self._lost()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            if not isinstance(exc, BrokenPipeError) and exc.errno not in (errno.EPIPE, errno.EBADF):
                raise
            self._lost()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
