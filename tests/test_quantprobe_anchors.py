"""quantprobe's own published measurements on the reference desktop (anchors/law4/quantprobe.toml).

Each anchor re-measures one number of quantprobe's regression suite (MEASURED_ANCHORS, VRAM_GAPS), its
plan.py docstring or its README, read from github.com/FedericoTs/quantprobe at the public record's
pinned commit (anchors/public_record.toml caches the lines quoted; `lawbench record verify` re-reads
them from a clone). Off the desktop every anchor SKIPs naming the GTX 1060 this machine lacks; each
quote is in a cached excerpt of its file; `lawbench check` accepts the whole set.
"""
from __future__ import annotations

import dataclasses
import re
from importlib import resources as ir
from pathlib import Path

import pytest
from conftest import run_cli

from lawbench.core.run.evaluate import RunPolicy, evaluate
from lawbench.core.hardware.detect import fingerprint_machine, match_reasons
from lawbench.core.hardware.profiles import load_profiles
from lawbench.core.claims.inventory import load_inventory
from lawbench.core.claims.loading import load_anchors
from lawbench.core.claims.public_record import load_record
from lawbench.core.models import Verdict
from lawbench.core.store.catalog import RealModel, load_catalog
from lawbench.plugins.law4.law import Law4
from lawbench.plugins.law4.measure import arm_cases

REPO = "FedericoTs/quantprobe"
SMOKE = f"{REPO}:tests/smoke.py"
RECORD = load_record()
PROFILES = load_profiles()
ANCHORS = [la.anchor for la in load_anchors([ir.files("lawbench.anchors.law4") / "quantprobe.toml"],
                                            laws=["law4"], profiles=PROFILES).anchors]
INVENTORY = load_inventory()
LINES = [lc.claim for lc in INVENTORY.claims.values() if lc.file.endswith("quantprobe.toml")]
MACHINE = fingerprint_machine()


def _words(text: str) -> str:
    return " ".join(text.split())


def _policy(*, strict: bool = False) -> RunPolicy:
    profile = PROFILES["gtx1060"]
    kwargs = dict(profile=profile, profiles=PROFILES, on_own_runner=False, strict=strict)
    if "mismatch" in {f.name for f in dataclasses.fields(RunPolicy)}:
        kwargs["mismatch"] = tuple(r for r in match_reasons(MACHINE, profile)[1] if r.startswith("no: "))
    return RunPolicy(**kwargs)


def test_every_measured_row_of_quantprobe_has_a_line():
    """MEASURED_ANCHORS has 4 rows and VRAM_GAPS 7 (smoke.py at v1.36.0); plan.py and the README add
    3 measured figures. A row dropped from the inventory fails here."""
    smoke = "\n".join(e.text for e in RECORD.excerpts(REPO, "tests/smoke.py"))
    measured = re.search(r"^MEASURED_ANCHORS = \[(.*?)^\]", smoke, re.S | re.M).group(1)
    gaps = re.search(r"^VRAM_GAPS = \[(.*?)^\]", smoke, re.S | re.M).group(1)
    rows = [m.group(1) for m in re.finditer(r'^\s*\("([^"]+)",', measured + gaps, re.M)]
    assert len(rows) == 11
    quoted = " ".join(c.quote for c in LINES)
    for label in rows:
        assert f'("{label}",' in quoted, f"no inventory line quotes the row {label!r}"
    assert sum(c.document != SMOKE for c in LINES) == 3


@pytest.mark.parametrize("line", LINES, ids=lambda c: c.id)
def test_each_line_quotes_its_file_of_the_public_record(line):
    assert line.law == "law4" and line.document and line.document.startswith(f"{REPO}:")
    path = line.document.partition(":")[2]
    rec_file = RECORD.file(REPO, path)
    assert rec_file is not None and len(rec_file.sha256) == 64, f"{line.id}: {path} is cached with its bytes' sha256"
    assert RECORD.missing_piece(REPO, path, line.quote) is None, f"{line.id}: not verbatim in {line.document}"


def test_no_copy_of_quantprobe_is_kept_in_the_repository():
    """Issue 21: lawbench cites quantprobe's files at a pinned commit and runs the pinned wheel
    (tests/test_quantprobe_crosscheck.py); it keeps no copy of either."""
    root = Path(__file__).resolve().parents[1]
    assert not (root / "sources" / "quantprobe").exists()
    assert not list((root / "sources").rglob("*.py")), "sources/ holds the user's documents, no code"


@pytest.mark.parametrize("anchor", ANCHORS, ids=lambda a: a.id)
def test_each_anchor_is_a_measurement_on_the_desktop_citing_its_lines(anchor):
    assert anchor.kind == "measurement" and anchor.profiles == ["gtx1060"] and anchor.status == "active"
    assert anchor.id.startswith("law4.gtx1060.qp.")
    ours = {c.id for c in LINES}
    assert set(anchor.claims) & ours, anchor.claims  # its quantprobe lines (a seed line may join them)
    pv = anchor.provenance
    # provenance.document names the public record's file, which the cache lists with its sha256
    repo, _, path = (pv.document or "").partition(":")
    assert repo == REPO and RECORD.file(repo, path) is not None, pv.document
    assert re.search(r"±|\+/-", pv.band_rationale) and "'" in pv.band_rationale, pv.band_rationale
    assert "Engine:" in pv.notes and "Model" in pv.notes
    # Each number is the published one: it appears in every line the anchor cites.
    for cid in anchor.claims:
        assert f"{anchor.value:g}" in INVENTORY.claims[cid].claim.quote, (cid, anchor.value)


def test_each_band_is_the_reproduction_figure_of_its_regime():
    """docs/bands.md: quantprobe's row tolerance (0.30, 0.60) is its planner's, not a re-measurement's
    (issue 23); a decode figure re-measured on this box carries C-02's drift, one streamed from SATA
    the rep spread of the register's accepted disk-tier run (C-21)."""
    by_id = {a.id: a for a in ANCHORS}
    for aid in ("law4.gtx1060.qp.meas.30b-hybrid.smoke-19.30", "law4.gtx1060.qp.meas.30b-experts-cpu.smoke-18.35",
                "law4.gtx1060.qp.meas.30b-hybrid.plan-19.30"):
        a = by_id[aid]
        assert (a.band.rel, a.band.abs, a.band_basis) == (0.14, None, "reproduction"), aid
        assert "Between-session drift is 10-13% on decode" in a.provenance.band_rationale
    for aid in ("law4.gtx1060.qp.meas.glm-air-110b-sata.smoke-0.19", "law4.gtx1060.qp.meas.laguna-118b-sata.smoke-0.38",
                "law4.gtx1060.qp.meas.laguna-117b-sata.readme-0.476"):
        a = by_id[aid]
        # issue 34: the accepted run's 1.172x rep spread (C-21), not the thrown-away 2026-07-31 log
        assert (a.band.rel, a.noise, a.band_basis) == (0.172, "stream", "reproduction"), aid
        assert "rep spread 1.172x" in a.provenance.band_rationale and "thrown away" in a.provenance.band_rationale
        assert "planner" not in a.claim or "±60 %" in a.claim  # the claim stays as published
    vram = [a for a in ANCHORS if ".vram." in a.id]
    assert len(vram) == 7
    for a in vram:
        assert (a.band.rel, a.band.abs) == (0.14, None), a.id  # C-02's between-session drift + 1 %
        assert "Between-session drift is 10-13% on decode" in a.provenance.band_rationale


@pytest.mark.parametrize("anchor", ANCHORS, ids=lambda a: a.id)
def test_each_arm_names_a_runner_file_of_the_catalogue(anchor):
    catalog = load_catalog()
    for arm, case in arm_cases(anchor).items():
        kind, _, mid = (case.model or "").partition(":")
        assert kind == "gguf", f"{anchor.id} arm {arm}: {case.model!r}"
        entry = catalog.get(mid)
        assert isinstance(entry, RealModel), f"{anchor.id}: no real model {mid!r}"
        assert entry.source.path == "${LAWBENCH_MODEL_DIR}/" + entry.file
        assert entry.sha256 is None and entry.size is None, "no checksum or byte size is published"
        assert "not published" in entry.description
        assert case.bench is not None


@pytest.mark.parametrize("anchor", ANCHORS, ids=lambda a: a.id)
def test_off_the_desktop_each_anchor_skips_naming_the_gtx_1060(anchor):
    if match_reasons(MACHINE, PROFILES["gtx1060"])[0]:
        pytest.skip("this machine is a gtx1060 runner: its anchors measure here")
    result = evaluate(anchor, Law4(), _policy())
    assert result.verdict is Verdict.SKIP, result.reason
    assert "gtx1060" in result.reason and "does not match" in result.reason, result.reason
    assert "GTX 1060" in result.reason, result.reason
    strict = evaluate(anchor, Law4(), _policy(strict=True))
    assert strict.verdict is Verdict.FAIL and "skipped under --strict" in strict.reason, strict.reason


def test_lawbench_check_accepts_the_anchors_and_their_lines(tmp_path):
    done = run_cli(["check"], env=None, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert " 0 missing" in done.stdout, done.stdout
