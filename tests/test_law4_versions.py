"""Law 4's versions: an anchor names the version it tests, and the law prices exactly its terms."""
from __future__ import annotations

import pytest

from lawbench.core.errors import DataError
from lawbench.core.hardware.profiles import load_profiles
from lawbench.plugins.law4 import versions as V
from lawbench.plugins.law4.law import Law4
from lawbench.plugins.law4.profile import law4_profile
from lawbench.testing import make_anchor

PROFILES = load_profiles()
PROV = {"seed": "000_4a91008eeaefec79.txt", "quote": "test", "band_rationale": "test"}


def anchor(case: dict, version: str | None = None, **fields):
    data = {"id": "law4.t", "law": "law4", "claim": "t", "quantity": case["quantity"], "unit": "tok/s",
            "kind": "prediction", "value": 1.0, "band": {"rel": 0.5}, "provenance": PROV, "case": case}
    if version is not None:
        data["law_version"] = version
    data.update(fields)
    return make_anchor(**data)


def tok_s(case: dict, version: str | None, profile: str = "cpu-ddr4") -> float:
    return Law4().predict(anchor(case, version), PROFILES[profile]).value


PURE_CPU_7B = {"quantity": "decode_tok_s", "model": "manifest:qwen2.5-7b", "weight_mix": "Q4_K_M",
               "placement": {"ngl": 0}}


def test_versions_nest_in_the_seeds_order_and_the_current_one_is_everything():
    ids = [v.id for v in V.VERSIONS]
    assert ids == ["v1.0", "v1.1", "L-15", "v2", "L-30", "general"]
    for before, after in zip(V.VERSIONS, V.VERSIONS[1:]):
        assert before.terms < after.terms and set(after.adds) == after.terms - before.terms
    assert V.resolve(None) is V.CURRENT is V.BY_ID["general"]


def test_an_unknown_version_is_a_data_error_naming_law_version():
    a = anchor(PURE_CPU_7B, "v3")
    for call in (lambda: Law4().check_anchor(a), lambda: Law4().predict(a, PROFILES["cpu-ddr4"])):
        with pytest.raises(DataError) as err:
            call()
        assert err.value.field == "law_version" and "'v3'" in err.value.message
        assert "v1.0, v1.1, L-15, v2, L-30, general" in err.value.message


@pytest.mark.parametrize("quantity, first", [("kv_bytes_per_pos", "v1.1"), ("expert_ceiling", "L-30"),
                                             ("fits", "general")])
def test_a_quantity_is_asked_only_of_a_version_that_states_it(quantity, first):
    case = {"quantity": quantity, "model": "manifest:qwen3-30b-a3b", "experts_used": 4}
    earlier = V.VERSIONS[[v.id for v in V.VERSIONS].index(first) - 1].id
    with pytest.raises(DataError) as err:
        Law4().check_anchor(anchor(case, earlier, unit="x" if quantity != "kv_bytes_per_pos" else "B/pos"))
    assert err.value.field == "law_version" and first in err.value.message
    Law4().check_anchor(anchor(case, first, unit="x" if quantity != "kv_bytes_per_pos" else "B/pos"))


def test_v1_0_has_no_kv_term_and_v1_1_adds_it():
    d0, d16 = dict(PURE_CPU_7B), dict(PURE_CPU_7B, ctx=16384)
    assert tok_s(d16, "v1.0") == tok_s(d0, "v1.0")
    assert tok_s(d16, "v1.1") < tok_s(d0, "v1.1")
    # the KV term by hand: 16384 × 57,344 B/pos on the RAM tier at η_kv 0.70 × 48 GB/s
    kv_s = 16384 * 28 * 4 * 256 * 2 / (0.70 * 48e9)
    assert 1 / tok_s(d16, "v1.1") - 1 / tok_s(d0, "v1.1") == pytest.approx(kv_s)


def test_v2_adds_l19s_cpu_attention_at_the_seeds_k_even_on_pure_cpu():
    """k = 1.55 µs (the seed's formula constant) on every placement; the register's pure-CPU arm
    (1.10 µs) is a profile constant, not the law's."""
    case = dict(PURE_CPU_7B, ctx=16384)
    extra = 1 / tok_s(case, "v2") - 1 / tok_s(case, "L-15")
    assert extra == pytest.approx(28 * 16384 * 1.55e-6)
    assert law4_profile(PROFILES["cpu-ddr4"]).constant("cpu_attention_k_us_pure_cpu") == 1.10  # kept, unused


def test_l15_prices_the_format_eta_and_earlier_versions_the_tier_average():
    case = dict(PURE_CPU_7B, placement={})  # all in VRAM on gtx1060
    assert tok_s(case, "L-15", "gtx1060") == pytest.approx(0.553 * 192e9 / 4.67712e9, rel=1e-6)
    # v1.1: η 0.56 on the active bytes, the embedding's one row (3584 × 144/256 B) read on RAM
    row = 3584 * 144 // 256
    t = (4.370560992e9 - row) / (0.56 * 192e9) + row / (0.65 * 48e9)
    assert tok_s(case, "v1.1", "gtx1060") == pytest.approx(1 / t, rel=1e-9)


def test_only_the_general_form_checks_capacity_with_reserves():
    """Seed 000: 'at 16k the 30B no longer fits a 16 GB box as pure-CPU — the fit-checker knows'."""
    case = {"quantity": "decode_tok_s", "model": "manifest:qwen3-30b-a3b", "weight_mix": "Q2_K",
            "placement": {"ngl": 0}, "ctx": 16384}
    law, prof = Law4(), PROFILES["cpu-ddr4"]
    general = law.predict(anchor(case), prof).detail["pricing"]
    l30 = law.predict(anchor(case, "L-30"), prof).detail["pricing"]
    assert general["fits"]["ram"] is False and general["streamed_bytes"]["ram"] > 0
    assert l30["fits"]["ram"] is True and not l30["streamed_bytes"]  # bare 16 GB, no reserve


def test_the_prediction_records_the_version_it_priced():
    assert Law4().predict(anchor(PURE_CPU_7B, "v1.1"), PROFILES["cpu-ddr4"]).detail["law_version"] == "v1.1"
    assert Law4().predict(anchor(PURE_CPU_7B), PROFILES["cpu-ddr4"]).detail["law_version"] == "general"
