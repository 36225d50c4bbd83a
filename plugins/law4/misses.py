"""How far a published prediction missed its measurement, and how much a newer prediction cut
that miss: arithmetic on published speeds, never a run.

    quantity = "prediction_error"  predicted / measured − 1, the register's sign: a prediction
                                   below its measurement misses by a negative share (prereg #73:
                                   '30B MoE split 15% | 16384 | 12.3 | 15.95 | −22.9%')
    quantity = "error_cut"         |superseded − measured| / |predicted − measured|: the older
                                   prediction's error over the newer one's, against one measured
                                   arm (prereg #74: 'Corrected error 0.17 tok/s vs uncorrected
                                   1.94 tok/s — the term cuts the error by 11×')

The case names the speeds as the source prints them: ``predicted_tok_s`` (the prediction judged),
``superseded_tok_s`` (the one it replaced, error_cut only) and ``measured_tok_s``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lawbench import DataError
from lawbench.plugins.law4.case import CASE_FILE

if TYPE_CHECKING:
    from lawbench.plugins.law4.case import Law4Case

QUANTITIES = ("prediction_error", "error_cut")


def compute(case: "Law4Case", anchor_id: str) -> tuple[float, dict[str, Any]]:
    """(the quantity as a fraction or a ratio, detail with each error in tok/s)."""
    predicted, measured = case.predicted_tok_s, case.measured_tok_s
    assert predicted is not None and measured is not None  # Law4Case.NEEDS requires both
    detail: dict[str, Any] = {"predicted_tok_s": predicted, "measured_tok_s": measured,
                              "error_tok_s": predicted - measured}
    if case.quantity == "prediction_error":
        return predicted / measured - 1.0, detail
    superseded = case.superseded_tok_s
    assert superseded is not None
    if predicted == measured:  # a perfect prediction: the cut is unbounded, not a number to judge
        raise DataError(CASE_FILE, "predicted_tok_s equals measured_tok_s: an exact prediction has no "
                                   "error to cut by", anchor=anchor_id, field="case.predicted_tok_s")
    detail.update(superseded_tok_s=superseded, superseded_error_tok_s=superseded - measured)
    return abs(superseded - measured) / abs(predicted - measured), detail
