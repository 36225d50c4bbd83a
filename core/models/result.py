"""What a run produces per anchor: samples, the measurement, the verdict."""
from __future__ import annotations

import enum
from typing import Any, Optional

from pydantic import Field

from lawbench.core.models.anchor import AnchorKind
from lawbench.core.models.base import Id, ResultId, Strict


class Verdict(str, enum.Enum):
    PASS = "PASS"
    FAIL = "FAIL"
    VOID = "VOID"  # the instrument cannot resolve the band: the interval straddles an edge
    SKIP = "SKIP"  # not applicable here, with the reason
    ERROR = "ERROR"  # could not run

    @property
    def bad(self) -> bool:
        return self in (Verdict.FAIL, Verdict.VOID, Verdict.ERROR)


class Sample(Strict):
    value: float
    arm: Optional[str] = None  # ratio anchors: "a" / "b"; single-arm: None
    predecessor: Optional[str] = None  # the configuration that ran immediately before (L-31)
    raw: dict[str, Any] = Field(default_factory=dict)


class Measurement(Strict):
    """Every raw sample, the protocol that took them, and the machine they were taken on."""

    samples: list[Sample] = Field(default_factory=list)
    protocol: dict[str, Any] = Field(default_factory=dict)
    environment: dict[str, Any] = Field(default_factory=dict)
    log: Optional[str] = None  # tail of the engine's output, for census and for people


class RateSeries(Strict):
    """What one measured arm is, as a runner's tracked speed (issue 31): the same model, format,
    placement and quantity on the same runner is one series, night after night, whatever anchor
    it served. A law names its arms' series; core stores and judges them without naming the law."""

    model: str
    format: str = ""  # the weight format ("Q4_0"), or "" where the case names none
    placement: str = ""  # e.g. "ngl=0": a different placement is a different speed
    quantity: str  # "decode tok/s" or "prefill tok/s"

    @property
    def key(self) -> str:
        return " | ".join((self.model, self.format or "-", self.placement or "-", self.quantity))


class RateSample(Strict):
    """One series' reading in one run: its per-visit values (warm-up excluded), their geometric
    mean and its 95 % interval (student-t on logs, one value per engine visit)."""

    series: RateSeries
    engine: str = ""  # the engine build key the values were taken with
    values: list[float] = Field(default_factory=list)
    measured: Optional[float] = None
    interval: Optional[tuple[float, float]] = None


class Result(Strict):
    """The outcome of one anchor in one run."""

    anchor_id: ResultId
    law: str
    kind: AnchorKind
    profile: Id
    verdict: Verdict
    reason: str = ""
    quantity: str = ""
    unit: str = ""
    published: Optional[float] = None
    predicted: Optional[float] = None
    # One statistic per result: `measured`, `interval` and `band` are all in `unit`, and
    # `statistic` says what they are; raw speeds and predictions in other units live in `detail`.
    statistic: str = ""
    measured: Optional[float] = None  # the statistic the verdict is about
    interval: Optional[tuple[float, float]] = None  # its confidence interval
    band: Optional[tuple[float, float]] = None
    spread: Optional[float] = None  # relative spread of the samples (IQR / median)
    measurement: Optional[Measurement] = None
    detail: dict[str, Any] = Field(default_factory=dict)
    # Every measured arm's absolute speed, typed (issue 31): filled by core's ArmSampler from the
    # series the law named, so the history and the gate read rates without reading `detail`.
    rates: list[RateSample] = Field(default_factory=list)
    duration_s: float = 0.0

    @property
    def blocking(self) -> bool:
        """Fails the build: FAIL / ERROR / VOID, except the expected FAIL of an open finding."""
        return self.verdict.bad and not self.detail.get("open_finding")
