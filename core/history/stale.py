"""Stale runners: a profile whose newest completed run is older than the window (36 hours by
default) has a runner that stopped reporting. A scheduled job runs `lawbench history stale` and
opens an issue when it exits 1.

A completed run is one that reached its end (finished, not interrupted) on a machine that matched
its profile: a prediction-only run elsewhere with `--profile h200` says nothing about the h200
runner. Its verdicts do not matter — a night of FAILs is a runner that works. A contribution
(someone else's machine, imported as one) never counts, whatever profile and fingerprint it claims.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Optional, Sequence

from lawbench.core.errors import UsageError
from lawbench.core.hardware.profiles import plugin_profiles
from lawbench.core.history.store import History
from lawbench.core.laws.registry import get_registry


@dataclass(frozen=True)
class Freshness:
    profile: str
    run_id: Optional[str]  # the newest completed run; None when there is none
    finished: Optional[str]
    age_hours: Optional[float]
    stale: bool


def parse_time(text: str, what: str = "--now") -> datetime:
    """An ISO-8601 time; one without a zone is read as UTC."""
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"cannot read {what} {text!r}: give an ISO-8601 time such as "
                         "2026-12-01T02:00:00+00:00") from None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def runner_profiles() -> list[str]:
    """Every deployed profile ([nightly] deployed = true) with runner labels: the ones a nightly
    job runs on. A profile with no runner is never called stale."""
    return sorted(p.id for p in plugin_profiles(get_registry()).values()
                  if p.runner_labels and p.nightly is not None and p.nightly.deployed)


def check_stale(history: Optional[History], profiles: Sequence[str], hours: float = 36.0,
                now: Optional[datetime] = None) -> list[Freshness]:
    """Per profile, its newest completed run and whether that is older than `hours` (or absent).

    :param history: None stands for an empty history (no file yet): every profile is stale.
    :param now: the time to measure ages from (default: the clock); injectable for tests.
    """
    if hours <= 0:
        raise UsageError(f"--hours must be above 0 (got {hours:g})")
    now = now or datetime.now(timezone.utc)
    newest: dict[str, tuple[datetime, str, str]] = {}
    for run_id, keys in (history.run_keys() if history is not None else {}).items():
        if keys.finished is None or keys.interrupted or not keys.profile_matches or keys.contribution \
                or keys.mode != "run":
            continue  # a contribution says nothing about the runner, whatever its record claims; an A/B is no night
        when = parse_time(keys.finished, f"the finish time of run {run_id}")
        if keys.profile not in newest or when > newest[keys.profile][0]:
            newest[keys.profile] = (when, run_id, keys.finished)
    out = []
    for profile in profiles:
        if profile not in newest:
            out.append(Freshness(profile, None, None, None, True))
            continue
        when, run_id, finished = newest[profile]
        age = (now - when).total_seconds() / 3600
        out.append(Freshness(profile, run_id, finished, age, age > hours))
    return out
