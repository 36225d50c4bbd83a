"""Per-process GPU memory: what an engine process (and its children) holds, read per PID.

On unified-memory parts (a GB10: seed 002) nvidia-smi's aggregate "used" field reads [N/A]; only
the per-process list (`--query-compute-apps`) reports what an engine holds, so every law that
weighs an engine's memory reads it here (public: lawbench.hardware). Two instruments read that list:
nvidia-ml-py (nvmlDeviceGetComputeRunningProcesses), and the seed's own command line

    nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits

NVML is asked first; when it cannot start (no driver, no library) nvidia-smi is tried. With neither,
reading raises NotApplicable with both reasons, which core turns into a SKIP (a FAIL on a runner of
the anchor's own profile).
"""
from __future__ import annotations

import shutil
import subprocess
from typing import Callable, Optional

from lawbench.core.errors import NotApplicable
from lawbench.core.models import HardwareProfile

MIB = 1024 * 1024
NVIDIA_SMI_QUERY = ["--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"]


def refuse_aggregate(profile: HardwareProfile) -> None:
    """An aggregate reading means nothing where the profile says memory is read per PID."""
    if profile.memory_reading == "per-pid":
        raise NotApplicable(
            f"profile {profile.id!r} reads GPU memory per PID (unified memory: the aggregate field reads "
            "[N/A]); an aggregate reading is refused — use the per-process list instead")


def parse_compute_apps(text: str) -> dict[int, Optional[float]]:
    """Parse `pid, used_memory` CSV lines (MiB, no header, no units) into {pid: MiB or None}.

    "[N/A]" (or any non-number) in the memory column becomes None: the process is on the GPU but
    the driver cannot say how much it holds. A line that does not start with a PID is an error.
    """
    out: dict[int, Optional[float]] = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("No running"):
            continue
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 2 or not parts[0].isdigit():
            raise ValueError(f"nvidia-smi --query-compute-apps line {n} is not 'pid, used_memory': {line!r}")
        try:
            mib: Optional[float] = float(parts[1])
        except ValueError:
            mib = None
        # A process on two GPUs is listed twice; its footprint is the sum.
        pid = int(parts[0])
        prev = out.get(pid)
        out[pid] = None if mib is None and prev is None else (prev or 0.0) + (mib or 0.0)
    return out


def _nvml_reader() -> Callable[[], dict[int, Optional[float]]]:
    import pynvml  # nvidia-ml-py; ImportError is reported by the caller

    pynvml.nvmlInit()

    def read() -> dict[int, Optional[float]]:
        out: dict[int, Optional[float]] = {}
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
                used = proc.usedGpuMemory  # bytes, or None where the driver cannot tell
                mib = None if used is None else used / MIB
                prev = out.get(proc.pid)
                out[proc.pid] = None if mib is None and prev is None else (prev or 0.0) + (mib or 0.0)
        return out

    return read


def _smi_reader(exe: str) -> Callable[[], dict[int, Optional[float]]]:
    def read() -> dict[int, Optional[float]]:
        try:
            proc = subprocess.run([exe, *NVIDIA_SMI_QUERY], capture_output=True,
                                  text=True, encoding="utf-8", errors="replace", timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise NotApplicable(f"nvidia-smi could not be run: {exc}") from None
        if proc.returncode != 0:
            raise NotApplicable(f"nvidia-smi exited with status {proc.returncode}: "
                                f"{(proc.stderr or proc.stdout).strip()[:300]}")
        try:
            return parse_compute_apps(proc.stdout)
        except ValueError as exc:
            raise NotApplicable(str(exc)) from None

    return read


class PerPidMemory:
    """Reads {pid: MiB} for every compute process on the GPU(s), through NVML and/or nvidia-smi."""

    def __init__(self, readers: list[tuple[str, Callable[[], dict[int, Optional[float]]]]]):
        self.readers = readers
        self.instrument = readers[0][0] if readers else "none"

    @classmethod
    def open(cls) -> "PerPidMemory":
        readers, why = [], []
        try:
            readers.append(("nvml", _nvml_reader()))
        except ImportError:
            why.append("nvidia-ml-py is not installed (pip install 'lawbench[gpu]')")
        except Exception as exc:  # pynvml.NVMLError_* when there is no driver or no GPU
            why.append(f"NVML could not start: {exc}")
        exe = shutil.which("nvidia-smi")
        if exe:
            readers.append(("nvidia-smi --query-compute-apps", _smi_reader(exe)))
        else:
            why.append("nvidia-smi is not on PATH")
        if not readers:
            raise NotApplicable("no per-process GPU memory instrument on this machine: " + "; ".join(why))
        return cls(readers)

    def used_by(self, pids: set[int]) -> Optional[float]:
        """MiB held by these processes together; None while none of them is listed with a number.

        Where NVML lists a process without a number ([N/A]), the seed's nvidia-smi query is asked.
        """
        for name, read in self.readers:
            readings = read()
            values = [v for p in pids if (v := readings.get(p)) is not None]
            if values:
                self.instrument = name
                return float(sum(values))
        return None


def aggregate_used_mib(profile: HardwareProfile, device: int = 0) -> float:
    """The device-wide used memory (MiB) — refused where the profile reads memory per PID."""
    refuse_aggregate(profile)
    try:
        import pynvml

        pynvml.nvmlInit()
        info = pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(device))
    except ImportError:
        raise NotApplicable("nvidia-ml-py is not installed (pip install 'lawbench[gpu]')") from None
    except Exception as exc:  # pynvml.NVMLError_*: no driver, no GPU, or [N/A] on unified memory
        raise NotApplicable(f"NVML cannot read the aggregate GPU memory: {exc}") from None
    return info.used / MIB


class PeakSampler:
    """The peak per-PID GPU memory of one process while it runs, read every ``interval_s`` on a
    thread of its own (``start`` is a run_process monitor: it returns the stop function).

    ``peak_mib`` stays None when no reading ever listed the process with a number; ``readings``
    counts the readings that did, so a census can refuse a peak taken from too few."""

    def __init__(self, memory: "PerPidMemory", interval_s: float = 0.02):
        self.memory, self.interval_s = memory, interval_s
        self.peak_mib: Optional[float] = None
        self.readings = 0
        self.errors: list[str] = []

    def start(self, pid: int) -> Callable[[], None]:
        import threading

        done = threading.Event()

        def watch() -> None:
            while not done.is_set():
                try:
                    used = self.memory.used_by({pid})
                except Exception as exc:  # an instrument that fails mid-run: say so, stop reading
                    self.errors.append(str(exc))
                    return
                if used is not None:
                    self.readings += 1
                    self.peak_mib = used if self.peak_mib is None else max(self.peak_mib, used)
                done.wait(self.interval_s)

        thread = threading.Thread(target=watch, name=f"gpu-memory-{pid}", daemon=True)
        thread.start()

        def stop() -> None:
            done.set()
            thread.join(timeout=5)

        return stop
