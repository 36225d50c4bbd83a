"""An engine upgrade measured against the build it replaces in the same night (issue 31): the
record's typed `engine_upgrade` (lawbench.core.run.upgrade measures it, lawbench.core.history.upgrade
turns it into gate news)."""
from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import Field

from lawbench.core.models.base import Strict
from lawbench.core.models.result import Sample


class UpgradeSeries(Strict):
    """One rate series paired on both builds: new / old with its interval."""

    series: str  # RateSeries.key: "model | format | placement | quantity"
    format: str = ""
    anchor_id: str  # the anchor whose arm was paired
    arm: str  # that arm: "main", "a" or "b"
    status: Literal["measured", "skip", "error"]
    reason: str = ""
    ratio: Optional[float] = None  # tonight's build / the replaced one: geometric mean of per-pair ratios
    interval: Optional[tuple[float, float]] = None
    confidence: Optional[float] = None  # per look: 1 − alpha / series, then Bonferroni over the looks
    verdict: Optional[Literal["slower", "faster", "same", "unresolved"]] = None
    pairs: int = 0
    median_old: Optional[float] = None
    median_new: Optional[float] = None
    samples: list[Sample] = Field(default_factory=list)  # every pair (value new/old, order, both visits)


class EngineUpgrade(Strict):
    """Tonight's engine key differs from the runner's last accepted night's: that build, paired."""

    replaced: str  # engine_key of the accepted night's build
    tonight: str  # engine_key of tonight's build
    accepted_run_id: str  # the accepted night whose build was replaced
    old_engine: dict[str, Any] = Field(default_factory=dict)  # the replaced build as run tonight
    alpha: float  # family-wise: the chance of any false `slower` over the night's series
    tolerance: float  # slower / faster only beyond this fraction (the interval wholly past 1 ∓ it)
    error: Optional[str] = None  # the replaced build could not be found or run: nothing was paired
    series: list[UpgradeSeries] = Field(default_factory=list)
