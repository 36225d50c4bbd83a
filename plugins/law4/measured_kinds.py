"""Law 4's measured-only quantities, each with its own sampler and check: the law never prices them.

    decode_spread, eta_range   plugins/law4/spread.py      a statistic over a round of engine visits
    order_spread, order_span   plugins/law4/order_effect.py  readings split by the arm that ran before
    step_change                plugins/law4/step.py        the largest change between neighbouring settings
    eta_disk_implied           plugins/law4/eta_disk.py    η_disk read back from a decode and its residency
    expert_union               plugins/law4/union.py       distinct experts a K+1-token verify batch reads

Law4.check_anchor and Law4.sampler hand these quantities here first (``handles``); eta_disk_implied
is a one-arm llama-bench case, so after its own check it goes on through the law's usual checks.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lawbench import Anchor, DataError, HardwareProfile
from lawbench.plugins.law4 import eta_disk, order_effect, spread, step, union
from lawbench.plugins.law4.case import CASE_FILE, parse_case, unit_scale
from lawbench.plugins.law4.models import check_model_ref
from lawbench.plugins.law4.spread import SPREAD_QUANTITIES, spread_cases

if TYPE_CHECKING:
    from lawbench import Resources
    from lawbench.plugins.law4.law import Law4

MEASURED_ONLY = (*SPREAD_QUANTITIES, *order_effect.ORDER_KINDS, "step_change", "eta_disk_implied", "expert_union")


def quantity(anchor: Anchor) -> Any:
    return anchor.case.get("quantity") if isinstance(anchor.case, dict) else None


def check(anchor: Anchor) -> bool:
    """Check a measured-only anchor; True when nothing else is left to check."""
    q = quantity(anchor)
    if q == "eta_disk_implied":
        eta_disk.check(anchor)
        return False  # one llama-bench arm: the law's usual checks follow
    if q in SPREAD_QUANTITIES:
        cases = spread_cases(anchor)
    elif q in order_effect.ORDER_KINDS:
        cases = order_effect.order_cases(anchor)
    elif q == "step_change":
        cases = step.step_cases(anchor)
    elif q == "expert_union":
        union.check(anchor)
        cases = {"main": parse_case(anchor.case, anchor.id)}
    else:
        return False
    if anchor.quantity != q:
        raise DataError(CASE_FILE, f"quantity {anchor.quantity!r} differs from case.quantity {q!r}; name "
                                   "the same quantity in both", anchor=anchor.id, field="quantity")
    unit_scale(anchor.quantity, anchor.unit, anchor.id)
    for arm, case in cases.items():
        check_model_ref(case.model, anchor.id, ("case" if arm == "main" else f"arms.{arm}") + ".model")
    return True


def sampler(law: "Law4", anchor: Anchor, profile: HardwareProfile, resources: "Resources") -> Any:
    """The quantity's own sampler, or None for every other quantity."""
    q = quantity(anchor)
    if q in SPREAD_QUANTITIES:
        return spread.sampler(law, anchor, profile, resources)
    if q in order_effect.ORDER_KINDS:
        return order_effect.sampler(anchor, profile, resources)
    if q == "step_change":
        return step.sampler(anchor, profile, resources)
    if q == "eta_disk_implied":
        return eta_disk.sampler(law, anchor, profile, resources)
    if q == "expert_union":
        return union.sampler(anchor, profile, resources)
    return None
