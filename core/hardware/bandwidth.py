"""Measure this machine's memory read bandwidth and write it into a profile.

RAM: T threads each reduce their own slice of one array far larger than the last-level cache.
numpy releases the GIL inside reductions, so the threads read in parallel; `ndarray.max` is a
plain streaming compare with no accumulation chain, so it runs at memory speed rather than at
the speed of a dependent add. The figure is the median of repeats — register C-24: one sample
of a noisy machine is a coin toss — and the sample list is kept.
"""
from __future__ import annotations

import datetime
import os
import re
import statistics
import threading
import time
from pathlib import Path
from typing import Any, Optional

import numpy as np
import psutil
from pydantic import BaseModel, ConfigDict, Field

from lawbench.core.errors import UsageError
from lawbench.core.hardware import detect, toml_out
from lawbench.core.hardware import profiles as profile_io
from lawbench.core.cpus import usable_cpus
from lawbench.core.models import Fact, HardwareProfile
from lawbench.core.paths import writable_dir

MIB = 1024 ** 2
GIB = 1024 ** 3
DEFAULT_SIZE_MB = 1024  # 1 GiB: ~30x a large desktop L3, well past any LLC we expect
LLC_MULTIPLE = 8  # never measure less than 8x the last-level cache: the cache would answer


class BandwidthResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    median_gbs: float
    samples: list[float] = Field(default_factory=list)  # GB/s (1e9 bytes/s) per repeat
    threads: int
    size_bytes: int
    method: str = "numpy max-reduce, one slice per thread"


class VramResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    median_gbs: Optional[float] = None
    samples: list[float] = Field(default_factory=list)
    size_bytes: int = 0
    device: str = ""
    skipped: Optional[str] = None  # why nothing was measured


# --------------------------------------------------------------------------- RAM


def last_level_cache_bytes() -> Optional[int]:
    """The largest cache sysfs reports for cpu0 (usually L3); None where it cannot be read."""
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    sizes = []
    for index in base.glob("index*"):
        try:
            text = (index / "size").read_text(encoding="utf-8").strip()
        except OSError:
            continue
        m = re.fullmatch(r"(\d+)([KMG]?)", text)
        if m:
            sizes.append(int(m.group(1)) * {"": 1, "K": 1024, "M": MIB, "G": GIB}[m.group(2)])
    return max(sizes) if sizes else None


def measure_ram_bandwidth(threads: Optional[int] = None, size_mb: Optional[int] = None,
                          repeats: int = 7) -> BandwidthResult:
    """Multi-threaded read bandwidth of RAM, median of `repeats` timed passes after a warm-up."""
    threads = usable_cpus() if threads is None else threads
    if threads < 1 or repeats < 1:
        raise UsageError("threads and repeats must be at least 1")
    size = _array_bytes(size_mb, threads)
    data = np.ones(size // 8, dtype=np.float64)  # np.ones writes every page: all resident
    n = data.size // threads
    slices = [data[i * n:(i + 1) * n] for i in range(threads)]
    read_bytes = n * threads * data.itemsize
    _timed_pass(slices)  # warm-up: thread start, page tables, frequency ramp
    samples = [round(read_bytes / _timed_pass(slices) / 1e9, 3) for _ in range(repeats)]
    del data, slices
    return BandwidthResult(median_gbs=round(statistics.median(samples), 3), samples=samples,
                           threads=threads, size_bytes=read_bytes)


def _array_bytes(size_mb: Optional[int], threads: int) -> int:
    llc = last_level_cache_bytes()
    if size_mb is not None:
        size = size_mb * MIB
        if llc and size < LLC_MULTIPLE * llc:
            raise UsageError(f"--size-mb {size_mb} is under {LLC_MULTIPLE}x this CPU's "
                             f"{llc // MIB} MiB last-level cache; the cache would be measured, "
                             f"not RAM. Use at least {LLC_MULTIPLE * llc // MIB}.")
    else:
        size = max(DEFAULT_SIZE_MB * MIB, LLC_MULTIPLE * (llc or 0))
    available = psutil.virtual_memory().available
    if size > available // 2:
        raise UsageError(f"a {size // MIB} MiB test array needs more than half of the "
                         f"{available // MIB} MiB available RAM; free memory or pass a "
                         "smaller --size-mb")
    return size - size % (8 * threads)


def _timed_pass(slices: list[np.ndarray]) -> float:
    """Seconds for all threads to reduce their slices, started together behind one barrier."""
    barrier = threading.Barrier(len(slices) + 1)
    errors: list[BaseException] = []

    def work(chunk: np.ndarray) -> None:
        try:
            barrier.wait()
            chunk.max()
        except BaseException as exc:  # re-raised in the caller, never lost in a thread
            errors.append(exc)

    workers = [threading.Thread(target=work, args=(s,), daemon=True) for s in slices]
    for w in workers:
        w.start()
    barrier.wait()
    start = time.perf_counter()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - start
    if errors:
        raise errors[0]
    return elapsed


# --------------------------------------------------------------------------- VRAM


def measure_vram_bandwidth(size_mb: int = 2048, repeats: int = 7, device: int = 0) -> VramResult:
    """Device read bandwidth via CuPy when it is installed and a GPU is present; else skipped."""
    if not detect.list_gpus():
        return VramResult(skipped="no NVIDIA GPU visible through NVML")
    try:
        import cupy as cp
    except Exception as exc:  # not installed, or installed for another CUDA version
        return VramResult(skipped=f"CuPy is not importable ({type(exc).__name__}); "
                                  "install cupy-cuda12x to measure VRAM bandwidth")
    try:
        with cp.cuda.Device(device):
            data = cp.ones(size_mb * MIB // 4, dtype=cp.float32)
            start, stop = cp.cuda.Event(), cp.cuda.Event()
            data.max()  # warm-up: kernel compile and clocks
            samples = []
            for _ in range(repeats):
                start.record()
                data.max()
                stop.record()
                stop.synchronize()
                seconds = cp.cuda.get_elapsed_time(start, stop) / 1000
                samples.append(round(data.nbytes / seconds / 1e9, 1))
            name = cp.cuda.runtime.getDeviceProperties(device)["name"]
            name = name.decode() if isinstance(name, bytes) else name
            return VramResult(median_gbs=statistics.median(samples), samples=samples,
                              size_bytes=data.nbytes, device=str(name))
    except Exception as exc:  # driver/runtime mismatch, out of memory
        return VramResult(skipped=f"CuPy could not run on device {device}: {exc}")


# --------------------------------------------------------------------------- profile writing


def measured_profile(base: HardwareProfile, result: BandwidthResult,
                     fp: detect.MachineFingerprint, profile_id: Optional[str] = None,
                     when: Optional[datetime.date] = None) -> HardwareProfile:
    """`base` with its RAM tier's measured bandwidth and capacity from this machine."""
    when = when or datetime.datetime.now(datetime.timezone.utc).date()  # the day as records count it (UTC)
    ram = next((t for t in base.tiers if t.kind == "ram"), None)
    if ram is None:
        raise UsageError(f"profile {base.id!r} has no RAM tier to measure; "
                         "use --base cpu or a profile with a kind = \"ram\" tier")
    host = fp.hostname or "this machine"
    new_id = profile_id or f"{base.id}-{_slug(host)}"
    measured = Fact(value=result.median_gbs, source=(
        f"measured by lawbench profiles measure on {host} {when.isoformat()}: median of "
        f"{len(result.samples)}, {result.threads} threads, {result.size_bytes // MIB} MiB "
        f"({', '.join(f'{s:g}' for s in result.samples)} GB/s)"))
    capacity = Fact(value=round(fp.ram_total_gb, 1), source=(
        f"measured: psutil total RAM on {host} {when.isoformat()} (GiB)"))
    tiers = [t.model_copy(update={"bandwidth_measured_gbs": measured, "capacity_gb": capacity})
             if t.name == ram.name else t for t in base.tiers]
    fingerprint = base.fingerprint.model_copy(update={
        "generic": False,
        "cpu_model_contains": fp.cpu_model or None,
        # ±5 %: a DIMM change shows up as a mismatch, firmware reservations do not.
        "ram_gb_min": round(fp.ram_total_gb * 0.95, 1),
        "ram_gb_max": round(fp.ram_total_gb * 1.05, 1),
    })
    notes = [f"Written by `lawbench profiles measure` from base profile {base.id!r} on {host} "
             f"{when.isoformat()}; fingerprint = this CPU model and its RAM total ±5 %.",
             # a generic base's notes describe the catch-all, not this machine
             *([] if base.fingerprint.generic else base.notes)]
    return base.model_copy(update={
        "id": new_id,
        "description": f"{base.description} — measured on {host}",
        "runner_labels": ["self-hosted", f"lawbench-{new_id}"],
        "fingerprint": fingerprint,
        "tiers": tiers,
        "threads": result.threads,
        "notes": notes,
    })


def write_measured_profile(base: str = "cpu", out: Optional[os.PathLike | str] = None,
                           threads: Optional[int] = None, size_mb: Optional[int] = None,
                           repeats: int = 7, profile_id: Optional[str] = None,
                           extra_dirs: Any = (), laws: profile_io.Laws = None) -> tuple[Path, HardwareProfile, BandwidthResult]:
    """Measure RAM, write a TOML profile for this machine, and re-load it to prove it valid (each
    law's table checked by ``laws``, the registry's: what `lawbench run` will check)."""
    known = profile_io.load_profiles(extra_dirs, laws)
    base_profile = profile_io.get_profile(base, known)
    fp = detect.fingerprint_machine()
    # Everything that could refuse the result is checked before the minute of measuring.
    new_id = profile_id or f"{base_profile.id}-{_slug(fp.hostname or 'this machine')}"
    if new_id in known:
        raise UsageError(f"profile id {new_id!r} is already a profile: a second file with it would be set "
                         f"aside as a duplicate; give another with --id")
    path = Path(out) if out else Path(f"{new_id}.toml")
    if path.is_dir():
        raise UsageError(f"--out {path} is a folder; give the profile's file path, e.g. {path / (new_id + '.toml')}")
    writable_dir(path.parent, f"--out file {path}: its folder", fix="give a writable path")
    result = measure_ram_bandwidth(threads=threads, size_mb=size_mb, repeats=repeats)
    profile = measured_profile(base_profile, result, fp, profile_id=new_id)
    try:
        path.write_text(toml_out.dumps(_profile_dict(profile)), encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write --out {path}: {exc.strerror or exc}") from None
    profile_io.load_profile_file(path, laws)  # what was written must load
    return path, profile, result


def _profile_dict(profile: HardwareProfile) -> dict[str, Any]:
    data = profile.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
    data["id"] = profile.id  # keep the key order readable: id first
    return {"id": data.pop("id"), **data}


def _slug(text: str) -> str:
    slug = re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-._")
    return slug or "machine"
