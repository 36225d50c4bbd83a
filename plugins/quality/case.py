"""The `case` and `arms` tables of a quality anchor, checked before anything runs.

    case = { text = { repo = "FedericoTs/quantprobe", commit = "f02d7cce…",
                      path = "weights/data/wikitext2_test.txt", sha256 = "696cca6b…" },
             ctx = 2048, chunks = 32, statistic = "ppl_ratio",
             reference = { model = "gguf:…" } }          # the delta statistics' and KLD's base
    arms.a = { model = "gguf:…", label = "imatrix" }
    arms.b = { model = "gguf:…", cache_type = "q8_0" }
    arms.c = { model = "gguf:…", quantize = "Q6_K", tensor_types = ['blk\\.(21|22)\\.ffn_.*=q2_k'] }  # a band probe
    arms.d = { model = "gguf:…", experts_used = 4 }     # a MoE's top-k overridden (--override-kv)

Statistics (every arm scores the same chunks of the same text; lawbench.plugins.quality.law):
  * "ppl"              PPL(a), one file's perplexity              kind "measurement"
                       (a gate's absolute score, e.g. "10.87 ± 0.34 on our WikiText-2 gate")
  * "ppl_ratio"        PPL(a) / PPL(b)                        kind "ratio"; per chunk exp(nll_a - nll_b)
  * "ppl_delta"        PPL(a) - PPL(b)                        kind "measurement"
  * "ppl_delta_ratio"  Σ_num (PPL(k) - PPL(ref)) / Σ_den (PPL(k) - PPL(ref))   kind "measurement"
                       (the register's "a ratio of perplexity differences"; num = ["a"], den = ["b"]
                       by default; num = ["c"], den = ["a", "b"] asks whether two gains add up)
  * "kld_mean"         mean KL divergence of arm a against the reference's saved logits (llama-perplexity
                       --kl-divergence-base / --kl-divergence)                     kind "measurement"
"""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, ValidationError, model_validator

from lawbench import ANCHOR_FILE, Anchor, DataError, FiniteFloat, Strict, validation_error
from lawbench.engines import RecordText, TextReference, check_text_ref, expert_override
from lawbench.store import ModelReference, check_model_ref

CACHE_TYPES = ("f16", "bf16", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "iq4_nl")
STATISTICS = ("ppl", "ppl_ratio", "ppl_delta", "ppl_delta_ratio", "kld_mean")
KIND_OF = {"ppl": "measurement", "ppl_ratio": "ratio", "ppl_delta": "measurement", "ppl_delta_ratio": "measurement",
           "kld_mean": "measurement"}


class Arm(Strict):
    """One model file as llama-perplexity scores it."""

    model: ModelReference  # gguf:<catalogue id> or path:<file>
    # -ctk/-ctv: the KV cache's type for this arm (llama.cpp's default, f16, when unset)
    cache_type: Literal[CACHE_TYPES] | None = None  # type: ignore[valid-type]
    # the arm's file is `model` requantized to this type by llama-quantize --allow-requantize
    # (made once, kept in the cache), as the record built its arms from one source
    quantize: Annotated[str, Field(pattern=r"^[A-Za-z0-9_]+$")] | None = None
    # llama-quantize --tensor-type "<regex>=<type>" rules applied with `quantize` (the rest of the
    # file): the register's band probe, "one band's FFNs -> q2_k at a time, rest at base"
    tensor_types: list[Annotated[str, Field(pattern=r"^[^=\s]+=[A-Za-z0-9_]+$")]] = Field(default_factory=list)
    # the MoE's top-k for this arm: --override-kv <arch>.expert_used_count=int:K, the architecture read
    # from the file's own header (pre-registrations #18 and #107 ran it so)
    experts_used: int | None = Field(default=None, ge=1)
    # more llama-perplexity arguments for this arm alone
    args: list[str] = Field(default_factory=list)
    label: str | None = None

    @model_validator(mode="after")
    def _recipe_needs_a_base(self) -> "Arm":
        if self.tensor_types and not self.quantize:
            raise ValueError("tensor_types: a per-tensor recipe is applied by llama-quantize: give quantize = "
                             "\"<the type of every other tensor>\" too")
        return self

    def engine_args(self, architecture: str | None = None) -> list[str]:
        """The arm's llama-perplexity arguments; ``architecture`` (general.architecture of the
        arm's file) is needed when the arm sets experts_used."""
        kv = ["-ctk", self.cache_type, "-ctv", self.cache_type] if self.cache_type else []
        k = ["--override-kv", expert_override(architecture or "?", self.experts_used)] if self.experts_used else []
        return kv + k + list(self.args)


class QualityCase(Strict):
    text: TextReference = "python-reference-3.11.txt"
    ctx: int = Field(default=512, ge=32)
    chunks: int = Field(ge=2)  # each chunk is one sample: disjoint, scored once per arm
    statistic: Literal[STATISTICS] = "ppl_ratio"  # type: ignore[valid-type]
    # What the claim is a figure of. "text": the chunks are a sample of the text, and the interval
    # says where the whole text's statistic lies (a law's claim). "chunks": the figure of exactly
    # these chunks, as a gate prints it ("PPL = 10.8727 +/- 0.33891" over "32 chunks"): the chunks
    # are the whole population, every one is scored, and the figure is computed, not estimated, so
    # the band (the source's ±) is what judges it, not the chunk-to-chunk scatter the ± already is.
    population: Literal["text", "chunks"] = "text"
    reference: Arm | None = None
    num: list[str] = Field(default_factory=lambda: ["a"])
    den: list[str] = Field(default_factory=lambda: ["b"])
    # llama-perplexity arguments every arm gets, e.g. the record's placement ["-ngl", "99", "-ot", "exps=CPU"]
    engine_args: list[str] = Field(default_factory=list)
    threads: int | None = Field(default=None, ge=1)
    timeout_s: FiniteFloat = Field(default=600.0, gt=0)


def parse_case(anchor: Anchor) -> tuple[QualityCase, dict[str, Arm]]:
    """The case and its arms (the reference, when there is one, as arm "ref"), or a DataError
    naming the anchor and the field."""
    try:
        case = QualityCase.model_validate(anchor.case)
    except ValidationError as exc:
        raise validation_error(ANCHOR_FILE, exc, anchor=anchor.id, prefix="case") from None
    try:
        check_text_ref(case.text)
    except Exception as exc:  # noqa: BLE001 - a LawbenchError naming the shipped texts
        raise DataError(ANCHOR_FILE, str(exc), anchor=anchor.id, field="case.text") from None
    want = KIND_OF[case.statistic]
    if anchor.kind != want:
        raise DataError(ANCHOR_FILE, f"statistic {case.statistic!r} is a {want} anchor's, not a {anchor.kind}'s",
                        anchor=anchor.id, field="kind")
    if anchor.budget.max_samples > case.chunks:
        raise DataError(ANCHOR_FILE, f"budget.max_samples {anchor.budget.max_samples} asks for more samples than "
                        f"the case's {case.chunks} chunks (one sample a chunk)", anchor=anchor.id,
                        field="budget.max_samples")
    if case.population == "chunks" and not (anchor.budget.min_samples == anchor.budget.max_samples == case.chunks):
        raise DataError(ANCHOR_FILE, f"population \"chunks\" is the figure of all {case.chunks} chunks: set "
                        f"budget.min_samples = budget.max_samples = {case.chunks} (got {anchor.budget.min_samples} "
                        f"and {anchor.budget.max_samples})", anchor=anchor.id, field="budget.min_samples")
    arms: dict[str, Arm] = {}
    for name, table in sorted(anchor.arms.items()):
        if name == "ref":
            raise DataError(ANCHOR_FILE, "the reference is case.reference, not an arm", anchor=anchor.id,
                            field="arms.ref")
        try:
            arms[name] = Arm.model_validate(table)
        except ValidationError as exc:
            raise validation_error(ANCHOR_FILE, exc, anchor=anchor.id, prefix=f"arms.{name}") from None
    if case.reference is not None:
        arms["ref"] = case.reference
    for name, arm in arms.items():
        try:
            check_model_ref(arm.model)
        except ValueError as exc:
            where = "case.reference.model" if name == "ref" else f"arms.{name}.model"
            raise DataError(ANCHOR_FILE, str(exc), anchor=anchor.id, field=where) from None
    needs_ref = case.statistic in ("ppl_delta_ratio", "kld_mean")
    if needs_ref and case.reference is None:
        raise DataError(ANCHOR_FILE, f"statistic {case.statistic!r} is measured against a reference: give "
                        "case.reference = { model = … }", anchor=anchor.id, field="case.reference")
    if not needs_ref and case.reference is not None:
        raise DataError(ANCHOR_FILE, f"statistic {case.statistic!r} reads no reference: remove case.reference",
                        anchor=anchor.id, field="case.reference")
    named = {"ppl": ["a"], "ppl_ratio": ["a", "b"], "ppl_delta": ["a", "b"], "kld_mean": ["a"],
             "ppl_delta_ratio": sorted(set(case.num) | set(case.den))}[case.statistic]
    if sorted(set(arms) - {"ref"}) != sorted(set(named)):
        raise DataError(ANCHOR_FILE, f"statistic {case.statistic!r} needs arms {named} (got "
                        f"{sorted(set(arms) - {'ref'}) or 'none'})", anchor=anchor.id, field="arms")
    if case.statistic == "ppl_delta_ratio" and (not case.num or not case.den or set(case.num) & set(case.den)):
        raise DataError(ANCHOR_FILE, f"num {case.num} and den {case.den} must each name arms, and no arm twice",
                        anchor=anchor.id, field="case.num")
    return case, arms


__all__ = ["STATISTICS", "Arm", "QualityCase", "RecordText", "parse_case"]
