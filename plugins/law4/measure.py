"""Law 4 on real hardware: a case's `bench` table run through llama-bench, under core's protocol.

    sampler(anchor, profile, resources)  one arm (measurement / agreement) or two arms a, b
                                         (ratio, or agreement with arms), interleaved A B B A in
                                         one run by lawbench.core.stats.protocol.ArmSampler

The census (one verbose llama-bench run, counted) is plugins/law4/census.py.

One visit is one engine process running one test (tg n_gen at depth, or pp n_prompt) with
bench.reps repetitions; every repetition's tokens/s is a reading. The engine is llama-bench, or
llama-batched-bench with bench.tool = "batched-bench" (parallel slots; case.experts_used through
--override-kv — the only engine that honours it: elsewhere check_measured refuses the case). The
case's placement and KV type set -ngl / --n-cpu-moe / -ctk / -ctv, so what runs is what the law
priced. Models: "gguf:<catalogue id>" through the run's model store (fetched or built once),
"path:<file>" as given (missing here: NotApplicable, a FAIL on the anchor's own runner);
"manifest:<id>" describes a model without a file and cannot be measured.
"""
from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any, Optional

from lawbench import Anchor, ArmSampler, DataError, EngineError, HardwareProfile, NotApplicable, RateSeries, Visit
from lawbench.plugins.law4.bench_case import BenchCase
from lawbench.plugins.law4.case import CASE_FILE, Law4Case, arm_case, check_measured, parse_case
from lawbench.plugins.law4.scope import check_measured_on, check_scope

ENGINES = {"llama-bench": "llama-bench", "batched-bench": "llama-batched-bench"}  # bench.tool -> binary


def _gpu_tier(profile: HardwareProfile) -> bool:
    return any(t.kind in ("vram", "unified") for t in profile.tiers)


def bench_params(case: Law4Case, profile: HardwareProfile) -> dict[str, Any]:
    """llama-bench keyword arguments (lawbench.core.engines.bench.bench_command) for a case.

    -ngl comes from the placement (bench.n_gpu_layers overrides it); on a profile without a GPU
    tier it is 0. KV types come from case.kv_type; --n-cpu-moe, --cpu-moe (-ot exps=CPU) and
    -nkvo from the placement. Options left at None are not passed, so llama-bench's own defaults
    apply and show in its JSON record.
    """
    b = case.bench or BenchCase()
    ngl = b.n_gpu_layers
    if ngl is None:
        ngl = case.placement.ngl if case.placement.ngl is not None else (None if _gpu_tier(profile) else 0)
    if case.placement.cpu_layers is not None and b.n_gpu_layers is None:
        raise DataError(CASE_FILE, "placement.cpu_layers prices a split by blocks; a measured case "
                        "also needs bench.n_gpu_layers (-ngl counts the output layer as one)",
                        field="case.bench.n_gpu_layers")
    pc = case.placement
    params: dict[str, Any] = {
        "n_gen": b.n_gen, "n_prompt": b.n_prompt,
        "depth": b.depth or None,
        # measured_on.threads: a figure its source scopes to its thread count runs at that count
        "threads": b.threads or (case.measured_on.threads if case.measured_on else None) or profile.engine_threads(),
        "n_gpu_layers": ngl,
        "flash_attn": b.flash_attn,
        "cache_type_k": case.kv_type if case.kv_type != "f16" else None,
        "cache_type_v": _v_type(case),
        "ubatch": b.ubatch,
        "n_cpu_moe": pc.n_cpu_moe or None,
        "override_tensor": "exps=CPU" if pc.experts_on_cpu else None,  # what --cpu-moe does
        "extra_args": [*(["-nkvo", "1"] if pc.kv_on_cpu else []),
                       *(["-b", str(b.batch)] if b.batch else []),
                       *(["-lm", b.load_mode] if b.load_mode else []),
                       *(["--repack", "1" if b.repack else "0"] if b.repack is not None else []),
                       *(["-nopo", "0" if b.op_offload else "1"] if b.op_offload is not None else [])] or None,
    }
    return {k: v for k, v in params.items() if v is not None}


def _v_type(case: Law4Case) -> Optional[str]:
    """-ctv: bench.cache_type_v where it is given (a K-only quantized cache), else kv_type."""
    v = (case.bench.cache_type_v if case.bench else None) or case.kv_type
    return v if v != "f16" else None


def batched_params(case: Law4Case, profile: HardwareProfile, model: Path) -> dict[str, Any]:
    """llama-batched-bench keyword arguments (lawbench.core.engines.batched.run_batched): the
    same placement, cache and flags as bench_params; a decode at depth is a prompt of `depth`
    tokens, then n_gen timed tokens on each of bench.slots sequences; experts_used goes to
    --override-kv under the file's own architecture."""
    b = case.bench or BenchCase()
    p = bench_params(case, profile)
    params: dict[str, Any] = {
        "n_gen": b.n_gen, "n_prompt": b.n_prompt or b.depth, "slots": (b.slots,),
        "n_gpu_layers": p.get("n_gpu_layers"), "flash_attn": b.flash_attn,
        "cache_type_k": p.get("cache_type_k"), "cache_type_v": p.get("cache_type_v"),
        "batch": b.batch, "ubatch": b.ubatch, "threads": p.get("threads"),
        "n_cpu_moe": p.get("n_cpu_moe"), "override_tensor": p.get("override_tensor"),
        "load_mode": b.load_mode, "kv_offload": not case.placement.kv_on_cpu,
    }
    if case.experts_used is not None:
        from lawbench import read_gguf_header as read_header

        params.update(experts_used=case.experts_used, architecture=read_header(model).architecture)
    return {k: v for k, v in params.items() if v is not None}


def model_file(ref: Optional[str], resources: Any) -> Path:
    """The file a case's model names, on this machine, fetched or built through the run's
    resources (lawbench.store.model_file: the one reader of model references)."""
    from lawbench.store import model_file as resolve

    if ref is None:
        raise NotApplicable("the case names no model, so there is nothing to run")
    try:
        return resolve(ref, resources)
    except ValueError as exc:  # check_anchor refuses the form first; a direct call lands here
        raise NotApplicable(str(exc)) from None


PRIME_CHUNK = 16 << 20  # bytes per read() of the priming pass


def prime_read(model: Path, chunk: int = PRIME_CHUNK) -> dict[str, Any]:
    """`cat model.gguf > /dev/null` (register D-29): the whole file read once, front to back, so
    the page cache holds what a sequential read leaves in it. What was read and how fast is
    returned for the visit's raw record (D-29 printed its own: 'at 582 MB/s')."""
    buf = bytearray(chunk)
    n = 0
    t0 = time.monotonic()
    with open(model, "rb", buffering=0) as f:
        while True:
            got = f.readinto(buf)
            if not got:
                break
            n += got
    seconds = time.monotonic() - t0
    return {"mode": "read", "file": model.name, "bytes": n, "seconds": round(seconds, 3),
            "mb_s": round(n / seconds / 1e6, 1) if seconds > 0 else None}


def prime_evict(model: Path) -> dict[str, Any]:
    """The coldest start lawbench can set without root: the file's cached pages dropped
    (posix_fadvise DONTNEED, lawbench.core.hardware.pagecache), so the engine reads every page it
    needs from the disk. An eviction the kernel ignored (the file on tmpfs, or mapped whole by
    another process) would time a warm visit as a cold one: an engine error, never a reading."""
    from lawbench.hardware import pagecache

    before = pagecache.residency(model)
    t0 = time.monotonic()
    pagecache.evict(model)
    seconds = time.monotonic() - t0
    after = pagecache.residency(model)
    if before.resident and after.resident >= before.resident:
        raise EngineError(f"bench.prime = \"evict\": the kernel dropped none of {model}'s "
                          f"{before.resident} cached pages (a file on tmpfs, or one another process "
                          f"maps); a visit from this state is not cold")
    return {"mode": "evict", "file": model.name, "bytes": before.file_bytes, "seconds": round(seconds, 3),
            "resident_before": before.as_dict(), "resident_after": after.as_dict()}


def _prime(mode: str, model: Path) -> dict[str, Any]:
    """Set the page-cache state bench.prime names; the record says how much of the file the
    cache held before and after (pagecache.residency: mincore, which reads nothing)."""
    from lawbench.hardware import pagecache

    if mode == "evict":
        done = prime_evict(model)
    elif mode == "keep":  # the cache as the previous visit left it: only its state is recorded
        state = pagecache.residency(model).as_dict()
        done = {"mode": "keep", "file": model.name, "resident_before": state, "resident_after": state}
    else:
        before = pagecache.residency(model)
        done = prime_read(model)
        done.update(resident_before=before.as_dict(), resident_after=pagecache.residency(model).as_dict())
    done["residency_method"] = pagecache.METHOD
    return done


def _check_prime(mode: Optional[str]) -> None:
    """A visit that must set a page-cache state this machine cannot set or read never runs."""
    from lawbench.hardware import pagecache

    lacks = pagecache.supported() if mode is not None else None
    if lacks:
        raise NotApplicable(f"bench.prime = {mode!r}: {lacks}")


def _visit(llama: Any, model: Path, params: dict[str, Any], bench: BenchCase):
    """One arm's visit: one engine process, `reps` repetitions, one reading per repetition;
    with bench.prime, the page-cache state it names is set right before each one (the file read
    through the cache, or evicted from it), and what the cache held of the file after the prime
    and after the engine goes into the visit's raw record."""
    _check_prime(bench.prime)
    if bench.tool == "batched-bench":
        run = _batched_visit(llama, model, params, bench)
    else:
        run = _bench_visit(llama, model, params, bench)
    if bench.prime is None:
        return run

    from lawbench.hardware import pagecache

    def primed(reps: int) -> Visit:
        done = _prime(bench.prime, model)  # immediately before the engine starts: nothing runs between
        visit = run(reps)
        done["resident_after_visit"] = pagecache.residency(model).as_dict()
        visit.raw["prime"] = done
        return visit
    return primed


def _bench_visit(llama: Any, model: Path, params: dict[str, Any], bench: BenchCase):
    from lawbench.engines import bench_record_label as record_label, run_bench

    def visit(reps: int) -> Visit:
        run = run_bench(llama, model, timeout_s=bench.timeout_s, repetitions=reps,
                        warmup=bench.warmup, env=bench.env or None, **params)
        values = [v for ts in run.samples_ts for v in ts]
        rec = run.records[0] if run.records else {}
        return Visit(values=values, wall_s=run.wall_s,
                     raw={"test": record_label(rec), "n_threads": rec.get("n_threads"),
                          "model": model.name})
    return visit


def _batched_visit(llama: Any, model: Path, params: dict[str, Any], bench: BenchCase):
    """llama-batched-bench warms up on 16 tokens itself; its cells are the repetitions."""
    from lawbench.engines import batched_record_label as record_label, run_batched

    def visit(reps: int) -> Visit:
        run = run_batched(llama, model, timeout_s=bench.timeout_s, repetitions=reps, **params)
        rec = run.records[0] if run.records else {}
        return Visit(values=list(run.speeds), wall_s=run.wall_s,
                     raw={"test": record_label(rec), "n_threads": rec.get("n_threads"),
                          "slots": rec.get("pl"), "experts_used": params.get("experts_used"),
                          "model": model.name,
                          **({"lost_runs": run.lost_runs} if run.lost_runs else {})})
    return visit


def fastest(values: list[float]) -> Optional[float]:
    return max(values) if values else None


def _label(case: Law4Case, params: dict[str, Any]) -> str:
    model = (case.model or "").partition(":")[2]
    opts = " ".join(f"{k}={v}" for k, v in params.items() if k not in ("n_gen", "n_prompt"))
    if case.bench is not None and case.bench.prime:
        opts = f"{opts} prime={case.bench.prime}".strip()  # a primed arm is another configuration
    test = f"tg{params.get('n_gen', 0)}" if params.get("n_gen") else f"pp{params.get('n_prompt', 0)}"
    return f"{model} {test} {opts}".strip()


def rate_series(case: Law4Case, params: dict[str, Any]) -> Optional[RateSeries]:
    """The runner's tracked speed this arm measures (issue 31): llama-bench's tg / pp in tok/s.
    The format is the case's weight_format, else the quant suffix of the model's name
    ("syn-25m-q4_0" -> Q4_0); the placement is every llama-bench option that shapes the run."""
    if case.bench is None or case.bench.tool != "llama-bench":
        return None
    model = (case.model or "").partition(":")[2] or str(case.model or "")
    suffix = re.search(r"-((?:i?q\d\w*)|f16|bf16|f32)$", model, re.IGNORECASE)
    fmt = case.weight_format or (suffix.group(1).upper() if suffix else "")
    label = _label(case, params)
    placement = label[len(model):].strip() if label.startswith(model) else label
    quantity = "decode tok/s" if params.get("n_gen") else "prefill tok/s"
    return RateSeries(model=model, format=fmt, placement=placement, quantity=quantity)


def arm_cases(anchor: Anchor) -> dict[str, Law4Case]:
    """{'main': case} for one arm; {'a': …, 'b': …} when the anchor has arms (case ⊕ arm)."""
    if anchor.arms:
        if set(anchor.arms) != {"a", "b"}:
            raise NotApplicable(f"anchor {anchor.id}: two-arm anchors need exactly arms.a and arms.b")
        cases = {arm: arm_case(anchor.case, anchor.arms[arm], anchor.id, arm) for arm in ("a", "b")}
    else:
        cases = {"main": parse_case(anchor.case, anchor.id)}
    for name, case in cases.items():  # `lawbench check` runs this too (Law4.check_anchor)
        check_measured(case, anchor.kind, anchor.id, "case" if name == "main" else f"arms.{name}")
    if len({c.bench.tool for c in cases.values() if c.bench is not None}) > 1:
        raise DataError(CASE_FILE, "both arms must run in one engine (bench.tool): a ratio of two "
                        "harnesses measures the harnesses", anchor=anchor.id, field="arms.b.bench.tool")
    return cases


def engine_for(resources: Any, case: Law4Case) -> Any:
    """The llama.cpp an arm runs on: the run's build, or that source built with the arm's
    bench.patches (a build of its own; lawbench.engines.source_patches)."""
    patches = case.bench.patches if case.bench is not None else []
    return resources.llama(patches=tuple(patches)) if patches else resources.llama()


def sampler(anchor: Anchor, profile: HardwareProfile, resources: Any) -> ArmSampler:
    cases = arm_cases(anchor)
    if anchor.kind == "ratio" and "main" in cases:
        raise NotApplicable(f"ratio anchor {anchor.id} needs arms.a and arms.b")
    for name, case in cases.items():
        if case.bench is None:
            raise DataError(CASE_FILE, "a measured anchor needs a bench table: nothing says how to run it",
                            anchor=anchor.id, field="case.bench" if name == "main" else f"arms.{name}.bench")
    reps = {c.bench.reps for c in cases.values()}  # type: ignore[union-attr]
    if len(reps) != 1:
        raise DataError(CASE_FILE, "both arms must run the same bench.reps (one ratio per round)",
                        anchor=anchor.id, field="arms.b.bench.reps")
    # A figure scoped to its source's machine runs only on such a machine: decided before any model
    # is fetched or built (plugins/law4/scope.py).
    for case in cases.values():
        check_measured_on(case, profile)
    # Resolve every model first: a missing one is a SKIP (a FAIL on own runner) before any run.
    files = {name: model_file(c.model, resources) for name, c in cases.items()}
    params = {name: batched_params(c, profile, files[name]) if c.bench.tool == "batched-bench"  # type: ignore[union-attr]
              else bench_params(c, profile) for name, c in cases.items()}
    llamas = {name: engine_for(resources, c) for name, c in cases.items()}
    llama = next(iter(llamas.values()))
    arms = {name: _visit(llamas[name], files[name], params[name], c.bench)  # type: ignore[arg-type]
            for name, c in cases.items()}
    patched = {name: c.bench.patches for name, c in cases.items() if c.bench is not None and c.bench.patches}
    labels = {name: _label(c, params[name]) for name, c in cases.items()}
    if len(set(labels.values())) != len(labels):
        labels = {name: f"{name}: {lab}" for name, lab in labels.items()}
    per_visit = {c.bench.per_visit for c in cases.values()}  # type: ignore[union-attr]
    if len(per_visit) != 1:
        raise DataError(CASE_FILE, "both arms must take a visit's value the same way",
                        anchor=anchor.id, field="arms.b.bench.per_visit")
    scope = None
    # Decided before the anchor's own visits; an engine A/B compares engines on the case, not the law.
    if any(c.scope == "cpu-tier" for c in cases.values()) and not getattr(resources, "comparing_engines", False):
        scope = check_scope(files, lambda arm, path: _visit(llamas[arm], path, params[arm], cases[arm].bench),
                            resources.store().synthetic, reps=next(iter(reps)))
    series = {name: rate_series(c, params[name]) for name, c in cases.items()}
    return ArmSampler(arms, labels=labels, reps_per_visit=reps.pop(),
                      per_visit=fastest if per_visit.pop() == "fastest" else None,
                      series={k: v for k, v in series.items() if v is not None}, engine=llama.version or "",
                      protocol={"engine": ENGINES[next(iter(cases.values())).bench.tool],  # type: ignore[union-attr]
                                "llama_cpp": llama.version,
                                "bench_params": params, "models": {k: str(v) for k, v in files.items()},
                                **({"patches": patched, "bin_dirs": {k: str(v.bin_dir) for k, v in llamas.items()}}
                                   if patched else {}),
                                **({"scope": scope} if scope else {})})

