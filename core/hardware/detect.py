"""Recognise the machine: fingerprint it, pick its profile, refuse a mismatched runner.

Also `environment_snapshot()`, the machine state recorded next to every measurement (free RAM
and page cache, clocks, load): register L-29/C-14 show a number without its state cannot be
compared with anything.
"""
from __future__ import annotations

import os
import platform
import socket
import sys
import time
from typing import Any, Optional

import psutil
from pydantic import BaseModel, ConfigDict, Field

from lawbench.core.hardware.gpus import GpuInfo, gpu_state, list_gpus
from lawbench.core.models import HardwareProfile

__all__ = ["GpuInfo", "MachineFingerprint", "list_gpus", "fingerprint_machine", "match_profile",
           "match_reasons", "profile_matches", "environment_snapshot"]

GIB = 1024 ** 3
# The flags that decide which kernels llama.cpp can use; the full list is noise in a report.
INTERESTING_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl",
                     "avx512_vnni", "avx512_bf16", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16",
                     "asimd", "asimddp", "sve", "sve2", "i8mm", "bf16")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MachineFingerprint(_Strict):
    hostname: str = ""
    cpu_model: str = ""
    cpu_count_logical: int = 0
    cpu_count_physical: Optional[int] = None
    ram_total_gb: float = 0.0  # GiB: what RAM sold as "16 GB" reads as, a little under 16
    cpu_flags: list[str] = Field(default_factory=list)
    governor: Optional[str] = None
    gpus: list[GpuInfo] = Field(default_factory=list)


# --------------------------------------------------------------------------- fingerprint


def fingerprint_machine() -> MachineFingerprint:
    info = _cpuinfo()
    flags = set(info.get("flags", info.get("features", "")).split())
    return MachineFingerprint(
        hostname=socket.gethostname(),
        cpu_model=info.get("model name") or platform.processor() or platform.machine(),
        cpu_count_logical=psutil.cpu_count(logical=True) or os.cpu_count() or 0,
        cpu_count_physical=psutil.cpu_count(logical=False),
        ram_total_gb=round(psutil.virtual_memory().total / GIB, 2),
        cpu_flags=[f for f in INTERESTING_FLAGS if f in flags],
        governor=_read_text("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        gpus=list_gpus(),
    )


def _cpuinfo() -> dict[str, str]:
    """The first processor block of /proc/cpuinfo (model name, flags); empty off Linux."""
    fields: dict[str, str] = {}
    text = _read_text("/proc/cpuinfo") or ""
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip().lower(), value.strip())
    return fields


def _read_text(path: str) -> Optional[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read().strip()
    except OSError:
        return None


# --------------------------------------------------------------------------- matching


def match_reasons(fp: MachineFingerprint, profile: HardwareProfile) -> tuple[bool, list[str]]:
    """Whether `fp` satisfies every criterion of the profile's fingerprint, and why."""
    want = profile.fingerprint
    reasons: list[str] = []
    ok = True

    def check(passed: bool, text: str) -> None:
        nonlocal ok
        ok = ok and passed
        reasons.append(("ok: " if passed else "no: ") + text)

    if want.gpu_name_contains or want.compute_capability:
        gpu = _matching_gpu(fp, want.gpu_name_contains, want.compute_capability)
        seen = ", ".join(f"{g.name} (cc {g.compute_capability})" for g in fp.gpus) or "no GPU"
        wanted = " and ".join(x for x in (
            f"name containing {want.gpu_name_contains!r}" if want.gpu_name_contains else "",
            f"cc {want.compute_capability}" if want.compute_capability else "") if x)
        check(gpu is not None, f"GPU with {wanted} (found: {seen})")
    elif want.requires_gpu:
        check(bool(fp.gpus), f"a GPU is required (found {len(fp.gpus)})")
    if want.cpu_model_contains:
        check(want.cpu_model_contains.lower() in fp.cpu_model.lower(),
              f"CPU model contains {want.cpu_model_contains!r} (found {fp.cpu_model!r})")
    if want.ram_gb_min is not None:
        check(fp.ram_total_gb >= want.ram_gb_min,
              f"RAM >= {want.ram_gb_min:g} GiB (found {fp.ram_total_gb:g})")
    if want.ram_gb_max is not None:
        check(fp.ram_total_gb <= want.ram_gb_max,
              f"RAM <= {want.ram_gb_max:g} GiB (found {fp.ram_total_gb:g})")
    if want.generic:
        reasons.append("ok: generic profile, matches any machine")
    elif _specificity(profile) == 0:
        check(False, "the profile's fingerprint names no criterion, so it never auto-matches")
    return ok, reasons


def profile_matches(fp: MachineFingerprint, profile: HardwareProfile) -> bool:
    """True when this machine may run as `profile` (used to refuse a mismatched runner)."""
    return match_reasons(fp, profile)[0]


def match_profile(fp: MachineFingerprint,
                  profiles: dict[str, HardwareProfile]) -> tuple[str, list[str]]:
    """The most specific matching profile, else the generic one; with the reasons."""
    matching = [p for p in profiles.values() if not p.fingerprint.generic and profile_matches(fp, p)]
    if matching:
        best = max(_specificity(p) for p in matching)
        winners = sorted(p.id for p in matching if _specificity(p) == best)
        chosen = profiles[winners[0]]
        reasons = match_reasons(fp, chosen)[1]
        others = sorted(p.id for p in matching if p.id != chosen.id)
        if others:
            reasons.append(f"also matches {', '.join(others)}; chose the most specific "
                           f"({best} criteria{', ties broken by id' if len(winners) > 1 else ''})")
        return chosen.id, reasons
    generic = sorted(p.id for p in profiles.values() if p.fingerprint.generic)
    if not generic:
        return "", ["no profile matches this machine and no generic profile is loaded"]
    chosen_id = "cpu" if "cpu" in generic else generic[0]
    checked = sorted(p.id for p in profiles.values() if not p.fingerprint.generic)
    return chosen_id, [f"no specific profile matches this machine (checked: "
                       f"{', '.join(checked) or 'none'}); using the generic profile"]


def _specificity(profile: HardwareProfile) -> int:
    f = profile.fingerprint
    return sum([f.gpu_name_contains is not None, f.compute_capability is not None,
                f.cpu_model_contains is not None, f.ram_gb_min is not None,
                f.ram_gb_max is not None, f.requires_gpu])


def _matching_gpu(fp: MachineFingerprint, name: Optional[str],
                  cc: Optional[str]) -> Optional[GpuInfo]:
    for gpu in fp.gpus:
        if name and name.lower() not in gpu.name.lower():
            continue
        if cc and gpu.compute_capability != cc:
            continue
        return gpu
    return None


# --------------------------------------------------------------------------- run-time state


def environment_snapshot() -> dict[str, Any]:
    """The machine state next to one measurement: memory, page cache, clocks, load, GPUs."""
    vm = psutil.virtual_memory()
    snap: dict[str, Any] = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),
        "hostname": socket.gethostname(),
        "kernel": platform.release(),
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "ram_total_gb": round(vm.total / GIB, 3),
        "ram_available_gb": round(vm.available / GIB, 3),
        "ram_free_gb": round(vm.free / GIB, 3),
        "page_cache_gb": _gib(getattr(vm, "cached", None)),
        "buffers_gb": _gib(getattr(vm, "buffers", None)),
        "swap_used_gb": round(psutil.swap_memory().used / GIB, 3),
        "governor": _read_text("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        "load_avg": _load_avg(),
        "cpu_freq_mhz": _cpu_freq(),
    }
    snap["gpus"] = gpu_state()
    return snap


def _gib(value: Optional[int]) -> Optional[float]:
    return round(value / GIB, 3) if value is not None else None


def _load_avg() -> Optional[list[float]]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def _cpu_freq() -> Optional[dict[str, float]]:
    try:
        freq = psutil.cpu_freq()
    except Exception:  # psutil raises on some VMs without cpufreq
        return None
    if freq is None:
        return None
    return {"current": round(freq.current, 1), "min": round(freq.min, 1), "max": round(freq.max, 1)}
