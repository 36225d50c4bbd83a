"""The nightly gate's data: what a night is judged against, what it found, and the standing reds a
person has acknowledged (hardware_profiles/acknowledged/<profile>.toml)."""
from __future__ import annotations

import datetime as dt
from typing import Literal, Optional

from pydantic import Field, field_validator

from lawbench.core.models.base import Id, Strict

# What the gate calls news. Red unless acknowledged: a verdict turned, a census lost a label, a
# drift step, an open finding closed, a new anchor not green, an anchor the night did not reach.
RED_NEWS = ("turned", "void-twice", "error", "lost-label", "drift", "finding-closed", "new-not-green",
            "not-reached", "slower")
# Said, never red: a first VOID after PASS (red if the next night is VOID too), a recovery.
NOTE_NEWS = ("void-once", "recovered", "not-run", "faster")
NewsKind = Literal["turned", "void-twice", "error", "lost-label", "drift", "finding-closed", "new-not-green",
                   "not-reached", "void-once", "recovered", "not-run", "slower", "faster"]


class GateNews(Strict):
    """One thing tonight says that the accepted state did not."""

    anchor_id: str
    kind: NewsKind
    before: Optional[str] = None  # the baseline's verdict (None: no baseline for this anchor)
    after: Optional[str] = None  # tonight's verdict (None: not run / not reached)
    why: str  # one line for people: what turned and why
    acknowledged_until: Optional[str] = None  # ISO date: a person accepted it until then (not red)
    acknowledged_by: Optional[str] = None
    # slower / faster (a rate series, issue 31): tonight / baseline − 1 and its 99 % interval
    size: Optional[float] = None
    size_interval: Optional[tuple[float, float]] = None

    @property
    def red(self) -> bool:
        return self.kind in RED_NEWS and self.acknowledged_until is None


class GateVerdict(Strict):
    """A night judged against its runner's last accepted state (core/history/gate.py)."""

    mode: Literal["baseline"] = "baseline"
    verdict: Literal["green", "red"]
    profile: str
    fingerprint: str  # the machine's, as core.history.gate.machine_fingerprint reads it
    engine: str  # the engine build key (core.history.run_keys.engine_key)
    baseline_run_id: Optional[str] = None  # the newest accepted night it was judged against
    baseline_runs: int = 0  # accepted nights of the same profile, machine and engine build
    new_baseline: Optional[str] = None  # why tonight starts a new baseline (None: it continues one)
    alpha: float  # the drift test's false-alarm level per series and night
    news: list[GateNews] = Field(default_factory=list)
    acknowledged: list[str] = Field(default_factory=list)  # anchors whose red news a person accepted
    held: list[str] = Field(default_factory=list)  # anchors whose baseline did not move tonight (a first VOID)
    expired: list[str] = Field(default_factory=list)  # "anchor until DATE": acknowledgements past their date
    weekly: list[str] = Field(default_factory=list)  # this profile's anchors queued for the weekly run
    # rate series tonight measured that the one-night test cannot judge yet (too few accepted
    # nights, or a new engine): said, one line each, never green by silence and never red
    rates_unanalysed: list[str] = Field(default_factory=list)

    @property
    def red_news(self) -> list[GateNews]:
        return [n for n in self.news if n.red]


class Acknowledgement(Strict):
    """A standing red a person accepted, for one anchor on one profile, until a date."""

    anchor: Id
    why: str = Field(min_length=1)
    claim: str = Field(min_length=1)  # the anchor's claim, word for word: a changed claim is reviewed again
    accepted_by: str = Field(min_length=1)
    until: dt.date

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
