"""SIGINT, SIGTERM and SIGHUP stop any lawbench command the same way. SIGHUP is what a closed
terminal or a dropped ssh session sends: by default it killed the run with no record and left the
engine running. A SIGHUP ignored when lawbench starts (`nohup`) stays ignored.

The handlers are installed once per process, here: `lawbench`'s main installs them for every
command, and a Run (lawbench.core.run) takes the same ones over (it installs them itself only when
pytest is driven directly, without main). Nothing else calls ``signal.signal`` (tests/test_import_graph.py).
"""
from __future__ import annotations

import signal
import sys
from typing import Any, Optional


class StopSignals:
    """SIGINT and SIGTERM (what a CI runner sends a cancelled job) stop a run the same way: as a
    KeyboardInterrupt that names the signal, raised once. Once the record is being written
    (``closing``) a further signal is only noted, so the record is never cut in half."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self.received: Optional[str] = None
        self.closing = False
        self._saved: dict[int, Any] = {}

    def _install(self) -> None:
        for sig in self.SIGNALS:
            # `nohup lawbench run`, `trap '' HUP`: a hangup its caller chose to ignore stays ignored,
            # and the run goes on when the terminal vanishes (its streams: core.commands.streams)
            if sig == signal.SIGHUP and signal.getsignal(sig) == signal.SIG_IGN:
                continue
            try:
                self._saved[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not the main thread: Python's own SIGINT handling stays
                return

    def _restore(self) -> None:
        for sig, handler in self._saved.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
        self._saved.clear()

    def _handle(self, signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        if self.received is None and not self.closing:
            self.received = name
            raise KeyboardInterrupt(name)
        doing = "writing the run record" if self.closing else "already stopping"
        print(f"lawbench: {name} received; {doing} first", file=sys.stderr, flush=True)


_installed: Optional[StopSignals] = None


def installed() -> Optional[StopSignals]:
    """The process's stop handlers, when they are installed."""
    return _installed


def install() -> StopSignals:
    """Install the stop handlers for this process, once: a second call returns the same ones."""
    global _installed
    if _installed is None:
        _installed = StopSignals()
        _installed._install()
    return _installed


def restore() -> None:
    """Put the handlers back as they were before install() (the end of a command)."""
    global _installed
    if _installed is not None:
        _installed._restore()
        _installed = None
