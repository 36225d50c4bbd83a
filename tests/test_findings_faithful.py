"""Issue 34: a finding must be a contradiction. `lawbench check` refuses an open finding whose own
printed inputs, rounded, price into the band (lawbench.core.claims.faithful), and the two findings
that were only a print's precision (L-33's fourth decimal, U-25's 46.7 ms) are now faithful tests.

Expected figures are arithmetic written out here from the published prints, not copied from code.
"""
from __future__ import annotations

import pytest

from lawbench.core.claims.faithful import half_step, unfaithful_findings
from lawbench.core.claims.loading import LoadedAnchor, load_all
from lawbench.core.hardware.profiles import load_profiles
from lawbench.core.laws.registry import get_registry
from lawbench.testing import make_anchor

PROFILES = load_profiles()
PROV = {"seed": "000_4a91008eeaefec79.txt", "quote": "test", "band_rationale": "test"}


def k_anchor(value: float, cost_ms: float, finding: str | None = "test finding") -> LoadedAnchor:
    a = make_anchor(id="law4.test.k", law="law4", claim="test", quantity="cpu_attention_k_from_layer_cost",
                    unit="us/pos/layer", kind="prediction", value=value, band={"abs": 0.005}, provenance=PROV,
                    finding=finding, case={"quantity": "cpu_attention_k_from_layer_cost",
                                           "layer_cost_ms": cost_ms, "ctx": 32768})
    return LoadedAnchor(a, "anchors/law4/x.toml")


def test_half_step_is_half_the_last_printed_digit():
    assert half_step(46.7) == pytest.approx(0.05)
    assert half_step(32.212) == pytest.approx(0.0005)
    assert half_step(3.0) == pytest.approx(0.05)  # TOML's '3.0' is a one-decimal print
    assert half_step(1e-05) == pytest.approx(5e-06)


def test_an_integer_input_is_a_count_not_a_print():
    from lawbench.core.claims.faithful import printed_inputs
    assert printed_inputs({"layer_cost_ms": 46.7, "ctx": 32768, "quantity": "k", "flag": True}) == {"layer_cost_ms": 46.7}


def test_a_finding_its_inputs_rounding_reaches_is_refused_naming_file_anchor_field():
    # 46.65..46.75 ms over 32768 positions = 1.4237..1.4267 us, into the band 1.415..1.425
    [err] = unfaithful_findings([k_anchor(1.42, 46.7)], get_registry(), PROFILES["cpu"])
    text = str(err)
    assert err.field == "finding" and err.anchor == "law4.test.k" and "anchors/law4/x.toml" in text
    assert "case.layer_cost_ms = 46.7" in text and "not a contradiction" in text


def test_a_true_contradiction_and_an_anchor_without_a_finding_pass():
    # 48.7 ms / 32768 = 1.486 us: its rounding (±0.0015) is far from 1.42 ± 0.005, a real disagreement
    assert unfaithful_findings([k_anchor(1.42, 48.7)], get_registry(), PROFILES["cpu"]) == []
    assert unfaithful_findings([k_anchor(1.42, 46.7, finding=None)], get_registry(), PROFILES["cpu"]) == []


def test_the_shipped_anchors_hold_no_finding_a_print_can_decide():
    reg = get_registry()
    anchors = load_all(reg, profiles=PROFILES.keys())
    assert unfaithful_findings(anchors.anchors, reg, PROFILES["cpu"]) == []


@pytest.mark.parametrize("anchor_id, published, price", [
    # U-25's printed cost over the depth, against the seed's 1.42 widened by the cost's rounding
    ("law4.l19.cpu-attention-k.7b-11l-d32k.from-layer-cost", 1.42, 46.7 / 32768 * 1000),
    # U-54's two three-decimal groups against L-33's four-decimal total, widened by their rounding
    ("law4.l33.total-params.qwen3.6-35b-a3b.40-block", 34.6606, 32.212 + 2.448),
])
def test_the_print_limited_former_findings_are_faithful_tests(anchor_id, published, price):
    reg = get_registry()
    la = load_all(reg, profiles=PROFILES.keys()).by_id()[anchor_id]
    assert la.anchor.finding is None and la.anchor.value == published  # the published value is kept
    lo, hi = la.anchor.band_interval(la.anchor.value)
    assert lo <= price <= hi
    got = reg.law("law4").predict(la.anchor, PROFILES["cpu"]).value
    assert got == pytest.approx(price, abs=1e-3) and lo <= got <= hi
