"""`lawbench plan`: what a selection of anchors costs, before it runs.

The worst case comes from the budgets: a measured anchor stops taking samples once its budget's
`timeout_s` is spent (core/stats/verdicts.py), so that is its worst case; a prediction is arithmetic
(0 s). The last batch may start just before the budget is spent and run past it by one batch of
engine visits, which is why a night's window leaves room and why `lawbench run --deadline` stops
taking new anchors whose worst case no longer fits. The typical time is the median of the anchor's
recorded durations on the profile, when a history is given.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Optional

# A runner job's limit (timeout-minutes): a night's windows must fit it (lawbench check), a weekly
# job's profiles share its deadline.
JOB_LIMIT_MIN = 240
WEEKLY_JOB_MIN = 1440
WEEKLY_DEADLINE_MIN = WEEKLY_JOB_MIN - 40

# What setup takes before the first anchor (checkout, nox, lawbench check): the windows of the
# profiles sharing a box must fit in the job's limit less this.
SETUP_MIN = 20


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

    @property
    def worst_min(self) -> float:
        return sum(r.worst_s for r in self.rows) / 60

    @property
    def typical_min(self) -> Optional[float]:
        known = [r.typical_s for r in self.rows if r.typical_s is not None]
        return sum(known) / 60 if known else None

    @property
    def fits(self) -> bool:
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


def plan(profile: Any, anchors: Any, cadence: str, history: Any = None) -> Plan:
    """The anchors a `lawbench run --profile P --cadence C` selects, each with its cost."""
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
    return Plan(profile.id, cadence, sorted(rows, key=lambda r: (-r.worst_s, r.anchor_id)), window)


def window_problems(profiles: dict[str, Any], anchors: Any) -> list[str]:
    """What `lawbench check` refuses: a profile whose nightly worst case exceeds its window, and a
    box whose profiles' windows do not fit one job. One line each, naming the file and field."""

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
    for box, members in sorted(boxes.items()):
        total = sum(p.nightly.window_min for p in members)
        if total > JOB_LIMIT_MIN - SETUP_MIN:
            problems.append(f"hardware_profiles/{members[0].id}.toml: field nightly.window_min: box {box!r} runs "
                            f"{', '.join(p.id for p in members)} in one job: their windows add up to {total} min, "
                            f"above the job's {JOB_LIMIT_MIN} min less {SETUP_MIN} min of setup")
    return problems


def print_plan(pl: Plan, console: Any = None) -> None:
    from rich.table import Table

    from lawbench.core.console import console as _console

    console = console or _console()
    table = Table(title=f"plan: profile {pl.profile}, cadence {pl.cadence}: {len(pl.rows)} anchors",
                  title_justify="left")
    for name in ("anchor", "kind", "cadence", "worst case (min)", "typical (min)"):
        table.add_column(name, justify="right" if "min" in name else "left", overflow="fold")
    for r in pl.rows:
        table.add_row(r.anchor_id, r.kind, r.cadence, f"{r.worst_s / 60:.1f}",
                      "-" if r.typical_s is None else f"{r.typical_s / 60:.1f}")
    console.print(table)
    console.print(plan_line(pl))


def plan_line(pl: Plan) -> str:
    typical = "-" if pl.typical_min is None else f"{pl.typical_min:.0f} min"
    window = "" if pl.window_min is None else \
        f"; window {pl.window_min} min: {'fits' if pl.fits else 'DOES NOT FIT'}"
    return (f"profile {pl.profile}, cadence {pl.cadence}: {len(pl.rows)} anchors, worst case "
            f"{pl.worst_min:.0f} min, typical {typical}{window}")
