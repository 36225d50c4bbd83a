"""An anchor: one published claim, its band, its case, its life (superseded, refuted) and provenance."""
from __future__ import annotations

import math
from typing import Annotated, Any, Literal, Optional

from pydantic import Field, model_validator

from lawbench.core.models.base import FiniteFloat, Id, NoiseKind, Strict
from lawbench.core.models.harness import RegisterHarness


class Band(Strict):
    """Exactly one of: ±abs, ±rel (a fraction: 0.05 is ±5 %), or [lo, hi].

    A half-open band leaves lo or hi out (`band = { lo = 1.2 }` is "at least 1.2"). Every edge is a
    finite number: `hi = inf` is refused (leave hi out: one way to write it) and NaN always is.
    """

    abs: Optional[FiniteFloat] = None
    rel: Optional[FiniteFloat] = None
    lo: Optional[FiniteFloat] = None
    hi: Optional[FiniteFloat] = None

    @model_validator(mode="after")
    def _one_form(self) -> "Band":
        forms = [self.abs is not None, self.rel is not None, self.lo is not None or self.hi is not None]
        if sum(forms) != 1:
            raise ValueError("a band is exactly one of: abs = x, rel = x, or lo = a, hi = b")
        if self.lo is not None and self.hi is not None and self.lo > self.hi:
            raise ValueError(f"band lo {self.lo} is above hi {self.hi}")
        for name in ("abs", "rel"):
            v = getattr(self, name)
            if v is not None and v < 0:
                raise ValueError(f"band {name} must not be negative")
        return self

    def interval(self, center: Optional[float]) -> tuple[float, float]:
        if self.lo is not None or self.hi is not None:
            return (self.lo if self.lo is not None else -math.inf,
                    self.hi if self.hi is not None else math.inf)
        if center is None:
            raise ValueError("a ±abs or ±rel band needs a value to centre on")
        if self.abs is not None:
            return (center - self.abs, center + self.abs)
        half = abs(center) * self.rel  # type: ignore[operator]
        return (center - half, center + half)

    def describe(self, center: Optional[float]) -> str:
        if self.abs is not None:
            return f"{center:g} ± {self.abs:g}"
        if self.rel is not None:
            return f"{center:g} ± {self.rel * 100:g}%"
        return f"[{self.lo if self.lo is not None else '-inf'}, {self.hi if self.hi is not None else 'inf'}]"


class Provenance(Strict):
    """Where a published number came from. At least a seed document, a register id or another
    published document (a file of the public record, e.g. "FedericoTs/quantprobe:tests/smoke.py")."""

    seed: Optional[str] = None  # e.g. "000_4a91008eeaefec79.txt"
    register_id: Optional[str] = None  # e.g. "L-30"
    document: Optional[str] = None
    prereg: list[int] = Field(default_factory=list)
    date: Optional[str] = None
    log: Optional[str] = None
    quote: Optional[str] = None  # the source's own words for the number
    band_rationale: Optional[str] = None  # how the band was set, and why not wider
    notes: Optional[str] = None

    @model_validator(mode="after")
    def _has_a_source(self) -> "Provenance":
        if not self.seed and not self.register_id and not self.document:
            raise ValueError("provenance needs a seed document, a register id or a document")
        return self


class Budget(Strict):
    """How many samples a measurement may take before an unresolved interval becomes VOID.

    A sample is one engine visit (or one interleaved round of two arms). The rule looks after
    min_samples and after every batch up to max_samples; `confidence` is for all looks together
    (each look is taken at 1 - (1 - confidence) / looks: lawbench.core.stats.verdicts).
    """

    # Three at least: a Student-t interval on two samples is too wide to resolve any band.
    min_samples: int = Field(default=3, ge=3, le=1000)
    max_samples: int = Field(default=9, ge=3, le=1000)
    batch: int = Field(default=3, ge=1, le=1000)
    timeout_s: FiniteFloat = Field(default=600.0, gt=0)
    confidence: FiniteFloat = Field(default=0.95, gt=0.5, lt=1.0)

    @model_validator(mode="after")
    def _ordered(self) -> "Budget":
        if self.max_samples < self.min_samples:
            raise ValueError(f"max_samples {self.max_samples} is below min_samples {self.min_samples}")
        return self


class CensusSpec(Strict):
    exact: dict[str, Annotated[int, Field(ge=0)]] = Field(default_factory=dict)
    minimum: dict[str, Annotated[int, Field(ge=0)]] = Field(default_factory=dict)
    # an upper bound: a count that may grow only so far (e.g. MiB the engine holds beyond the
    # buffers it reports)
    maximum: dict[str, Annotated[int, Field(ge=0)]] = Field(default_factory=dict)
    forbidden: list[str] = Field(default_factory=list)


class PlantedFault(Strict):
    """A mutation proof of a census anchor: the same run with one fast path forced off by the
    engine's own switch (or a placement that leaves the GPU). Run by `lawbench census plant`; the
    census must then FAIL and name every label in ``breaks``, while a parity check on the same
    model and switches stays green (seed 002: parity cannot see a fast path that never runs)."""

    name: Id
    case: dict[str, Any]  # merged over the anchor's case (nested tables merge key by key)
    breaks: list[str] = Field(min_length=1)  # labels the census must name as broken
    why: str = Field(min_length=1)  # what the switch does, in the engine's own terms


def merge_case(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` on top of ``base``; nested tables merge, anything else is replaced."""
    out = dict(base)
    for key, value in over.items():
        out[key] = merge_case(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


# No `ratchet` kind: an error that may shrink but never grow needs the anchor's own history
# joined on profile and engine build (issue 8's history); until then it would be a name without logic.
AnchorKind = Literal["prediction", "measurement", "agreement", "ratio", "census"]


# How often an anchor runs, cheapest first. `quick` is a newcomer's first look (`nox -s anchors`
# on the generic profile), `nightly` what a runner measures every night, `weekly` the slow rest.
CADENCES = ("quick", "nightly", "weekly")
Cadence = Literal["quick", "nightly", "weekly"]


# status -> the field naming its successor
LINEAGE: dict[str, str] = {"superseded": "superseded_by", "refuted": "refuted_by",
                           "rescoped": "rescoped_by", "corrected": "corrected_by", "missed": "missed_by"}
# every field that names a successor: LINEAGE's, and a retired anchor's optional retired_by
SUCCESSOR_FIELDS: tuple[str, ...] = (*LINEAGE.values(), "retired_by")


class Anchor(Strict):
    id: Id
    law: str
    claim: str
    quantity: str
    unit: str
    kind: AnchorKind
    value: Optional[FiniteFloat] = None  # the published number (prediction, measurement, ratio)
    band: Optional[Band] = None
    case: dict[str, Any] = Field(default_factory=dict)  # validated by the law's own case model
    arms: dict[str, dict[str, Any]] = Field(default_factory=dict)  # ratio: {"a": {...}, "b": {...}}
    census: Optional[CensusSpec] = None
    # The source's own published script measures this figure (lawbench.core.engines.harness): core
    # runs it, whatever the law; the anchor's case and arms are then empty.
    harness: Optional[RegisterHarness] = None
    planted: list[PlantedFault] = Field(default_factory=list)  # census only: its mutation proofs
    profiles: list[str] = Field(default_factory=list)  # empty: binds to every profile
    # A claim's life, as the register records it: each non-active status names the anchor that
    # encodes what replaced it (LINEAGE), so history always leads to the claim that stands today.
    status: Literal["active", "superseded", "refuted", "rescoped", "corrected", "missed", "retired"] = "active"
    superseded_by: Optional[str] = None
    refuted_by: Optional[str] = None
    rescoped_by: Optional[str] = None
    corrected_by: Optional[str] = None
    missed_by: Optional[str] = None  # a pre-registered number scored a miss; its successor measures it
    # status "retired": why it no longer runs (required: the morning view names it when the anchor
    # leaves a runner's nights), and the anchor that now encodes the claim, where one does (issue 30 item 7)
    retired_reason: Optional[str] = None
    retired_by: Optional[str] = None
    # The claims inventory lines (anchors/inventory/*.toml) this anchor encodes: the published
    # sentence it re-checks. Every anchor of a built-in law cites at least one (lawbench check).
    claims: list[Id] = Field(default_factory=list)
    # Which version of its law the anchor tests ("v1.1", "v2", "L-15" …): the law declares its
    # versions, prices the case with exactly that version's terms, and refuses a version it lacks.
    law_version: Optional[str] = None
    budget: Budget = Field(default_factory=Budget)
    # Unset: predictions and censuses are `quick` (arithmetic, or one short engine visit), every
    # other kind `nightly` (effective_cadence).
    cadence: Optional[Cadence] = None
    provenance: Provenance
    tags: list[str] = Field(default_factory=list)
    # An open finding: the law does not reproduce this published number, and we say so. Its FAIL
    # is reported and recorded but does not fail the build; a PASS does (the finding has closed).
    finding: Optional[str] = None
    # A measured anchor's finding names its evidence: a committed run record under results/ whose
    # verdict for this anchor is a measured FAIL (`lawbench check` reads it: core/run/findings.py).
    # A prediction's evidence is the law's own number, which check computes.
    finding_evidence: Optional[str] = None
    # Where the band comes from (docs/bands.md): a "published" ± or interval, the source's
    # "reproduction" figure for such a number on that box, or the "law"'s accuracy.
    band_basis: Optional[Literal["published", "reproduction", "law"]] = None
    # Which row of the profile's noise table this figure's spread is read from, where the unit does
    # not say it (lawbench.core.stats.resolution.noise_kind); a print-limited anchor names its nearest basis.
    noise: Optional[NoiseKind] = None
    # "print-limited": the source gives no basis at all for how far this figure moves; the band is
    # the nearest basis it does give, and reports show the reason beside the verdict.
    resolution: Optional[Literal["print-limited"]] = None
    resolution_reason: Optional[str] = None
    # "VOID": the published claim is that this instrument cannot resolve the band at this budget
    # (register C-34: 'too jittery to resolve the ceiling to ±15% even at n=5'). A VOID run then
    # confirms it and PASSes; a run that resolves the band (PASS or FAIL) refutes it and FAILs
    # (lawbench.core.run.evaluate; docs/verdicts.md). expect_reason quotes the source's own verdict.
    expect: Optional[Literal["VOID"]] = None
    expect_reason: Optional[str] = None

    @model_validator(mode="after")
    def _kind_needs(self) -> "Anchor":
        if self.resolution and not (self.resolution_reason or "").strip():
            raise ValueError(f"resolution_reason: resolution = {self.resolution!r} needs a reason: say which "
                             "basis the source lacks and which nearer one the band borrows")
        if self.resolution_reason and not self.resolution:
            raise ValueError('resolution_reason: only an anchor with resolution = "print-limited" gives one')
        if self.expect and not (self.expect_reason or "").strip():
            raise ValueError(f"expect_reason: expect = {self.expect!r} needs the source's own words for the verdict it expects")
        if self.expect_reason and not self.expect:
            raise ValueError('expect_reason: only an anchor with expect = "VOID" gives one')
        if self.expect and (self.kind not in ("measurement", "agreement", "ratio") or self.finding):
            raise ValueError("expect: only a measured anchor (measurement, agreement, ratio) without a finding "
                             "can expect a VOID")
        if self.finding_evidence is not None and not self.finding:
            raise ValueError("finding_evidence: only an anchor with an open `finding` names its evidence")
        if self.finding_evidence is not None and self.kind == "prediction":
            raise ValueError("finding_evidence: a prediction's evidence is the law's own number, which "
                             "`lawbench check` computes: remove finding_evidence")
        if self.kind in ("prediction", "measurement", "ratio") and self.value is None \
                and (self.band is None or self.band.lo is None and self.band.hi is None):
            raise ValueError(f"value: a {self.kind} anchor needs a value (or a [lo, hi] band)")
        if self.kind != "census" and self.band is None:
            raise ValueError(f"band: a {self.kind} anchor needs a band")
        if self.harness is not None:
            if self.kind != "measurement":
                raise ValueError(f"harness: a register harness measures a figure (kind = \"measurement\"), "
                                 f"not a {self.kind}; several runs combine through harness.figure")
            if self.case or self.arms:
                raise ValueError("harness: a harness anchor has no case or arms; the script's runs are "
                                 "harness.runs")
            # a batch of rounds runs whole, each run up to its own timeout: the budget (what `lawbench
            # plan` prices a night with) must hold max_samples rounds of them
            worst = self.budget.max_samples * sum(r.timeout_s for r in self.harness.resolved().values())
            if self.budget.timeout_s < worst:
                raise ValueError(f"budget.timeout_s: {self.budget.timeout_s:g} s cannot hold {self.budget.max_samples} "
                                 f"rounds of the harness's runs at their timeouts ({worst:g} s); raise it to "
                                 f"{worst:g} or lower the runs' timeout_s")
        if self.kind == "census" and self.census is None:
            raise ValueError("census: a census anchor needs a [census] table")
        if self.planted and self.kind != "census":
            raise ValueError("planted: planted faults prove a census anchor; this one is a " + self.kind)
        if len({p.name for p in self.planted}) != len(self.planted):
            raise ValueError("planted: two planted faults share a name")
        if self.kind == "ratio" and set(self.arms) != {"a", "b"}:
            raise ValueError(f"arms: a ratio anchor needs arms.a and arms.b (got {sorted(self.arms)})")
        if self.status == "retired" and not (self.retired_reason or "").strip():
            raise ValueError("retired_reason: status 'retired' needs retired_reason (why it no longer runs; "
                             "name the anchor that now encodes the claim in retired_by, where there is one)")
        if (self.retired_reason or self.retired_by) and self.status != "retired":
            raise ValueError("retired_reason: only an anchor with status 'retired' gives retired_reason / "
                             f"retired_by (this one is {self.status!r})")
        for status, field in LINEAGE.items():
            if self.status == status and not getattr(self, field):
                raise ValueError(f"{field}: status '{status}' needs {field} (the anchor that replaced it)")
            if getattr(self, field) and self.status != status:
                raise ValueError(f"{field}: only an anchor with status '{status}' names {field} "
                                 f"(this one is {self.status!r})")
        if self.band is not None and self.value is not None and (self.band.abs is not None or self.band.rel is not None):
            lo, hi = self.band_interval()
            if not (math.isfinite(lo) and math.isfinite(hi)):  # rel = 1e308 overflows to ±inf
                raise ValueError(f"band: {self.band.describe(self.value)} reaches infinity; give a finite band")
        return self

    def with_fault(self, fault: PlantedFault) -> "Anchor":
        """This census anchor as its planted fault runs it: the case merged, the id marked."""
        return self.model_copy(update={"id": f"{self.id}~{fault.name}", "case": merge_case(self.case, fault.case),
                                       "planted": []})

    @property
    def runs(self) -> bool:
        return self.status == "active"

    @property
    def effective_cadence(self) -> str:
        if self.cadence is not None:
            return self.cadence
        return "quick" if self.kind in ("prediction", "census") else "nightly"

    def in_cadence(self, selection: str) -> bool:
        """Whether a run of cadence ``selection`` runs this anchor: `quick` the quick ones,
        `nightly` quick and nightly, `weekly` the rest (what a nightly leaves), `full` all."""
        mine = self.effective_cadence
        return {"quick": mine == "quick", "nightly": mine in ("quick", "nightly"),
                "weekly": mine == "weekly", "full": True}[selection]

    @property
    def successor(self) -> Optional[str]:
        """The anchor that replaced this one (None for an active anchor, or one retired without a successor)."""
        field = LINEAGE.get(self.status) or ("retired_by" if self.status == "retired" else None)
        return getattr(self, field) if field else None

    def band_interval(self, center: Optional[float] = None) -> tuple[float, float]:
        """The acceptance interval. Agreement anchors are centred on 1 (measured/predicted)."""
        assert self.band is not None
        if self.kind == "agreement":
            return self.band.interval(1.0)
        return self.band.interval(self.value if center is None else center)


class AnchorFile(Strict):
    """One TOML file: `[[anchor]]` tables."""

    anchor: list[Anchor] = Field(default_factory=list)
