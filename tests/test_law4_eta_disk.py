"""η_disk read back from a decode and the residency each visit records (plugins/law4/eta_disk.py).

The inputs exist only on the gtx1060 runner (a 117B file larger than RAM, a SATA drive), so the
stand-in here is planted visits — speeds and mincore residencies as measure.py records them —
driven through core's real verdict rule on the gtx1060 profile: the read-back inverts the law's own
price, a planted speed the disk could not give turns it red, and a visit that streamed nothing is an
error, never a number. The runner-bound anchor SKIPs here and FAILs under --strict.
"""
from __future__ import annotations

import itertools

import pytest

from lawbench.core.errors import DataError, EngineError
from lawbench.core.hardware.profiles import load_profiles
from lawbench.core.models import Verdict
from lawbench.core.stats.protocol import ArmSampler, Visit
from lawbench.plugins.law4 import measure
from lawbench.plugins.law4.case import parse_case
from lawbench.plugins.law4.eta_disk import disk_terms
from lawbench.plugins.law4.law import Law4
from lawbench.plugins.law4.models import Models
from lawbench.testing import evaluate_anchor, law_anchors, make_anchor

PROFILES = load_profiles()
GTX = PROFILES["gtx1060"]
ANCHOR = "law4.gtx1060.eta-disk.laguna-117b-sata"
# A 30B MoE at Q4_K_M (~18 GB, larger than the box's 16 GB): its RAM read streams past the cache.
CASE = {"quantity": "eta_disk_implied", "model": "manifest:qwen3-30b-a3b", "weight_mix": "Q4_K_M",
        "placement": {"ngl": 0}, "bench": {"n_gen": 64, "reps": 1, "prime": "keep"}}


def eta_anchor(**fields):
    data = dict(id="law4.test.eta-disk", law="law4", claim="test", quantity="eta_disk_implied", unit="fraction",
                kind="measurement", value=None, band={"lo": 0.88, "hi": 1.0}, profiles=["gtx1060"], case=CASE,
                noise="stream", budget={"min_samples": 4, "max_samples": 4, "batch": 4, "timeout_s": 60},
                provenance={"seed": "000_4a91008eeaefec79.txt", "quote": "0.88–1.0 (disk)", "band_rationale": "test"})
    data.update(fields)
    return make_anchor(**data)


def _terms():
    anchor = eta_anchor()
    return disk_terms(Law4(), anchor, parse_case(anchor.case, anchor.id), GTX, Models(None, fetch=False))


def tok_s_for(eta: float, resident: float) -> float:
    """The decode speed at which the disk, reading the missed bytes at ``eta``, fills the token."""
    t = _terms()
    t_disk = t.ram_bytes * (1 - resident) / (t.disk_gbs * 1e9 * eta)
    return 1.0 / (t_disk + t.other_s + t.ram_bytes * resident / t.ram_rate)


def test_the_read_back_inverts_the_laws_own_price():
    t = _terms()
    assert t.detail["disk_bandwidth_gbs"] == 0.56 and t.detail["modelled_streamed_bytes"] > 0
    eta, figures = t.eta(tok_s_for(0.94, 0.5), 0.5)
    assert eta == pytest.approx(0.94)
    assert figures["disk_bytes_per_token"] == pytest.approx(t.ram_bytes / 2)
    with pytest.raises(EngineError, match="not streaming past RAM"):
        t.eta(1.0, 1.0)  # the whole file cached: nothing missed, nothing to read back
    with pytest.raises(EngineError, match="cannot say what the disk did"):
        t.eta(500.0, 0.5)  # faster than the non-disk terms allow


def _planted(monkeypatch, speeds, residency=0.5):
    """measure.sampler replaced by an ArmSampler over planted visits (the first is the warm-up)."""
    feed = itertools.cycle(speeds)

    def visit(reps):
        state = {"fraction": residency}
        return Visit(values=[next(feed)], raw={"prime": {"mode": "keep", "resident_after": state,
                                                        "resident_after_visit": state}})
    monkeypatch.setattr(measure, "sampler", lambda anchor, profile, resources: ArmSampler({"main": visit}))


def test_eta_disk_through_core_passes_and_a_speed_the_disk_cannot_give_is_red(monkeypatch):
    tok = tok_s_for(0.94, 0.5)
    _planted(monkeypatch, [tok * f for f in (1.0, 0.99, 1.01, 1.0, 0.995)])
    ok = evaluate_anchor(eta_anchor(), Law4(), profile=GTX)
    assert ok.verdict is Verdict.PASS, ok.reason
    assert ok.measured == pytest.approx(0.94, rel=0.02)
    assert all(s.raw["eta_disk"]["miss"] == 0.5 for s in ok.measurement.samples)
    assert ok.measurement.protocol["priced_terms"]["disk_tier"] == "disk"

    _planted(monkeypatch, [tok * 1.3 * f for f in (1.0, 0.99, 1.01, 1.0, 0.995)])  # 30 % too fast for the disk
    red = evaluate_anchor(eta_anchor(), Law4(), profile=GTX)
    assert red.verdict is Verdict.FAIL, red.reason
    assert red.measured > 1.0

    _planted(monkeypatch, [tok], residency=1.0)  # the file sat in the page cache: nothing streamed
    void = evaluate_anchor(eta_anchor(), Law4(), profile=GTX)
    assert void.verdict is Verdict.ERROR and "cannot say what the disk did" in void.reason


@pytest.mark.parametrize("fields, field", [
    (dict(case={**CASE, "bench": {"n_gen": 64, "reps": 1}}), "case.bench.prime"),  # no residency recorded
    (dict(kind="agreement", band={"rel": 0.25}), "kind"),
])
def test_a_bad_eta_disk_case_is_refused_naming_its_field(fields, field):
    with pytest.raises(DataError) as exc:
        Law4().check_anchor(eta_anchor(**fields))
    assert exc.value.field == field, str(exc.value)


def test_the_gtx1060_eta_disk_anchor_skips_off_its_box_and_fails_strict():
    anchor = law_anchors(Law4())[ANCHOR]
    assert (anchor.band.lo, anchor.band.hi) == (0.88, 1.0)  # the seed's '0.88–1.0 (disk)'
    r = evaluate_anchor(anchor, Law4(), profile=GTX, on_own_runner=False)
    assert r.verdict is Verdict.SKIP and "gtx1060" in r.reason
    strict = evaluate_anchor(anchor, Law4(), profile=GTX, on_own_runner=False, strict=True)
    assert strict.verdict is Verdict.FAIL and strict.strict_skip
