"""The `case` table of a law2 anchor: what to measure, on which tensors of which model, with which codec."""
from __future__ import annotations

import re
from typing import Literal, Optional

from pydantic import Field, field_validator

import lawbench
from lawbench.store import ModelReference
from lawbench_law2.theory import codec_type

# A dense model's FFN down-projections: the closest thing a small dense model has to a routed
# expert (an MoE expert is an FFN), and the FFN matrix whose rows are a whole number of 256-weight
# blocks in both catalogue models (K- and I-quants need that; SmolLM2's up/gate rows hold 576).
FFN_DOWN = r"blk\.\d+\.ffn_down\.weight"


class Law2Case(lawbench.Strict):
    # rel-mse: the codec's relative MSE on real tensors (agreement: over the Gaussian floor).
    # rel-mse-vs-gaussian: the codec's rel-MSE on each real tensor over the same codec's rel-MSE on
    #   i.i.d. Gaussian rows of the same shape: the codec against its own Gaussian reference (the
    #   record's "floor" 0.069 is its trellis codec's Gaussian MSE, not Shannon's 0.0625).
    # coding-gain: dB by which the codec does better on the real tensor than on the same weights
    #   shuffled inside each 256-weight block (0 dB: the element stream is white, register L-10).
    # expert-rel-mse-vs-gaussian: a census of a routed-expert model, one sample per layer's 3-D
    #   expert tensor: every expert's rel-MSE over the codec's Gaussian figure, the worst one kept.
    # bits-per-weight / file-gb: read from a GGUF's header and size (no prediction).
    # bits-per-weight-ratio: one file's bits per weight over another's (over_model), both read from
    #   headers; predicted from two published rates (rate_bits over over_rate_bits).
    measure: Literal["rel-mse", "rel-mse-vs-gaussian", "coding-gain", "expert-rel-mse-vs-gaussian",
                     "bits-per-weight", "file-gb", "bits-per-weight-ratio"] = "rel-mse"
    # "gguf:<catalogue id>" (anchors/models*.toml) or "path:<file>" (a runner's own file): the form
    # is checked here, the catalogue id by check_anchor (lawbench.store.check_model_ref)
    model: Optional[ModelReference] = None
    over_model: Optional[ModelReference] = None  # bits-per-weight-ratio: the denominator's file
    codec: Optional[str] = None  # a ggml type name: "IQ2_XXS", "Q2_K", "Q4_K", "Q1_0"
    # The rate R the prediction uses; default: the codec's stored bits per weight (scales included).
    rate_bits: Optional[lawbench.FiniteFloat] = Field(default=None, ge=0, le=32)
    # bits-per-weight-ratio's prediction: the published rate of the denominator
    over_rate_bits: Optional[lawbench.FiniteFloat] = Field(default=None, gt=0, le=32)
    tensors: str = FFN_DOWN  # regular expression, matched against whole tensor names
    source_types: list[str] = Field(default_factory=list)  # keep tensors stored as these types only
    rows: int = Field(default=128, ge=1, le=1_000_000)  # rows read per tensor (evenly spaced)

    @field_validator("codec")
    @classmethod
    def _known_codec(cls, v: Optional[str]) -> Optional[str]:
        if v is not None:
            codec_type(v)  # ValueError lists the known types
        return v

    @field_validator("source_types")
    @classmethod
    def _known_types(cls, v: list[str]) -> list[str]:
        for name in v:
            codec_type(name)
        return v

    @field_validator("tensors")
    @classmethod
    def _regex(cls, v: str) -> str:
        try:
            re.compile(v)
        except re.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from None
        return v
