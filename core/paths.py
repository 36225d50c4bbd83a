"""Where lawbench keeps what it builds and downloads: one root for every cache."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from lawbench.core.errors import UsageError

CACHE_ENV = "LAWBENCH_CACHE"


def cache_root() -> Path:
    """``$LAWBENCH_CACHE``, else ``$XDG_CACHE_HOME/lawbench``, else ``~/.cache/lawbench``: builds,
    downloads, models, headers, locks.

    ``XDG_CACHE_HOME`` is honoured as the XDG base directory specification says (pip does too): a
    machine that keeps its caches elsewhere (a bigger disk, a runner's work volume) keeps lawbench's
    there; a relative one is ignored, as the specification asks."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "lawbench"


def writable_dir(path: Path, what: str = "cache folder", fix: str = "") -> Path:
    """``path``, created if need be, once a file can be made in it.

    :param fix: what to do instead; default: point ``$LAWBENCH_CACHE`` at a writable folder.
    :raises UsageError: naming the folder, why, and the fix (exit 2, not a traceback).
    """
    fix = fix or f"set {CACHE_ENV} to a writable folder (now {os.environ.get(CACHE_ENV) or 'unset'})"
    if path.exists() and not path.is_dir():  # the OS would say only "File exists"
        raise UsageError(f"cannot write the {what} {path}: it is a file, not a folder; {fix}")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        raise UsageError(f"cannot write the {what} {path}: {exc.strerror or exc}; {fix}") from None
    return path
