"""The nightly gate's data: what a night is judged against, what it found, and the standing reds a
person has acknowledged (hardware_profiles/acknowledged/<profile>.toml)."""
from __future__ import annotations

import datetime as dt
from typing import Literal, Optional

from pydantic import Field, field_validator, model_validator

from lawbench.core.models.base import Id, Strict

# What the gate calls news (docs/gate.md has the table). Red unless acknowledged: a verdict turned,
# a census lost a label, a drift step, an open finding closed, a new anchor not green, an anchor the
# night did not reach, a skip where the anchor ran (a deployed runner under --strict, or a skip the
# run itself turned FAIL), an anchor flapping between a resolved verdict and VOID (issue 30 items 5, 7).
RED_NEWS = ("turned", "void-twice", "error", "lost-label", "drift", "finding-closed", "new-not-green",
            "not-reached", "acknowledgement-expired", "finding-moved", "finding-unmeasured", "finding-added",
            "finding-removed", "slower", "cannot-judge", "upgrade-unmeasured", "skipped", "flapping")
# Red news no entry can accept: a date ran out, or the night had nothing it could be judged against.
UNACKNOWLEDGEABLE = ("acknowledgement-expired", "cannot-judge")
# An anchor of the last accepted night that tonight did not run, by why: no longer in the anchors
# TOML (removed, or renamed), retired (a status that never runs), moved (its cadence or profiles
# changed), not-run (runnable, not selected tonight). Said, never red; listed apart in the views.
GONE_NEWS = ("removed", "retired", "moved", "not-run")
# Said, never red: a first VOID after PASS (red if the next night is VOID too), a recovery, a rate
# series that got faster (issue 31), a skip where the anchor ran off a deployed --strict runner, a
# scope decision that put an anchor back in scope, and every anchor gone since the accepted night.
# `not-confirmed`: a rate series that read slower in the night's first round and not when it was
# read again (lawbench.core.run.recheck): a neighbour that slowed the first round, said so.
NOTE_NEWS = ("void-once", "recovered", "faster", "not-confirmed", "skipped-off-runner", "back-in-scope", *GONE_NEWS)
# One tuple per meaning, the Literal built from them: a new kind is one word added to each.
NewsKind = Literal["turned", "void-twice", "error", "lost-label", "drift", "finding-closed", "new-not-green",
                   "not-reached", "acknowledgement-expired", "finding-moved", "finding-unmeasured", "finding-added",
                   "finding-removed", "slower", "cannot-judge", "upgrade-unmeasured", "skipped", "flapping",
                   "void-once", "recovered", "faster", "not-confirmed", "skipped-off-runner", "back-in-scope",
                   "removed", "retired", "moved", "not-run"]


class GateNews(Strict):
    """One thing tonight says that the accepted state did not."""

    anchor_id: str
    kind: NewsKind
    before: Optional[str] = None  # the baseline's verdict (None: no baseline for this anchor)
    after: Optional[str] = None  # tonight's verdict (None: not run / not reached)
    why: str  # one line for people: what turned and why
    acknowledged_until: Optional[str] = None  # ISO date: a person accepted it until then (not red)
    acknowledged_by: Optional[str] = None
    measured: Optional[float] = None  # tonight's statistic (what an acknowledgement's `value` is compared with)
    counts: Optional[dict[str, int]] = None  # tonight's census counts (compared with an acknowledgement's `counts`)
    # slower / faster (a rate series, issue 31): tonight / baseline − 1 and its 99 % interval
    size: Optional[float] = None
    size_interval: Optional[tuple[float, float]] = None

    @property
    def red(self) -> bool:
        return self.kind in RED_NEWS and self.acknowledged_until is None


class RateCheck(Strict):
    """What the one-night rate test (core/history/rates.py) looked at for one series it judged
    tonight: the morning view draws the series against its accepted band (issue 31)."""

    series: str  # the series' key (lawbench.core.models.RateSeries.key): model | format | placement | quantity
    format: str = ""  # its weight format ("Q4_0"), "" where the case names none
    nights: list[float]  # the accepted nights' readings (tok/s, each night's fastest visit), oldest first
    runs: list[str]  # those nights' run ids (12 characters), in the same order
    tonight: float  # tonight's reading (tok/s)
    baseline: float  # the geometric mean of the nights (tok/s): what tonight is compared with
    # The readings tonight could have had without being news (tok/s): the 1 ∓ TOLERANCE margin around
    # the baseline, widened by the t-quantile at `level` times the test's standard error
    band: tuple[float, float]
    level: float  # the band's two-sided level: the first Holm step, alpha / (series judged tonight)
    kind: Optional[Literal["slower", "faster"]] = None  # the news the series made tonight, if any

    @model_validator(mode="after")
    def _paired(self) -> "RateCheck":
        if len(self.runs) != len(self.nights):
            raise ValueError(f"runs: {len(self.runs)} run ids for {len(self.nights)} nights; one per night")
        if not self.band[0] <= self.band[1]:
            raise ValueError(f"band: {self.band[0]} > {self.band[1]}; give it low first")
        return self


class GateVerdict(Strict):
    """A night judged against its runner's last accepted state (core/history/gate.py)."""

    mode: Literal["baseline"] = "baseline"
    verdict: Literal["green", "red"]
    profile: str
    fingerprint: str  # the machine's, as core.history.gate.machine_fingerprint reads it
    engine: str  # the engine build key (core.record.run_keys.engine_key)
    baseline_run_id: Optional[str] = None  # the newest accepted night it was judged against
    baseline_runs: int = 0  # accepted nights of the same profile, machine and engine build
    new_baseline: Optional[str] = None  # why tonight starts a new baseline (None: it continues one)
    # What the night was judged against (issue 30, item 6): "judged" (its baseline was read),
    # "first-night" (declared: the data branch, fetched, holds no runs of this profile) or
    # "cannot-judge" (a baseline missing, unreadable, empty, entirely refused or another profile's:
    # red, with a "cannot-judge" news saying why; never taken for a first night)
    baseline_state: Literal["judged", "first-night", "cannot-judge"] = "judged"
    alpha: float  # the drift test's false-alarm level per runner-night, shared among the series measured that night
    news: list[GateNews] = Field(default_factory=list)
    acknowledged: list[str] = Field(default_factory=list)  # anchors whose red news a person accepted
    held: list[str] = Field(default_factory=list)  # anchors whose baseline did not move tonight (a first VOID)
    expired: list[str] = Field(default_factory=list)  # "anchor until DATE": acknowledgements past their date
    weekly: list[str] = Field(default_factory=list)  # this profile's anchors queued for the weekly run
    # rate series tonight measured that the one-night test cannot judge yet (too few accepted
    # nights, or a new engine): said, one line each, never green by silence and never red
    rates_unanalysed: list[str] = Field(default_factory=list)
    # each rate series the one-night test judged tonight, slower / faster first (drawn against its band)
    rate_checks: list[RateCheck] = Field(default_factory=list)

    @property
    def red_news(self) -> list[GateNews]:
        return [n for n in self.news if n.red]


class Acknowledgement(Strict):
    """What a person accepted on one anchor of one profile, until a date: one kind of news at one
    state. Another kind of news on that anchor, or a state worse than the accepted one by more than
    tonight's resolvable noise (its interval's half-width), is red again (issue 30, item 2)."""

    anchor: Id
    kind: NewsKind  # the news accepted ("turned", "lost-label", "drift", ...): any other kind stays red
    value: Optional[float] = None  # the statistic accepted (a measured anchor): further from the band is red
    counts: Optional[dict[str, int]] = None  # the census counts accepted: a label counting fewer is red
    why: str = Field(min_length=1)
    claim: str = Field(min_length=1)  # the anchor's claim, word for word: a changed claim is reviewed again
    accepted_by: str = Field(min_length=1)
    until: dt.date

    @field_validator("kind")
    @classmethod
    def _red_kind(cls, v: str) -> str:
        if v not in RED_NEWS or v in UNACKNOWLEDGEABLE:
            raise ValueError(f"{v!r} cannot be acknowledged; one of: "
                             f"{', '.join(k for k in RED_NEWS if k not in UNACKNOWLEDGEABLE)}")
        return v

    @model_validator(mode="after")
    def _seen(self) -> "Acknowledgement":
        if self.kind == "skipped" and (self.value is not None or self.counts is not None):
            raise ValueError("value: a skipped anchor measured nothing, so there is no value or counts to accept; "
                             "acknowledge the kind alone")
        return self

    @field_validator("why", "accepted_by")
    @classmethod
    def _said(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("say it: an empty line is not a review")
        return v


class AcknowledgedFile(Strict):
    """hardware_profiles/acknowledged/<profile>.toml: reviewed in a pull request, like an anchor."""

    profile: Id
    acknowledged: list[Acknowledgement] = Field(default_factory=list)

    def valid_on(self, day: dt.date) -> dict[str, Acknowledgement]:
        return {a.anchor: a for a in self.acknowledged if a.until >= day}

    def expired_on(self, day: dt.date) -> list[Acknowledgement]:
        return [a for a in self.acknowledged if a.until < day]
