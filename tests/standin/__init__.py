"""The minfer stand-in (minfer_standin.py) and its per-PID instrument (nvidia-smi), for tests.

Both are real executables run as subprocesses; this module only says where they are and how to
name them on a command line. The contract they speak: docs/minfer-contract.md.
"""
from __future__ import annotations

import shlex
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
STANDIN = HERE / "minfer_standin.py"
SMI_DIR = HERE  # holds the stand-in `nvidia-smi`: put it first on PATH
FAULT_ENV = "MINFER_STANDIN_FAULT"
REVISION_ENV = "MINFER_STANDIN_REVISION"
HOLD_ENV = "MINFER_STANDIN_HOLD_S"
PIDFILE_ENV = "MINFER_STANDIN_PIDFILE"
GPU_ENV = "MINFER_STANDIN_GPU"  # "GB10": the stand-in nvidia-smi also lists one simulated GB10
RATES_ENV = "MINFER_STANDIN_RATES"  # "FAST,SLOW" tok/s of the test's own (default: the seed's)
READ_MARK_ENV = "MINFER_STANDIN_READ_MARK"  # with HOLD_ENV: hold until the stand-in nvidia-smi read it
MIB_ENV = "MINFER_STANDIN_MIB"  # "BASE,PLANE" MiB of the test's own (default: the seed's)


def argv() -> list[str]:
    return [sys.executable, str(STANDIN)]


def command() -> str:
    """The stand-in as a LAWBENCH_MINFER_CMD value."""
    return " ".join(shlex.quote(a) for a in argv())


def faults() -> dict[str, str]:
    """The stand-in's planted faults and what each plants (read from the script itself)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("minfer_standin", STANDIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(module.FAULTS)


HARNESS_SOURCE = HERE / "tracer_harness.cpp"
HARNESS_ENV = "MINFER_STANDIN_TRACE_HARNESS"  # the built harness: traced stand-in passes write a trace
KERNEL_MS_ENV = "MINFER_STANDIN_KERNEL_MS"  # "FAST,SLOW" ms per ffn_down launch (default: the seed's)


def build_harness(out_dir: Path) -> Path:
    """tracer_harness.cpp built with lawbench's real tracer source compiled in, against the
    toolkit's real CUPTI (no GPU needed). NotApplicable without a toolkit with CUPTI."""
    import os
    import subprocess

    from lawbench.core.engines import kernels

    try:
        inputs = kernels.tracer_inputs()
    except kernels.NotApplicable:
        if not Path("/usr/local/cuda/include/cupti_activity.h").is_file() or os.environ.get("CUDA_HOME"):
            raise
        os.environ["CUDA_HOME"] = "/usr/local/cuda"  # nvcc on PATH outside the toolkit's own bin/
        try:
            inputs = kernels.tracer_inputs()
        finally:
            del os.environ["CUDA_HOME"]
    exe = Path(out_dir) / "tracer_harness"
    subprocess.run([inputs["cxx"], "-O1", "-std=c++17", f"-DKREC={inputs['krec']}", f"-I{inputs['include']}",
                    f"-I{inputs['root']}/include", "-include", str(kernels.SOURCE), str(HARNESS_SOURCE), "-o",
                    str(exe), f"-L{inputs['libdir']}", "-lcupti", f"-Wl,-rpath,{inputs['libdir']}"],
                   check=True, capture_output=True, timeout=300)
    return exe
