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
from typing import Any, Callable, ClassVar, Iterable, Optional, Protocol

from pydantic import BaseModel, ValidationError

from lawbench.core.errors import (  # noqa: F401
    ANCHOR_FILE,
    EngineError,
    EngineInterrupted,
    LawbenchError,
    NotApplicable,
    validation_error,
)
from lawbench.core.models import Anchor, HardwareProfile, Sample


@dataclass
class Prediction:
    """The law's number for an anchor's case.

    ``from_reference``: for an agreement anchor whose machine constant (η·BW) is not published
    for the profile, the law's prediction of arm a given what arm b measured in the same round —
    the constant is calibrated on arm b, round by round, so machine drift cancels and the
    anchor tests the law's shape. ``value`` is then the predicted a/b ratio, for people.
    """

    value: float
    detail: dict[str, Any] = field(default_factory=dict)
    from_reference: Optional[Callable[[float], float]] = field(default=None, compare=False, repr=False)


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
    """Base class for a law. Subclass, set ``name``, ``anchors_package`` and ``case_model``,
    override what applies."""

    name: ClassVar[str] = ""  # lower-case, unique: "law4"
    title: ClassVar[str] = ""
    # importlib.resources package holding this law's anchor TOML files, e.g. "lawbench.anchors.law4"
    anchors_package: ClassVar[Optional[str]] = None
    # The pydantic model of this law's `case` table (extra="forbid", so a typo is an error).
    # `lawbench check` validates every anchor's case with it; `lawbench schema` exports it.
    case_model: ClassVar[Optional[type[BaseModel]]] = None

    def case(self, anchor: Anchor) -> Any:
        """The anchor's case validated by ``case_model`` (the raw table for a law without one).

        :raises DataError: naming the anchor and the dotted field, e.g. ``case.terms.1``.
        """
        if self.case_model is None:
            return anchor.case
        try:
            return self.case_model.model_validate(anchor.case)
        except ValidationError as exc:
            raise validation_error(ANCHOR_FILE, exc, anchor=anchor.id, prefix="case") from None

    def check_anchor(self, anchor: Anchor) -> None:
        """Check everything this law reads from an anchor, without running anything.

        Called for every anchor by ``lawbench check`` and before every run, so a data error is
        exit 2 before the first measurement. The default validates the case with ``case_model``;
        a law with arms or cross-field rules overrides this and raises DataError naming the
        field (the file is filled in by core).
        """
        self.case(anchor)

    def predict(self, anchor: Anchor, profile: HardwareProfile) -> Prediction:
        raise NotApplicable(f"law {self.name!r} has no prediction for anchor {anchor.id!r}")

    def sampler(self, anchor: Anchor, profile: HardwareProfile, resources: Any) -> Sampler:
        raise NotApplicable(f"law {self.name!r} cannot measure anchor {anchor.id!r}")

    def census(self, anchor: Anchor, profile: HardwareProfile, resources: Any) -> Census:
        raise NotApplicable(f"law {self.name!r} has no census for anchor {anchor.id!r}")

    def parity(self, anchor: Anchor, profile: HardwareProfile, resources: Any) -> dict[str, Any]:
        """What the engine's output says on this census's run ({"ppl": …}), so a planted fault
        can show that the output stayed right while the fast path disappeared."""
        raise NotApplicable(f"law {self.name!r} has no parity check for anchor {anchor.id!r}")

    def anchor_files(self) -> Iterable[Any]:
        """The anchor TOML files this law ships (importlib.resources Traversables)."""
        if not self.anchors_package:
            return []
        from importlib.resources import files

        root = files(self.anchors_package)
        return sorted((p for p in root.iterdir() if p.name.endswith(".toml")), key=lambda p: p.name)
