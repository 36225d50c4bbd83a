"""Law 4's census: one verbose llama-bench run of the case, counted three ways (bench.census).

  load-log    what llama.cpp's load log says it did: layers offloaded, buffers, repacked tensors
              (lawbench.core.engines.loadlog)
  kernels     the load log, and every CUDA kernel that ran, by path label (mmvq:<type>, mmq:<type>,
              flash-attn, dequant-cublas(fallback!), …: lawbench.core.engines.kernels). A CUDA build
              only: on any other the census is not applicable (a SKIP, a FAIL on its own runner).
  gpu-memory  the load log, and the engine process's peak per-PID GPU memory (NVML, read while it
              runs) next to the GPU buffers its load log reports — seed 002's memory census on an
              engine lawbench can run. Labels, all in MiB:
                gpu_peak_mib              the process's peak, per PID
                gpu_buffers_mib           model + KV + compute + output buffers on CUDA devices
                gpu_peak_over_buffers_mib peak minus buffers: the CUDA context, cuBLAS workspace
                                          and kernel images llama.cpp does not report
              and gpu_readings, how many readings listed the process with a number.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lawbench import Anchor, Census, EngineError, HardwareProfile, NotApplicable
from lawbench.plugins.law4.bench_case import BenchCase
from lawbench.plugins.law4.case import check_measured, parse_case
from lawbench.plugins.law4.measure import arm_cases, bench_params, engine_for, model_file
from lawbench.plugins.law4.tiers import DEFAULT_UBATCH

if TYPE_CHECKING:
    from lawbench import Resources
    from lawbench.plugins.law4.case import Law4Case

MIB = 1024 * 1024


def opt_outs(bench: BenchCase) -> set[str]:
    """The fast paths this case turns off on purpose: what makes a slow path an opt-out."""
    out = set()
    if bench.flash_attn == "off":
        out.add("flash-attn")
    if bench.env.get("GGML_CUDA_DISABLE_GRAPHS"):
        out.add("cuda-graphs")
    if bench.repack is False:
        out.add("repack")
    if bench.op_offload is False:
        out.add("op-offload")
    return out


def census(anchor: Anchor, profile: HardwareProfile, resources: "Resources") -> Census:
    """One verbose llama-bench run of the case (its bench test, one repetition), counted; with
    arms a and b, two loads and their difference (two_load_census)."""
    if anchor.arms:
        return two_load_census(anchor, profile, resources)
    case = parse_case(anchor.case, anchor.id)
    check_measured(case, "census", anchor.id)
    return _one_load(case, profile, resources)


def _one_load(case: "Law4Case", profile: HardwareProfile, resources: "Resources") -> Census:
    from lawbench.engines import capture_load_log, parse_load_log

    model = model_file(case.model, resources)
    params = bench_params(case, profile)
    llama = engine_for(resources, case)
    bench = case.bench or BenchCase(n_gen=1)
    env, monitor, extra = dict(bench.env), None, {}
    with tempfile.TemporaryDirectory(prefix="lawbench-census-") as tmp:
        if bench.census == "kernels":
            env.update(_tracer_env(llama, Path(tmp) / "kernels.tsv"))
        elif bench.census == "gpu-memory":
            from lawbench.hardware import PeakSampler, PerPidMemory

            sampler = PeakSampler(PerPidMemory.open())
            monitor = sampler.start
        run = capture_load_log(llama, model, timeout_s=bench.timeout_s, repetitions=1,
                               warmup=bench.warmup, env=env or None, monitor=monitor, **params)
        log = parse_load_log(run.log)
        counts = log.census()
        if bench.census == "kernels":
            extra = _kernel_counts(Path(tmp) / "kernels.tsv", bench, model.name)
        elif bench.census == "gpu-memory":
            extra = _memory_counts(sampler, log, model.name)  # type: ignore[possibly-undefined]
    counts.update(extra.pop("counts", {}))
    environment = {"command": run.cmd, "wall_s": run.wall_s, "llama_cpp": llama.version,
                   "census": bench.census, **({"env": bench.env} if bench.env else {}), **extra}
    return Census(counts=counts, log=run.log, environment=environment)


def two_load_census(anchor: Anchor, profile: HardwareProfile, resources: "Resources") -> Census:
    """Two loads, arm a then arm b, each counted as one census; the labels are each arm's
    (`a:<label>`, `b:<label>`) and, for every label both counted, their difference `a-b:<label>`.
    Where the arms differ in -ub, `per_ubatch_token:<label>` is that difference over the ubatch
    difference, rounded to a whole count (bytes per ubatch token for a buffer: register L-08's
    slope of the compute buffer, which one load cannot show)."""
    cases = arm_cases(anchor)  # arms a and b, each checked as a census case
    loads = {arm: _one_load(cases[arm], profile, resources) for arm in ("a", "b")}
    counts: dict[str, int] = {}
    for arm, load in loads.items():
        counts.update({f"{arm}:{label}": v for label, v in load.counts.items()})
    shared = [label for label in loads["a"].counts if label in loads["b"].counts]
    for label in shared:
        counts[f"a-b:{label}"] = loads["a"].counts[label] - loads["b"].counts[label]
    ub = {arm: (c.bench.ubatch if c.bench and c.bench.ubatch else DEFAULT_UBATCH) for arm, c in cases.items()}
    if ub["a"] != ub["b"]:
        for label in shared:
            counts[f"per_ubatch_token:{label}"] = round(counts[f"a-b:{label}"] / (ub["a"] - ub["b"]))
    log = "".join(f"===== arm {arm}: {load.environment.get('command')}\n{load.log}" for arm, load in loads.items())
    return Census(counts=counts, log=log,
                  environment={"loads": {arm: load.environment for arm, load in loads.items()},
                               "ubatch": ub, "llama_cpp": loads["a"].environment.get("llama_cpp")})


def _tracer_env(llama: Any, trace_file: Path) -> dict[str, str]:
    from lawbench.engines import build_tracer, traced_env
    from lawbench.store import cache_root

    if getattr(llama, "backend", "unknown") not in ("cuda", "unknown"):
        raise NotApplicable(f"a kernel census counts CUDA kernels; this llama.cpp is a {llama.backend} build")
    return traced_env(build_tracer(cache_root()), trace_file)


def _kernel_counts(trace_file: Path, bench: BenchCase, model: str) -> dict[str, Any]:
    from lawbench.engines import kernel_labels, read_trace

    trace = read_trace(trace_file, f"llama-bench on model {model}")
    counts = kernel_labels(trace, opt_outs(bench))
    # every distinct kernel with its count, for the record (the labels are what anchors judge)
    kernels = dict(sorted(((name[:200], n) for name, (n, _) in trace.kernels.items()),
                          key=lambda kv: -kv[1]))
    return {"counts": counts, "kernel_source": "lawbench kernel tracer (CUPTI activity records)",
            "kernels": kernels}


def _memory_counts(sampler: Any, log: Any, model: str) -> dict[str, Any]:
    if sampler.peak_mib is None:
        why = f" ({sampler.errors[0]})" if sampler.errors else ""
        raise EngineError(f"no per-PID GPU memory reading listed llama-bench on model {model}{why}: "
                          f"the process ran {sampler.readings} readings long")
    gpu = {**{f"buffer:{k}": v for k, v in log.model_buffers.items()}, **log.other_buffers}
    on_gpu = {k: v for k, v in gpu.items() if ":CUDA" in k}
    buffers = round(sum(on_gpu.values()) / MIB)
    peak = round(sampler.peak_mib)
    return {"counts": {"gpu_peak_mib": peak, "gpu_buffers_mib": buffers,
                       "gpu_peak_over_buffers_mib": peak - buffers, "gpu_readings": sampler.readings},
            "memory_instrument": sampler.memory.instrument,
            "gpu_buffers": {k: round(v / MIB, 2) for k, v in on_gpu.items()}}


# ------------------------------------------------------------------ parity (planted faults)

PARITY_CTX, PARITY_CHUNKS = 128, 2


def parity(anchor: Anchor, profile: HardwareProfile, resources: "Resources") -> dict[str, Any]:
    """What the output says, for the planted-fault runs: llama-perplexity on the census's model
    with the same placement and switches, over the first PARITY_CHUNKS × PARITY_CTX tokens of the
    shipped text. A planted fault changes which kernels run, not what the model computes, so its
    perplexity must match the unplanted run's (lawbench.core.run.planted judges the pair)."""
    from lawbench.engines import run_perplexity, shipped_text

    case = parse_case(anchor.case, anchor.id)
    bench = case.bench or BenchCase(n_gen=1)
    params = bench_params(case, profile)
    args: list[str] = []
    if params.get("n_gpu_layers") is not None:
        args += ["-ngl", str(params["n_gpu_layers"])]
    if bench.flash_attn:
        args += ["-fa", bench.flash_attn]
    if bench.repack is False:
        args.append("--no-repack")
    if bench.op_offload is False:
        args.append("--no-op-offload")
    run = run_perplexity(engine_for(resources, case), model_file(case.model, resources), shipped_text(),
                         ctx=PARITY_CTX, chunks=PARITY_CHUNKS, threads=params.get("threads"),
                         timeout_s=bench.timeout_s, extra_args=args, env=bench.env or None)
    return {"ppl": run.ppl, "command": run.cmd, "wall_s": round(run.wall_s, 3)}
