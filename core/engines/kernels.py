"""Kernel census: which CUDA kernels an engine process ran, how often, mapped to path labels.

The load log (loadlog.py) says what llama.cpp asked for and where it put the weights; it cannot say
which kernels then ran. Seed 002's lesson is that a fast path can silently stop running while the
output stays right, so the census here counts the kernels themselves.

Source: lawbench's kernel tracer (kernel_tracer.cpp), a CUDA injection library built on the runner
against the toolkit's CUPTI and loaded into the unchanged engine through CUDA_INJECTION64_PATH. It
counts one CUPTI activity record per kernel that executed, so kernels replayed from a CUDA graph
count too (and are counted again as graph nodes). Cost, measured on the H200 machine over
llama-bench -p 64 -n 4 of a 100 M-parameter Q4_0 model: 0.68 s traced against 0.63 s untraced.
Nsight Compute's per-kernel summary names the same kernels but serializes and replays each one:
10.0 s for -p 8 -n 1 without warm-up, and -p 64 -n 4 with its default sections did not finish in
400 s (tests/data/kernels/README.md). So the tracer is the census source; ncu stays a tool for
looking at one kernel.

Labels (an anchor's [census] names them; every count is kernels executed, not launch calls):

  mmvq:<type>      quantized matrix-vector kernel by weight type (mul_mat_vec_q<type, …>): decode
  mmq:<type>       quantized matrix-matrix kernel (mul_mat_q<type, …>): prompt processing
  mmvf:<type>      float matrix-vector kernel (mul_mat_vec_f<half|bf16|float, …>)
  mmf:<type>       float tensor-core matrix kernel for small batches (mul_mat_f<…>)
  dmmv             the legacy dequantize_mul_mat_vec kernels
  flash-attn       flash-attention kernels (flash_attn_ext_*, flash_attn_tile*, not the combine step)
  cublas-gemm      cuBLAS / CUTLASS GEMM kernels: the float path, or a fallback where weights are quantized
  dequant-cublas(fallback!)  a dequantize_* kernel: quantized weights converted for cuBLAS — the
                   dequantize-plus-cuBLAS fallback; no runtime switch of llama.cpp b11434 asks for
                   it, so it is never an opt-out here
  attn-softmax(opt-out)      attention through soft_max + GEMMs on a run that turned flash
                   attention off (-fa 0): a deliberate opt-out, seed 002's exp=off
  attn-softmax(fallback!)    the same kernels on a run that did not ask for it
  graph-node       kernels executed from a CUDA graph (0 with GGML_CUDA_DISABLE_GRAPHS=1)
  kernels          every kernel executed
  kernel:<name>    every kernel by its base name (template arguments and signature dropped)
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

from lawbench.core.errors import EngineError, NotApplicable

TRACE_MAGIC = "# lawbench-kernel-trace 1"
TRACE_OUT_ENV = "LAWBENCH_KERNEL_TRACE_OUT"
INJECTION_ENV = "CUDA_INJECTION64_PATH"
SOURCE = Path(__file__).with_name("kernel_tracer.cpp")
LIBRARY = "liblawbench_kernel_tracer.so"


@dataclass
class KernelTrace:
    """Every distinct kernel of one process: demangled name -> (executed, of which from a graph)."""

    kernels: dict[str, tuple[int, int]] = field(default_factory=dict)
    dropped: int = 0  # activity records CUPTI had to drop: the counts would be low


def parse_trace(text: str, where: str = "kernel trace") -> KernelTrace:
    """Parse the tracer's file. A file without its first line is not a trace (the engine died
    before exit, or something else wrote it): EngineError, never an empty census."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith(TRACE_MAGIC):
        raise EngineError(f"{where} is not a lawbench kernel trace (first line {lines[0][:60]!r} "
                          f"where {TRACE_MAGIC!r} was expected)" if lines else f"{where} is empty")
    m = re.search(r"dropped=(\d+)", lines[0])
    trace = KernelTrace(dropped=int(m.group(1)) if m else 0)
    for n, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        parts = line.split("\t", 2)
        if len(parts) != 3 or not parts[0].isdigit() or not parts[1].isdigit():
            raise EngineError(f"{where} line {n} is not '<count>\\t<in graph>\\t<kernel>': {line[:120]!r}")
        total, in_graph = trace.kernels.get(parts[2], (0, 0))
        trace.kernels[parts[2]] = (total + int(parts[0]), in_graph + int(parts[1]))
    return trace


_TEMPLATE = re.compile(r"^(?:void\s+)?(?P<base>[A-Za-z_][\w:]*)\s*(?:<(?P<args>.*?)>)?\s*\(")


def base_name(kernel: str) -> tuple[str, str]:
    """(base name, first template argument or '') of a demangled kernel name."""
    m = _TEMPLATE.match(kernel)
    if not m:
        return kernel.split("(")[0].strip(), ""
    args = m.group("args") or ""
    first = args.split(",")[0].strip() if args else ""
    return m.group("base"), first


def weight_type(arg: str) -> str:
    """``(ggml_type)2`` or ``2`` -> ``q4_0`` (gguf's own type table); ``__half`` -> ``f16``."""
    m = re.fullmatch(r"(?:\(ggml_type\))?(\d+)", arg)
    if m:
        from gguf import GGMLQuantizationType

        try:
            return GGMLQuantizationType(int(m.group(1))).name.lower()
        except ValueError:
            return f"type{m.group(1)}"
    return {"__half": "f16", "half": "f16", "__nv_bfloat16": "bf16", "nv_bfloat16": "bf16",
            "float": "f32"}.get(arg, arg or "?")


_GEMM = re.compile(r"cutlass|cublas|gemm|xmma", re.IGNORECASE)


def kernel_labels(trace: KernelTrace, opt_outs: Iterable[str] = ()) -> dict[str, int]:
    """The census counts of one trace. ``opt_outs`` names the fast paths the run deliberately
    turned off ("flash-attn" for -fa 0), which decides between (opt-out) and (fallback!)."""
    opted = set(opt_outs)
    counts: Counter = Counter()
    for kernel, (n, in_graph) in trace.kernels.items():
        base, first = base_name(kernel)
        counts["kernels"] += n
        counts["graph-node"] += in_graph
        counts[f"kernel:{base}"] += n
        if base == "mul_mat_vec_q":
            counts[f"mmvq:{weight_type(first)}"] += n
        elif base == "mul_mat_q":
            counts[f"mmq:{weight_type(first)}"] += n
        elif base == "mul_mat_vec_f":
            counts[f"mmvf:{weight_type(first)}"] += n
        elif base == "mul_mat_f":
            counts[f"mmf:{weight_type(first)}"] += n
        elif base.startswith("dequantize_mul_mat_vec"):
            counts["dmmv"] += n
        elif base.startswith("dequantize"):
            counts["dequant-cublas(fallback!)"] += n
        elif base.startswith("flash_attn_ext") or base.startswith("flash_attn_tile"):
            counts["flash-attn"] += n
        elif base.startswith("soft_max"):
            which = "opt-out" if "flash-attn" in opted else "fallback!"
            counts[f"attn-softmax({which})"] += n
        if _GEMM.search(kernel.split("(")[0]):
            counts["cublas-gemm"] += n
    return dict(counts)


# ------------------------------------------------------------------ building the tracer

DEFAULT_NVCC = Path("/usr/local/cuda/bin/nvcc")  # where NVIDIA's installers put it, when not on PATH


def _cuda_root() -> Path:
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env) and Path(os.environ[env]).is_dir():
            return Path(os.environ[env])
    nvcc = shutil.which("nvcc") or (str(DEFAULT_NVCC) if DEFAULT_NVCC.is_file() else None)
    if not nvcc:
        raise NotApplicable("the kernel census needs a CUDA toolkit with CUPTI on the runner (no nvcc on PATH, "
                            "no CUDA_HOME): it builds lawbench's kernel tracer against it")
    return Path(nvcc).resolve().parent.parent


def _find(root: Path, pattern: str, where: Iterable[str]) -> Optional[Path]:
    for sub in where:
        hits = sorted(root.glob(f"{sub}/{pattern}"))
        if hits:
            return hits[0]
    return None


def tracer_inputs() -> dict[str, str]:
    """Where the toolkit keeps CUPTI: header folder, library folder, newest kernel record."""
    root = _cuda_root()
    header = _find(root, "cupti_activity.h", ("extras/CUPTI/include", "include", "targets/*/include"))
    lib = _find(root, "libcupti.so*", ("extras/CUPTI/lib64", "lib64", "targets/*/lib"))
    if header is None or lib is None:
        raise NotApplicable(f"the CUDA toolkit at {root} has no CUPTI (cupti_activity.h: {header}, "
                            f"libcupti.so: {lib}): the kernel census needs it")
    records = {int(n) for h in header.parent.glob("cupti_activity*.h")
               for n in re.findall(r"CUpti_ActivityKernel(\d+)\s*;", h.read_text(errors="replace", encoding="utf-8"))}
    if not records:
        raise NotApplicable(f"{header} declares no CUpti_ActivityKernel<N> record")
    cxx = shutil.which("g++") or shutil.which("c++")
    if not cxx:
        raise NotApplicable("the kernel census builds its tracer with a C++ compiler: g++ is not on PATH")
    return {"root": str(root), "include": str(header.parent), "libdir": str(lib.parent),
            "lib": str(lib.resolve()), "krec": f"CUpti_ActivityKernel{max(records)}", "cxx": cxx}


def build_tracer(cache: Path, timeout_s: float = 300) -> Path:
    """The tracer library for this runner's toolkit, built once into ``cache`` (keyed by the
    source and the CUPTI it links)."""
    inputs = tracer_inputs()
    key = hashlib.sha256(SOURCE.read_bytes() + inputs["lib"].encode() + inputs["krec"].encode()).hexdigest()[:16]
    out = Path(cache) / "kernel-tracer" / key / LIBRARY
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".{os.getpid()}.tmp")
    cmd = [inputs["cxx"], "-O2", "-shared", "-fPIC", "-std=c++17", f"-DKREC={inputs['krec']}",
           f"-I{inputs['include']}", f"-I{inputs['root']}/include", str(SOURCE), "-o", str(tmp),
           f"-L{inputs['libdir']}", "-lcupti", f"-Wl,-rpath,{inputs['libdir']}"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8", errors="replace", timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EngineError(f"building the kernel tracer failed: {exc}; command: {' '.join(cmd)}") from None
    if p.returncode != 0 or not tmp.is_file():
        raise EngineError(f"building the kernel tracer failed (exit {p.returncode}): "
                          f"{(p.stderr or p.stdout).strip()[-600:]}; command: {' '.join(cmd)}")
    os.replace(tmp, out)
    return out


def traced_env(library: Path, trace_file: Path) -> dict[str, str]:
    """The environment that loads the tracer into a CUDA process and names its output file."""
    return {INJECTION_ENV: str(library), TRACE_OUT_ENV: str(trace_file)}


def read_trace(trace_file: Path, what: str) -> KernelTrace:
    """The trace a finished engine process left; none, or one with dropped records, is an
    EngineError naming ``what`` (a census from a partial trace would undercount)."""
    if not trace_file.is_file():
        raise EngineError(f"the kernel tracer wrote no {trace_file} for {what}: the engine loaded no CUDA "
                          f"(a CPU build, or it died before exit)")
    trace = parse_trace(trace_file.read_text(errors="replace", encoding="utf-8"), where=f"kernel trace of {what}")
    if trace.dropped:
        raise EngineError(f"the kernel tracer dropped {trace.dropped} kernel records for {what}: "
                          f"the counts would be low")
    return trace
