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


class EngineInterrupted(EngineError):
    """The run was stopped (SIGINT / SIGTERM) while the engine ran; the engine's process group is
    already ended. An EngineError so that the samples taken so far ride through the samplers to the
    record like any fault's; the runner records the anchor as ERROR and then stops the run.
    """

    def __init__(self, message: str, signal_name: str = "SIGINT",
                 samples: Optional[list[Sample]] = None, log: str = ""):
        super().__init__(message, samples=samples, log=log)
        self.signal_name = signal_name

    @staticmethod
    def signal_of(exc: BaseException) -> str:
        """The signal behind a KeyboardInterrupt: lawbench's handlers raise it with the signal's
        name; Python's own SIGINT handler raises it bare."""
        name = exc.args[0] if exc.args else None
        return name if isinstance(name, str) and name.startswith("SIG") else "SIGINT"


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
