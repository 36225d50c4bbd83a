"""A weekly larger than its window rotates in slices, one slice a week (issue 30, item 8).

gtx1060's weekly budgets add up to more than 7,600 minutes against a 700-minute share of the
weekly job: run as one selection, every anchor after the first that does not fit is not-reached,
every week, and those anchors never run. Split into N slices that each fit the window by
construction, one slice runs each week and every anchor runs once in N weeks.

How an anchor finds its slice (docs/RUNNERS.md says the same): the anchors are taken in id order;
each goes to the slice its id hashes to (sha256 of the id, mod N), or, when that slice is full,
to the next one with room (N-1 wraps to 0). N is the smallest count from ceil(total / window)
up for which every anchor finds room, less any slice left empty (a week that would run nothing). A hash, rather than filling slices in id order, because an
anchor added, removed or re-budgeted then moves only the anchors that probed past its slice,
not every anchor after it in id order; only a change of N reshuffles the rotation.

Which slice runs: the number of whole weeks since Monday 1970-01-05 (UTC), mod N. A continuous
count rather than the ISO week number: ISO years have 52 or 53 weeks, so "week mod N" would
skip or repeat slices at a new year and an anchor could wait longer than N weeks.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import math
from dataclasses import dataclass
from typing import Optional, Sequence

WEEK_ZERO = dt.date(1970, 1, 5)  # a Monday: the first week of the count


def week_number(day: Optional[dt.date] = None) -> int:
    """Whole weeks from Monday 1970-01-05 to ``day`` (default: today, UTC)."""
    day = day or dt.datetime.now(dt.timezone.utc).date()
    return (day - WEEK_ZERO).days // 7


def iso_week(day: Optional[dt.date] = None) -> str:
    """The week's name people read in a calendar ("2026-W49"); the rotation counts weeks itself."""
    year, week, _ = (day or dt.datetime.now(dt.timezone.utc).date()).isocalendar()
    return f"{year}-W{week:02d}"


def _home(anchor_id: str, n: int) -> int:
    return int(hashlib.sha256(anchor_id.encode()).hexdigest()[:16], 16) % n


@dataclass(frozen=True)
class Rotation:
    """The weekly of one profile in slices: ``slices[k]`` the anchor ids of slice k (id order)."""

    window_min: int
    slices: tuple[tuple[str, ...], ...]
    worst_s: tuple[float, ...]  # per slice, the sum of its anchors' worst cases
    too_big: tuple[tuple[str, float], ...]  # (anchor id, worst case s) larger than the window alone

    @property
    def count(self) -> int:
        return len(self.slices)

    def slice_of(self, anchor_id: str) -> Optional[int]:
        return next((k for k, ids in enumerate(self.slices) if anchor_id in ids), None)

    def this_week(self, day: Optional[dt.date] = None) -> int:
        return week_number(day) % self.count

    def weeks_until(self, k: int, day: Optional[dt.date] = None) -> int:
        """0 when slice k runs this week, else how many weeks until it does."""
        return (k - self.this_week(day)) % self.count


def _assign(costs: Sequence[tuple[str, float]], n: int, capacity_s: float) -> Optional[list[list[str]]]:
    slices: list[list[str]] = [[] for _ in range(n)]
    used = [0.0] * n
    for anchor_id, cost in costs:
        home = _home(anchor_id, n)
        k = next((k % n for k in range(home, home + n) if used[k % n] + cost <= capacity_s), None)
        if k is None:
            return None
        slices[k].append(anchor_id)
        used[k] += cost
    return slices


def rotate(costs: Sequence[tuple[str, float]], window_min: int) -> Rotation:
    """The slices of a weekly whose anchors cost ``costs`` ((id, worst case s) each) in a window of
    ``window_min``. An anchor whose worst case alone exceeds the window fits no slice: it is named
    in ``too_big`` (lawbench check refuses it) and left out of the slices."""
    capacity = 60.0 * window_min
    fit = sorted((a, c) for a, c in costs if c <= capacity)
    too_big = tuple(sorted((a, c) for a, c in costs if c > capacity))
    n = max(1, math.ceil(sum(c for _, c in fit) / capacity)) if fit else 1
    while (slices := _assign(fit, n, capacity)) is None:
        n += 1  # ends: with one slice per anchor every anchor fits
    # A slice no anchor hashed or probed into (possible once N grew past the minimum) would be a
    # week that runs nothing, and a run of nothing exits 2: dropped, the rest keep their order.
    slices = [s for s in slices if s] or [[]]
    cost = dict(fit)
    return Rotation(window_min=window_min, slices=tuple(tuple(s) for s in slices),
                    worst_s=tuple(sum(cost[a] for a in s) for s in slices), too_big=too_big)
