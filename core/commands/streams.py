"""A run never ends silently because of its own standard streams.

`lawbench run … | head -1` closes stdout after one line: Python then raises BrokenPipeError at the
next print, which used to end the run with exit 0 and no record. And a command started with
stdout closed (`>&-`) has no fd 1 at all: the next file lawbench opens (the history!) would take
fd 1, and every print would go into it. And a terminal that vanishes (a dropped ssh session, a
closed window) makes every later write to it fail with EIO: the run ended in a traceback. So: the
three standard fds always exist (on /dev/null when they were closed), and during a run a stdout or
stderr that is gone is swapped for /dev/null, said once on stderr while stderr is still there — the
run goes on, writes its record and exits with its own code.
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


def escape_unencodable() -> None:
    """stdout and stderr escape what their encoding cannot hold instead of raising.

    On a terminal whose locale is not UTF-8 (``LANG=en_US.ISO-8859-1``, or ``LC_ALL=C`` with
    ``PYTHONUTF8=0``), printing an anchor's claim ("±25 %", "α", "—") or a stranger's record raised
    UnicodeEncodeError and ended the command in a traceback (issue 35). Now such a character is
    written as ``\\xb1`` / ``\\u2014``: the words stay readable and nothing is lost. A UTF-8 stream
    holds every character, so nothing changes there."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        reconfigure = getattr(stream, "reconfigure", None)
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "").replace("_", "")
        if reconfigure is None or encoding == "utf8":
            continue
        try:
            reconfigure(errors="backslashreplace")
        except (ValueError, OSError):  # a closed or detached stream: nothing to print on
            pass


# What a write to a stream whose reader is gone raises: a closed pipe (EPIPE), a closed fd (EBADF),
# a terminal that vanished (EIO: the pty's other end was closed).
_GONE = (errno.EPIPE, errno.EBADF, errno.EIO)


class SteadyStream:
    """sys.stdout or sys.stderr for the length of a run: writes go to the real stream until its
    reader is gone, then to /dev/null (said once on stderr, when stderr is not the one gone).
    Everything else is the real stream's."""

    def __init__(self, stream: Any, name: str = "stdout"):
        self._stream = stream
        self.name = name
        self.broken = False

    def _lost(self, exc: OSError) -> None:
        if self.broken:
            return
        self.broken = True
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, self._stream.fileno())  # later flushes, pytest's and rich's too, are harmless
        except (OSError, ValueError):
            pass
        finally:
            os.close(null)
        self._stream = open(os.devnull, "w", encoding="utf-8")
        if self.name == "stderr":
            return  # nowhere left to say it: the record and the exit code say how the run ended
        why = "lost its terminal (EIO)" if exc.errno == errno.EIO else "was closed by its reader"
        try:
            print(f"lawbench: {self.name} {why}; the run goes on and writes its record as usual "
                  "(run.json, the history); the exit code is the run's", file=sys.stderr, flush=True)
        except OSError:
            pass

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as exc:
            if not isinstance(exc, BrokenPipeError) and exc.errno not in _GONE:
                raise
            self._lost(exc)
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            if not isinstance(exc, BrokenPipeError) and exc.errno not in _GONE:
                raise
            self._lost(exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
