"""Where lawbench keeps what it builds and downloads: one root for every cache."""
from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """``$LAWBENCH_CACHE`` or ``~/.cache/lawbench``: builds, downloads, models, headers, locks."""
    env = os.environ.get("LAWBENCH_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "lawbench"
