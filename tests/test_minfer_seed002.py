"""Seed 002 whole: the plane's arithmetic in each unit the seed writes it in, the q6_K tensor set
read from a real Q4_K_M file's header, and the claims inventory lines of the seed.

The plane is priced from the published geometry (Qwen2.5-7B's config, the anchors say why); its
sum is 1,521,221,632 B, 16,000 B below the printed 1,521,237,632 B. That is an open finding with
an exact band (the printed integer), never a widened one.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from _engine_fixtures import llama, synth_dir  # noqa: F401 (fixtures)
from test_minfer import anchors, run, with_case  # noqa: F401 (fixtures)

from lawbench.core.engines.bench import quantize
from lawbench.core.errors import DataError, NotApplicable
from lawbench.core.claims.inventory import load_inventory
from lawbench.core.models import Verdict
from lawbench.core.store.synthetic import SyntheticSpec, build_synthetic
from lawbench.plugins.minfer.law import Minfer
from lawbench.plugins.minfer.model_census import TOTAL, role

PLANE = 14 * 512 * 3584 + 14 * 3584 * 18944 + 152064 * 3584
SEED = Path(__file__).resolve().parents[1] / "sources" / "seeds" / "002_73bfd6a23252a67a.txt"


# ------------------------------------------------------------------ the plane's arithmetic

def test_the_published_geometry_sums_to_16000_bytes_below_the_printed_figure(anchors):
    assert PLANE == 1_521_221_632
    a = anchors["minfer.r54.plane-bytes"]
    assert int(a.value) == 1_521_237_632 and a.value - PLANE == 16_000
    assert a.band_interval() == (1_521_237_631.5, 1_521_237_632.5)  # the printed integer, exactly
    assert "16,000 B" in a.finding


@pytest.mark.parametrize("anchor_id,predicted,verdict", [
    ("minfer.r54.plane-bytes", PLANE, Verdict.FAIL),  # open finding: 16,000 B
    ("minfer.r54.plane-gb", PLANE / 1e9, Verdict.PASS),  # 1.521 -> "1.52 GB"
    ("minfer.r54.plane-mib", PLANE / 2 ** 20, Verdict.FAIL),  # 1450.75, printed 1450.9: open finding
    ("minfer.r54.plane-share.8gb", 100 * PLANE / 8e9, Verdict.PASS),  # 19.02 % -> "19%"
    ("minfer.r54.plane-share.16gb", 100 * PLANE / 16e9, Verdict.PASS),  # 9.508 % -> "9.5%"
])
def test_the_plane_in_each_unit_the_seed_writes(anchors, anchor_id, predicted, verdict):
    a = anchors[anchor_id]
    r = run(a, on_own_runner=False)
    assert r.predicted == pytest.approx(predicted, rel=1e-12)
    assert r.verdict is verdict, r.reason
    assert bool(a.finding) == (verdict is Verdict.FAIL)  # each FAIL here is an open finding, recorded
    if a.finding:
        assert r.reason.startswith("open finding") and r.open_finding == a.finding


def test_bytes_are_compared_as_the_exact_integer(anchors):
    pred = Minfer().predict(anchors["minfer.r54.plane-bytes"], None)
    assert pred.value == float(PLANE) and pred.value.is_integer() and pred.detail["bytes"] == PLANE


def test_the_15mb_estimate_is_history_corrected_by_the_plane(anchors):
    a = anchors["minfer.r53.plane-estimate-15mb"]
    assert a.status == "corrected" and a.corrected_by == "minfer.r54.plane-gb"
    r = run(a, on_own_runner=False)
    assert r.verdict is Verdict.SKIP and r.reason == "history: corrected by minfer.r54.plane-gb"


@pytest.mark.parametrize("update,field", [({"unit": "KiB"}, "unit"), ({"unit": "%"}, "case.card_gb")])
def test_a_plane_in_an_unknown_unit_or_a_share_without_a_card_is_a_data_error(anchors, update, field):
    a = anchors["minfer.r54.plane-gb"].model_copy(update=update)
    with pytest.raises(DataError) as e:
        Minfer().check_anchor(a)
    assert e.value.field == field


# ------------------------------------------------------------------ the q6_K tensor set, from a real file

def test_roles_are_the_seeds_names():
    assert role("blk.13.attn_v.weight") == "attn_v" and role("blk.0.ffn_down.weight") == "ffn_down"
    assert role("output.weight") == "output.weight" and role("token_embd.weight") == "token_embd.weight"


def _q4_k_m(llama, synth_dir, n_layer: int) -> Path:
    """A real Q4_K_M: a synthetic llama of n_layer layers, F16 written by gguf, requantized by the
    real llama-quantize (its use_more_bits rule decides which layers get q6_K)."""
    spec = SyntheticSpec(id=f"minfer-{n_layer}l", n_layer=n_layer, n_embd=256, n_ff=512, n_head=4, n_head_kv=4,
                         n_vocab=512, weight_type="Q4_K_M")
    return build_synthetic(spec, cache_dir=synth_dir, quantize=lambda s, d, t: quantize(llama, s, d, t, timeout_s=300))


def test_a_28_layer_q4_k_m_has_the_seeds_q6k_set_and_a_32_layer_one_has_not(llama, synth_dir, anchors,
                                                                           monkeypatch, tmp_path):
    monkeypatch.setenv("LAWBENCH_CACHE", str(tmp_path / "cache"))
    a = anchors["minfer.r54.q6k-tensor-set"]
    monkeypatch.setenv("LAWBENCH_MINFER_MODEL", str(_q4_k_m(llama, synth_dir, 28)))
    r = run(a)
    assert r.verdict is Verdict.PASS, r.reason
    assert r.census_counts == {TOTAL: 29, "attn_v": 14, "ffn_down": 14, "output.weight": 1}
    monkeypatch.setenv("LAWBENCH_MINFER_MODEL", str(_q4_k_m(llama, synth_dir, 32)))
    r = run(a)
    assert r.verdict is Verdict.FAIL
    assert "attn_v: counted 16, expected exactly 14" in r.reason and "q6_K tensors: counted 33" in r.reason


def test_without_the_model_file_the_census_says_how_to_name_it(anchors, monkeypatch, tmp_path):
    a = anchors["minfer.r54.q6k-tensor-set"]
    monkeypatch.delenv("LAWBENCH_MINFER_MODEL", raising=False)
    with pytest.raises(NotApplicable, match="set LAWBENCH_MINFER_MODEL"):
        Minfer().census(a, None, None)
    monkeypatch.setenv("LAWBENCH_MINFER_MODEL", str(tmp_path / "absent.gguf"))
    r = run(a)
    assert r.verdict is Verdict.FAIL and "which is not a file here" in r.reason  # its own runner: a FAIL


# ------------------------------------------------------------------ the inventory lines of seed 002

def _seed002():
    inv = load_inventory()
    return {cid: lc.claim for cid, lc in inv.claims.items() if lc.claim.seed == SEED.name}


def test_every_minfer_anchor_cites_seed002_lines_and_every_line_is_minfer(anchors):
    lines = _seed002()
    assert len(lines) >= 40 and {c.law for c in lines.values()} == {"minfer"}
    cited = set()
    for a in anchors.values():
        assert a.claims and set(a.claims) <= set(lines), a.id
        cited |= set(a.claims)
    for cid, c in lines.items():
        if c.same_as:  # a figure the seed repeats: its status is its twin's (checked as that line)
            assert c.same_as in lines and c.unencoded is None and cid not in cited, cid
            continue
        assert (c.unencoded is None) == (cid in cited), cid  # encoded xor explained


def test_explained_lines_say_which_reason_and_why():
    for cid, c in _seed002().items():
        if c.unencoded is not None:
            # not-published: an incident the record does not describe enough to recreate (the co-tenant window)
            assert c.unencoded.reason in ("private-engine", "engine-capability", "not-published"), cid
            assert re.search(r"private|contract|source", c.unencoded.detail), cid
