"""What this process found wrong in the cache and made again: a llama.cpp build, a source archive,
a model or a model's stamp that failed its check (lawbench.core.engines.build_trust,
lawbench.core.store.model_stamp) is set aside and remade, and the run's record lists it
(``RunRecord.cache_repairs``) so a night that rebuilt a planted build says so, not only stderr.

The list is the process's: the cache is checked wherever a build or model is first asked for,
before or during a run, and ``lawbench.core.run.Run`` takes it all (``take``) when it finishes.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Optional

_found: list[dict[str, Optional[str]]] = []
_guard = threading.Lock()


def note(what: str, path: "os.PathLike[str] | str", why: str, aside: "os.PathLike[str] | str | None" = None) -> None:
    """One cache entry that failed its check: ``what`` it is ("llama.cpp build", "source archive",
    "synthetic model", "model", "model stamp"), where it was, why it failed, where it was set aside."""
    with _guard:
        _found.append({"what": what, "path": str(path), "why": why,
                       "set_aside": None if aside is None else str(Path(aside))})


def take() -> list[dict[str, Optional[str]]]:
    """Every repair noted since the last take, oldest first; the list is emptied."""
    with _guard:
        found = list(_found)
        _found.clear()
    return found
