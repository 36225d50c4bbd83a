"""A finding is a claim with evidence `lawbench check` verifies (issue 30): a prediction's finding
holds only while the law's number, computed in check, lies outside the band; a measured anchor's
names a committed run record under results/ whose verdict for that anchor is a measured FAIL.

Through the real `lawbench check`, on a real plugin distribution (a data-only carrier of anchors
that the installed dummy law prices), with a run record a real `lawbench run` wrote. Each refusal
is one line naming the file, the anchor and the field."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import carrier_plugin, run_cli

ANCHORS = """
[[anchor]]
id = "evid.reading"
law = "dummy"
claim = "A reading of ten."
quantity = "reading"
unit = "1"
kind = "measurement"
value = 10.0
band = { rel = 0.10 }
noise = "ratio"
case = { samples = [20.0, 20.2, 19.8, 20.1, 19.9, 20.0] }
profiles = ["cpu"]
budget = { min_samples = 3, max_samples = 6, batch = 3, timeout_s = 10 }
provenance = { seed = "tests", notes = "replayed readings, twice the published value" }
#MEASURED#

[[anchor]]
id = "evid.sum"
law = "dummy"
claim = "Two and two make five."
quantity = "sum"
unit = "1"
kind = "prediction"
value = 5.0
band = { abs = 0.01 }
case = { terms = [2, 2] }
provenance = { seed = "tests" }
#PREDICTION#
"""
FINDING = 'finding = "the law does not reproduce the published number"'
EVIDENCE = 'finding_evidence = "results/evid/run.json"'


def _check(tmp_path: Path, env: dict, measured: str = "", prediction: str = "", anchors: str = ANCHORS):
    text = anchors.replace("#MEASURED#", measured).replace("#PREDICTION#", prediction)
    site = tmp_path / "site"
    pkg = carrier_plugin(site, "evid", {"evid.toml": text})
    env = dict(env, PYTHONPATH=f"{site}:{env['PYTHONPATH']}")
    p = run_cli(["check"], env, tmp_path)
    assert "Traceback" not in p.stdout + p.stderr, p.stderr
    return p, str(pkg / "anchors" / "evid.toml"), env


def _refused(p, file: str, anchor: str, field: str, words: str) -> str:
    assert p.returncode == 2, p.stdout + p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith(f"lawbench: error: {file}: anchor {anchor}: field {field}: ")]
    assert len(lines) == 1 and words in lines[0], p.stderr
    return lines[0]


@pytest.fixture
def evidence(tmp_path, cli_env) -> dict:
    """results/evid/run.json, written by a real `lawbench run` of the carrier's anchors (no finding yet)."""
    p, _, env = _check(tmp_path, cli_env)
    assert p.returncode == 0, p.stderr  # the control: no finding, nothing to show
    run = run_cli(["run", "--profile", "cpu", "-k", "evid", "--no-history", "--out", "results/evid"], env, tmp_path)
    record = json.loads((tmp_path / "results" / "evid" / "run.json").read_text(encoding="utf-8"))
    assert {r["anchor_id"]: r["verdict"] for r in record["results"]} == {"evid.reading": "FAIL", "evid.sum": "FAIL"}, \
        run.stdout[-2000:]
    return record


def test_findings_with_their_evidence_pass_check(tmp_path, cli_env, evidence):
    p, _, _ = _check(tmp_path, cli_env, f"{FINDING}\n{EVIDENCE}", FINDING)
    assert p.returncode == 0 and p.stdout.startswith("ok:"), p.stderr


def test_a_measured_finding_without_evidence_is_refused(tmp_path, cli_env, evidence):
    p, file, _ = _check(tmp_path, cli_env, FINDING, FINDING)
    _refused(p, file, "evid.reading", "finding_evidence", "names the committed run record that shows its FAIL")


@pytest.mark.parametrize("given,words", [
    ('"results/evid/none.json"', "is not a committed file of this repository"),
    ('"../results/evid/run.json"', "is not a run record under results/"),
    ('"docs/run.json"', "is not a run record under results/"),
])
def test_evidence_that_is_no_committed_record_under_results_is_refused(tmp_path, cli_env, evidence, given, words):
    p, file, _ = _check(tmp_path, cli_env, f"{FINDING}\nfinding_evidence = {given}")
    _refused(p, file, "evid.reading", "finding_evidence", words)


def test_renaming_the_anchor_while_adding_the_finding_leaves_it_without_evidence(tmp_path, cli_env, evidence):
    """The record holds evid.reading's FAIL; the same anchor renamed has no result there."""
    renamed = ANCHORS.replace('id = "evid.reading"', 'id = "evid.reading-v2"')
    p, file, _ = _check(tmp_path, cli_env, f"{FINDING}\n{EVIDENCE}", anchors=renamed)
    _refused(p, file, "evid.reading-v2", "finding_evidence", "has no result for this anchor")


def test_a_record_whose_verdict_for_the_anchor_is_not_a_fail_is_no_evidence(tmp_path, cli_env, evidence):
    """The same run's record, with the anchor's result a PASS (a real record of a passing anchor:
    the readings replayed at the published value)."""
    passing = ANCHORS.replace("samples = [20.0, 20.2, 19.8, 20.1, 19.9, 20.0]", "samples = [10.0, 10.0, 10.0, 10.0]")
    _, _, env = _check(tmp_path, cli_env, anchors=passing)
    run_cli(["run", "--profile", "cpu", "-k", "evid.reading", "--no-history", "--out", "results/evid-pass"], env, tmp_path)
    record = json.loads((tmp_path / "results" / "evid-pass" / "run.json").read_text(encoding="utf-8"))
    assert [r["verdict"] for r in record["results"]] == ["PASS"]
    p, file, _ = _check(tmp_path, cli_env, f'{FINDING}\nfinding_evidence = "results/evid-pass/run.json"')
    _refused(p, file, "evid.reading", "finding_evidence", "shows PASS for this anchor, not a measured FAIL")


def test_an_edited_evidence_record_is_refused(tmp_path, cli_env, evidence):
    """A record whose counts no longer follow from its results (edited by hand) is not evidence."""
    path = tmp_path / "results" / "evid" / "run.json"
    edited = dict(evidence, counts={**evidence["counts"], "FAIL": 7})
    path.write_text(json.dumps(edited), encoding="utf-8")
    p, file, _ = _check(tmp_path, cli_env, f"{FINDING}\n{EVIDENCE}")
    _refused(p, file, "evid.reading", "finding_evidence", "is not a valid run record")


def test_a_prediction_finding_holds_only_while_the_laws_number_lies_outside_the_band(tmp_path, cli_env):
    """2 + 3 = 5 lies in 5 ± 0.01: check computes it and says the finding has closed."""
    closed = ANCHORS.replace("case = { terms = [2, 2] }", "case = { terms = [2, 3] }")
    p, file, _ = _check(tmp_path, cli_env, prediction=FINDING, anchors=closed)
    _refused(p, file, "evid.sum", "finding", "the law predicts 5 1, inside the band: the finding has closed")
    p, _, _ = _check(tmp_path, cli_env, prediction=FINDING)  # 2 + 2 = 4: outside, the finding holds
    assert p.returncode == 0, p.stderr


def test_a_prediction_names_no_evidence_file(tmp_path, cli_env):
    p, file, _ = _check(tmp_path, cli_env, prediction=f"{FINDING}\n{EVIDENCE}")
    assert p.returncode == 2 and "finding_evidence" in p.stderr and "check` computes" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr


# --------------------------------------------------------------------------- the repository's own findings

# Measured findings committed before evidence was asked for, with no committed record of their FAIL
# (anchors/findings_without_evidence.toml, each with why). This list only shrinks.
PENDING_WHEN_EVIDENCE_BECAME_REQUIRED = {
    "law4.cpu.v11.q2_k-per-byte-vs-q4_k_m.syn-400m",
    "law4.gtx1060.ratio.30b-split.pp2048-ub2048.nkvo-over-kv-vram.v03",
    "law4.gtx1060.ratio.30b-split.tg32-d16384.nkvo-over-kv-vram",
}


def test_every_shipped_finding_has_its_evidence_or_is_a_listed_old_one():
    from lawbench.core.run.findings import finding_problems, load_pending
    from lawbench.core.claims.loading import load_all
    from lawbench.core.hardware.profiles import plugin_profiles
    from lawbench.core.laws.registry import get_registry

    reg = get_registry()
    profiles = plugin_profiles(reg)
    anchors = load_all(reg, profiles=profiles.keys())
    pending = load_pending()
    assert set(pending) <= PENDING_WHEN_EVIDENCE_BECAME_REQUIRED, "a new finding brings its evidence"
    assert all(p.why.strip() for p in pending.values())
    assert finding_problems(anchors, reg, profiles) == []
    measured = [la.anchor for la in anchors.anchors if la.anchor.finding and la.anchor.runs
                and la.anchor.kind != "prediction"]
    assert {a.id for a in measured if not a.finding_evidence} == set(pending)
    # and without the list, exactly those are refused: the list hides nothing else
    refused = finding_problems(anchors, reg, profiles, pending={})
    assert sorted(line.split(": anchor ")[1].split(":")[0] for line in refused) == sorted(pending)
