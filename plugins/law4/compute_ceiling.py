"""A compute-bound ceiling (register L-12, the prefill wall): a card's FP32 peak over the FLOPs a
token costs. Arithmetic on a peak and a parameter count, never a run.

    quantity = "flops_per_token"        2 FLOPs (one multiply and one add) per active parameter
    quantity = "compute_ceiling_tok_s"  the peak FLOP/s over flops_per_token: tokens per second
                                        at 100 % of the peak, the ceiling batched prefill meets

Law 4's decode identity prices bytes; a batch of tokens reuses each weight it reads, so prefill
runs into the FLOP ceiling instead (L-12: "65-67% of the card's theoretical FLOP ceiling").

The active parameters are the case's published figure (``active_params_b``, as the source printed
the count it multiplied), else the model header's at ``experts_used`` (the model-card convention of
quantity active_params). The peak is the case's ``peak_tflops``, else the profile's
``constants.fp32_peak_tflops``; a profile that states none cannot price the ceiling (a SKIP).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from lawbench import DataError, HardwareProfile, NotApplicable
from lawbench.plugins.law4 import pricing as P
from lawbench.plugins.law4.case import CASE_FILE
from lawbench.plugins.law4.profile import law4_profile

if TYPE_CHECKING:
    from lawbench.plugins.law4.case import Law4Case
    from lawbench.plugins.law4.shape import ModelShape

QUANTITIES = ("flops_per_token", "compute_ceiling_tok_s")

# A dense matrix-vector product costs one multiply and one add per weight (L-12: "k=8 active 3.3B
# -> ~6.6 GFLOP/token").
FLOPS_PER_PARAM = 2.0

PEAK_CONSTANT = "fp32_peak_tflops"


class PeakUnknown(NotApplicable):
    """The profile states no FP32 peak and the case gives none: a SKIP until one is stated."""


def active_params(case: "Law4Case", shape: Optional["ModelShape"], anchor_id: str) -> tuple[float, str]:
    """(active parameters a token touches, where the count came from)."""
    if case.active_params_b is not None:
        return case.active_params_b * 1e9, "case.active_params_b (published)"
    if shape is None or not shape.has_tensors:
        raise DataError(CASE_FILE, f"{case.quantity} needs the active parameters: a published "
                                   "case.active_params_b, or a model whose header lists its tensors",
                        anchor=anchor_id, field="case.active_params_b")
    return float(P.active_params(shape, case.experts_used)), f"{shape.source} header"


def peak_flops(case: "Law4Case", profile: HardwareProfile) -> tuple[float, str]:
    """(peak FLOP/s, where the figure came from)."""
    if case.peak_tflops is not None:
        return case.peak_tflops * 1e12, "case.peak_tflops"
    peak = law4_profile(profile).constant(PEAK_CONSTANT)
    if peak is None:
        raise PeakUnknown(f"profile {profile.id!r} states no constants.{PEAK_CONSTANT} and the case gives "
                          f"no peak_tflops: the compute ceiling cannot be priced there")
    return peak * 1e12, f"profile {profile.id} constants.{PEAK_CONSTANT}"


def compute(case: "Law4Case", shape: Optional["ModelShape"], profile: HardwareProfile,
            anchor_id: str) -> tuple[float, dict[str, Any]]:
    """The quantity in SI units (FLOP, tok/s) with a detail naming every input and its source."""
    params, params_from = active_params(case, shape, anchor_id)
    flops = FLOPS_PER_PARAM * params
    detail: dict[str, Any] = {"active_params": params, "active_params_from": params_from,
                              "flops_per_param": FLOPS_PER_PARAM, "flops_per_token": flops}
    if case.quantity == "flops_per_token":
        return flops, detail
    peak, peak_from = peak_flops(case, profile)
    detail.update(peak_flops=peak, peak_from=peak_from)
    return peak / flops, detail
