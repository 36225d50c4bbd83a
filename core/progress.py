"""Progress lines for people: the one way lawbench says what a long step (a build, a download) is
doing while it does it.

``report(line)`` writes ``lawbench: <line>`` to the user's stderr at once. An anchor run goes
through pytest, which captures stderr, so a minutes-long build would show nothing until it ended:
``install_for_pytest(config)`` makes ``report`` suspend pytest's capture for each line (the
capture manager's ``global_and_fixture_disabled``, as pytest's own live logging does), and
``uninstall()`` undoes it. ``Meter`` turns a byte counter into such a line every few seconds.
"""
from __future__ import annotations

import contextlib
import sys
import time
from typing import Any, Iterator, Optional

# A byte meter prints at most one line per this many seconds (plus its first and last line).
EVERY_S = 5.0

_config: Any = None  # the pytest config of the active anchor run


def install_for_pytest(config: Any) -> None:
    """Let ``report`` reach the user through pytest's capture for the rest of this session."""
    global _config
    _config = config


def uninstall() -> None:
    global _config
    _config = None


@contextlib.contextmanager
def _uncaptured() -> Iterator[None]:
    # Looked up per line: the terminal reporter registers after early pytest_configure hooks.
    plugins = _config.pluginmanager if _config is not None else None
    capture = plugins.getplugin("capturemanager") if plugins is not None else None
    if capture is None:
        yield
        return
    with capture.global_and_fixture_disabled():
        reporter = plugins.getplugin("terminalreporter")
        if reporter is not None:
            reporter.ensure_newline()  # not glued to the end of "anchors/x.toml ..."
        yield


def report(line: str) -> None:
    """One progress line on the user's stderr, now, even inside a run."""
    with _uncaptured():
        print(f"lawbench: {line}", file=sys.stderr, flush=True)


def size(n: float) -> str:
    """Bytes for people: 98.4 MB, 1.2 GB."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


class Meter:
    """A byte counter that reports ``<what>: X of Y (P%)`` at most every ``every_s`` seconds."""

    def __init__(self, what: str, total: Optional[int], every_s: Optional[float] = None, out: Any = None):
        self.what, self.total = what, total
        self.every_s = EVERY_S if every_s is None else every_s
        self.out = out or report
        self.done_bytes = 0
        self.started = self._last = time.monotonic()
        self.out(f"{what}: starting ({size(total)})" if total else f"{what}: starting")

    def add(self, n: int) -> None:
        self.done_bytes += n
        now = time.monotonic()
        if now - self._last >= self.every_s:
            self._last = now
            self.out(f"{self.what}: {self._state()}")

    def finish(self) -> None:
        seconds = time.monotonic() - self.started
        self.out(f"{self.what}: done, {size(self.done_bytes)} in {seconds:.0f} s")

    def _state(self) -> str:
        if self.total:
            return f"{size(self.done_bytes)} of {size(self.total)} ({100 * self.done_bytes // self.total}%)"
        return size(self.done_bytes)
