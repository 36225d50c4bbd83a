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
from typing import Any, Iterable, Optional

from lawbench.core.errors import EngineError, NotApplicable

TRACE_MAGIC = "# lawbench-kernel-trace "
TRACE_FORMATS = (1, 2)  # 1: count, in graph, name; 2 adds the summed duration (ns) and the launch grid
TRACE_OUT_ENV = "LAWBENCH_KERNEL_TRACE_OUT"
TRACER_ENV = "LAWBENCH_KERNEL_TRACER"  # a runner's own build of kernel_tracer.cpp, used as it is
INJECTION_ENV = "CUDA_INJECTION64_PATH"
SOURCE = Path(__file__).with_name("kernel_tracer.cpp")
LIBRARY = "liblawbench_kernel_tracer.so"


@dataclass(frozen=True)
class Launches:
    """One kernel at one launch grid: how often it ran and its summed GPU time (trace format 2)."""

    kernel: str  # demangled name
    grid: tuple[int, int, int]
    count: int
    in_graph: int
    total_ns: int


@dataclass
class KernelTrace:
    """Every distinct kernel of one process: demangled name -> (executed, of which from a graph)."""

    kernels: dict[str, tuple[int, int]] = field(default_factory=dict)
    dropped: int = 0  # activity records CUPTI had to drop: the counts would be low
    version: int = 2
    launches: list[Launches] = field(default_factory=list)  # per (kernel, grid), format 2 only


def parse_trace(text: str, where: str = "kernel trace") -> KernelTrace:
    """Parse the tracer's file (format 1 or 2). A file without its first line is not a trace (the
    engine died before exit, or something else wrote it): EngineError, never an empty census."""
    lines = text.splitlines()
    m = re.match(r"# lawbench-kernel-trace (\d+)\b", lines[0]) if lines else None
    if m is None or int(m.group(1)) not in TRACE_FORMATS:
        raise EngineError(f"{where} is not a lawbench kernel trace of format {' or '.join(map(str, TRACE_FORMATS))} "
                          f"(first line {lines[0][:60]!r} where '{TRACE_MAGIC}<format> dropped=<n>' was expected)"
                          if lines else f"{where} is empty")
    version = int(m.group(1))
    d = re.search(r"dropped=(\d+)", lines[0])
    trace = KernelTrace(dropped=int(d.group(1)) if d else 0, version=version)
    fields = 3 if version == 1 else 5
    shape = ("'<count>\\t<in graph>\\t<kernel>'" if version == 1 else
             "'<count>\\t<in graph>\\t<ns>\\t<gx>x<gy>x<gz>\\t<kernel>'")
    for n, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        parts = line.split("\t", fields - 1)
        numbers = parts[:fields - 2] if version == 2 else parts[:2]
        grid = re.fullmatch(r"(\d+)x(\d+)x(\d+)", parts[3]) if version == 2 and len(parts) == fields else None
        if len(parts) != fields or not all(x.isdigit() for x in numbers) or (version == 2 and grid is None):
            raise EngineError(f"{where} line {n} is not {shape}: {line[:120]!r}")
        name, count, in_graph = parts[-1], int(parts[0]), int(parts[1])
        total, graphed = trace.kernels.get(name, (0, 0))
        trace.kernels[name] = (total + count, graphed + in_graph)
        if grid is not None:
            trace.launches.append(Launches(name, (int(grid[1]), int(grid[2]), int(grid[3])), count, in_graph,
                                           int(parts[2])))
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
    source and the CUPTI it links); or the runner's own build, named by $LAWBENCH_KERNEL_TRACER."""
    own = os.environ.get(TRACER_ENV, "").strip()
    if own:
        if not Path(own).is_file():
            raise NotApplicable(f"{TRACER_ENV}={own!r} names no file: point it at a build of {SOURCE.name} "
                                "or unset it to let lawbench build the tracer")
        return Path(own)
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


def kernel_time(trace: KernelTrace, kernel: str, grid: tuple[Optional[int], Optional[int], Optional[int]],
                where: str) -> tuple[float, dict[str, Any]]:
    """Mean GPU time per launch, in ms, of the launches of ``kernel`` (its base name, template
    arguments and signature dropped) whose grid matches ``grid`` (None: any), and what was summed.
    A format-1 trace has no durations, and no matching launch means the kernel never ran at that
    shape: both are an EngineError naming ``where`` (never a time of 0)."""
    if trace.version < 2:
        raise EngineError(f"{where}: the kernel trace is format {trace.version}, which records no durations; "
                          f"the kernel time needs the tracer of format 2 ({SOURCE.name})")

    def fits(launch: Launches) -> bool:
        return (base_name(launch.kernel)[0] == kernel
                and all(want is None or want == got for want, got in zip(grid, launch.grid)))

    chosen = [launch for launch in trace.launches if fits(launch)]
    count = sum(launch.count for launch in chosen)
    if not count:
        shapes = sorted({"x".join(map(str, launch.grid)) for launch in trace.launches
                         if base_name(launch.kernel)[0] == kernel})
        wanted = "x".join("*" if g is None else str(g) for g in grid)
        raise EngineError(f"{where}: no launch of {kernel} at grid {wanted} ran (grids it ran at: "
                          f"{', '.join(shapes) or 'none: the kernel never ran'})")
    total_ns = sum(launch.total_ns for launch in chosen)
    return total_ns / count / 1e6, {"launches": count, "total_ms": round(total_ns / 1e6, 6),
                                    "grids": sorted({"x".join(map(str, launch.grid)) for launch in chosen}),
                                    "kernels": sorted({launch.kernel[:200] for launch in chosen})}


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
