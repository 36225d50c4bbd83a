"""The data model: hardware profiles, anchors, measurements and verdicts.

TOML is the source of truth for anchors and profiles; these pydantic models are its schema
(`lawbench schema` exports them as JSON Schema for editors). Every model forbids unknown fields so
a typo in a data file is an error that names the field, never a silently ignored key.
"""
from __future__ import annotations

import enum
import math
import re
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


def _check_id(v: str) -> str:
    if not ID_RE.match(v):
        raise ValueError("an id must be lower-case letters, digits, '.', '_' or '-'")
    return v


# Every id a data file defines (profile, anchor, model, manifest): stable, lower-case, never reused.
Id = Annotated[str, AfterValidator(_check_id)]


class Strict(BaseModel):
    # Half-open bands hold ±inf; "strings" keeps them readable in JSON instead of turning into null.
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")


# --------------------------------------------------------------------------- hardware profiles


class Fact(Strict):
    """One number with where it came from ("seed 000, Law 4", "register L-01", "measured …")."""

    value: float
    source: str
    estimate: bool = False  # the source itself marks the number [est]
    # For an efficiency (η): which bandwidth of its tier it multiplies — the spec-sheet figure or
    # a measured one. The register reads both ways (L-01's table vs L-11), so it is never implied.
    basis: Optional[Literal["spec", "measured"]] = None


class Tier(Strict):
    name: str  # "vram", "ram", "disk", "unified" — the key η and placements refer to
    kind: Literal["vram", "ram", "disk", "unified"]
    capacity_gb: Optional[Fact] = None
    bandwidth_spec_gbs: Optional[Fact] = None
    bandwidth_measured_gbs: Optional[Fact] = None

    def bandwidth_gbs(self) -> float:
        """Measured bandwidth when the profile has it, else the spec sheet's."""
        fact = self.bandwidth_measured_gbs or self.bandwidth_spec_gbs
        if fact is None:
            raise ValueError(f"tier {self.name!r} has no bandwidth")
        return fact.value


class Fingerprint(Strict):
    """How `profiles detect` recognises this machine, and how a mismatched runner is refused."""

    gpu_name_contains: Optional[str] = None
    compute_capability: Optional[str] = None  # "6.1"
    ram_gb_min: Optional[float] = None
    ram_gb_max: Optional[float] = None
    cpu_model_contains: Optional[str] = None
    requires_gpu: bool = False
    generic: bool = False  # the catch-all `cpu` profile: matches any machine without a better match


class HardwareProfile(Strict):
    id: Id
    description: str
    runner_labels: list[str] = Field(default_factory=list)
    fingerprint: Fingerprint
    tiers: list[Tier]
    # η per tier name, and per tier name per weight format (L-15: η depends on unpack cost).
    eta: dict[str, Fact] = Field(default_factory=dict)
    eta_format: dict[str, dict[str, Fact]] = Field(default_factory=dict)
    constants: dict[str, Fact] = Field(default_factory=dict)  # e.g. cpu_attention_k_us, eta_kv
    memory_reading: Literal["aggregate", "per-pid", "host"] = "aggregate"
    # Engine threads. "all-but-one" leaves one core to a neighbour on a shared runner: a busy
    # core then slows one of our threads' barriers at most, not every op of every token.
    threads: Optional[Union[Annotated[int, Field(ge=1, le=4096)], Literal["all-but-one"]]] = None
    notes: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _eta_refers_to_tiers(self) -> "HardwareProfile":
        names = {t.name for t in self.tiers}
        if len(names) != len(self.tiers):
            raise ValueError("tier names must be unique")
        for key in list(self.eta) + list(self.eta_format):
            if key not in names:
                raise ValueError(f"eta refers to unknown tier {key!r} (tiers: {sorted(names)})")
        for where, tier, fact in self._efficiencies():
            # "<field>: <message>": core.hardware.profiles names the field from this prefix
            if fact.basis is None:
                raise ValueError(f"{where}.basis: an η must say which bandwidth of its tier it "
                                 f'multiplies: basis = "spec" or "measured"')
            t = next((t for t in self.tiers if t.name == tier), None)
            if t is not None and getattr(t, f"bandwidth_{fact.basis}_gbs") is None \
                    and not (fact.basis == "measured" and self.fingerprint.generic):
                raise ValueError(f"{where}.basis: this η multiplies the {fact.basis} bandwidth, but "
                                 f"tier {tier!r} has no bandwidth_{fact.basis}_gbs")
        return self

    def _efficiencies(self) -> list[tuple[str, Optional[str], Fact]]:
        """Every η with the tier it applies to: eta.<tier>, eta_format.<tier>.<fmt>, and the
        constants named eta_<tier>_… (eta_kv applies to whichever tier holds the KV cache)."""
        names = {t.name for t in self.tiers}
        out: list[tuple[str, Optional[str], Fact]] = [(f"eta.{k}", k, f) for k, f in self.eta.items()]
        out += [(f"eta_format.{k}.{fmt}", k, f) for k, table in self.eta_format.items()
                for fmt, f in table.items()]
        for key, f in self.constants.items():
            if key.startswith("eta_"):
                tier = key.split("_")[1]
                out.append((f"constants.{key}", tier if tier in names else None, f))
        return out

    def engine_threads(self) -> Optional[int]:
        """The thread count to run an engine with here (None: the engine's own default)."""
        if self.threads == "all-but-one":
            from lawbench.core.hardware.bandwidth import usable_cpus

            return max(1, usable_cpus() - 1)
        return self.threads

    def tier(self, name: str) -> Tier:
        for t in self.tiers:
            if t.name == name:
                return t
        raise KeyError(f"profile {self.id!r} has no tier {name!r}")

    def eta_for(self, tier: str, fmt: Optional[str] = None) -> float:
        """η for a tier, per format when the profile measured one (L-15), else the tier average."""
        return self.eta_fact(tier, fmt).value

    def eta_fact(self, tier: str, fmt: Optional[str] = None) -> Fact:
        """The η Fact (value, source, basis) for a tier, per format where published."""
        if fmt is not None and fmt in self.eta_format.get(tier, {}):
            return self.eta_format[tier][fmt]
        if tier not in self.eta:
            raise KeyError(f"profile {self.id!r} has no eta for tier {tier!r}")
        return self.eta[tier]


# --------------------------------------------------------------------------- anchors


class Band(Strict):
    """Exactly one of: ±abs, ±rel (a fraction: 0.05 is ±5 %), or [lo, hi]."""

    abs: Optional[float] = None
    rel: Optional[float] = None
    lo: Optional[float] = None
    hi: Optional[float] = None

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
    """Where a published number came from. At least a seed document or a register id."""

    seed: Optional[str] = None  # e.g. "000_4a91008eeaefec79.txt"
    register_id: Optional[str] = None  # e.g. "L-30"
    prereg: list[int] = Field(default_factory=list)
    date: Optional[str] = None
    log: Optional[str] = None
    quote: Optional[str] = None  # the source's own words for the number
    band_rationale: Optional[str] = None  # how the band was set, and why not wider
    notes: Optional[str] = None

    @model_validator(mode="after")
    def _has_a_source(self) -> "Provenance":
        if not self.seed and not self.register_id:
            raise ValueError("provenance needs a seed document or a register id")
        return self


class Budget(Strict):
    """How many samples a measurement may take before an unresolved interval becomes VOID.

    A sample is one engine visit (or one interleaved round of two arms). The rule looks after
    min_samples and after every batch up to max_samples; `confidence` is for all looks together
    (each look is taken at 1 - (1 - confidence) / looks: lawbench.core.verdicts).
    """

    # Three at least: a Student-t interval on two samples is too wide to resolve any band.
    min_samples: int = Field(default=3, ge=3, le=1000)
    max_samples: int = Field(default=9, ge=3, le=1000)
    batch: int = Field(default=3, ge=1, le=1000)
    timeout_s: float = Field(default=600.0, gt=0, allow_inf_nan=False)
    confidence: float = Field(default=0.95, gt=0.5, lt=1.0)

    @model_validator(mode="after")
    def _ordered(self) -> "Budget":
        if self.max_samples < self.min_samples:
            raise ValueError(f"max_samples {self.max_samples} is below min_samples {self.min_samples}")
        return self


class CensusSpec(Strict):
    exact: dict[str, int] = Field(default_factory=dict)
    minimum: dict[str, int] = Field(default_factory=dict)
    forbidden: list[str] = Field(default_factory=list)


AnchorKind = Literal["prediction", "measurement", "agreement", "ratio", "census", "ratchet"]


class Anchor(Strict):
    id: Id
    law: str
    claim: str
    quantity: str
    unit: str
    kind: AnchorKind
    value: Optional[float] = None  # the published number (prediction, measurement, ratio, ratchet)
    band: Optional[Band] = None
    case: dict[str, Any] = Field(default_factory=dict)  # validated by the law's own case model
    arms: dict[str, dict[str, Any]] = Field(default_factory=dict)  # ratio: {"a": {...}, "b": {...}}
    census: Optional[CensusSpec] = None
    profiles: list[str] = Field(default_factory=list)  # empty: binds to every profile
    status: Literal["active", "superseded", "refuted", "retired"] = "active"
    superseded_by: Optional[str] = None
    refuted_by: Optional[str] = None
    budget: Budget = Field(default_factory=Budget)
    provenance: Provenance
    tags: list[str] = Field(default_factory=list)
    # An open finding: the law does not reproduce this published number, and we say so. Its FAIL
    # is reported and recorded but does not fail the build; a PASS does (the finding has closed).
    finding: Optional[str] = None

    @model_validator(mode="after")
    def _kind_needs(self) -> "Anchor":
        if self.kind in ("prediction", "measurement", "ratio", "ratchet") and self.value is None \
                and (self.band is None or self.band.lo is None and self.band.hi is None):
            raise ValueError(f"a {self.kind} anchor needs a value (or a [lo, hi] band)")
        if self.kind != "census" and self.band is None:
            raise ValueError(f"a {self.kind} anchor needs a band")
        if self.kind == "census" and self.census is None:
            raise ValueError("a census anchor needs a [census] table")
        if self.kind == "ratio" and set(self.arms) != {"a", "b"}:
            raise ValueError("a ratio anchor needs arms.a and arms.b")
        if self.status == "superseded" and not self.superseded_by:
            raise ValueError("status 'superseded' needs superseded_by")
        if self.status == "refuted" and not self.refuted_by:
            raise ValueError("status 'refuted' needs refuted_by")
        return self

    @property
    def runs(self) -> bool:
        return self.status == "active"

    def band_interval(self, center: Optional[float] = None) -> tuple[float, float]:
        """The acceptance interval. Agreement anchors are centred on 1 (measured/predicted)."""
        assert self.band is not None
        if self.kind == "agreement":
            return self.band.interval(1.0)
        return self.band.interval(self.value if center is None else center)


class AnchorFile(Strict):
    """One TOML file: `[[anchor]]` tables."""

    anchor: list[Anchor] = Field(default_factory=list)


# --------------------------------------------------------------------------- results


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


class Result(Strict):
    """The outcome of one anchor in one run."""

    anchor_id: str
    law: str
    kind: AnchorKind
    profile: str
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
    duration_s: float = 0.0

    @property
    def blocking(self) -> bool:
        """Fails the build: FAIL / ERROR / VOID, except the expected FAIL of an open finding."""
        return self.verdict.bad and not self.detail.get("open_finding")
