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
