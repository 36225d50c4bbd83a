"""`lawbench plan`: what a selection of anchors costs, before it runs.

The worst case comes from the budgets: a measured anchor stops taking samples once its budget's
`timeout_s` is spent (core/stats/verdicts.py), so that is its worst case; a prediction is arithmetic
(0 s). The last batch may start just before the budget is spent and run past it by one batch of
engine visits, which is why a night's window leaves room and why `lawbench run --deadline` stops
taking new anchors whose worst case no longer fits. The typical time is the median of the anchor's
recorded durations on the profile, when a history is given.
"""
from __future__ import annotations

import datetime as dt
import statistics
from dataclasses import dataclass
from typing import Any, Optional

from lawbench.core.run.slices import Rotation, iso_week, rotate

# A runner job's limit (timeout-minutes): a night's windows must fit it (lawbench check), a weekly
# job's profiles share its deadline.
JOB_LIMIT_MIN = 240
WEEKLY_JOB_MIN = 1440
WEEKLY_DEADLINE_MIN = WEEKLY_JOB_MIN - 40

# What setup takes before the first anchor (checkout, nox, lawbench check): the windows of the
# profiles sharing a box must fit in the job's limit less this.
SETUP_MIN = 20


def weekly_window_min(profile: Any, profiles: Optional[dict[str, Any]] = None) -> int:
    """A profile's share of the weekly job: its box's deadline split evenly between the box's
    deployed profiles (all of them, whether or not each has a weekly today, so that one profile's
    anchors never change another's slices); a profile alone on its box has all of it."""
    n = profile.nightly
    if n is None or not n.deployed or profiles is None:
        return WEEKLY_DEADLINE_MIN
    box = n.box or profile.id
    members = [p for p in profiles.values() if p.nightly is not None and p.nightly.deployed
               and p.runner_labels and (p.nightly.box or p.id) == box]
    return WEEKLY_DEADLINE_MIN // max(1, len(members))


def weekly_cadence(profile: Any) -> str:
    """What the weekly job runs: the rest of a nightly that ran `nightly`, everything after a `quick` one."""
    return "full" if profile.nightly is not None and profile.nightly.cadence == "quick" else "weekly"


def worst_case_s(anchor: Any) -> float:
    """The longest this anchor may take by its budget (0 for a prediction)."""
    return 0.0 if anchor.kind == "prediction" else float(anchor.budget.timeout_s)


@dataclass(frozen=True)
class PlanRow:
    anchor_id: str
    kind: str
    cadence: str
    worst_s: float
    typical_s: Optional[float]  # median recorded duration on the profile; None without history


@dataclass(frozen=True)
class Plan:
    profile: str
    cadence: str
    rows: list[PlanRow]
    window_min: Optional[int]
    # A weekly (cadence "weekly") in the slices that rotate week by week (core/run/slices.py)
    rotation: Optional[Rotation] = None

    @property
    def worst_min(self) -> float:
        return sum(r.worst_s for r in self.rows) / 60

    @property
    def typical_min(self) -> Optional[float]:
        known = [r.typical_s for r in self.rows if r.typical_s is not None]
        return sum(known) / 60 if known else None

    @property
    def fits(self) -> bool:
        """Whether every run of this plan fits its window: the whole selection, or for a weekly each
        slice (by construction; an anchor larger than the window alone fits none)."""
        if self.rotation is not None:
            return not self.rotation.too_big
        return self.window_min is None or self.worst_min <= self.window_min


def typical_durations(history: Any, profile: str) -> dict[str, float]:
    """Median recorded duration per anchor on ``profile`` (runs whose machine matched it)."""
    seen: dict[str, list[float]] = {}
    for run in history.runs(profile=profile, limit=None):
        record = history.record(run.run_id)
        if not record.profile_matches:
            continue
        for r in record.results:
            if r.duration_s > 0:
                seen.setdefault(r.anchor_id, []).append(r.duration_s)
    return {a: statistics.median(v) for a, v in seen.items()}


def plan(profile: Any, anchors: Any, cadence: str, history: Any = None,
         profiles: Optional[dict[str, Any]] = None) -> Plan:
    """The anchors a `lawbench run --profile P --cadence C` selects, each with its cost. A weekly
    comes with its rotation in the profile's weekly window (its box's share, given ``profiles``)."""
    typical = typical_durations(history, profile.id) if history is not None else {}
    rows = []
    for la in anchors.anchors:
        a = la.anchor
        if not a.runs or not a.in_cadence(cadence):
            continue
        if a.kind != "prediction" and a.profiles and profile.id not in a.profiles:
            continue
        rows.append(PlanRow(a.id, a.kind, a.effective_cadence, worst_case_s(a), typical.get(a.id)))
    n = profile.nightly
    window = n.window_min if n is not None and cadence == n.cadence else None
    rotation = None
    if cadence == "weekly":
        window = weekly_window_min(profile, profiles)
        rotation = rotate([(r.anchor_id, r.worst_s) for r in rows], window)
    return Plan(profile.id, cadence, sorted(rows, key=lambda r: (-r.worst_s, r.anchor_id)), window, rotation)


def window_problems(profiles: dict[str, Any], anchors: Any, notes: Optional[list[str]] = None) -> list[str]:
    """What `lawbench check` refuses: a profile whose nightly worst case exceeds its window, a box
    whose profiles' windows do not fit one job, and a weekly that cannot fit its window (an anchor
    larger than the window alone; a `full` weekly, which does not rotate, larger than it). One line
    each, naming the file and field. A weekly that rotates in slices is said in ``notes``."""

    problems = []
    boxes: dict[str, list[Any]] = {}
    for pid, p in sorted(profiles.items()):
        if p.nightly is None:
            continue
        pl = plan(p, anchors, p.nightly.cadence)
        if not pl.fits:
            heaviest = ", ".join(f"{r.anchor_id} {r.worst_s / 60:.0f} min" for r in pl.rows[:3])
            problems.append(f"hardware_profiles/{pid}.toml: field nightly.window_min: the nightly worst case "
                            f"is {pl.worst_min:.0f} min, above the window of {p.nightly.window_min} min "
                            f"(heaviest: {heaviest}); mark slow anchors cadence = \"weekly\" or widen the window")
        if p.nightly.deployed:
            boxes.setdefault(p.nightly.box or pid, []).append(p)
        problems += _weekly_problems(p, profiles, anchors, notes)
    for box, members in sorted(boxes.items()):
        total = sum(p.nightly.window_min for p in members)
        if total > JOB_LIMIT_MIN - SETUP_MIN:
            problems.append(f"hardware_profiles/{members[0].id}.toml: field nightly.window_min: box {box!r} runs "
                            f"{', '.join(p.id for p in members)} in one job: their windows add up to {total} min, "
                            f"above the job's {JOB_LIMIT_MIN} min less {SETUP_MIN} min of setup")
    return problems


def _weekly_problems(p: Any, profiles: dict[str, Any], anchors: Any, notes: Optional[list[str]]) -> list[str]:
    cadence = weekly_cadence(p)
    wk = plan(p, anchors, cadence, profiles=profiles)
    window = weekly_window_min(p, profiles)
    if wk.rotation is None:  # `full` after a `quick` nightly: one selection, no rotation
        if wk.worst_min <= window:
            return []
        return [f"hardware_profiles/{p.id}.toml: field nightly.cadence: the weekly job runs cadence full after a "
                f"quick nightly, {wk.worst_min:.0f} min worst case in a {window}-min weekly window; set cadence = "
                "\"nightly\" so the weekly runs the rest, which rotates in slices that fit"]
    files = {la.anchor.id: la.file for la in anchors.anchors}
    out = [f"{files.get(a, 'anchors')}: anchor {a}: field budget.timeout_s: its worst case {c / 60:.0f} min is "
           f"above profile {p.id}'s weekly window of {window} min, so no weekly slice can hold it; lower its "
           "budget or split the anchor" for a, c in wk.rotation.too_big]
    if notes is not None and wk.rotation.count > 1:
        notes.append(f"profile {p.id}: the weekly's worst case is {wk.worst_min:.0f} min, above its {window}-min "
                     f"window: it rotates in {wk.rotation.count} slices, one a week, each anchor once in "
                     f"{wk.rotation.count} weeks (`lawbench plan --profile {p.id} --cadence weekly`)")
    return out


def print_plan(pl: Plan, console: Any = None, day: Optional[dt.date] = None) -> None:
    from rich.table import Table

    from lawbench.core.console import console as _console

    console = console or _console()
    rot = pl.rotation
    table = Table(title=f"plan: profile {pl.profile}, cadence {pl.cadence}: {len(pl.rows)} anchors",
                  title_justify="left")
    for name in ("anchor", "kind", "cadence", *(("slice",) if rot else ()), "worst case (min)", "typical (min)"):
        table.add_column(name, justify="right" if "min" in name or name == "slice" else "left", overflow="fold")
    for r in pl.rows:
        k = rot.slice_of(r.anchor_id) if rot else None
        table.add_row(r.anchor_id, r.kind, r.cadence, *((("-" if k is None else str(k)),) if rot else ()),
                      f"{r.worst_s / 60:.1f}", "-" if r.typical_s is None else f"{r.typical_s / 60:.1f}")
    console.print(table)
    if rot is not None and rot.count > 1:
        turn = Table(title=f"rotation: {rot.count} slices of at most {rot.window_min} min, one a week "
                           f"(weeks since 1970-01-05 mod {rot.count})", title_justify="left")
        for name in ("slice", "anchors", "worst case (min)", "runs"):
            turn.add_column(name, justify="left" if name == "runs" else "right")
        for k, ids in enumerate(rot.slices):
            wait = rot.weeks_until(k, day)
            turn.add_row(str(k), str(len(ids)), f"{rot.worst_s[k] / 60:.0f}",
                         "this week" if wait == 0 else f"in {wait} week{'s' if wait > 1 else ''}")
        console.print(turn)
    for a, c in rot.too_big if rot else ():
        console.print(f"not in any slice: {a} ({c / 60:.0f} min alone, above the {rot.window_min}-min window)")
    console.print(plan_line(pl, day), soft_wrap=True)  # one line, whatever the width: scripts read it


def plan_line(pl: Plan, day: Optional[dt.date] = None) -> str:
    typical = "-" if pl.typical_min is None else f"{pl.typical_min:.0f} min"
    window = "" if pl.window_min is None else \
        f"; window {pl.window_min} min: {'fits' if pl.fits else 'DOES NOT FIT'}"
    rot = pl.rotation
    if rot is not None and rot.count > 1:
        k = rot.this_week(day)
        window += (f" in {rot.count} weekly slices (every anchor once in {rot.count} weeks); this week "
                   f"({iso_week(day)}) slice {k}: {len(rot.slices[k])} anchors, worst case {rot.worst_s[k] / 60:.0f} min")
    return (f"profile {pl.profile}, cadence {pl.cadence}: {len(pl.rows)} anchors, worst case "
            f"{pl.worst_min:.0f} min, typical {typical}{window}")
