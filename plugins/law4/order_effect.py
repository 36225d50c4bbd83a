"""Order effects (register L-31): one arm's readings split by which arm ran before it.

    quantity = "order_spread"   per schedule, the readings of each judged arm are grouped by the arm
                                that ran right before (L-31's 'grouped by (arm k, predecessor k)'),
                                keeping the groups whose predecessor ran an equal-or-higher setting or
                                a lower one (`spread.after`); a group's spread is half its range over
                                its mean, as prereg108_order_effect.txt prints it ('mean 93.85 +/- 19.65
                                (20.9%)'), and the sample is the min or max over the groups
    quantity = "order_span"     per schedule, the fastest of one arm's readings over its slowest
                                (L-31's 'k=8 readings ranged 11.3 to 70.7 tok/s, a 6.3x span')

A schedule is the record's own: `spread.warmup` discarded visits of the first arm, then
`spread.passes` passes through `spread.order`, odd passes forward and even ones backward
('forward, backward, forward', prereg #108), one engine process per visit. One schedule is one
sample, so core's interval over samples is over whole schedules; every visit, with the arm before
it, is in the record. Setting the page cache (bench.prime) would remove the effect measured here,
so these arms run unprimed: the predecessor's working set is the treatment.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable, Optional

from lawbench import Anchor, DataError, EngineError, HardwareProfile, Sample, Visit
from lawbench.plugins.law4 import measure
from lawbench.plugins.law4.case import arm_case, CASE_FILE, check_measured, Law4Case, parse_case
from lawbench.plugins.law4.spread import _snapshot, swept_arms
from lawbench.plugins.law4.spread_case import ORDER_KINDS, SpreadCase

if TYPE_CHECKING:
    from lawbench import Resources

__all__ = ["ORDER_KINDS", "groups", "half_range", "order_cases", "schedule", "OrderSampler", "sampler"]


def schedule(order: list[str], passes: int) -> list[str]:
    """The visits of one schedule after its warm-up: odd passes forward, even passes backward."""
    out: list[str] = []
    for p in range(passes):
        out += order if p % 2 == 0 else order[::-1]
    return out


def half_range(values: list[float]) -> float:
    """(max − min) / 2 over the mean: the '+/- x (y%)' of prereg108_order_effect.txt."""
    mean = sum(values) / len(values)
    return (max(values) - min(values)) / 2.0 / mean


def _side(arm: str, before: str, order: list[str]) -> str:
    return "equal-or-higher" if order.index(before) <= order.index(arm) else "lower"


def groups(readings: list[tuple[str, str, float]], order: list[str], arms: list[str],
           after: Optional[str]) -> dict[tuple[str, str], list[float]]:
    """{(arm, predecessor): readings} of the judged arms on the chosen side ((arm, predecessor,
    value) triples in visit order); after=None keeps every predecessor."""
    out: dict[tuple[str, str], list[float]] = {}
    for arm, before, value in readings:
        if arm in arms and (after is None or _side(arm, before, order) == after):
            out.setdefault((arm, before), []).append(value)
    return out


def _planned_groups(spread: SpreadCase, order: list[str], arms: list[str]) -> dict[tuple[str, str], int]:
    """How many readings each group gets in one schedule (for the check: a group needs two)."""
    visits = [order[0]] * spread.warmup + schedule(order, spread.passes)
    triples = [(a, visits[i - 1], 0.0) for i, a in enumerate(visits) if i >= spread.warmup and i > 0]
    return {g: len(v) for g, v in groups(triples, order, arms, spread.after).items()}


def order_cases(anchor: Anchor) -> dict[str, Law4Case]:
    """Every arm (case ⊕ arm), checked: a named order of them all, judged arms among them, and a
    schedule in which every judged group gets at least two readings."""
    case = parse_case(anchor.case, anchor.id)
    spread = case.spread
    assert spread is not None  # NEEDS: an order quantity needs case.spread
    if len(anchor.arms) < 2:
        raise DataError(CASE_FILE, f"an order effect is the arm before this one: give two or more arms (got "
                        f"{len(anchor.arms)})", anchor=anchor.id, field="arms")
    if sorted(spread.order) != sorted(anchor.arms):
        raise DataError(CASE_FILE, f"spread.order must list every arm once, highest setting first (arms: "
                        f"{', '.join(sorted(anchor.arms))})", anchor=anchor.id, field="case.spread.order")
    judged = spread.arms or spread.order
    unknown = [a for a in judged if a not in anchor.arms]
    if unknown:
        raise DataError(CASE_FILE, f"spread.arms names {unknown[0]!r}, which is not an arm", anchor=anchor.id,
                        field="case.spread.arms")
    if case.quantity == "order_span" and len(judged) != 1:
        raise DataError(CASE_FILE, "an order_span is one arm's fastest reading over its slowest: name one arm "
                        "in spread.arms", anchor=anchor.id, field="case.spread.arms")
    planned = _planned_groups(spread, spread.order, judged)
    if case.quantity == "order_spread":
        if not any(n >= 2 for n in planned.values()):
            raise DataError(CASE_FILE, f"no arm of {judged} gets two readings after a predecessor on the "
                            f"{spread.after!r} side in {spread.passes} passes: add passes or change spread.after",
                            anchor=anchor.id, field="case.spread.passes")
    elif sum(planned.values()) < 2:
        raise DataError(CASE_FILE, "the schedule gives the arm fewer than two readings: add passes",
                        anchor=anchor.id, field="case.spread.passes")
    cases = {name: arm_case(anchor.case, over, anchor.id, name) for name, over in anchor.arms.items()}
    for name, c in cases.items():
        where = f"arms.{name}"
        if c.bench is None or c.model is None:
            raise DataError(CASE_FILE, "an order effect is measured on a model file: give a model and a bench "
                            "table", anchor=anchor.id, field=f"{where}.{'bench' if c.bench is None else 'model'}")
        if c.bench.prime not in (None, "keep"):
            raise DataError(CASE_FILE, f"bench.prime = {c.bench.prime!r} sets the page cache before each visit, "
                            "which removes the predecessor's effect this anchor measures: leave it out (or \"keep\")",
                            anchor=anchor.id, field=f"{where}.bench.prime")
        if c.bench.tool not in measure.ENGINES:
            raise DataError(CASE_FILE, "an order effect runs in llama-bench or llama-batched-bench",
                            anchor=anchor.id, field=f"{where}.bench.tool")
        check_measured(c, anchor.kind, anchor.id, where)
    if len({c.bench.tool for c in cases.values()}) > 1 or len({c.bench.reps for c in cases.values()}) > 1:  # type: ignore[union-attr]
        raise DataError(CASE_FILE, "every arm runs in one engine with the same bench.reps: only the predecessor "
                        "may differ", anchor=anchor.id, field="arms")
    if anchor.kind != "measurement":
        raise DataError(CASE_FILE, f"an order effect's sample is already a statistic over a schedule: kind must "
                        f"be \"measurement\", not {anchor.kind!r}", anchor=anchor.id, field="kind")
    return cases


class OrderSampler:
    """One schedule of visits per sample (core's Sampler protocol)."""

    def __init__(self, quantity: str, spread: SpreadCase, visits: dict[str, Callable[[int], Visit]],
                 labels: dict[str, str], *, reps: int, per_visit: Callable[[list[float]], Optional[float]],
                 protocol: Optional[dict[str, object]] = None):
        self.quantity, self.spread, self.arms, self.labels = quantity, spread, visits, labels
        self.log_scale = quantity == "order_span"  # a span is a ratio of speeds; a spread can be 0
        self.judged = spread.arms or spread.order
        self.reps, self.per_visit = reps, per_visit
        self._extra = dict(protocol or {})
        self._last: Optional[str] = None
        self._schedule = 0
        self.visits: list[dict[str, Any]] = []

    def _visit(self, arm: str, discard: bool) -> Optional[float]:
        t0 = time.monotonic()
        visit = self.arms[arm](self.reps)
        value = self.per_visit(visit.values)
        self.visits.append({"schedule": self._schedule, "arm": arm, "predecessor": self._last, "reps": self.reps,
                            "discarded": discard, "values": visit.values, "value": value,
                            "wall_s": round(visit.wall_s or time.monotonic() - t0, 3),
                            **({"raw": visit.raw} if visit.raw else {})})
        self._last = arm
        return value

    def _one_schedule(self) -> Optional[Sample]:
        order = self.spread.order
        for _ in range(self.spread.warmup):
            self._visit(order[0], discard=True)
        readings: list[tuple[str, str, float]] = []
        first = self._last
        for arm in schedule(order, self.spread.passes):
            before = self._last
            value = self._visit(arm, discard=False)
            if value is not None and before is not None:
                readings.append((arm, before, value))
        self._schedule += 1
        every = groups(readings, order, self.judged, self.spread.after)
        if self.quantity == "order_span":  # every reading of the arm counts, whatever group it falls in
            values = [x for v in every.values() for x in v]
            if len(values) < 2:
                return None
            return Sample(value=max(values) / min(values), arm=self.judged[0], predecessor=first,
                          raw={"groups": {f"{a} after {b}": v for (a, b), v in every.items()},
                               "fastest": max(values), "slowest": min(values)})
        found = {g: v for g, v in every.items() if len(v) >= 2}  # a spread needs two readings
        if not found:
            return None
        raw: dict[str, Any] = {"groups": {f"{a} after {b}": v for (a, b), v in found.items()}}
        spreads = {g: half_range(v) for g, v in found.items()}
        pick = min if self.spread.statistic == "min" else max
        end = pick(spreads, key=spreads.__getitem__)
        raw["spreads"] = {f"{a} after {b}": s for (a, b), s in spreads.items()}
        return Sample(value=spreads[end], arm=end[0], predecessor=end[1],
                      raw={**raw, "end": f"{end[0]} after {end[1]}"})

    def draw(self, n: int) -> list[Sample]:
        out: list[Sample] = []
        try:
            for _ in range(n):
                sample = self._one_schedule()
                if sample is not None:
                    out.append(sample)
        except (EngineError, KeyboardInterrupt) as exc:
            exc.samples = out + list(getattr(exc, "samples", []))
            raise
        return out

    def statistic(self, samples: list[Sample]) -> list[float]:
        return [s.value for s in samples]

    def environment(self) -> dict[str, Any]:
        return {"after": _snapshot()}

    def protocol(self) -> dict[str, Any]:
        s = self.spread
        statistic = ("fastest / slowest reading of the arm" if self.quantity == "order_span" else
                     f"{s.statistic} over (arm, predecessor) groups of (max - min) / 2 / mean")
        return {"sampling_unit": f"schedule of {s.warmup} discarded visit(s) of {s.order[0]}, then {s.passes} "
                                 f"passes through {s.order}, odd forward, even backward",
                "reps_per_visit": self.reps, "after": s.after, "judged_arms": self.judged,
                "statistic": statistic, "arms": self.labels, "visits": self.visits, **self._extra}


def sampler(anchor: Anchor, profile: HardwareProfile, resources: "Resources") -> OrderSampler:
    arms = swept_arms(order_cases(anchor), profile, resources)
    assert arms.first.bench is not None and arms.first.spread is not None
    return OrderSampler(arms.first.quantity, arms.first.spread, arms.visits, arms.labels, reps=arms.first.bench.reps,
                        per_visit=arms.per_visit, protocol=arms.protocol)

