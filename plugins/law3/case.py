"""The `case` and `arms` tables of a Law 3 anchor, checked before anything runs.

    case = { model = "gguf:smollm2-135m-q4_1", low_type = "q2_0", ctx = 128, chunks = 3,
             bytes = "equal" }
    arms.a = { layers = [0, 1, 2, 3, 4] }          # this recipe's layers go to low_type
    arms.b = { layers = [10, 11, 12, 13, 14] }

Statistic per slice of the shipped text (one sample; lawbench.core.engines.perplexity):
  * "ppl_ratio" (default): arm a's perplexity over arm b's, exp(nll_a - nll_b);
  * "damage_ratio": arm a's log-perplexity damage over arm b's, both against the source file
    (nll_a - nll_src) / (nll_b - nll_src) — a third visit per round, of the unmodified source.
"""
from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationError, model_validator

from lawbench import ANCHOR_FILE, Anchor, DataError, FiniteFloat, Strict, validation_error
from lawbench.engines import TextReference
from lawbench.store import ModelReference, check_model_ref

# Low-bit types the recipes may use. Block sizes matter: both small models have rows of 576 / 640
# values, which Q2_K / Q3_K (blocks of 256) cannot hold — llama-quantize would silently fall back
# to Q4_0. Q2_0 (2.25 bpw, groups of 64) and Q1_0 fit every row of both.
LOW_TYPES = ("q2_0", "q1_0", "q4_0", "q2_k", "q3_k")


class Recipe(Strict):
    """One arm: the layers (blk.N) requantized to the case's low type; [] is the source itself."""

    layers: list[int] = Field(default_factory=list)
    label: str | None = None  # how reports name this recipe, e.g. "depth-aware"

    @model_validator(mode="after")
    def _distinct(self) -> Recipe:
        if any(n < 0 for n in self.layers):
            raise ValueError("layers: a layer number is never negative")
        if len(set(self.layers)) != len(self.layers):
            raise ValueError(f"layers: {self.layers} names a layer twice")
        return self


class Law3Case(Strict):
    model: ModelReference  # gguf:<catalogue id> or path:<file>
    low_type: Literal[LOW_TYPES] = "q2_0"  # type: ignore[valid-type]
    statistic: Literal["ppl_ratio", "damage_ratio"] = "ppl_ratio"
    text: TextReference = "python-reference-3.11.txt"  # a shipped name or a pinned file of the record
    slice_chars: int = Field(default=3000, ge=500)
    # Slices before this one are skipped: those the probe that chose the recipes was measured on,
    # so an anchor never re-scores the text its recipes were picked on.
    first_slice: int = Field(default=0, ge=0)
    ctx: int = Field(default=128, ge=32)
    chunks: int = Field(default=3, ge=1)
    threads: int | None = Field(default=None, ge=1)
    timeout_s: FiniteFloat = Field(default=300.0, gt=0)
    # "equal": the two recipe files must have the same size in bytes (read from the files), so a
    # recipe can only win by where its low bits go, never by keeping more of them.
    bytes: Literal["any", "equal"] = "any"


def parse_case(anchor: Anchor) -> tuple[Law3Case, dict[str, Recipe]]:
    """The case and the two recipes, or a DataError naming the anchor and the field."""
    try:
        case = Law3Case.model_validate(anchor.case)
    except ValidationError as exc:
        raise validation_error(ANCHOR_FILE, exc, anchor=anchor.id, prefix="case") from None
    try:
        check_model_ref(case.model)
    except ValueError as exc:
        raise DataError(ANCHOR_FILE, str(exc), anchor=anchor.id, field="case.model") from None
    if set(anchor.arms) != {"a", "b"}:
        raise DataError(ANCHOR_FILE, f"a Law 3 anchor compares two recipes: needs arms.a and arms.b "
                        f"(got {sorted(anchor.arms) or 'none'})", anchor=anchor.id, field="arms")
    arms = {}
    for name in ("a", "b"):
        try:
            arms[name] = Recipe.model_validate(anchor.arms[name])
        except ValidationError as exc:
            raise validation_error(ANCHOR_FILE, exc, anchor=anchor.id, prefix=f"arms.{name}") from None
    if arms["a"].layers and sorted(arms["a"].layers) == sorted(arms["b"].layers):
        raise DataError(ANCHOR_FILE, "arms a and b name the same layers: the two recipes are one file",
                        anchor=anchor.id, field="arms.b.layers")
    if case.statistic == "damage_ratio" and not (arms["a"].layers and arms["b"].layers):
        raise DataError(ANCHOR_FILE, "a damage_ratio compares two damaged recipes against the source: "
                        "both arms need layers", anchor=anchor.id, field="arms")
    if case.bytes == "equal" and len(arms["a"].layers) != len(arms["b"].layers):
        raise DataError(ANCHOR_FILE, f"bytes = \"equal\" needs as many layers in each arm "
                        f"({len(arms['a'].layers)} against {len(arms['b'].layers)})",
                        anchor=anchor.id, field="arms.b.layers")
    return case, arms
