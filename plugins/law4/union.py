"""The expert union of a verify batch (quantity "expert_union"): how many distinct experts a
mixture of experts reads per MoE layer when it decodes K+1 tokens at once, as speculative
verification does (seed 000: "verify-batches union ~40 experts vs 8"; the union tax of D-09).

    case = { quantity = "expert_union", model = "gguf:…", union = { draft_tokens = 3 } }

One reader run (lawbench.engines.read_union: the router's ffn_moe_topk tensors, read through
llama.cpp's eval callback) decodes the leading ``union.chars`` characters of ``union.text`` in
batches of K+1 tokens. A sample is one verify batch: its union averaged over the model's MoE
layers; the statistic is their mean, its interval over the text's batches. The count is a
deterministic function of model, text and K (noise = "deterministic"): running the reader again
gives the same batches, so the reader runs once and the budget's samples are successive batches —
the interval says how the union varies across the text, never engine noise. A text that runs out
of batches ends the draw (core then decides on what it has). Measured only: the law prices bytes,
not routing.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from lawbench import Anchor, DataError, EngineError, HardwareProfile, LawbenchError, Sample
from lawbench.engines import NotMixture, check_text_ref, read_union, resolve_text, text_label
from lawbench.plugins.law4.case import CASE_FILE, Law4Case, parse_case
from lawbench.plugins.law4.measure import model_file

if TYPE_CHECKING:
    from lawbench import Resources


def check(anchor: Anchor) -> None:
    """What `lawbench check` can say of an expert_union anchor without running it."""
    if anchor.kind != "measurement" or anchor.arms:
        raise DataError(CASE_FILE, "an expert_union anchor measures one model's verify batches: kind "
                        "\"measurement\", no arms", anchor=anchor.id, field="arms" if anchor.arms else "kind")
    case = parse_case(anchor.case, anchor.id)
    if case.experts_used is not None or case.bench is not None:
        raise DataError(CASE_FILE, "the union is read at the model's own top-k by lawbench's reader, not "
                        "llama-bench: leave experts_used and bench out",
                        anchor=anchor.id, field="case.experts_used" if case.experts_used is not None else "case.bench")
    assert case.union is not None  # NEEDS["expert_union"]
    try:
        check_text_ref(case.union.text)
    except LawbenchError as exc:
        raise DataError(CASE_FILE, str(exc), anchor=anchor.id, field="case.union.text") from None


class UnionSampler:
    """Hands out one verify batch a sample from one reader run (made at the first draw)."""

    log_scale = False  # a mean of counts, on the linear scale

    def __init__(self, anchor: Anchor, case: Law4Case, profile: HardwareProfile, resources: "Resources"):
        self.anchor, self.case, self.profile, self.resources = anchor, case, profile, resources
        self.run: Optional[Any] = None
        self.next = 0
        self.model_path: Optional[Any] = None

    def _read(self) -> Any:
        u = self.case.union
        assert u is not None
        self.model_path = model_file(self.case.model, self.resources)
        text = resolve_text(u.text).read_text(encoding="utf-8", errors="replace")[: u.chars]
        try:
            run = read_union(self.resources.llama(), self.model_path, text, u.batch_tokens,
                             threads=u.threads or self.profile.engine_threads() or 1,
                             n_gpu_layers=self.case.placement.ngl or 0, timeout_s=u.timeout_s,
                             max_batches=self.anchor.budget.max_samples)  # no batch the budget cannot use
        except NotMixture as exc:
            raise DataError(CASE_FILE, f"{exc}; an expert_union case needs a mixture-of-experts model",
                            anchor=self.anchor.id, field="case.model") from None
        if not run.unions:
            raise EngineError(f"the reader decoded no whole batch of {u.batch_tokens} tokens from "
                              f"{u.chars} characters of {text_label(u.text)} ({run.text_tokens} tokens)")
        return run

    def draw(self, n: int) -> list[Sample]:
        if self.run is None:
            self.run = self._read()
        run = self.run
        out = []
        for i in range(self.next, min(self.next + n, len(run.unions))):
            out.append(Sample(value=sum(run.unions[i]) / len(run.unions[i]),
                              raw={"batch": i, "first_token": i * run.batch_tokens, "union": run.unions[i]}))
        self.next += len(out)
        return out

    def statistic(self, samples: list[Sample]) -> list[float]:
        return [s.value for s in samples]

    def environment(self) -> dict[str, Any]:
        llama = self.resources.llama()
        return {"engine": "lawbench-expert-union", "llama_cpp": llama.version, "backend": llama.backend}

    def protocol(self) -> dict[str, Any]:
        u = self.case.union
        assert u is not None
        run = self.run
        return {"reader": "lawbench-expert-union (core/engines/expert_union.cpp): ffn_moe_topk-<layer> "
                          "tensors through llama.cpp's eval callback, every token of a batch asking for logits",
                "draft_tokens": u.draft_tokens, "batch_tokens": u.batch_tokens, "text": text_label(u.text),
                "chars": u.chars, "model": str(self.model_path) if self.model_path else None,
                "sample": "one verify batch: its distinct experts per MoE layer, averaged over the layers",
                "statistic": "mean over the text's batches (deterministic counts: the interval is across batches)",
                **({"n_expert": run.n_expert, "n_expert_used": run.n_expert_used, "moe_layers": run.layers,
                    "text_tokens": run.text_tokens, "batches": len(run.unions), "reader_wall_s": round(run.wall_s, 3)}
                   if run else {})}


def sampler(anchor: Anchor, profile: HardwareProfile, resources: "Resources") -> UnionSampler:
    check(anchor)
    return UnionSampler(anchor, parse_case(anchor.case, anchor.id), profile, resources)
