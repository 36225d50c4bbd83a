"""One run of lawbench, whatever command started it: ``RunContext`` (what a run needs before the
first anchor) and ``Run`` (resources, signals, evaluation, the exit code, saving the record).
`lawbench run` (through pytest), `lawbench ab` and `lawbench census plant` are its modes.
"""
from __future__ import annotations

import importlib
from typing import Any

# Lazy, so that importing one module of the package never imports the rest (and no module of a
# lower layer pulls in the Run): the names below resolve on first use.
_LAZY = {
    "Run": "lawbench.core.run.run",
    "RunContext": "lawbench.core.run.context",
    "interrupted_result": "lawbench.core.run.verify",
}

__all__ = ["Run", "RunContext", "interrupted_result"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
