"""Every Law 4 prediction anchor validates, and predict() lands in its band — computed, not echoed.

Anchors tagged "finding" are published figures the arithmetic does NOT reproduce; they must keep
landing outside their band (if one starts passing, the code or the data changed: look). Bad case
fields must give a DataError naming the anchor and the field.
"""
from __future__ import annotations

from importlib import resources

import pytest

from lawbench.core.errors import DataError
from lawbench.core.run.evaluate import RunPolicy, evaluate
from lawbench.core.hardware.profiles import load_profiles
from lawbench.core.claims.loading import as_path, load_anchors
from lawbench.core.models import Verdict
from lawbench.plugins.law4.case import parse_case
from lawbench.plugins.law4.law import Law4
from lawbench.plugins.law4.manifest import load_manifest
from lawbench.testing import make_anchor

PROFILES = load_profiles()
LAW = Law4()
# the prediction anchors; measured anchors (cpu.toml, h200.toml) are tested in test_law4_measure.py
FILES = [f for f in LAW.anchor_files() if f.name == "predictions.toml"]
ANCHORS = [la.anchor for la in load_anchors(FILES, laws=["law4"], profiles=PROFILES).anchors]


def _profile_for(anchor):
    """The profile a prediction prices with: the one it binds to, else the generic one."""
    return PROFILES[anchor.profiles[0]] if anchor.profiles else PROFILES["cpu"]


def test_the_law_ships_its_anchor_file_and_registers():
    assert [f.name for f in FILES] == ["predictions.toml"]
    from lawbench.core.laws.registry import build_registry, make_plugin_manager

    laws = build_registry(make_plugin_manager(autoload=False)).laws
    assert isinstance(laws["law4"], Law4)
    assert len(ANCHORS) >= 30


@pytest.mark.parametrize("anchor", ANCHORS, ids=lambda a: a.id)
def test_anchor_is_complete(anchor):
    assert anchor.id.startswith("law4.") and anchor.law == "law4" and anchor.kind == "prediction"
    pv = anchor.provenance
    assert pv.quote and pv.band_rationale, "every number carries the source's words and its band's reason"
    case = parse_case(anchor.case, anchor.id)
    assert case.quantity == anchor.quantity
    assert ("finding" in anchor.tags) == bool(anchor.finding), "tag and finding field go together"


@pytest.mark.parametrize("anchor", ANCHORS, ids=lambda a: a.id)
def test_prediction_lands_in_band_unless_a_finding(anchor):
    pred = LAW.predict(anchor, _profile_for(anchor))
    lo, hi = anchor.band_interval()
    inside = lo <= pred.value <= hi
    if "finding" in anchor.tags:
        assert not inside, f"{anchor.id}: now reproduces its published figure ({pred.value:.6g}); retag it"
    else:
        assert inside, f"{anchor.id}: predicted {pred.value:.6g}, band [{lo:.6g}, {hi:.6g}]"


@pytest.mark.parametrize("anchor", [a for a in ANCHORS if a.runs], ids=lambda a: a.id)
def test_runner_verdicts_match(anchor):
    policy = RunPolicy(profile=PROFILES["cpu"], profiles=PROFILES, on_own_runner=False)
    result = evaluate(anchor, LAW, policy)
    assert result.verdict is (Verdict.FAIL if "finding" in anchor.tags else Verdict.PASS), result.reason
    # an open finding is reported as FAIL but does not fail the build
    assert result.blocking is False, result.reason
    assert bool(result.open_finding) == ("finding" in anchor.tags)


def test_profile_bound_anchors_use_their_profile():
    anchor = next(a for a in ANCHORS if a.id == "law4.eta-kv.qwen3-30b-a3b.d16384")
    data = PROFILES["gtx1060"].model_dump()
    data["tiers"][0]["bandwidth_spec_gbs"]["value"] = 150.0  # not the 192 GB/s the seed priced with
    slower = type(PROFILES["gtx1060"]).model_validate(data)
    lo, hi = anchor.band_interval()
    assert not lo <= LAW.predict(anchor, slower).value <= hi


def test_every_manifest_loads_and_every_referenced_one_exists():
    root = resources.files("lawbench.anchors.manifests")
    ids = {p.name[:-5] for p in root.iterdir() if p.name.endswith(".toml")}
    for mid in ids:
        assert load_manifest(as_path(root / f"{mid}.toml")).id == mid
    used = {a.case["model"].split(":", 1)[1] for a in ANCHORS if a.case.get("model", "").startswith("manifest:")}
    assert used <= ids


# --------------------------------------------------------------------------- bad cases


BASE = {"model": "manifest:qwen3-30b-a3b", "quantity": "kv_bytes_per_pos"}


@pytest.mark.parametrize("case, unit, field, words", [
    ({**BASE, "colour": 1}, "B/pos", "case.colour", "unknown field"),
    ({**BASE, "ctx": -1}, "B/pos", "case.ctx", "greater than or equal"),
    ({**BASE, "placement": {"ngl": -2}}, "B/pos", "case.placement.ngl", "greater than or equal"),
    ({**BASE, "placement": {"ngl": 1, "cpu_layers": 2}}, "B/pos", "case.placement", "not both"),
    ({**BASE, "kv_type": "q3_k"}, "B/pos", "case.kv_type", "Input should be"),
    ({"quantity": "kv_bytes_per_pos"}, "B/pos", "case.model", "needs case.model"),
    ({**BASE, "model": "huggingface:x"}, "B/pos", "case.model", "use gguf:<catalogue id>, path:<file.gguf> or manifest:<id>"),
    ({**BASE, "quantity": "decode_ratio"}, "x", "case.vs", "needs case.vs"),
    ({**BASE, "quantity": "kv_bytes_ratio", "vs": {"kv_tpye": "f16"}}, "x", "case.vs.kv_tpye", "unknown field"),
    ({**BASE, "quantity": "expert_ceiling"}, "x", "case.experts_used", "needs case.experts_used"),
    (BASE, "furlongs", "unit", "does not fit quantity"),
    ({**BASE, "model": "manifest:no-such-model"}, "B/pos", "case.model", "no manifest 'no-such-model'"),
    ({**BASE, "quantity": "active_params", "experts_used": 999}, "B params", "case", "outside 0..128"),
])
def test_bad_case_names_anchor_and_field(case, unit, field, words):
    anchor = make_anchor(id="law4.test.bad", law="law4", quantity=case.get("quantity", "x"),
                         unit=unit, case=case)
    with pytest.raises(DataError) as exc:
        LAW.predict(anchor, PROFILES["cpu"])
    if field is not None:
        assert exc.value.anchor == "law4.test.bad" and exc.value.field == field
    assert words in str(exc.value)


def test_a_profile_without_eta_skips_instead_of_guessing():
    from lawbench.core.errors import NotApplicable

    anchor = make_anchor(id="law4.test.h200", law="law4", quantity="decode_tok_s", unit="tok/s",
                         case={"model": "manifest:qwen2.5-7b", "quantity": "decode_tok_s"})
    with pytest.raises(NotApplicable, match="no η for tier 'vram'"):
        LAW.predict(anchor, PROFILES["h200"])
