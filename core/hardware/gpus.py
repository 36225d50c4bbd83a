"""The NVIDIA GPUs of this machine: NVML first, nvidia-smi when NVML cannot start.

A runner with the driver installed always has nvidia-smi; nvidia-ml-py (the `gpu` extra) may be
missing from the environment lawbench runs in, and then a GPU runner must still be recognised,
never fall back to the generic `cpu` profile and skip everything. `LAWBENCH_GPU_DETECT` picks the
source (auto, nvml, nvidia-smi, none) so a runner owner can see what each one finds.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import Any, Iterator, Optional

from pydantic import BaseModel, ConfigDict

from lawbench.core.errors import UsageError

GIB = 1024 ** 3
SOURCES = ("auto", "nvml", "nvidia-smi", "none")
SMI_TIMEOUT_S = 20  # nvidia-smi can hang on a wedged driver: never hang the run with it


class GpuInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    index: int
    name: str
    compute_capability: Optional[str] = None  # "6.1"
    memory_total_gb: Optional[float] = None  # GiB; None where the driver cannot say (unified parts)
    driver: Optional[str] = None
    source: Optional[str] = None  # "nvml" or "nvidia-smi": which one found it


def detect_source() -> str:
    """The source `LAWBENCH_GPU_DETECT` asks for; an unknown value is a usage error."""
    value = os.environ.get("LAWBENCH_GPU_DETECT", "auto").strip().lower() or "auto"
    if value not in SOURCES:
        raise UsageError(f"LAWBENCH_GPU_DETECT={value!r} is not one of {', '.join(SOURCES)}")
    return value


def list_gpus() -> list[GpuInfo]:
    """Every NVIDIA GPU this machine has, from NVML, else nvidia-smi; [] without a driver."""
    source = detect_source()
    if source in ("auto", "nvml"):
        gpus = _nvml_gpus()
        if gpus is not None or source == "nvml":
            return gpus or []
    if source in ("auto", "nvidia-smi"):
        return _smi_gpus()
    return []


# --------------------------------------------------------------------------- NVML


class Nvml:
    """NVML opened for one block; None when the library, the driver or a GPU is missing, or when
    LAWBENCH_GPU_DETECT says not to use it."""

    def __enter__(self) -> Any:
        self.nvml = None
        source = detect_source()
        if source not in ("auto", "nvml"):
            return None
        try:
            import pynvml
            pynvml.nvmlInit()
        except Exception as exc:  # no nvidia-ml-py, no libnvidia-ml, no driver: no GPUs, not a crash
            if source == "nvml":  # asked for by name: say why it found nothing
                why = ("nvidia-ml-py is not installed (pip install 'lawbench[gpu]')"
                       if isinstance(exc, ImportError) else f"{type(exc).__name__}: {exc}")
                _warn_once(f"LAWBENCH_GPU_DETECT=nvml: NVML cannot start ({why}); no GPU found through it")
            return None
        self.nvml = pynvml
        return pynvml

    def __exit__(self, *exc: Any) -> None:
        if self.nvml is not None:
            try:
                self.nvml.nvmlShutdown()
            except Exception:
                pass


def nvml_call(fn: Any, *args: Any) -> Any:
    try:
        value = fn(*args)
    except Exception:  # NotSupported on unified-memory parts, Unknown on odd drivers
        return None
    return value.decode() if isinstance(value, bytes) else value


def nvml_devices(nvml: Any) -> Iterator[tuple[int, Any]]:
    """(index, handle) of every GPU NVML can open; one it cannot is left out."""
    for index in range(nvml_call(nvml.nvmlDeviceGetCount) or 0):
        handle = nvml_call(nvml.nvmlDeviceGetHandleByIndex, index)
        if handle is not None:
            yield index, handle


def _nvml_gpus() -> Optional[list[GpuInfo]]:
    """None when NVML cannot start (so nvidia-smi is tried); a list, maybe empty, when it can."""
    gpus: list[GpuInfo] = []
    with Nvml() as nvml:
        if nvml is None:
            return None
        driver = nvml_call(nvml.nvmlSystemGetDriverVersion)
        for index, handle in nvml_devices(nvml):
            cc = nvml_call(nvml.nvmlDeviceGetCudaComputeCapability, handle)
            mem = nvml_call(nvml.nvmlDeviceGetMemoryInfo, handle)
            gpus.append(GpuInfo(
                index=index,
                name=nvml_call(nvml.nvmlDeviceGetName, handle) or "unknown NVIDIA GPU",
                compute_capability=f"{cc[0]}.{cc[1]}" if cc else None,
                memory_total_gb=round(mem.total / GIB, 2) if mem is not None and mem.total else None,
                driver=driver, source="nvml",
            ))
    return gpus


# --------------------------------------------------------------------------- nvidia-smi

# compute_cap is a query field since driver 510; older drivers refuse the whole query, so the
# second form asks without it (the profile's compute-capability check then says "found cc None").
SMI_FIELDS = ("index", "name", "compute_cap", "memory.total", "driver_version")
SMI_FIELDS_OLD = ("index", "name", "memory.total", "driver_version")


def _smi_gpus() -> list[GpuInfo]:
    for fields in (SMI_FIELDS, SMI_FIELDS_OLD):
        text = run_smi(["--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"])
        if text is not None:
            return parse_smi_gpus(text, fields)
        if _hung:  # a wedged driver: asking again costs another timeout
            break
    return []


_hung = False
_warned: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        print(f"lawbench: warning: {message}", file=sys.stderr, flush=True)


def run_smi(args: list[str]) -> Optional[str]:
    """nvidia-smi's output, or None when it is absent, fails, or hangs past SMI_TIMEOUT_S (said
    once on stderr: a hung driver must not read as a machine without a GPU)."""
    global _hung
    smi = shutil.which("nvidia-smi")
    if smi is None or _hung:
        return None
    try:
        done = subprocess.run([smi, *args], capture_output=True,
                              text=True, encoding="utf-8", errors="replace", timeout=SMI_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        _hung = True
        _warn_once(f"{smi} did not answer within {SMI_TIMEOUT_S} s (a hung driver?); no GPU found through it")
        return None
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def parse_smi_gpus(text: str, fields: tuple[str, ...] = SMI_FIELDS) -> list[GpuInfo]:
    """Rows of `nvidia-smi --query-gpu=… --format=csv,noheader,nounits`. "[N/A]" (GB10's
    memory.total) and "[Not Supported]" become None; a row that cannot be read is left out."""
    gpus: list[GpuInfo] = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(fields):
            continue
        row = {f: (None if c.startswith("[") or not c else c) for f, c in zip(fields, cells)}
        try:
            index = int(row["index"] or "")
            mem = float(row["memory.total"]) * 1024 ** 2 / GIB if row.get("memory.total") else None
        except ValueError:
            continue
        gpus.append(GpuInfo(index=index, name=row["name"] or "unknown NVIDIA GPU",
                            compute_capability=row.get("compute_cap"),
                            memory_total_gb=round(mem, 2) if mem else None,
                            driver=row.get("driver_version"), source="nvidia-smi"))
    return gpus


# --------------------------------------------------------------------------- state per sample

SMI_STATE_FIELDS = ("index", "name", "driver_version", "memory.used", "memory.total",
                    "temperature.gpu", "power.draw", "pstate", "clocks.sm", "clocks.mem")


def gpu_state() -> list[dict[str, Any]]:
    """Each GPU's memory, clocks, temperature and power next to a sample (NVML, else nvidia-smi)."""
    state: list[dict[str, Any]] = []
    with Nvml() as nvml:
        if nvml is not None:
            driver = nvml_call(nvml.nvmlSystemGetDriverVersion)
            for index, h in nvml_devices(nvml):
                mem = nvml_call(nvml.nvmlDeviceGetMemoryInfo, h)
                state.append({
                    "index": index,
                    "name": nvml_call(nvml.nvmlDeviceGetName, h),
                    "driver": driver,
                    # None on unified-memory parts (GB10): read per PID instead (seed 002).
                    "memory_used_gb": _gib(mem.used) if mem is not None else None,
                    "memory_total_gb": _gib(mem.total) if mem is not None else None,
                    "temperature_c": nvml_call(nvml.nvmlDeviceGetTemperature, h, nvml.NVML_TEMPERATURE_GPU),
                    "power_w": _watts(nvml_call(nvml.nvmlDeviceGetPowerUsage, h)),
                    "pstate": nvml_call(nvml.nvmlDeviceGetPerformanceState, h),
                    "sm_mhz": nvml_call(nvml.nvmlDeviceGetClockInfo, h, nvml.NVML_CLOCK_SM),
                    "mem_mhz": nvml_call(nvml.nvmlDeviceGetClockInfo, h, nvml.NVML_CLOCK_MEM),
                    "source": "nvml",
                })
            return state
    if detect_source() not in ("auto", "nvidia-smi"):
        return state
    return parse_smi_state(run_smi(["--query-gpu=" + ",".join(SMI_STATE_FIELDS), "--format=csv,noheader,nounits"])
                           or "")


def parse_smi_state(text: str) -> list[dict[str, Any]]:
    """Rows of `nvidia-smi --query-gpu=<SMI_STATE_FIELDS> --format=csv,noheader,nounits`."""
    state: list[dict[str, Any]] = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(SMI_STATE_FIELDS):
            continue
        row = dict(zip(SMI_STATE_FIELDS, (None if c.startswith("[") else c for c in cells)))
        state.append({
            "index": _num(row["index"], int), "name": row["name"], "driver": row["driver_version"],
            "memory_used_gb": _mib_to_gib(row["memory.used"]),
            "memory_total_gb": _mib_to_gib(row["memory.total"]),
            "temperature_c": _num(row["temperature.gpu"], float), "power_w": _num(row["power.draw"], float),
            "pstate": row["pstate"], "sm_mhz": _num(row["clocks.sm"], float),
            "mem_mhz": _num(row["clocks.mem"], float), "source": "nvidia-smi",
        })
    return state


def _num(text: Optional[str], kind: Any) -> Any:
    try:
        return kind(text) if text is not None else None
    except ValueError:
        return None


def _mib_to_gib(text: Optional[str]) -> Optional[float]:
    mib = _num(text, float)
    return round(mib / 1024, 3) if mib is not None else None


def _gib(value: Optional[int]) -> Optional[float]:
    return round(value / GIB, 3) if value is not None else None


def _watts(milliwatts: Optional[int]) -> Optional[float]:
    return round(milliwatts / 1000, 1) if milliwatts is not None else None
