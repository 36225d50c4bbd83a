"""Law 1's state variable read off a real file: the effective rank of a tensor, or of the map two
tensors implement together.

Seed 000 prints the effective ranks its rotation costs were measured against ("a full-rank MLP
(eff. rank 1168)", "the low-rank KV-latent (eff. rank 394)"). The register computes them as the
entropy effective rank of the *energy* spectrum, p_i = s_i^2 / sum s^2, erank = exp(-sum p log p)
(FedericoTs/quantprobe: weights/m1_dichotomy.py, weights/rank_fragility.py), which is not Roy &
Vetterli's p_i = s_i / sum s that gauges.effective_rank uses; `spectrum` names which.

    case = { model = "gguf:deepseek-v2-lite-bf16", tensor = "blk.1.ffn_down_shexp.weight" }
    case = { model = "gguf:deepseek-v2-lite-bf16", mla_kv = 13 }   # kv_b . kv_a[:kv_lora_rank]

`mla_kv = N` is MLA's composed key/value map at block N: the up-projection out of the latent times
the latent's rows of the down-projection, kv_b . kv_a_mqa[:kv_lora_rank] (rank_fragility.py:
'kb @ ka[:512]'). llama.cpp's converter stores kv_b either whole (attn_kv_b) or split per head
into attn_k_b (transposed) and attn_v_b; the rows come back in another order from the split, which
leaves every singular value, and so the rank, unchanged.

One sample is one reading of the file: arithmetic on stored weights, so every reading is the same
number (noise "deterministic"); the samples say so rather than assume it. This module is the case
(loaded with the law, without numpy); erank.py the arithmetic and the reading.
"""
from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from lawbench import ANCHOR_FILE, Anchor, DataError, validation_error
from lawbench.plugins.law1.case import catalogue_id
from lawbench.store import ModelReference

QUANTITY = "effective rank"


class Law1RankCase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: ModelReference  # a catalogue model: "gguf:<id>"
    tensor: Optional[str] = Field(default=None, min_length=1)  # one tensor, e.g. "blk.1.ffn_down_shexp.weight"
    mla_kv: Optional[int] = Field(default=None, ge=0)  # or MLA's composed K/V map at this block
    # "energy": p = s^2 / sum s^2 (the register's); "singular": p = s / sum s (Roy & Vetterli's)
    spectrum: Literal["energy", "singular"] = "energy"

    @model_validator(mode="after")
    def _one_map(self) -> "Law1RankCase":
        if (self.tensor is None) == (self.mla_kv is None):
            raise ValueError("name exactly one map: tensor = \"<name>\" or mla_kv = <block>")
        return self


def parse_case(anchor: Anchor) -> Law1RankCase:
    """The case of an effective-rank anchor, or a DataError naming the anchor and the field."""
    if anchor.kind != "measurement" or anchor.arms:
        raise DataError(ANCHOR_FILE, "an effective-rank anchor is a measurement without arms", anchor=anchor.id,
                        field="kind")
    try:
        case = Law1RankCase.model_validate(anchor.case)
    except ValidationError as exc:
        raise validation_error(ANCHOR_FILE, exc, anchor=anchor.id, prefix="case") from None
    catalogue_id(case.model, anchor.id)
    return case
