"""Law 4's table of a hardware profile ([laws.law4]): the shipped η and constants are where the law
reads them, and a bad entry is one line naming the file and the field — validated by the law's own
model (Law4.profile_model), which core runs when the profile loads."""
from __future__ import annotations


import pytest

from lawbench.core.errors import DataError
from lawbench.core.hardware.profiles import load_profiles, validate_profile
from lawbench.plugins.law4.law import Law4
from lawbench.plugins.law4.profile import Law4Profile, law4_profile

from _profile_files import GOOD, broken


def test_law4_declares_its_profile_table():
    assert Law4.profile_model is Law4Profile


# --------------------------------------------------------------------------- shipped values


def test_estimates_are_marked_as_the_seed_marks_them():
    gtx = law4_profile(load_profiles()["gtx1060"])
    assert gtx.constants["tensor_parallel_efficiency"].estimate
    assert gtx.constants["raid0_efficiency"].estimate
    assert "[est]" in gtx.constants["tensor_parallel_efficiency"].source
    assert not gtx.eta["vram"].estimate


def test_the_seed_numbers_are_where_the_law_looks_for_them():
    profiles = load_profiles()
    gtx = law4_profile(profiles["gtx1060"])
    assert gtx.eta_for("vram") == 0.56
    assert gtx.eta_for("vram", "Q4_0") == 0.619
    assert gtx.eta_for("vram", "Q4_K_M") == 0.553
    assert gtx.eta_for("vram", "Q2_K") == 0.340
    assert gtx.eta_for("vram", "IQ3_XS") == 0.56  # no per-format figure: the tier average
    assert profiles["gtx1060"].tier("vram").bandwidth_spec_gbs.value == 192.0
    assert gtx.constants["cpu_attention_k_us"].value == 1.55
    assert gtx.constant("eta_kv") == 0.70
    assert law4_profile(profiles["h200"]).constant("tensor_parallel_efficiency") == 0.85
    assert law4_profile(profiles["cpu"]) == Law4Profile()  # no table: the law's empty one


def test_shipped_etas_name_their_basis():
    """Law 4's η table is a fraction of the spec bandwidth; L-11's MoE figure of the measured one."""
    profiles = load_profiles()
    for pid in ("gtx1060", "cpu-ddr4"):
        p = law4_profile(profiles[pid])
        assert p.eta["ram"].basis == "spec" and p.constants["eta_ram_moe"].basis == "spec"
    assert law4_profile(profiles["gtx1060"]).eta_format["vram"]["Q4_0"].basis == "spec"
    l11 = law4_profile(profiles["cpu-ddr4"]).constants["eta_ram_moe_l11"]
    assert l11.basis == "measured" and l11.value == 0.66


# --------------------------------------------------------------------------- bad tables


def test_eta_for_a_tier_that_does_not_exist(tmp_path):
    err = broken(tmp_path, GOOD.format(id="x").replace("[laws.law4.eta]\nram", "[laws.law4.eta]\nvram"))
    assert err.field == "laws.law4.eta.vram"
    assert "which this profile does not define (tiers: ram)" in err.message


def test_eta_format_for_a_tier_that_does_not_exist(tmp_path):
    err = broken(tmp_path, GOOD.format(id="x") + '[laws.law4.eta_format.disk]\nQ4_0 = { value = 1, source = "t" }\n')
    assert err.field == "laws.law4.eta_format.disk"


def test_a_fact_without_a_source(tmp_path):
    err = broken(tmp_path, GOOD.format(id="x").replace('ram = { value = 0.5, source = "test", basis = "spec" }',
                                                       'ram = { value = 0.5, basis = "spec" }'))
    assert err.field == "laws.law4.eta.ram.source" and "missing" in err.message


@pytest.mark.parametrize("value, words", [("1.6", "at most 1.5 (got 1.6)"), ("0", "above 0"), ("nan", "finite")])
def test_an_eta_out_of_range(tmp_path, value, words):
    err = broken(tmp_path, GOOD.format(id="x").replace("value = 0.5", f"value = {value}"))
    assert err.field == "laws.law4.eta.ram.value" and words in err.message


def test_an_unknown_field_of_the_table_lists_the_allowed_ones(tmp_path):
    err = broken(tmp_path, GOOD.format(id="x").replace("[laws.law4.eta]", "[laws.law4.etas]"))
    assert err.field == "laws.law4.etas"
    assert "unknown field" in err.message and "eta_format" in err.message and "constants" in err.message


@pytest.mark.parametrize("eta, field, words", [
    ('ram = { value = 0.5, source = "t" }', "laws.law4.eta.ram.basis", "which bandwidth"),
    ('ram = { value = 0.5, source = "t", basis = "stream" }', "laws.law4.eta.ram.basis", "'spec' or 'measured'"),
    ('ram = { value = 0.5, source = "t", basis = "measured" }', "laws.law4.eta.ram.basis", "no bandwidth_measured_gbs"),
])
def test_an_eta_without_its_basis_is_refused(tmp_path, eta, field, words):
    text = GOOD.format(id="x").replace('ram = { value = 0.5, source = "test", basis = "spec" }', eta)
    err = broken(tmp_path, text)
    assert err.field == field and words in err.message


def test_constants_named_eta_need_a_basis_too(tmp_path):
    text = GOOD.format(id="x") + '[laws.law4.constants]\neta_ram_moe = { value = 0.35, source = "t" }\n'
    err = broken(tmp_path, text)
    assert err.field == "laws.law4.constants.eta_ram_moe.basis"


def test_a_constant_out_of_its_range(tmp_path):
    text = GOOD.format(id="x") + '[laws.law4.constants]\ncpu_attention_k_us = { value = -1, source = "t" }\n'
    err = broken(tmp_path, text)
    assert err.field == "laws.law4.constants.cpu_attention_k_us.value" and "0 µs or more" in err.message


def test_the_old_top_level_eta_is_refused_by_name(tmp_path):
    err = broken(tmp_path, GOOD.format(id="x").replace("[laws.law4.eta]", "[eta]"))
    assert err.field == "eta" and "unknown field" in err.message and "laws" in err.message


def test_a_profile_built_in_code_with_a_bad_table_is_a_data_error():
    import tomllib

    profile = validate_profile(tomllib.loads(GOOD.format(id="x")), "test", laws={})  # no law checks it
    bad = profile.model_copy(update={"laws": {"law4": {"eta": {"vram": {"value": 0.5, "source": "t",
                                                                         "basis": "spec"}}}}})
    with pytest.raises(DataError) as err:
        law4_profile(bad)
    assert err.value.field == "laws.law4.eta.vram" and "'x'" in str(err.value)
