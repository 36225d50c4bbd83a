"""The reference desktop's measured anchors (anchors/law4/gtx1060.toml, cpu-ddr4.toml).

Each names a model of the register's own catalogue (anchors/models_register.toml, a runner's file under
$LAWBENCH_MODEL_DIR) and quotes the tolerance its band comes from. Off that desktop every one SKIPs
with a reason naming the hardware this machine lacks; under --strict the same reason is a FAIL; on the
desktop itself a model file that is not there is a FAIL, never a skip.
"""
from __future__ import annotations

import dataclasses
import re
from importlib import resources as ir

import pytest

from lawbench.core.run.evaluate import RunPolicy, evaluate
from lawbench.core.hardware.detect import fingerprint_machine, match_reasons
from lawbench.core.hardware.profiles import load_profiles
from lawbench.core.claims.inventory import load_inventory
from lawbench.core.claims.loading import load_anchors
from lawbench.core.models import Verdict
from lawbench.core.store.catalog import RealModel, load_catalog
from lawbench.core.store.real import ModelStore
from lawbench.plugins.law4.law import Law4
from lawbench.plugins.law4.measure import arm_cases

PROFILES = load_profiles()
LAW = Law4()
FILES = {"gtx1060": ir.files("lawbench.anchors.law4") / "gtx1060.toml",
         "cpu-ddr4": ir.files("lawbench.anchors.law4") / "cpu-ddr4.toml"}
# What each profile's fingerprint names, so a skip reason can be checked for the missing hardware.
HARDWARE = {"gtx1060": "GTX 1060", "cpu-ddr4": "i5-7600K"}
ANCHORS = [(pid, la.anchor) for pid, f in FILES.items()
           for la in load_anchors([f], laws=["law4"], profiles=PROFILES).anchors]
IDS = [a.id for _, a in ANCHORS]
MACHINE = fingerprint_machine()


def _policy(profile_id: str, *, strict: bool = False, own: bool = False) -> RunPolicy:
    profile = PROFILES[profile_id]
    kwargs = dict(profile=profile, profiles=PROFILES, on_own_runner=own, strict=strict)
    if "mismatch" in {f.name for f in dataclasses.fields(RunPolicy)}:
        kwargs["mismatch"] = tuple(r for r in match_reasons(MACHINE, profile)[1] if r.startswith("no: "))
    return RunPolicy(**kwargs)


def _on_the_desktop(profile_id: str) -> bool:
    return match_reasons(MACHINE, PROFILES[profile_id])[0]


def test_both_files_hold_measured_anchors_bound_to_their_profile():
    assert sum(1 for pid, _ in ANCHORS if pid == "gtx1060") >= 30
    assert sum(1 for pid, _ in ANCHORS if pid == "cpu-ddr4") >= 3
    for pid, a in ANCHORS:
        assert a.kind in ("measurement", "ratio", "agreement"), a.id
        assert a.profiles == [pid], a.id
        assert a.id.startswith(f"law4.{pid}."), a.id
        assert a.status == "active", a.id
        assert ("finding" in a.tags) == bool(a.finding), a.id


@pytest.mark.parametrize("pid,anchor", ANCHORS, ids=IDS)
def test_each_arm_names_a_model_of_the_register_catalogue(pid, anchor):
    catalog = load_catalog()
    for arm, case in arm_cases(anchor).items():
        kind, _, mid = (case.model or "").partition(":")
        assert kind == "gguf", f"{anchor.id} arm {arm}: {case.model!r} is not a catalogue model"
        entry = catalog.get(mid)
        assert isinstance(entry, RealModel), f"{anchor.id}: no real model {mid!r} in the catalogue"
        assert catalog.files[mid].endswith("models_register.toml"), catalog.files[mid]
        assert entry.source.path == "${LAWBENCH_MODEL_DIR}/" + entry.file
        assert entry.sha256 is None and entry.size is None, "the register publishes no checksum or byte size"
        assert "not published" in entry.description
        assert case.bench is not None, f"{anchor.id} arm {arm}: a measured case needs a bench table"


@pytest.mark.parametrize("pid,anchor", ANCHORS, ids=IDS)
def test_each_band_quotes_its_tolerance_and_each_anchor_cites_a_claim(pid, anchor):
    pv = anchor.provenance
    assert pv.quote and pv.band_rationale and pv.notes
    # The tolerance, quoted: a published '±'/'+/-', a stated interval, or the printed figure's rounding.
    assert re.search(r"±|\+/-|rounding interval|\[\d", pv.band_rationale), pv.band_rationale
    assert "'" in pv.band_rationale, "the band's rationale quotes its source"
    assert "Engine:" in pv.notes and "Model" in pv.notes, "each anchor names its engine build and model"
    inventory = load_inventory()
    assert anchor.claims
    for cid in anchor.claims:
        assert cid in inventory.claims, f"{anchor.id} cites unknown claim {cid}"
        assert inventory.claims[cid].claim.unencoded is None, f"{cid} is marked unencoded"


@pytest.mark.parametrize("pid,anchor", ANCHORS, ids=IDS)
def test_off_the_desktop_each_anchor_skips_naming_the_missing_hardware(pid, anchor):
    if _on_the_desktop(pid):
        pytest.skip(f"this machine is a {pid} runner: its anchors measure here")
    result = evaluate(anchor, LAW, _policy(pid))
    assert result.verdict is Verdict.SKIP, result.reason
    assert pid in result.reason and "does not match" in result.reason, result.reason
    if "mismatch" in {f.name for f in dataclasses.fields(RunPolicy)}:
        assert HARDWARE[pid] in result.reason, result.reason


@pytest.mark.parametrize("pid,anchor", ANCHORS, ids=IDS)
def test_under_strict_the_skip_is_a_failure_with_the_reason(pid, anchor):
    if _on_the_desktop(pid):
        pytest.skip(f"this machine is a {pid} runner")
    result = evaluate(anchor, LAW, _policy(pid, strict=True))
    assert result.verdict is Verdict.FAIL
    assert "skipped under --strict" in result.reason and pid in result.reason, result.reason


class _NoEngine:
    """Resources for a run on the desktop whose model files are missing: the real model store over an
    empty cache; the engine must never be reached, because a missing model stops the anchor first."""

    def __init__(self, cache_dir):
        self._store = ModelStore(cache_dir=cache_dir)

    def model(self, model_id):
        return self._store.path(model_id)

    def store(self):
        return self._store

    def llama(self):
        raise AssertionError("the engine was asked for before the model files were found")


@pytest.mark.parametrize("pid,anchor", ANCHORS, ids=IDS)
def test_on_the_desktop_a_missing_model_file_is_a_failure(pid, anchor, tmp_path, monkeypatch):
    monkeypatch.setenv("LAWBENCH_MODEL_DIR", str(tmp_path / "models"))
    result = evaluate(anchor, LAW, _policy(pid, own=True), resources=_NoEngine(tmp_path / "cache"))
    assert result.verdict is Verdict.FAIL, result.reason
    assert "own runner is a failure" in result.reason and "does not exist on this runner" in result.reason


def test_the_skip_test_can_fail_on_an_anchor_without_a_profile(tmp_path):
    """The same anchor bound to no profile does not skip for missing hardware on a matching-profile
    run: the reason test above is not vacuous."""
    pid, anchor = ANCHORS[0]
    unbound = anchor.model_copy(update={"profiles": []})
    result = evaluate(unbound, LAW, _policy(pid, own=True), resources=_NoEngine(tmp_path / "cache"))
    assert "does not match" not in result.reason
