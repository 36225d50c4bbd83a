"""The `case` table of a Law 1 anchor: which real tensors, which quantization, which gauge."""
from __future__ import annotations

from typing import Annotated, Literal, Optional

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from lawbench import ANCHOR_FILE, DataError
from lawbench.store import ModelReference


def _power_of_two(v: int) -> int:
    if v & (v - 1):
        raise ValueError(f"group {v} is not a power of two")
    return v


# The frames a tensor is quantized in (lawbench.plugins.law1.gauges does the arithmetic); named here,
# with the case that picks one, so that loading the law does not load numpy.
GAUGES = ("native", "hadamard", "svd", "diagonal")

# Weights per quantization group (one scale each): a power of two, as the Hadamard transform needs.
Group = Annotated[int, Field(ge=8, le=4096), AfterValidator(_power_of_two)]

# Where the output error's input statistics come from: "imatrix", the real activations llama-imatrix
# measures on the shipped text (core.engines.imatrix); "norm-gain", the layer's own RMSNorm gain
# squared read from the file (tensors.input_scale), a proxy that needs no engine run.
ACTIVATIONS = ("imatrix", "norm-gain")

# Roles whose inputs the file describes (they read an RMSNorm's output: tensors.input_scale).
NORMED_ROLES = ("attn_q", "attn_k", "attn_v", "ffn_gate", "ffn_up")
ROLES = NORMED_ROLES + ("attn_output", "ffn_down")


class Law1Case(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: ModelReference  # a catalogue model (anchors/models*.toml), e.g. "gguf:gemma3-270m-q4_k_m"
    role: Literal[ROLES]  # type: ignore[valid-type]
    # The layers sampled, in this order: one sample per layer (each with its own rotation seed),
    # so the interval is over tensors of one role, never over repetitions of one tensor.
    layers: list[int] = Field(min_length=3)
    bits: int = Field(ge=1, le=8)
    group: Group = 64
    gauge: Literal[GAUGES[1:]] = "hadamard"  # type: ignore[valid-type]  # compared with native
    rank: Optional[int] = Field(default=None, ge=1)  # truncated SVD: a manufactured bottleneck
    # output_error_ratio: gauge/native relative error on the tensor's outputs (inputs with the
    # second moment `activations` names); rel_mse_ratio: the same on the weights themselves.
    quantity: Literal["output_error_ratio", "rel_mse_ratio"] = "output_error_ratio"
    activations: Literal[ACTIVATIONS] = "imatrix"  # type: ignore[valid-type]
    seed: int = Field(default=0, ge=0)  # first rotation seed; sample k uses seed + k

    @field_validator("layers")
    @classmethod
    def _distinct(cls, v: list[int]) -> list[int]:
        if any(x < 0 for x in v):
            raise ValueError("layers are block indices, 0 or more")
        if len(set(v)) != len(v):
            raise ValueError("a layer is listed twice (one sample per tensor)")
        return v

    @model_validator(mode="after")
    def _output_needs_inputs(self) -> "Law1Case":
        if (self.quantity == "output_error_ratio" and self.activations == "norm-gain"
                and self.role not in NORMED_ROLES):
            raise ValueError(f"role {self.role}: the file does not describe its inputs; use "
                             f"activations = \"imatrix\", quantity = \"rel_mse_ratio\" or one of "
                             f"{', '.join(NORMED_ROLES)}")
        return self

    def tensor(self, layer: int) -> str:
        return f"blk.{layer}.{self.role}.weight"


def catalogue_id(ref: str, anchor_id: str) -> str:
    """The catalogue id a Law 1 case's ``model = "gguf:<id>"`` names: Law 1 keys its copies and
    imatrices by the catalogue's checksum, so a model is a catalogue entry, never a bare path.

    :raises DataError: naming the anchor and case.model.
    """
    from lawbench.store import check_model_ref

    try:
        parsed = check_model_ref(ref)
    except ValueError as exc:
        raise DataError(ANCHOR_FILE, str(exc), anchor=anchor_id, field="case.model") from None
    if parsed.kind != "gguf":
        raise DataError(ANCHOR_FILE, f"model {ref!r}: Law 1 reads a catalogue model, gguf:<catalogue id>",
                        anchor=anchor_id, field="case.model")
    return parsed.name
