"""Law 4 on real hardware: a case's `bench` table run through llama-bench, under core's protocol.

    sampler(anchor, profile, resources)  one arm (measurement / agreement) or two arms a, b
                                         (ratio, or agreement with arms), interleaved A B B A in
                                         one run by lawbench.core.protocol.ArmSampler
    census(anchor, profile, resources)   one verbose llama-bench run; its load log counted

One visit is one llama-bench process running one test (tg n_gen at depth, or pp n_prompt) with
bench.reps repetitions; every repetition's tokens/s (the record's samples_ts) is a reading. The
case's placement and KV type set -ngl / --n-cpu-moe / -ctk / -ctv, so what runs is what the law
priced. Models: "gguf:<catalogue id>" through the run's model store (fetched or built once),
"path:<file>" as given (missing here: NotApplicable, a FAIL on the anchor's own runner);
"manifest:<id>" describes a model without a file and cannot be measured.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

from lawbench.core.errors import DataError
from lawbench.core.law import Census, NotApplicable
from lawbench.core.models import Anchor, HardwareProfile
from lawbench.core.protocol import ArmSampler, Visit
from lawbench.plugins.law4.case import CASE_FILE, BenchCase, Law4Case, arm_case, parse_case


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
        "threads": b.threads or profile.engine_threads(),
        "n_gpu_layers": ngl,
        "flash_attn": b.flash_attn,
        "cache_type_k": case.kv_type if case.kv_type != "f16" else None,
        "cache_type_v": case.kv_type if case.kv_type != "f16" else None,
        "ubatch": b.ubatch,
        "n_cpu_moe": pc.n_cpu_moe or None,
        "override_tensor": "exps=CPU" if pc.experts_on_cpu else None,  # what --cpu-moe does
        "extra_args": ["-nkvo", "1"] if pc.kv_on_cpu else None,
    }
    return {k: v for k, v in params.items() if v is not None}


def model_file(ref: Optional[str], resources: Any) -> Path:
    """The file a case's model names, on this machine."""
    if ref is None:
        raise NotApplicable("the case names no model, so there is nothing to run")
    kind, _, name = ref.partition(":")
    if kind == "manifest":
        raise NotApplicable(f"model {ref!r} is an architecture manifest without weights; measure "
                            f"a gguf:<catalogue id> or path:<file> model")
    if kind == "path":
        path = Path(os.path.expandvars(os.path.expanduser(name)))
        if not path.is_file():
            raise NotApplicable(f"model file {path} is not on this machine (case.model = {ref!r})")
        return path
    if kind == "gguf":
        from lawbench.core.store.real import ModelUnavailable

        try:
            return Path(resources.model(name))
        except ModelUnavailable as exc:  # a runner's own file is absent: a SKIP (a FAIL on its runner)
            raise NotApplicable(str(exc)) from None  # a bad checksum or download stays an ERROR
    raise NotApplicable(f"model {ref!r}: use gguf:<id> or path:<file> to measure")


_PREDICT_RESOURCES: dict[str, Any] = {}


def _unlocked_resources() -> type:
    from lawbench.core.resources import Resources

    class UnlockedResources(Resources):
        def lock(self) -> None:  # nothing is timed with these
            return None

    return UnlockedResources


def predict_resources(profile: HardwareProfile) -> Any:
    """Resources for predict() before the run has handed the law its own: the same pinned build
    (or $LAWBENCH_LLAMA_DIR) and model store, without the box lock — building or fetching a file
    times nothing, and the run's own Resources takes the lock for its first measurement.
    A --llama-dir given only on the command line is not seen here; llama-quantize from the
    pinned build writes the same synthetic files."""
    if profile.id not in _PREDICT_RESOURCES:
        _PREDICT_RESOURCES[profile.id] = _unlocked_resources()(profile=profile)
    return _PREDICT_RESOURCES[profile.id]


def _visit(llama: Any, model: Path, params: dict[str, Any], bench: BenchCase):
    """One arm's visit: one llama-bench process, `reps` repetitions, one reading per repetition."""
    from lawbench.core.engines.bench import record_label, run_bench

    def visit(reps: int) -> Visit:
        run = run_bench(llama, model, timeout_s=bench.timeout_s, repetitions=reps,
                        warmup=bench.warmup, **params)
        values = [v for ts in run.samples_ts for v in ts]
        rec = run.records[0] if run.records else {}
        return Visit(values=values, wall_s=run.wall_s,
                     raw={"test": record_label(rec), "n_threads": rec.get("n_threads"),
                          "model": model.name})
    return visit


def fastest(values: list[float]) -> Optional[float]:
    return max(values) if values else None


def _label(case: Law4Case, params: dict[str, Any]) -> str:
    model = (case.model or "").partition(":")[2]
    opts = " ".join(f"{k}={v}" for k, v in params.items() if k not in ("n_gen", "n_prompt"))
    test = f"tg{params.get('n_gen', 0)}" if params.get("n_gen") else f"pp{params.get('n_prompt', 0)}"
    return f"{model} {test} {opts}".strip()


def arm_cases(anchor: Anchor) -> dict[str, Law4Case]:
    """{'main': case} for one arm; {'a': …, 'b': …} when the anchor has arms (case ⊕ arm)."""
    if anchor.arms:
        if set(anchor.arms) != {"a", "b"}:
            raise NotApplicable(f"anchor {anchor.id}: two-arm anchors need exactly arms.a and arms.b")
        return {arm: arm_case(anchor.case, anchor.arms[arm], anchor.id, arm) for arm in ("a", "b")}
    return {"main": parse_case(anchor.case, anchor.id)}


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
    # Resolve every model first: a missing one is a SKIP (a FAIL on own runner) before any run.
    files = {name: model_file(c.model, resources) for name, c in cases.items()}
    params = {name: bench_params(c, profile) for name, c in cases.items()}
    llama = resources.llama()
    arms = {name: _visit(llama, files[name], params[name], c.bench)  # type: ignore[arg-type]
            for name, c in cases.items()}
    labels = {name: _label(c, params[name]) for name, c in cases.items()}
    if len(set(labels.values())) != len(labels):
        labels = {name: f"{name}: {lab}" for name, lab in labels.items()}
    per_visit = {c.bench.per_visit for c in cases.values()}  # type: ignore[union-attr]
    if len(per_visit) != 1:
        raise DataError(CASE_FILE, "both arms must take a visit's value the same way",
                        anchor=anchor.id, field="arms.b.bench.per_visit")
    return ArmSampler(arms, labels=labels, reps_per_visit=reps.pop(),
                      per_visit=fastest if per_visit.pop() == "fastest" else None,
                      protocol={"engine": "llama-bench", "llama_cpp": llama.version,
                                "bench_params": params, "models": {k: str(v) for k, v in files.items()}})


def census(anchor: Anchor, profile: HardwareProfile, resources: Any) -> Census:
    """One verbose llama-bench run of the case (its bench test, one repetition), counted."""
    from lawbench.core.engines.bench import capture_load_log
    from lawbench.core.engines.loadlog import census_counts

    case = parse_case(anchor.case, anchor.id)
    model = model_file(case.model, resources)
    params = bench_params(case, profile)
    llama = resources.llama()
    bench = case.bench or BenchCase(n_gen=1)
    run = capture_load_log(llama, model, timeout_s=bench.timeout_s, repetitions=1,
                           warmup=bench.warmup, **params)
    return Census(counts=census_counts(run.log), log=run.log,
                  environment={"command": run.cmd, "wall_s": run.wall_s, "llama_cpp": llama.version})
