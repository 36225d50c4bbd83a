"""Which CUDA architecture a profile's GPU needs, and whether the installed toolkit can build it.

ggml's CUDA kernels are compiled for the architectures CMAKE_CUDA_ARCHITECTURES names; a GPU
whose architecture is not among them either cannot run them (an older GPU than the build: Pascal
cc 6.1 under an sm_90 build) or runs them through PTX JIT at first launch (a newer one: GB10
cc 12.1 under sm_90), and neither is the engine the profile's anchors describe. So the build
follows the profile, and a toolkit that cannot target it is refused before cmake starts.
"""
from __future__ import annotations

import re
import subprocess
from typing import Optional

from lawbench.core.errors import LawbenchError
from lawbench.core.hardware.gpus import list_gpus

# The toolkits that can compile for each architecture, from NVIDIA's CUDA release notes: the
# first release that targets it, and the last (CUDA 13.0 dropped everything before Turing).
# Only used to say which toolkit to install; what the installed nvcc can do is asked of nvcc.
TOOLKITS: dict[int, tuple[str, Optional[str]]] = {
    50: ("6.0", "12.9"), 52: ("7.0", "12.9"), 60: ("8.0", "12.9"), 61: ("8.0", "12.9"),
    70: ("9.0", "12.9"), 75: ("10.0", None), 80: ("11.0", None), 86: ("11.1", None),
    89: ("11.8", None), 90: ("11.8", None), 100: ("12.8", None), 120: ("12.8", None), 121: ("12.9", None),
}


def arch_of(compute_capability: str) -> str:
    """CMAKE_CUDA_ARCHITECTURES for a compute capability: "6.1" -> "61", "12.1" -> "121"."""
    major, _, minor = compute_capability.partition(".")
    if not (major.isdigit() and minor.isdigit()):
        raise LawbenchError(f"compute capability {compute_capability!r} is not 'major.minor' (e.g. '6.1')")
    return f"{int(major)}{int(minor)}"


def this_machines_arch() -> str:
    """The architecture of this machine's first GPU with a known compute capability; "90" without one."""
    for gpu in list_gpus():
        if gpu.compute_capability:
            return arch_of(gpu.compute_capability)
    return "90"


def toolkit_that_can(arch: str) -> str:
    """In words, which CUDA toolkits can target `arch` (for an error message)."""
    known = TOOLKITS.get(int(arch)) if arch.isdigit() else None
    if known is None:
        return "a CUDA toolkit whose `nvcc --list-gpu-code` lists sm_" + arch
    first, last = known
    return f"CUDA {first} to {last}" if last else f"CUDA {first} or newer"


def parse_release(text: str) -> Optional[str]:
    match = re.search(r"release (\d+\.\d+)", text)
    return match.group(1) if match else None


def nvcc_targets(nvcc: str) -> Optional[set[str]]:
    """The sm_XX codes this nvcc can compile for (`--list-gpu-code`, CUDA 11+); None if it cannot say."""
    return parse_gpu_codes(_ask(nvcc, "--list-gpu-code") or "")


def parse_gpu_codes(text: str) -> Optional[set[str]]:
    """{"75", "80", …} from `nvcc --list-gpu-code` ("sm_75", one per line); None from nothing."""
    return set(re.findall(r"\bsm_(\d+)[a-z]?\b", text)) or None


def check_toolkit(nvcc: str, arches: str) -> None:
    """Refuse a CUDA build the installed toolkit cannot target, naming the toolkit that can.

    :param arches: CMAKE_CUDA_ARCHITECTURES as given ("61", "90;121", "121a-real").
    """
    for arch in re.split(r"[;,\s]+", arches.strip()):
        if not re.fullmatch(r"\d+[a-z]?(-real|-virtual)?|native|all|all-major", arch):
            raise LawbenchError(f"--cuda-arch {arches!r}: {arch!r} is not a CUDA architecture "
                                "(e.g. 61, 90, 121, or 90;121)")
    version = _ask(nvcc, "--version")
    if version is None:
        raise LawbenchError(f"the CUDA compiler {nvcc} does not run (`{nvcc} --version` failed); point "
                            "CUDACXX at a working nvcc, or put one on PATH")
    targets = nvcc_targets(nvcc)
    if targets is None:
        return  # an old nvcc that cannot list its targets: cmake's own error will have to do
    refuse_unbuildable(arches, targets, nvcc, parse_release(version) or "unknown")


def refuse_unbuildable(arches: str, targets: set[str], nvcc: str, release: str) -> None:
    """The check itself, on what nvcc said (so it is testable on any machine)."""
    for arch in re.split(r"[;,\s]+", arches.strip()):
        number = re.match(r"\d+", arch)
        if number is None or arch in ("native", "all", "all-major"):
            continue
        if number.group(0) not in targets:
            raise LawbenchError(
                f"the CUDA toolkit at {nvcc} (release {release}) cannot build for sm_{number.group(0)} "
                f"(it targets sm_{', sm_'.join(sorted(targets, key=int))}); install "
                f"{toolkit_that_can(number.group(0))} and point CUDACXX at its nvcc")


def _ask(nvcc: str, flag: str) -> Optional[str]:
    try:
        done = subprocess.run([nvcc, flag], capture_output=True,
                              text=True, encoding="utf-8", errors="replace", timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None
