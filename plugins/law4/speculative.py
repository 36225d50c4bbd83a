"""Law 4 with speculation: a case's bench table run through llama-server (``bench.tool = "server"``).

The law prices one token per weight read; speculation (a draft model, an n-gram drafter, an MTP
head) accepts several tokens per read, so the law reads low by the acceptance multiplier, and on
offloaded MoE the verify batch unions extra experts (seed 000, Law 4 corollaries; register L-13,
V-04, D-09, D-10). llama-bench cannot speculate, so these cases run in llama.cpp's own server::

    case = { quantity = "decode_tok_s", model = "gguf:…", placement = { n_cpu_moe = 32 },
             bench = { tool = "server", n_gen = 256, reps = 1, warmup = false,
                       server = { prompt = "copy",
                                  spec = { type = "ngram-simple", ngram_size_m = 384, ngram_size_n = 4 } } } }

A visit is one llama-server process (lawbench.core.engines.server): with ``bench.warmup`` one
discarded request first, then ``bench.reps`` timed requests of n_gen tokens on the shipped prompt
(plugins/law4/prompts.py); each timed request's ``timings.predicted_per_second`` is a reading.
``warmup = false`` times request 1 of a fresh server, the register's own rule for drafters with a
cross-request store (D-10, D-12). With ``case.quantity = "draft_acceptance"`` each timed request's
reading is instead its acceptance, ``draft_n_accepted / draft_n`` in the anchor's unit (register
L-13: '66-68% acceptance at 384-token drafts'); a request that drafted nothing has no acceptance,
and a visit without one is an engine error, never a zero. A ratio anchor (speculation on over off) interleaves its arms
A B B A exactly as the llama-bench path does (core.stats.protocol.ArmSampler); the off arm is
``spec = { type = "none" }`` on the same server build, prompt and n_gen.

With ``case.quantity = "prefix_cache_speedup"`` a visit is one server session of several requests:
``server.prompt = "document"`` asks each of ``server.questions`` after the same document, with
``cache_prompt`` (register V-10, prereg #29), and the visit's one reading is the first request's
``timings.prompt_ms`` over the last's. ``questions = ["a", "b"]`` is the second question against the
document; ``["a", "b", "c", "c"]`` ends on an identical repeat.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional



def server_flags(case: Any, profile: Any) -> dict[str, Any]:
    """serve() keyword arguments for a case: the placement and KV flags the llama-bench path
    derives (plugins/law4/measure.bench_params), spelled as llama-server spells them."""
    from lawbench import DataError
    from lawbench.plugins.law4.case import CASE_FILE
    from lawbench.plugins.law4.measure import bench_params

    b = case.bench
    p = bench_params(case, profile)
    extra: list[str] = []
    for key, flag in (("cache_type_k", "-ctk"), ("cache_type_v", "-ctv"), ("flash_attn", "-fa"),
                      ("ubatch", "-ub"), ("n_cpu_moe", "--n-cpu-moe"), ("override_tensor", "-ot")):
        if p.get(key) is not None:
            extra += [flag, str(p[key])]
    if case.placement.kv_on_cpu:
        extra.append("-nkvo")  # a switch here, "-nkvo 1" in llama-bench
    if b.batch:
        extra += ["-b", str(b.batch)]
    if b.load_mode not in (None, "auto", "mmap"):
        if b.load_mode != "none":
            raise DataError(CASE_FILE, f"bench.load_mode {b.load_mode!r} has no llama-server spelling here; "
                            "use \"none\" (--no-mmap) or leave it out", field="case.bench.load_mode")
        extra.append("--no-mmap")
    return {"ctx": b.server.ctx, "threads": p.get("threads"), "n_gpu_layers": p.get("n_gpu_layers"),
            "extra_args": tuple(extra)}


def acceptance(timings: list[dict[str, Any]], scale: float = 1.0) -> list[float]:
    """Each request's accepted over drafted tokens (divided by the unit's scale: 0.01 for %);
    a request that drafted nothing has no acceptance and gives no reading."""
    return [t["draft_n_accepted"] / t["draft_n"] / scale for t in timings
            if t.get("draft_n") and "draft_n_accepted" in t]


def prefix_speedup(timings: list[dict[str, Any]]) -> float:
    """A session's first request's prompt time over its last's (register V-10: '5380.8 -> 183.4 ms
    prompt time'); a prompt time that is not a positive number is an engine error, never a guess."""
    from lawbench import EngineError

    first, last = (t.get("prompt_ms") for t in (timings[0], timings[-1]))
    if not all(isinstance(v, (int, float)) and v > 0 for v in (first, last)):
        raise EngineError(f"llama-server answered without a positive timings.prompt_ms (first {first!r}, "
                          f"last {last!r}): the prefix cache's speedup is undefined")
    return float(first) / float(last)


def _readings(case: Any, timed: list[dict[str, Any]], scale: float, model: Path) -> list[float]:
    """A visit's readings: each timed request's decode tok/s, or its draft acceptance, or the
    session's prefix-cache speedup (one reading per session)."""
    from lawbench import EngineError

    if case.quantity == "prefix_cache_speedup":
        return [prefix_speedup(timed) / scale]
    if case.quantity != "draft_acceptance":
        return [float(t["predicted_per_second"]) for t in timed]
    rates = acceptance(timed, scale)
    if not rates:
        raise EngineError(f"llama-server drafted no token in {len(timed)} timed request(s) on {model.name} "
                          f"(spec {case.bench.server.spec.type}): draft acceptance is undefined "
                          f"(draft_n = 0), not zero")
    return rates


def _visit(llama: Any, model: Path, draft: Optional[Path], case: Any, flags: dict[str, Any],
           scale: float = 1.0):
    """One arm's visit: one llama-server process, an optional warm-up request, `reps` timed ones."""
    from lawbench.engines import Request, Speculation, serve
    from lawbench import Visit
    from lawbench.plugins.law4.prompts import PROMPTS, document

    b, opts = case.bench, case.bench.server
    s = opts.spec
    spec = Speculation(type=s.type, draft_model=draft, draft_max=s.draft_max, draft_min=s.draft_min,
                       draft_gpu_layers=s.draft_gpu_layers, ngram_size_n=s.ngram_size_n,
                       ngram_size_m=s.ngram_size_m)
    if opts.prompt == "document":  # one session: each question after the same document (register V-10)
        session = [Request(prompt=document(opts.document_chars, q), n_predict=b.n_gen, ignore_eos=opts.ignore_eos,
                           timeout_s=b.timeout_s, cache_prompt=opts.cache_prompt) for q in opts.questions]
    else:
        request = Request(prompt=PROMPTS[opts.prompt], n_predict=b.n_gen, ignore_eos=opts.ignore_eos,
                          timeout_s=b.timeout_s, cache_prompt=opts.cache_prompt)

    def visit(reps: int) -> Visit:
        if opts.prompt == "document":
            requests = session * reps  # check: reps = 1, no warm-up, so request 1 is cold
        else:
            requests = [request] * (reps + (1 if b.warmup else 0))
        run = serve(llama, model, requests, load_timeout_s=opts.load_timeout_s, spec=spec, **flags)
        timed = run.timings[1:] if b.warmup else run.timings
        keep = ("predicted_n", "predicted_per_second", "prompt_n", "prompt_ms", "draft_n", "draft_n_accepted")
        return Visit(values=_readings(case, timed, scale, model), wall_s=run.wall_s,
                     raw={"engine": "llama-server", "model": model.name, "spec": s.type,
                          "requests": [{k: t[k] for k in keep if k in t} for t in timed]})
    return visit


def sampler(anchor: Any, profile: Any, resources: Any, cases: dict[str, Any]) -> Any:
    """The ArmSampler of a server case: the llama-bench path's shape (plugins/law4/measure.sampler)
    with a llama-server visit; models (and draft models) resolved before anything runs."""
    from lawbench import ArmSampler, DataError, NotApplicable
    from lawbench.plugins.law4.case import CASE_FILE, unit_scale
    from lawbench.plugins.law4.measure import fastest, model_file

    if anchor.kind == "agreement":
        raise DataError(CASE_FILE, "the law prices one token per weight read and has no speculation term: "
                        "a server case is measured (kind measurement or ratio), never priced",
                        anchor=anchor.id, field="kind")
    if anchor.kind == "ratio" and "main" in cases:
        raise NotApplicable(f"ratio anchor {anchor.id} needs arms.a and arms.b")
    for name, case in cases.items():
        where = "case.bench" if name == "main" else f"arms.{name}.bench"
        b = case.bench
        if b is None or b.tool != "server" or b.server is None:
            raise DataError(CASE_FILE, "every arm of a server case runs in llama-server: bench.tool = "
                            "\"server\" with a bench.server table", anchor=anchor.id, field=where)
        if b.n_prompt or b.depth:
            raise DataError(CASE_FILE, "a server case times the decode of one request after the shipped "
                            "prompt: leave n_prompt and depth out", anchor=anchor.id, field=where)
    reps = {c.bench.reps for c in cases.values()}
    per_visit = {c.bench.per_visit for c in cases.values()}
    if len(reps) != 1 or len(per_visit) != 1:
        raise DataError(CASE_FILE, "both arms must run the same bench.reps and per_visit (one ratio per round)",
                        anchor=anchor.id, field="arms.b.bench")
    files = {name: model_file(c.model, resources) for name, c in cases.items()}
    drafts = {name: model_file(c.bench.server.spec.draft_model, resources)
              if c.bench.server.spec.draft_model else None for name, c in cases.items()}
    flags = {name: server_flags(c, profile) for name, c in cases.items()}
    scale = (unit_scale(anchor.quantity, anchor.unit, anchor.id)
             if anchor.quantity in ("draft_acceptance", "prefix_cache_speedup") else 1.0)
    llama = resources.llama()
    arms = {name: _visit(llama, files[name], drafts[name], c, flags[name], scale) for name, c in cases.items()}
    labels = {name: _label(c, flags[name]) for name, c in cases.items()}
    if len(set(labels.values())) != len(labels):
        labels = {name: f"{name}: {lab}" for name, lab in labels.items()}
    sampler = ArmSampler(arms, labels=labels, reps_per_visit=reps.pop(),
                         per_visit=fastest if per_visit.pop() == "fastest" else None,
                         protocol={"engine": "llama-server", "llama_cpp": llama.version,
                                   "reading": _reading(anchor.quantity),
                                   "server": {n: {"flags": {k: list(v) if isinstance(v, tuple) else v
                                                            for k, v in flags[n].items()},
                                                  "options": c.bench.server.model_dump(),
                                                  "n_gen": c.bench.n_gen, "warmup_request": c.bench.warmup}
                                              for n, c in cases.items()},
                                   "models": {k: str(v) for k, v in files.items()},
                                   "draft_models": {k: str(v) for k, v in drafts.items() if v}})
    if anchor.quantity == "draft_acceptance":
        sampler.log_scale = False  # a rate that may be 0 is averaged, not multiplied
    return sampler


def _reading(quantity: str) -> str:
    if quantity == "draft_acceptance":
        return "timings.draft_n_accepted / timings.draft_n per timed request"
    if quantity == "prefix_cache_speedup":
        return "timings.prompt_ms of the session's first request over its last's, one per server session"
    return "timings.predicted_per_second per timed request"


def _label(case: Any, flags: dict[str, Any]) -> str:
    s = case.bench.server.spec
    spec = s.type if s.type == "none" else " ".join(
        [s.type] + [f"{k}={v}" for k, v in s.model_dump(exclude={"type"}).items() if v is not None])
    model = (case.model or "").partition(":")[2]
    return (f"{model} server {case.bench.server.prompt} n{case.bench.n_gen} spec={spec} "
            f"ngl={flags.get('n_gpu_layers')} {' '.join(flags['extra_args'])}").strip()
