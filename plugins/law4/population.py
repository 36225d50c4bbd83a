"""A statistic over a population of published figures (register L-18): arithmetic, never a run.

    quantity = "eta_population_spread"   the largest member's η over the smallest one's, over
                                         case.population = { <member> = η, … } as the source prints
                                         each member ('ada 0.706 · rdna4 0.812 · … · hopper 0.512'),
                                         the '1.6x population spread' L-18 reads off them

The members are other people's machines, which no runner holds, so the anchor checks that the
published spread follows from the published members; a member's own figure is the source's.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lawbench import DataError
from lawbench.plugins.law4.case import CASE_FILE

if TYPE_CHECKING:
    from lawbench.plugins.law4.case import Law4Case

QUANTITIES = ("eta_population_spread",)


def compute(case: "Law4Case", anchor_id: str) -> tuple[float, dict[str, Any]]:
    """(max / min over the members, detail naming both ends and the median)."""
    members = case.population
    if len(members) < 2:
        raise DataError(CASE_FILE, f"a population spread needs two or more members (got {len(members)})",
                        anchor=anchor_id, field="case.population")
    low = min(members, key=members.__getitem__)
    high = max(members, key=members.__getitem__)
    ordered = sorted(members.values())
    mid = len(ordered) // 2
    median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    return members[high] / members[low], {"lowest": {low: members[low]}, "highest": {high: members[high]},
                                          "median": median, "members": len(members)}
