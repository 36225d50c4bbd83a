"""Where the bytes land: per-format η on the bytes it was fitted on (L-15), tier capacities less
their reserves, the page cache and the disk tier below RAM, and "does not fit" (the general form)."""
from __future__ import annotations

import os

import pytest

from lawbench.core.errors import DataError
from lawbench.core.hardware.profiles import load_profiles
from lawbench.plugins.law4 import pricing as P
from lawbench.plugins.law4.case import Law4Case
from lawbench.plugins.law4.law import Law4
from lawbench.plugins.law4.manifest import load_manifest
from lawbench.plugins.law4.quantmix import apply_mix
from lawbench.plugins.law4.tiers import resolve_tiers
from lawbench.testing import make_anchor

PROFILES = load_profiles()
PROV = {"seed": "000_4a91008eeaefec79.txt", "quote": "test", "band_rationale": "test"}
GTX, DDR4 = PROFILES["gtx1060"], PROFILES["cpu-ddr4"]


def case(**raw) -> Law4Case:
    return Law4Case.model_validate({"quantity": "decode_tok_s", "model": "manifest:qwen2.5-7b", **raw})


@pytest.fixture(scope="module")
def real_models():
    from lawbench.core.store import ModelStore

    store = ModelStore()  # the real files the PyPI part packages ship
    return {"smollm2": store.path("smollm2-135m-q4_1"), "gemma": store.path("gemma3-270m-q4_k_m")}


def anchor(raw: dict, unit: str = "tok/s"):
    return make_anchor(id="law4.t", law="law4", claim="t", quantity=raw["quantity"], unit=unit,
                       kind="prediction", value=1.0, band={"rel": 0.5}, provenance=PROV, case=raw)


# --------------------------------------------------------------------------- L-15: format and bytes


def test_the_seeds_format_ranking_reproduces_only_on_whole_file_bytes():
    """'prefer Q4_0 over Q4_K_M … 26.87 vs 22.72 tok/s' (seed 000, L-15): Qwen2.5-7B all in VRAM
    at each format's η on the file's bytes; on the active bytes the same η would give 24.3."""
    law = Law4()
    q4km = law.predict(anchor({"quantity": "decode_tok_s", "model": "manifest:qwen2.5-7b",
                               "weight_mix": "Q4_K_M"}), GTX)
    q40 = law.predict(anchor({"quantity": "decode_tok_s", "model": "manifest:qwen2.5-7b",
                              "weight_mix": "Q4_0"}), GTX)
    # the η are printed to three digits: their rounding interval is ±0.0005
    assert 0.5525 * 192 / 4.67712 <= q4km.value <= 0.5535 * 192 / 4.67712
    assert 0.5525 * 192 / 4.67712 <= 22.72 <= 0.5535 * 192 / 4.67712
    assert 0.6185 * 192 / 4.425437184 <= 26.87 <= 0.6195 * 192 / 4.425437184
    assert q40.value == pytest.approx(0.619 * 192 / 4.425437184)
    eta = q4km.detail["pricing"]["eta"]["vram"]
    assert eta == {"eta": 0.553, "format": "Q4_K_M", "bytes": "file"}
    active = P.active_bytes(apply_mix(load_manifest("qwen2.5-7b"), "Q4_K_M"))
    assert 0.553 * 192e9 / active == pytest.approx(24.3, abs=0.05)  # the basis it was not fitted on


def test_a_gguf_names_its_format_and_its_header_bytes_count_on_the_file_basis(real_models):
    """Gemma-3-270M's own general.file_type is Q4_K_M: all in VRAM it prices at L-15's 0.553 on
    its whole file (tensor data and header: exactly the bytes on disk)."""
    path = real_models["gemma"]
    pr = Law4().price(case(model=f"path:{path}"), Law4()._shape(case(model=f"path:{path}"), "t"), GTX)
    assert pr.eta["vram"] == {"eta": 0.553, "format": "Q4_K_M", "bytes": "file"}
    assert sum(pr.weight_bytes.values()) == os.path.getsize(path)


def test_without_a_published_format_eta_the_tier_average_prices_active_bytes(real_models):
    path = real_models["smollm2"]  # Q4_1: no per-format η is published for it
    law = Law4()
    pr = law.price(case(model=f"path:{path}"), law._shape(case(model=f"path:{path}"), "t"), GTX)
    assert pr.eta["vram"] == {"eta": 0.56, "format": None, "bytes": "active"}


def test_weight_format_overrides_the_file():
    tiers = resolve_tiers(case(weight_format="Q2_K"), GTX, moe=False, fmt="Q4_0")
    assert tiers["vram"].eta == 0.340 and tiers["vram"].eta_format == "Q2_K"


# --------------------------------------------------------------------------- reserves and fit


def test_vram_keeps_the_desktop_reserve_and_the_compute_buffer_at_the_ubatch():
    mib = 2 ** 20 / 1e9
    default = resolve_tiers(case(), GTX, moe=False)["vram"]
    assert default.reserve_gb == pytest.approx(1.0 + 512 * 0.5874 * mib)  # llama.cpp's -ub 512
    big = resolve_tiers(case(ubatch=2048), GTX, moe=False)["vram"]
    assert big.reserve_gb == pytest.approx(1.0 + 2048 * 0.5874 * mib)
    assert resolve_tiers(case(), GTX, moe=False)["ram"].reserve_gb == 4.0
    over = resolve_tiers(case(tiers={"ram": {"reserve_gb": 2.5}}), GTX, moe=False)["ram"]
    assert over.reserve_gb == 2.5


def test_the_30b_at_16k_no_longer_fits_a_16_gb_box_as_pure_cpu():
    """Seed 000: 'at 16k the 30B no longer fits a 16 GB box as pure-CPU — the fit-checker knows'
    (the 30B at 2.95 bits: the Q2_K mix). 'fits' is 1/0; fit_margin_gb the tightest tier's room."""
    law = Law4()
    raw = {"model": "manifest:qwen3-30b-a3b", "weight_mix": "Q2_K", "placement": {"ngl": 0}}
    fits = lambda ctx: law.predict(anchor({"quantity": "fits", **raw, "ctx": ctx}, "x"), DDR4).value
    margin = lambda ctx: law.predict(anchor({"quantity": "fit_margin_gb", **raw, "ctx": ctx}, "GB"), DDR4).value
    assert fits(0) == 1.0 and fits(16384) == 0.0
    weights = sum(t.n_bytes for t in apply_mix(load_manifest("qwen3-30b-a3b"), "Q2_K").tensors)
    assert margin(0) == pytest.approx((16e9 - 4e9 - weights) / 1e9)
    assert margin(16384) == pytest.approx((16e9 - 4e9 - weights - 16384 * 98304) / 1e9)


def _tiers(ram_cap: float, disk: bool = True) -> dict[str, P.TierRate]:
    out = {"ram": P.TierRate("ram", "ram", 50.0, 0.5, ram_cap, reserve_gb=1.0)}
    if disk:
        out["disk"] = P.TierRate("disk", "disk", 0.5, 0.8)
    return out


def test_ram_that_cannot_hold_the_weights_streams_the_rest_from_disk():
    shape = apply_mix(load_manifest("qwen2.5-7b"), "Q4_0")  # dense: every byte read every token
    held = sum(t.n_bytes for t in shape.tensors)
    read = P.active_bytes(shape)
    cap = (held + 1e9) / 2 / 1e9 + 1.0  # usable = held / 2 + 0.5 GB after the 1 GB reserve
    pr = P.price_decode(shape, _tiers(cap), P.Placement(None, "ram"))
    cache = cap * 1e9 - 1e9
    miss = 1 - cache / held
    assert pr.fits["ram"] is False and not pr.does_not_fit
    assert pr.page_cache_bytes["ram"] == pytest.approx(cache)
    assert pr.weight_bytes["disk"] == pytest.approx(read * miss)
    assert pr.seconds["weights@disk"] == pytest.approx(read * miss / (0.8 * 0.5e9))
    assert pr.seconds["weights@ram"] == pytest.approx(read * (1 - miss) / (0.5 * 50e9))
    assert pr.fit_margin() == pytest.approx(cache - held)


def test_kv_is_held_first_and_kv_past_ram_does_not_fit():
    shape = apply_mix(load_manifest("qwen2.5-7b"), "Q4_0")
    kv = lambda ctx: ctx * P.kv_bytes_per_pos(shape)
    ok = P.price_decode(shape, _tiers(20.0), P.Placement(None, "ram"), ctx=16384, eta_kv=0.7)
    assert ok.fits["ram"] is True and ok.resident_bytes["ram"] == pytest.approx(
        sum(t.n_bytes for t in shape.tensors) + kv(16384))
    full = P.price_decode(shape, _tiers(1.0 + kv(100_000) / 1e9 * 0.9), P.Placement(None, "ram"),
                          ctx=100_000, eta_kv=0.7)
    assert full.does_not_fit and "KV cannot be paged" in full.does_not_fit[0]


def test_without_a_disk_tier_ram_overflow_does_not_fit():
    shape = apply_mix(load_manifest("qwen2.5-7b"), "Q4_0")
    pr = P.price_decode(shape, _tiers(3.0, disk=False), P.Placement(None, "ram"))
    assert pr.does_not_fit and "no disk tier" in pr.does_not_fit[0]


def test_a_decode_price_of_a_placement_that_does_not_fit_names_case_placement():
    raw = {"quantity": "decode_tok_s", "model": "manifest:qwen2.5-7b", "weight_mix": "Q8_0"}  # 8 GB
    with pytest.raises(DataError) as err:
        Law4().predict(anchor(raw), GTX)
    assert err.value.field == "case.placement" and "does not fit" in err.value.message
    assert Law4().predict(anchor({**raw, "quantity": "fits"}, "x"), GTX).value == 0.0


# --------------------------------------------------------------------------- lawbench predict


def _predict(capsys, *argv: str, as_json: bool = True):
    import json

    from lawbench.core.commands.main import main

    code = main(["predict", *argv, *(["--json"] if as_json else [])])
    out = capsys.readouterr().out
    return code, (json.loads(out) if as_json and code == 0 else out)


def test_predict_prices_a_manifest_at_a_stated_mix_and_shows_where_bytes_land(capsys):
    code, out = _predict(capsys, "manifest:qwen2.5-7b", "--profile", "gtx1060", "--weight-mix", "Q4_K_M",
                         "--ctx", "8192")
    assert code == 0 and out["format"] == "Q4_K_M" and out["law_version"] == "general"
    assert out["file_bytes"] == sum(
        t.n_bytes for t in apply_mix(load_manifest("qwen2.5-7b"), "Q4_K_M").tensors)
    rows = {r["placement"]: r for r in out["placements"]}
    gpu = rows["all on GPU"]  # 4.37 GB of weights + 8192 × 57,344 B of KV past 6 − 1.0 − 0.315 GB
    assert gpu["does_not_fit"] and gpu["tok_s"] is None
    assert gpu["usable_bytes"]["vram"] == pytest.approx(6e9 - 1e9 - 512 * 0.5874 * 2 ** 20)
    assert rows["pure CPU (-ngl 0)"]["fits"]["ram"] is True and rows["pure CPU (-ngl 0)"]["tok_s"] > 0
    code, text = _predict(capsys, "manifest:qwen2.5-7b", "--profile", "gtx1060", "--weight-mix", "Q4_K_M",
                          "--ctx", "8192", as_json=False)
    assert code == 0 and "does not fit" in text and "reserved" in text


def test_predict_refuses_an_unknown_mix_in_one_line(capsys):
    from lawbench.core.commands.main import main

    assert main(["predict", "manifest:qwen2.5-7b", "--profile", "gtx1060", "--weight-mix", "Q4_K_X"]) == 2
    assert "--weight-mix" in capsys.readouterr().err
