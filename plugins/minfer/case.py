"""The `case` (and `arms`) tables a minfer anchor may carry, checked before anything runs."""
from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lawbench.core.errors import ANCHOR_FILE
from lawbench.core.loading import validation_error
from lawbench.core.models import Anchor, FiniteFloat
from lawbench.plugins.minfer.engine import CMD_ENV

Measure = Literal["per_pid_memory_mib", "prefill_tok_s", "plane_bytes"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Run(_Strict):
    """How to start one engine pass: which command, with which environment."""

    env: dict[str, str] = Field(default_factory=dict)
    # Variables removed from the runner's environment first, so "default" really is the default
    # even on a box with a stray export (seed 002: unset MINFER_MMQ_Q6K_EXP means "1").
    unset_env: list[str] = Field(default_factory=list)
    command_env: str = CMD_ENV  # the env var holding the command line (LAWBENCH_MINFER_CMD)
    label: Optional[str] = None  # how reports name this configuration, e.g. "EXP=0"


class Shape(_Strict):
    """`count` tensors of od × id elements, e.g. 14 attn_v of 512 × 3584."""

    name: str
    count: int = Field(ge=1)
    od: int = Field(ge=1)  # output rows
    id: int = Field(ge=1)  # input columns (the row length the plane gate checks: id % 256 == 0)


class Case(Run):
    model: Optional[str] = None  # the seed's own words for the model, e.g. "7B q4_k_m"
    architecture: Optional[str] = None  # the architecture the shape table was taken from
    measure: Optional[Measure] = None
    statistic: Literal["value", "difference"] = "value"  # difference: arm a − arm b, per pair
    timeout_s: FiniteFloat = Field(default=600.0, gt=0)
    shapes: list[Shape] = Field(default_factory=list)


def parse_case(anchor: Anchor) -> Case:
    return _validate(Case, anchor.case, anchor, "case")


def parse_arm(anchor: Anchor, name: str) -> Run:
    return _validate(Run, anchor.arms[name], anchor, f"arms.{name}")


def _validate(model: type, data: Any, anchor: Anchor, where: str) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:  # core names the anchor's file (DataError.located)
        raise validation_error(ANCHOR_FILE, exc, anchor=anchor.id, prefix=where) from None
