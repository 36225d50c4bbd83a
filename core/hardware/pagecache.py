"""One file's page-cache state: how much of it is resident, and dropping it without root.

    residency(path)  mincore(2) on a read-only shared mmap of the file: the kernel's own count of
                     the file's pages it holds in memory. Mapping touches nothing and mincore faults
                     nothing in, so measuring never changes the state it measures.
    evict(path)      fdatasync, then posix_fadvise(POSIX_FADV_DONTNEED) over the whole file: the
                     kernel drops the file's clean cached pages. No root is needed (unlike
                     /proc/sys/vm/drop_caches); pages another process has mapped, and every page of
                     a file on tmpfs (there the cache is the storage), stay.

Register L-29 / C-32: where a model is larger than free RAM, a tok/s figure measures this state,
so a visit that sets it records it (plugins/law4/measure.py, bench.prime).
"""
from __future__ import annotations

import ctypes
import mmap
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np

METHOD = "mincore(2) on a read-only shared mmap of the file (ctypes)"


@dataclass(frozen=True)
class Residency:
    """The file's pages (of the system page size) and how many the page cache holds now."""

    pages: int
    resident: int
    page_size: int
    file_bytes: int

    @property
    def fraction(self) -> float:
        return self.resident / self.pages if self.pages else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"pages": self.pages, "resident_pages": self.resident, "fraction": round(self.fraction, 6),
                "resident_bytes": min(self.resident * self.page_size, self.file_bytes)}


def supported() -> Optional[str]:
    """None where this machine can measure and evict; otherwise what it lacks, in words."""
    if not hasattr(os, "posix_fadvise"):
        return "this platform has no posix_fadvise (POSIX_FADV_DONTNEED), so a file cannot be evicted"
    if _libc() is None or not hasattr(_libc(), "mincore"):
        return "this platform's C library has no mincore(2), so residency cannot be measured"
    return None


_LIBC: list[Any] = []


def _libc() -> Any:
    if not _LIBC:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.mmap.restype = ctypes.c_void_p
            libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                                  ctypes.c_int, ctypes.c_int64]
            libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
            libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
        except (OSError, AttributeError):
            libc = None
        _LIBC.append(libc)
    return _LIBC[0]


def residency(path: Path) -> Residency:
    """How many of the file's pages are in the page cache now (mincore; nothing is read)."""
    page = mmap.PAGESIZE
    size = os.path.getsize(path)
    pages = (size + page - 1) // page
    if not pages:
        return Residency(0, 0, page, 0)
    libc = _libc()
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            err = ctypes.get_errno()
            raise OSError(err, f"mmap of {path} for mincore: {os.strerror(err)}")
        try:
            vec = (ctypes.c_ubyte * pages)()
            if libc.mincore(addr, size, vec) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"mincore on {path}: {os.strerror(err)}")
            resident = int((np.frombuffer(vec, dtype=np.uint8) & 1).sum())  # bit 0: resident
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)
    return Residency(pages, resident, page, size)


def evict(path: Path) -> None:
    """Drop the file's pages from the page cache (clean ones: dirty pages are written back first,
    since DONTNEED only starts writeback on a dirty page and leaves it cached)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
