"""The `spread` table of a Law 4 spread anchor: how one sample, a statistic over several readings,
is formed (plugins/law4/spread.py, plugins/law4/order_effect.py). A model only, so case.py holds it
without importing the samplers.

    spread = { visits = 6 }                                   decode_spread
    spread = { statistic = "min", bytes = "active" }          eta_range
    spread = { order = ["k8", "k4", "k2", "k1"], passes = 5, warmup = 3,
               arms = ["k4", "k8"], after = "lower", statistic = "min" }   order_spread / order_span
    spread = { order = ["ub512", "ub1024", "ub1536", "ub2048"], statistic = "min" }   step_change
"""
from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field, model_validator

from lawbench import Strict

# Quantities whose one sample is a statistic over several readings (measured only, never priced).
SPREAD_KINDS = ("decode_spread", "eta_range", "order_spread", "order_span", "step_change")
ORDER_KINDS = ("order_spread", "order_span")
ORDERED_KINDS = (*ORDER_KINDS, "step_change")  # the ones whose arms run in a named order


class SpreadCase(Strict):
    """How a spread anchor forms one sample: over `visits` consecutive engine visits of one arm
    (decode_spread: (max − min) / mean, the register's own "relative spread"), over one visit of
    every arm (eta_range: the arms' implied η, their `statistic`), or over one schedule of passes
    through the arms (order_spread, order_span: the readings split by the arm that ran before)."""

    visits: int = Field(default=6, ge=2, le=50)  # decode_spread: consecutive fresh visits per sample
    # eta_range, order_spread, step_change: which end over the arms / groups / steps
    statistic: Optional[Literal["min", "max"]] = None
    # eta_range: the bytes an arm's η is read on, as its source printed it: "active" (what a token
    # reads: the law's tier η, L-14's ladder) or "file" (the whole file: L-15's per-format η)
    bytes: Literal["active", "file"] = "active"
    # order_spread / order_span (register L-31): the arms from the highest setting to the lowest (k=8
    # first); odd passes run them in this order, even passes backwards ('forward, backward, forward'),
    # after `warmup` discarded visits of the first, so each arm meets the neighbours the record's did.
    # step_change (L-08): the arms in the order of the swept parameter; a step is a neighbour pair.
    order: list[str] = Field(default_factory=list)
    passes: int = Field(default=5, ge=2, le=21)
    warmup: int = Field(default=1, ge=0, le=10)
    arms: list[str] = Field(default_factory=list)  # whose readings are judged (default: every arm)
    # Which readings: those whose predecessor ran an equal-or-higher setting (the same arm, or one
    # earlier in `order`), or a lower one (later in `order`); order_span may leave it out (every reading).
    after: Optional[Literal["equal-or-higher", "lower"]] = None

    @model_validator(mode="after")
    def _order_fields(self) -> "SpreadCase":
        if len(set(self.order)) != len(self.order):
            raise ValueError("order: each arm once")
        if len(set(self.arms)) != len(self.arms):
            raise ValueError("arms: each arm once")
        return self
