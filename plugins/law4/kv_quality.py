"""The quality half of a KV lever: perplexity with one KV cache type over perplexity with another.

    quantity = "kv_ppl_ratio", kind = "ratio", arms a and b (e.g. kv_type = "q8_0" against "f16")
    [anchor.case.perplexity]  text (shipped, or "path:<file>" a runner holds), ctx, chunks, slice_chars

One round scores one disjoint slice of the text with both arms, order alternating, one
llama-perplexity process each; the sample is exp(nll_a − nll_b) on that slice, the paired design of
lawbench.core.engines.perplexity. Each arm's kv_type sets -ctk and -ctv (bench.cache_type_v, where
given, sets -ctv alone) and its placement -ngl / --n-cpu-moe / -ot exps=CPU / -nkvo, so what runs is
the case as Law 4 reads it. The register's own guards (pre-registration #91: 'The two arms' logs
must show different KV cache types', and 512-token chunks 'a measurement that cannot vary') are
check-time rules here: two arms at one KV type, or arms scoring different texts or depths, are refused.
"""
from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

from lawbench import Anchor, DataError, EngineError, HardwareProfile, LawbenchError, NotApplicable, Sample
from lawbench.plugins.law4.case import CASE_FILE, Law4Case, arm_case

MAX_SLICES = 64  # more than any budget asks for; each slice is scored once at most


def kv_cases(anchor: Anchor) -> dict[str, Law4Case]:
    """Arms a and b (case ⊕ arm), each checked: same text and depth, different KV cache types."""
    if anchor.kind != "ratio" or set(anchor.arms) != {"a", "b"}:
        raise DataError(CASE_FILE, "a kv_ppl_ratio anchor is a ratio of two arms (kind = \"ratio\", "
                        "arms.a over arms.b)", anchor=anchor.id, field="kind" if anchor.kind != "ratio" else "arms")
    cases = {arm: arm_case(anchor.case, anchor.arms[arm], anchor.id, arm) for arm in ("a", "b")}
    a, b = cases["a"], cases["b"]
    if a.perplexity != b.perplexity:
        raise DataError(CASE_FILE, "both arms must score the same text at the same depth (case.perplexity): "
                        "a ratio over two texts or two depths measures those", anchor=anchor.id, field="arms.b.perplexity")
    if kv_types(a) == kv_types(b):
        raise DataError(CASE_FILE, f"both arms run the KV cache at {kv_types(a)}: a ratio of one KV type "
                        "over itself cannot vary (pre-registration #91's guard)", anchor=anchor.id, field="arms.b.kv_type")
    for arm, c in cases.items():
        if c.model is None:
            raise DataError(CASE_FILE, "a perplexity is scored on a model file: name one", anchor=anchor.id,
                            field=f"arms.{arm}.model")
    return cases


def kv_types(case: Law4Case) -> tuple[str, str]:
    """(-ctk, -ctv) of a case: kv_type, and bench.cache_type_v where it sets the V cache apart."""
    v = (case.bench.cache_type_v if case.bench else None) or case.kv_type
    return case.kv_type, v


def perplexity_args(case: Law4Case, profile: HardwareProfile) -> list[str]:
    """llama-perplexity options of a case: the KV types always spelled out (so the command shows
    them), then the placement as llama-bench would run it (plugins/law4/measure.py)."""
    k, v = kv_types(case)
    args = ["-ctk", k, "-ctv", v]
    pc = case.placement
    gpu = any(t.kind in ("vram", "unified") for t in profile.tiers)
    ngl = pc.ngl if pc.ngl is not None else (None if gpu else 0)
    if ngl is not None:
        args += ["-ngl", str(ngl)]
    if pc.n_cpu_moe:
        args += ["--n-cpu-moe", str(pc.n_cpu_moe)]
    if pc.experts_on_cpu:
        args += ["-ot", "exps=CPU"]
    if pc.kv_on_cpu:
        args.append("-nkvo")
    ppl = case.perplexity
    if ppl is not None and ppl.flash_attn:
        args += ["-fa", ppl.flash_attn]
    if ppl is not None and ppl.no_mmap:
        args.append("--no-mmap")
    return args


def text_file(text: str, anchor_id: str) -> Path:
    """A shipped text by name, or a runner's own file ("path:<file>", $VARS expanded). A file this
    machine does not hold is NotApplicable (a SKIP; a FAIL on the anchor's own runner)."""
    from lawbench.engines import shipped_text

    if text.startswith("path:"):
        raw = text[len("path:"):]
        path = Path(os.path.expandvars(os.path.expanduser(raw)))
        if "$" in str(path) or not path.is_file():
            raise NotApplicable(f"text {text!r} is not on this machine ({path}): a runner that holds it "
                                "sets the folder it names")
        return path
    try:
        return shipped_text(text)
    except LawbenchError as exc:
        raise DataError(CASE_FILE, str(exc), anchor=anchor_id, field="case.perplexity.text") from None


class KvQualitySampler:
    """Per round: one slice, both arms scored on it (order alternating), one sample a/b."""

    log_scale = True

    def __init__(self, visits: dict[str, Any], info: dict[str, Any]):
        self.visits, self.info = visits, info
        self.round = 0
        self.log: list[dict[str, Any]] = []
        self._env: dict[str, Any] = {}

    def draw(self, n: int) -> list[Sample]:
        out: list[Sample] = []
        try:
            for _ in range(n):
                order = ("a", "b") if self.round % 2 == 0 else ("b", "a")
                nll, raw = {}, {}
                for arm in order:
                    t0 = time.monotonic()
                    visit = self.visits[arm]()
                    nll[arm], raw[arm] = visit.raw["nll"], visit.raw
                    self.log.append({"round": self.round, "arm": arm, "slice": visit.raw["slice"],
                                     "nll": visit.raw["nll"], "wall_s": round(time.monotonic() - t0, 3)})
                self.round += 1
                out.append(Sample(value=math.exp(nll["a"] - nll["b"]), arm="a/b",
                                  raw={"order": "".join(order), "nll": nll, "slice": raw["a"]["slice"],
                                       "visits": raw}))
        except EngineError as exc:
            exc.samples = out + list(exc.samples)
            raise
        return out

    def statistic(self, samples: list[Sample]) -> list[float]:
        return [s.value for s in samples]

    def environment(self) -> dict[str, Any]:
        if not self._env:
            try:
                from lawbench.hardware import environment_snapshot

                self._env = environment_snapshot()
            except Exception as exc:  # noqa: BLE001 - evidence, never a reason to lose a run
                self._env = {"error": f"{type(exc).__name__}: {exc}"}
        return self._env

    def protocol(self) -> dict[str, Any]:
        return {"sampling_unit": "one disjoint slice of the text, both arms scored on it "
                                 "(one llama-perplexity process per arm)",
                "statistic": "ppl ratio a/b = exp(nll_a - nll_b) per slice", "interleaved": True,
                "order": "ABBA", **self.info, "visits": self.log}


def sampler(anchor: Anchor, profile: HardwareProfile, resources: Any) -> KvQualitySampler:
    from lawbench.engines import SliceVisits, text_sha256, text_slices
    from lawbench.plugins.law4.measure import model_file
    from lawbench.store import cache_root

    cases = kv_cases(anchor)
    ppl = cases["a"].perplexity
    assert ppl is not None  # Law4Case's NEEDS
    files = {arm: model_file(c.model, resources) for arm, c in cases.items()}
    text = text_file(ppl.text, anchor.id)
    slices = text_slices(text, MAX_SLICES, ppl.slice_chars)
    if len(slices) < anchor.budget.max_samples:
        raise DataError(CASE_FILE, f"text {ppl.text} gives {len(slices)} slices of {ppl.slice_chars} "
                        f"characters, fewer than budget.max_samples {anchor.budget.max_samples}",
                        anchor=anchor.id, field="budget.max_samples")
    sha = text_sha256(text)
    work = cache_root() / "law4" / "slices" / f"{sha[:12]}-{ppl.slice_chars}"
    llama = resources.llama()
    args = {arm: perplexity_args(c, profile) for arm, c in cases.items()}
    visits = {arm: SliceVisits(llama, files[arm], slices, workdir=work, ctx=ppl.ctx, chunks=ppl.chunks,
                               threads=profile.engine_threads(), timeout_s=ppl.timeout_s, extra_args=args[arm])
              for arm in cases}
    info = {"engine": "llama-perplexity", "llama_cpp": llama.version, "text": ppl.text, "text_sha256": sha,
            "ctx": ppl.ctx, "chunks": ppl.chunks, "slice_chars": ppl.slice_chars,
            "models": {arm: str(f) for arm, f in files.items()}, "args": args,
            "kv_types": {arm: list(kv_types(c)) for arm, c in cases.items()}}
    return KvQualitySampler(visits, info)


def check(anchor: Anchor) -> None:
    """What `lawbench check` asks of a kv_ppl_ratio anchor: its arms (kv_cases) and the text's form."""
    cases = kv_cases(anchor)
    text = cases["a"].perplexity.text  # type: ignore[union-attr]
    if not text.startswith("path:"):
        text_file(text, anchor.id)  # a shipped text must exist; a runner's path is the runner's business
