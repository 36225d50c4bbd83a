"""What a law plugin provides: a Law object that predicts, measures and names its anchors.

A law never decides a verdict. It answers three questions and core does the rest:
  predict(anchor, profile)            -> Prediction: the law's own number for the anchor's case
  sampler(anchor, profile, resources) -> Sampler: draws raw samples on this machine, on demand
  census(anchor, profile, resources)  -> Census: counted path labels from one real run
Core asks a Sampler for more samples while the confidence interval straddles a band edge, up to
the anchor's budget (see lawbench.core.verdicts). Anything a law cannot do raises NotApplicable
(a SKIP with its reason) or EngineError (an ERROR).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Iterable, Optional, Protocol

from lawbench.core.models import Anchor, HardwareProfile, Sample


class LawbenchError(Exception):
    """An error for people: says what was wrong, where, and what to do."""


class NotApplicable(LawbenchError):
    """The anchor cannot run here (missing GPU, wrong profile, …): a SKIP with this reason."""


class EngineError(LawbenchError):
    """The engine is missing, crashed, was killed or timed out: an ERROR verdict.

    ``samples`` keeps whatever was measured before the fault, so nothing is lost.
    """

    def __init__(self, message: str, samples: Optional[list[Sample]] = None, log: str = ""):
        super().__init__(message)
        self.samples = list(samples or [])
        self.log = log


@dataclass
class Prediction:
    value: float
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass
class Census:
    counts: dict[str, int]
    log: str = ""
    environment: dict[str, Any] = field(default_factory=dict)


class Sampler(Protocol):
    """Draws samples for one anchor. Ratio samplers return per-pair ratios of interleaved arms."""

    def draw(self, n: int) -> list[Sample]: ...

    def statistic(self, samples: list[Sample]) -> list[float]:
        """The values the verdict's interval is computed over (e.g. per-pair ratios)."""
        ...

    def environment(self) -> dict[str, Any]: ...

    def protocol(self) -> dict[str, Any]: ...


class Law:
    """Base class for a law. Subclass, set ``name`` and ``anchors_package``, override what applies."""

    name: ClassVar[str] = ""  # lower-case, unique: "law4"
    title: ClassVar[str] = ""
    # importlib.resources package holding this law's anchor TOML files, e.g. "lawbench.anchors.law4"
    anchors_package: ClassVar[Optional[str]] = None

    def predict(self, anchor: Anchor, profile: HardwareProfile) -> Prediction:
        raise NotApplicable(f"law {self.name!r} has no prediction for anchor {anchor.id!r}")

    def sampler(self, anchor: Anchor, profile: HardwareProfile, resources: Any) -> Sampler:
        raise NotApplicable(f"law {self.name!r} cannot measure anchor {anchor.id!r}")

    def census(self, anchor: Anchor, profile: HardwareProfile, resources: Any) -> Census:
        raise NotApplicable(f"law {self.name!r} has no census for anchor {anchor.id!r}")

    def anchor_files(self) -> Iterable[Any]:
        """The anchor TOML files this law ships (importlib.resources Traversables)."""
        if not self.anchors_package:
            return []
        from importlib.resources import files

        root = files(self.anchors_package)
        return sorted((p for p in root.iterdir() if p.name.endswith(".toml")), key=lambda p: p.name)
