"""A step across a case parameter (register L-08): the largest change between neighbouring settings.

    quantity = "step_change"   two or more arms that differ in one setting (bench.ubatch: -ub 512, 1024,
                               1536, 2048 …), named in `spread.order` in the setting's order; one visit
                               of every arm per round, in an order that rotates round by round, and the
                               sample is the round's largest fall between neighbours (statistic "min":
                               speed[i+1] / speed[i] − 1, '−45% prefill in one -ub step') or rise ("max")

A sweep judges where its cliff is by itself: the claim is that one step falls by so much, wherever
the card's free VRAM puts it, so the anchor needs no precondition on what the desktop holds. The
round is the sampling unit, as for eta_range (plugins/law4/spread.py, whose sampler this reuses),
and a change can be negative, so the interval is taken on values. Every visit, with its
predecessor, is in the record.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional

from lawbench import Anchor, DataError, HardwareProfile, Sample, Visit
from lawbench.plugins.law4 import measure
from lawbench.plugins.law4.case import arm_case, CASE_FILE, check_measured, Law4Case, parse_case
from lawbench.plugins.law4.spread import SpreadSampler, swept_arms

if TYPE_CHECKING:
    from lawbench import Resources


def steps(speeds: dict[str, float], order: list[str]) -> dict[str, float]:
    """{"a -> b": speed_b / speed_a − 1} for each neighbour pair of the order."""
    return {f"{a} -> {b}": speeds[b] / speeds[a] - 1.0 for a, b in zip(order, order[1:])}


def step_cases(anchor: Anchor) -> dict[str, Law4Case]:
    case = parse_case(anchor.case, anchor.id)
    assert case.spread is not None  # NEEDS: step_change needs case.spread
    if len(anchor.arms) < 2:
        raise DataError(CASE_FILE, f"a step is between two settings: give two or more arms (got {len(anchor.arms)})",
                        anchor=anchor.id, field="arms")
    if sorted(case.spread.order) != sorted(anchor.arms):
        raise DataError(CASE_FILE, f"spread.order must list every arm once, in the order of the swept setting "
                        f"(arms: {', '.join(sorted(anchor.arms))})", anchor=anchor.id, field="case.spread.order")
    cases = {name: arm_case(anchor.case, over, anchor.id, name) for name, over in anchor.arms.items()}
    for name, c in cases.items():
        if c.bench is None or c.model is None:
            raise DataError(CASE_FILE, "a step is measured on a model file: give a model and a bench table",
                            anchor=anchor.id, field=f"arms.{name}.{'bench' if c.bench is None else 'model'}")
        if c.bench.tool not in measure.ENGINES:
            raise DataError(CASE_FILE, "a step runs in llama-bench or llama-batched-bench", anchor=anchor.id,
                            field=f"arms.{name}.bench.tool")
        check_measured(c, anchor.kind, anchor.id, f"arms.{name}")
    if len({c.bench.tool for c in cases.values()}) > 1 or len({c.bench.reps for c in cases.values()}) > 1:  # type: ignore[union-attr]
        raise DataError(CASE_FILE, "every arm runs in one engine with the same bench.reps: only the swept setting "
                        "may differ", anchor=anchor.id, field="arms")
    if anchor.kind != "measurement":
        raise DataError(CASE_FILE, f"a step's sample is already a statistic over a round of arms: kind must be "
                        f"\"measurement\", not {anchor.kind!r}", anchor=anchor.id, field="kind")
    return cases


class StepSampler(SpreadSampler):
    """Rounds of one visit per arm; one sample per round: the largest fall or rise between neighbours."""

    def __init__(self, order: list[str], visits: dict[str, Callable[[int], Visit]], labels: dict[str, str], *,
                 reps: int, per_visit: Callable[[list[float]], Optional[float]], statistic: Optional[str],
                 protocol: Optional[dict[str, object]] = None):
        super().__init__("step_change", visits, labels, reps=reps, per_visit=per_visit, statistic=statistic,
                         protocol=protocol)
        self.order = order
        self.log_scale = False  # a change can be negative

    def _one_round(self) -> Optional[Sample]:
        names = sorted(self.arms)
        first = self._round % len(names)
        visit_order = names[first:] + names[:first]  # rotates, so no arm always follows the same one
        pred = self._last
        speeds: dict[str, float] = {}
        for arm in visit_order:
            value, _visit = self._visit(arm, self.reps)
            if value is not None:
                speeds[arm] = value
        self._round += 1
        if set(speeds) != set(self.arms):
            return None
        change = steps(speeds, self.order)
        pick = min if self.end == "min" else max
        end = pick(change, key=change.__getitem__)
        return Sample(value=change[end], arm=end.split(" -> ")[1], predecessor=pred,
                      raw={"tok_s": speeds, "steps": change, "end": end, "order": visit_order})

    def protocol(self) -> dict[str, Any]:
        out = super().protocol()
        fall = "largest fall" if self.end == "min" else "largest rise"
        out.update(statistic=f"{fall} between neighbours in {self.order}: tok/s[i+1] / tok/s[i] - 1",
                   eta_scale=None)
        return out


def sampler(anchor: Anchor, profile: HardwareProfile, resources: "Resources") -> StepSampler:
    arms = swept_arms(step_cases(anchor), profile, resources)
    assert arms.first.bench is not None and arms.first.spread is not None
    return StepSampler(arms.first.spread.order, arms.visits, arms.labels, reps=arms.first.bench.reps,
                       per_visit=arms.per_visit, statistic=arms.first.spread.statistic, protocol=arms.protocol)

