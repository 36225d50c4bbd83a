"""Arithmetic on published inputs (anchors/law4/arithmetic.toml): L-12's compute ceiling
(plugins/law4/compute_ceiling.py) and the misses of L-19's predictions (plugins/law4/misses.py).
Each figure is recomputed from the inputs as printed; a wrong input, a wrong peak or a flipped
sign turns it red."""
from __future__ import annotations

import pytest

from lawbench.core.errors import DataError
from lawbench.core.hardware.profiles import load_profiles
from lawbench.core.models import Verdict
from lawbench.plugins.law4.law import Law4
from lawbench.plugins.law4.profile import law4_profile
from lawbench.testing import evaluate_anchor, law_anchors, make_anchor

PROFILES = load_profiles()
LAW = Law4()
ANCHORS = {k: a for k, a in law_anchors(LAW).items() if k.startswith(("law4.l12.", "law4.l19.moe-split-miss",
                                                                     "law4.l19.error-cut"))}
FLOPS = "law4.l12.flops-per-token.qwen3-30b-a3b.k8"
CEILING = "law4.l12.compute-ceiling.gtx1060.qwen3-30b-a3b.k8"
MISS_16K = "law4.l19.moe-split-miss.prereg73-d16384"
MISS_32K = "law4.l19.moe-split-miss.prereg73-d32768"
CUT = "law4.l19.error-cut.prereg74-14b-d8192"


def _profile(anchor):
    return PROFILES[anchor.profiles[0]] if anchor.profiles else PROFILES["cpu"]


def _with_case(anchor, **case):
    return anchor.model_copy(update={"case": {**anchor.case, **case}})


def _gtx1060_with_peak(tflops):
    data = PROFILES["gtx1060"].model_dump()
    data["laws"]["law4"]["constants"]["fp32_peak_tflops"]["value"] = tflops
    return type(PROFILES["gtx1060"]).model_validate(data)


@pytest.mark.parametrize("anchor_id, expected", [
    (FLOPS, 6.6),                      # 2 x 3.3B
    (CEILING, 4.4e12 / 6.6e9),         # 666.67 t/s
    (MISS_16K, (12.3 / 15.95 - 1) * 100),   # -22.88 %
    (MISS_32K, (9.6 / 10.70 - 1) * 100),    # -10.28 %
    (CUT, (3.30 - 1.36) / (1.53 - 1.36)),   # 11.41
])
def test_each_figure_is_recomputed_and_passes(anchor_id, expected):
    a = ANCHORS[anchor_id]
    p = LAW.predict(a, _profile(a))
    assert p.value == pytest.approx(expected, rel=1e-12)
    r = evaluate_anchor(a, LAW, profile=_profile(a))
    assert r.verdict is Verdict.PASS, r.reason


def test_the_ceiling_reads_the_profile_s_peak():
    a = ANCHORS[CEILING]
    p = LAW.predict(a, PROFILES["gtx1060"])
    assert p.detail["peak_flops"] == pytest.approx(4.4e12) and "gtx1060" in p.detail["peak_from"]
    assert p.detail["flops_per_token"] == pytest.approx(6.6e9)


@pytest.mark.parametrize("tflops", [4.3, 4.5, 2.2])
def test_a_wrong_peak_turns_the_ceiling_red(tflops):
    r = evaluate_anchor(ANCHORS[CEILING], LAW, profile=_gtx1060_with_peak(tflops))
    assert r.verdict is Verdict.FAIL, r.reason


@pytest.mark.parametrize("anchor_id, wrong", [
    (FLOPS, {"active_params_b": 3.35}),          # the header's count, not the one the register multiplied
    (CEILING, {"active_params_b": 3.35}),
    (CEILING, {"peak_tflops": 4.375}),           # a case peak overrides the profile's
    (MISS_16K, {"predicted_tok_s": 12.4}),
    (MISS_16K, {"predicted_tok_s": 15.95, "measured_tok_s": 12.3}),   # measured over predicted: +29.7 %
    (MISS_32K, {"measured_tok_s": 10.07}),
    (CUT, {"measured_tok_s": 1.37}),
    (CUT, {"predicted_tok_s": 3.30, "superseded_tok_s": 1.53}),       # the cut upside down: 0.09
])
def test_a_wrong_input_turns_it_red(anchor_id, wrong):
    a = ANCHORS[anchor_id]
    r = evaluate_anchor(_with_case(a, **wrong), LAW, profile=_profile(a))
    assert r.verdict is Verdict.FAIL, r.reason


def test_the_miss_keeps_the_register_s_sign():
    """An under-prediction is a negative miss (prereg #73: 12.3 against 15.95 is −22.9 %)."""
    a = ANCHORS[MISS_16K]
    assert LAW.predict(a, PROFILES["cpu"]).value < 0
    flipped = _with_case(a, predicted_tok_s=15.95, measured_tok_s=12.3)
    assert LAW.predict(flipped, PROFILES["cpu"]).value == pytest.approx(29.67, abs=0.01)


def test_the_ceiling_prices_a_header_s_active_parameters():
    """Without a published count the ceiling takes the model header's, as active_params does:
    the real Qwen3-30B-A3B header at k=8 (3.35B) under gtx1060's 4.4 TFLOPS is 657 t/s."""
    case = {"model": "manifest:qwen3-30b-a3b", "experts_used": 8}
    ceiling = make_anchor(id="t.ceiling", law="law4", quantity="compute_ceiling_tok_s", unit="tok/s",
                          value=657.0, band={"abs": 1.0}, case={"quantity": "compute_ceiling_tok_s", **case})
    params = make_anchor(id="t.params", law="law4", quantity="active_params", unit="params",
                         value=3.35e9, band={"rel": 0.01}, case={"quantity": "active_params", **case})
    n = LAW.predict(params, PROFILES["gtx1060"]).value
    p = LAW.predict(ceiling, PROFILES["gtx1060"])
    assert p.value == pytest.approx(4.4e12 / (2 * n)) and 650 < p.value < 664
    assert "header" in p.detail["active_params_from"]
    assert evaluate_anchor(ceiling, LAW, profile=PROFILES["gtx1060"]).verdict is Verdict.PASS


def test_a_profile_without_a_peak_skips_the_ceiling():
    a = ANCHORS[CEILING].model_copy(update={"profiles": []})
    r = evaluate_anchor(a, LAW, profile=PROFILES["cpu"])
    assert r.verdict is Verdict.SKIP and "fp32_peak_tflops" in r.reason


@pytest.mark.parametrize("anchor_id, case, field", [
    (FLOPS, {"active_params_b": None}, "case.active_params_b"),        # neither a count nor a model
    (MISS_16K, {"measured_tok_s": None}, "case.measured_tok_s"),
    (CUT, {"superseded_tok_s": None}, "case.superseded_tok_s"),
    (CUT, {"predicted_tok_s": 1.36}, "case.predicted_tok_s"),          # an exact prediction: no cut
    (MISS_16K, {"predicted_tok_s": -12.3}, "case.predicted_tok_s"),
])
def test_bad_input_names_the_anchor_and_the_field(anchor_id, case, field):
    a = ANCHORS[anchor_id]
    raw = {k: v for k, v in {**a.case, **case}.items() if v is not None}
    bad = a.model_copy(update={"case": raw})
    with pytest.raises(DataError) as exc:
        LAW.check_anchor(bad)
        LAW.predict(bad, _profile(a))
    assert exc.value.anchor == anchor_id and exc.value.field == field, str(exc.value)


def test_a_profile_peak_of_zero_is_refused():
    with pytest.raises(DataError) as exc:
        law4_profile(_gtx1060_with_peak(0.0))
    assert "constants.fp32_peak_tflops" in str(exc.value) and "TFLOPS" in str(exc.value)
