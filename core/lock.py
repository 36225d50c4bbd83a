"""One lawbench job per box: timing runs that share a machine measure each other, not the law.

``box_lock`` takes a file lock under the cache directory. A second job on the same box fails fast
(``timeout=0``) with a message that names the holder's PID and command, read from a small holder
file written next to the lock once it is taken. The operating system drops the lock when the holder
dies, so a crashed job never leaves the box locked; its stale holder file is simply overwritten.
"""
from __future__ import annotations

import json
import os
import re
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

from filelock import FileLock, Timeout

from lawbench.core.errors import LawbenchError
from lawbench.core.paths import cache_root, writable_dir
from lawbench.core.procgroup import hold_fd, release_fd

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class BoxBusy(LawbenchError):
    """Another lawbench job holds this box's lock."""

    def __init__(self, message: str, holder: Optional[dict] = None):
        super().__init__(message)
        self.holder = holder or {}




def read_holder(holder_file: Path) -> dict:
    """The holder record, or {} when it is missing or half written (the holder may be starting)."""
    try:
        return json.loads(holder_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _describe(holder: dict) -> str:
    if not holder.get("pid"):
        return "another process (its PID is not recorded yet)"
    since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(holder.get("since", 0)))  # as records say time
    return f"PID {holder['pid']} ({holder.get('cmd', '?')}) since {since}"


@contextmanager
def box_lock(name: str = "lawbench", timeout: float = 0, cache_dir: Optional[Path] = None
             ) -> Iterator[Path]:
    """Hold the box lock ``<cache>/locks/<name>.lock`` for the duration of the ``with`` block.

    :param name: lock name; jobs that must not overlap use the same name.
    :param timeout: seconds to wait for the holder to finish; 0 fails at once.
    :param cache_dir: where the lock lives (default: :func:`cache_root`).
    :raises BoxBusy: the lock is held by another process; the message names its PID.
    """
    if not _NAME_RE.match(name):
        raise LawbenchError(f"box lock name {name!r} must be letters, digits, '.', '_' or '-'")
    locks = writable_dir((cache_dir or cache_root()) / "locks", "lock folder")
    lock_file, holder_file = locks / f"{name}.lock", locks / f"{name}.holder.json"
    lock = FileLock(str(lock_file), timeout=timeout)
    try:
        lock.acquire()
    except Timeout:
        holder = read_holder(holder_file)
        raise BoxBusy(f"another lawbench job holds the box lock {lock_file}: {_describe(holder)}; "
                      "wait for it to finish (one job per box keeps timings honest)",
                      holder) from None

    # Every engine group started while the lock is held inherits its fd: the kernel keeps a flock
    # while any process holds the file open, so a `kill -9` of lawbench never frees the box while
    # its engine still runs (core.procgroup ends that engine).
    fd = getattr(getattr(lock, "_context", None), "lock_file_fd", None)
    if isinstance(fd, int):
        hold_fd(fd)
    try:
        record = {"pid": os.getpid(), "cmd": " ".join(sys.argv)[:200] or "python",
                  "since": time.time()}
        tmp = holder_file.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(record), encoding="utf-8")
        os.replace(tmp, holder_file)  # atomic: a contender never reads half a record
        yield lock_file
    finally:
        try:
            if read_holder(holder_file).get("pid") == os.getpid():
                holder_file.unlink()
        except OSError:
            pass
        if isinstance(fd, int):
            release_fd(fd)
        lock.release()
