"""What a law plugin provides: a Law object that predicts, measures and names its anchors.

A law never decides a verdict. It answers three questions and core does the rest:
  predict(anchor, profile, resources) -> Prediction: the law's own number for the anchor's case
  sampler(anchor, profile, resources) -> Sampler: draws raw samples on this machine, on demand
  census(anchor, profile, resources)  -> Census: counted path labels from one real run
Core asks a Sampler for more samples while the confidence interval straddles a band edge, up to
the anchor's budget (see lawbench.core.stats.verdicts). Anything a law cannot do raises NotApplicable
(a SKIP with its reason) or EngineError (an ERROR).

Every method that may read a file or run an engine is handed the run's ``Resources`` (the one
engine, the one model store, the box lock), and core calls them in any order: a law keeps no
run state between calls, so predict() before, after or without sampler() gives one answer.
"""
from __future__ import annotations

from dataclasses import dataclass, field
import inspect
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterable, Optional, Protocol

from pydantic import BaseModel, Field, ValidationError

from lawbench.core.errors import (  # noqa: F401
    ANCHOR_FILE,
    EngineError,
    EngineInterrupted,
    LawbenchError,
    NotApplicable,
    PluginError,
    validation_error,
)
from lawbench.core.models import Anchor, HardwareProfile, Result, Sample
from lawbench.core.models.base import Strict

if TYPE_CHECKING:
    from lawbench.core.laws.resources import Resources


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


class MachineTerm(Strict):
    """One machine term a run measured: what the law's prediction needed from this machine (an
    effective bandwidth, say), measured paired with the engine visits. A contribution bundle
    carries them back (lawbench.core.record.contribute); ``Law.machine_terms`` says what they are."""

    anchor_id: str  # the anchor whose samples gave it
    term: str  # e.g. "eta_bw_gbs": the effective read rate η·BW of the tiers named in `tiers`
    tiers: list[str]
    value: float  # the median over the samples
    unit: str
    samples: list[float] = Field(default_factory=list)  # one per interleaved round
    how: str  # in one line


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
    # The pydantic model of this law's table in a hardware profile ([laws.<name>]: its own
    # constants of a machine). Core validates every profile's table with it when the profile is
    # loaded, handing it the profile (validation context "profile": its tiers and fingerprint),
    # so a bad entry is one line naming the file and the field; `lawbench schema` exports it.
    # The law reads the table with ``profile.law_table(self.name, self.profile_model)``.
    profile_model: ClassVar[Optional[type[BaseModel]]] = None

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

    def predict(self, anchor: Anchor, profile: HardwareProfile,
                resources: Optional["Resources"] = None) -> Prediction:
        """The law's number for the anchor's case.

        :param resources: the run's Resources: a prediction priced from a real model file fetches
            or builds it through ``resources.model``. ``None`` (a direct call, outside a run):
            never download and never run an engine; read what is on this machine.
        """
        raise NotApplicable(f"law {self.name!r} has no prediction for anchor {anchor.id!r}")

    def sampler(self, anchor: Anchor, profile: HardwareProfile, resources: "Resources") -> Sampler:
        raise NotApplicable(f"law {self.name!r} cannot measure anchor {anchor.id!r}")

    def census(self, anchor: Anchor, profile: HardwareProfile, resources: "Resources") -> Census:
        raise NotApplicable(f"law {self.name!r} has no census for anchor {anchor.id!r}")

    def parity(self, anchor: Anchor, profile: HardwareProfile, resources: "Resources") -> dict[str, Any]:
        """What the engine's output says on this census's run ({"ppl": …}), so a planted fault
        can show that the output stayed right while the fast path disappeared."""
        raise NotApplicable(f"law {self.name!r} has no parity check for anchor {anchor.id!r}")

    def measures_engine_speed(self, anchor: Anchor) -> bool:
        """Whether a measured anchor times an engine in tokens per second (directly, or as each arm
        of a ratio or agreement): what `lawbench ab` may compare across two engine builds.
        The default reads the anchor's own unit and quantity; a law whose case says it better
        (a quantity per arm, say) overrides this."""
        return anchor.unit == "tok/s" or anchor.quantity.endswith("tok_s")

    def machine_terms(self, result: Result) -> list[MachineTerm]:
        """The machine terms one of this law's results measured, for a contribution bundle: what
        the prediction needed from this machine, read from the result's own samples and detail.
        The default: none (a law whose predictions take no machine constant)."""
        return []

    def anchor_files(self) -> Iterable[Any]:
        """The anchor TOML files this law ships (importlib.resources Traversables)."""
        if not self.anchors_package:
            return []
        from importlib.resources import files

        root = files(self.anchors_package)
        return sorted((p for p in root.iterdir() if p.name.endswith(".toml")), key=lambda p: p.name)


# The methods core calls with (anchor, profile, resources), and the names a law gives them.
RESOURCE_METHODS = ("predict", "sampler", "census", "parity")


def check_law_signatures(law_cls: type, origin: str) -> None:
    """Refuse, at load, a law whose methods cannot take the run's resources.

    A law written for lawbench 0.1 has ``predict(self, anchor, profile)``; core now calls every
    such method with the resources as a third argument, and a TypeError in the middle of a run
    would read as an ERROR on every anchor. Set aside with one line instead.

    :raises PluginError: naming the law class and the method, with the signature to write.
    """
    for name in RESOURCE_METHODS:
        method = getattr(law_cls, name, None)
        if method is None or getattr(Law, name) is method:
            continue
        try:
            inspect.signature(method).bind(None, None, None, None)  # self, anchor, profile, resources
        except TypeError:
            raise PluginError(
                f"{origin}: law class {law_cls.__qualname__}: {name}() does not take the run's resources; "
                f"write `def {name}(self, anchor, profile, resources=None)` (docs/contributing-a-law.md, "
                f"'Resources')") from None
        except ValueError:  # a builtin or C callable without a signature: trust it
            continue
