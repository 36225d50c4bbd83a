"""A claim's life: every superseded, refuted, re-scoped, corrected or missed anchor names the anchor
that encodes what replaced it, and that anchor is the claim standing today (active, not an open
finding). Checked on the shipped data, and through `lawbench check` on data that breaks the rules.

The history itself lives in anchors/law4/history.toml (the old claims, never run, and the
successors written for them) and anchors/inventory/seed000-history.toml (one line per such claim,
quoted verbatim from seed 000 or the register).
"""
from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

import pytest
from conftest import carrier_plugin, run_cli

from lawbench.core.run.evaluate import RunPolicy, evaluate
from lawbench.core.hardware.profiles import load_profiles
from lawbench.core.claims.inventory import load_inventory
from lawbench.core.claims.loading import load_all
from lawbench.core.models import Verdict
from lawbench.core.models.anchor import LINEAGE
from lawbench.core.laws.registry import get_registry


PROFILES = load_profiles()
REGISTRY = get_registry()
ANCHORS = load_all(REGISTRY, profiles=PROFILES.keys())
BY_ID = {la.anchor.id: la for la in ANCHORS.anchors}
HISTORY = [la.anchor for la in ANCHORS.anchors if la.anchor.status in LINEAGE]
HISTORY_FILE = [la.anchor for la in ANCHORS.anchors if Path(la.file).name == "history.toml"]
INVENTORY = load_inventory()
HISTORY_LINES = [lc.claim for lc in INVENTORY.claims.values() if Path(lc.file).name == "seed000-history.toml"]


# --------------------------------------------------------------------------- the shipped lineage


def test_the_history_is_kept():
    """The sources mark about sixteen claims superseded, refuted, re-scoped, corrected or missed;
    the encodable ones are history anchors, not deleted lines."""
    assert len(HISTORY) >= 8
    assert {a.status for a in HISTORY} >= {"superseded", "refuted", "corrected", "missed"}


@pytest.mark.parametrize("anchor", HISTORY, ids=lambda a: a.id)
def test_a_successor_is_the_claim_standing_today(anchor):
    successor = BY_ID.get(anchor.successor)
    assert successor is not None, f"{anchor.id}: {LINEAGE[anchor.status]} names no anchor"
    s = successor.anchor
    assert s.status == "active", f"{anchor.id} -> {s.id}, which is itself {s.status}: point at the claim standing now"
    assert s.finding is None, f"{anchor.id} -> {s.id}, an open finding, not the anchor of the amendment"
    assert s.law == anchor.law


@pytest.mark.parametrize("anchor", HISTORY, ids=lambda a: a.id)
def test_a_chain_ends(anchor):
    seen, current = [anchor.id], anchor
    while current.successor is not None:
        current = BY_ID[current.successor].anchor
        assert current.id not in seen, f"the lineage loops: {' -> '.join(seen + [current.id])}"
        seen.append(current.id)
    assert current.runs


@pytest.mark.parametrize("anchor", HISTORY, ids=lambda a: a.id)
def test_history_is_shown_never_run(anchor):
    policy = RunPolicy(profile=PROFILES["cpu"], profiles=PROFILES, on_own_runner=False)
    result = evaluate(anchor, REGISTRY.law(anchor.law), policy)
    assert result.verdict is Verdict.SKIP
    assert result.reason == f"history: {anchor.status} by {anchor.successor}"


def test_history_toml_holds_history_and_the_successors_written_for_it():
    successors = {a.successor for a in HISTORY}
    assert HISTORY_FILE
    for a in HISTORY_FILE:
        assert a.status in LINEAGE or a.id in successors or _cites_history(a), \
            f"{a.id} is neither history nor a successor of it: it belongs in another anchor file"


def _cites_history(anchor) -> bool:
    """An amendment the seed states beside its successor (same paragraph, same prereg)."""
    return any(INVENTORY.claims[c].file.endswith("seed000-history.toml") for c in anchor.claims)


def test_the_v1_1_prediction_is_scored_a_miss_against_l19s_measurement():
    old = [a for a in HISTORY if a.id.startswith("law4.v1-1.pure-cpu-d16384")]
    assert len(old) == 2
    for a in old:
        assert a.status == "missed" and a.law_version == "v1.1"
        new = BY_ID[a.missed_by].anchor
        assert new.kind == "ratio" and new.profiles == ["gtx1060"]
        assert "−94%" in new.provenance.quote and new.finding is None


@pytest.mark.parametrize("anchor", [a for a in HISTORY_FILE if a.runs and a.kind != "prediction"],
                         ids=lambda a: a.id)
def test_a_successor_off_its_runner_skips_with_the_reason(anchor):
    assert anchor.profiles == ["gtx1060"], "a successor is measured on the desktop that published it"
    policy = RunPolicy(profile=PROFILES["cpu"], profiles=PROFILES, on_own_runner=False)
    result = evaluate(anchor, REGISTRY.law(anchor.law), policy)
    assert result.verdict is Verdict.SKIP and "gtx1060" in result.reason


# --------------------------------------------------------------------------- the inventory lines


def test_every_history_anchor_cites_its_claim_and_every_cited_line_exists():
    for a in HISTORY_FILE:
        assert a.claims, f"{a.id} cites no inventory line"
        for c in a.claims:
            assert c in INVENTORY.claims, f"{a.id} cites {c!r}, which no inventory file holds"


def test_history_lines_name_a_reason_or_an_anchor():
    cited = {c for la in ANCHORS.anchors for c in la.anchor.claims}
    lines = {line.id: line for line in HISTORY_LINES}
    for line in HISTORY_LINES:
        if line.same_as is not None:  # a figure printed again takes its twin's status (inventory.same_as)
            assert line.same_as in lines and lines[line.same_as].same_as is None, line.id
            line = lines[line.same_as]
        assert (line.id in cited) != (line.unencoded is not None), line.id


# --------------------------------------------------------------------------- bad input through the CLI

ANCHORS_TOML = """
[[anchor]]
id = "lineage.now"
law = "lineage"
claim = "The claim standing today."
quantity = "reading"
unit = "1"
kind = "prediction"
value = 4.0
band = { abs = 0.5 }
provenance = { seed = "tests" }

[[anchor]]
id = "lineage.then"
law = "lineage"
claim = "A claim scored a miss."
quantity = "reading"
unit = "1"
kind = "prediction"
value = 3.0
band = { abs = 0.5 }
status = "missed"
missed_by = "lineage.now"
provenance = { seed = "tests" }
"""


def _check(tmp_path: Path, anchors: str):
    pkg = carrier_plugin(tmp_path / "site", "lineage", {"history.toml": anchors})
    env = dict(os.environ, PYTHONPATH=str(pkg.parent), LAWBENCH_CACHE=str(tmp_path / "cache"))
    env.pop("LAWBENCH_DISABLE_PLUGIN_AUTOLOAD", None)
    return run_cli(["check"], env, tmp_path), str(pkg / "anchors" / "history.toml")


def _refused(p, file: str, anchor: str, field: str, words: str) -> None:
    assert p.returncode == 2, p.stdout + p.stderr
    assert "Traceback" not in p.stdout + p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith(f"lawbench: error: {file}: anchor {anchor}: field {field}: "), lines[0]
    assert words in lines[0], lines[0]


def test_the_unchanged_lineage_passes_check(tmp_path):
    """The control: check finds nothing wrong in the lineage file (the shipped data it also reads is
    other tests' business, so a claims-inventory problem there is not this test's verdict)."""
    p, file = _check(tmp_path, ANCHORS_TOML)
    assert "Traceback" not in p.stdout + p.stderr
    assert file not in p.stderr, p.stderr
    if p.returncode != 0:
        assert "claims-inventory problem(s)" in p.stderr.strip().splitlines()[-1], p.stderr
    else:
        assert p.stdout.startswith("ok:")


@pytest.mark.parametrize("status,field", list(LINEAGE.items()))
def test_a_status_without_its_successor(tmp_path, status, field):
    bad = ANCHORS_TOML.replace('status = "missed"\nmissed_by = "lineage.now"', f'status = "{status}"')
    p, file = _check(tmp_path, bad)
    _refused(p, file, "lineage.then", field, f"status '{status}' needs {field}")


@pytest.mark.parametrize("field", ["superseded_by", "corrected_by", "missed_by"])
def test_a_successor_on_an_active_anchor(tmp_path, field):
    bad = ANCHORS_TOML.replace('band = { abs = 0.5 }\nprovenance', f'band = {{ abs = 0.5 }}\n{field} = "lineage.then"\nprovenance', 1)
    p, file = _check(tmp_path, bad)
    _refused(p, file, "lineage.now", field, "this one is 'active'")


def test_a_successor_that_does_not_exist(tmp_path):
    p, file = _check(tmp_path, ANCHORS_TOML.replace('missed_by = "lineage.now"', 'missed_by = "lineage.nowhere"'))
    _refused(p, file, "lineage.then", "missed_by", "refers to anchor 'lineage.nowhere', which does not exist")


def test_the_wrong_successor_field_for_the_status(tmp_path):
    p, file = _check(tmp_path, ANCHORS_TOML.replace('missed_by = "lineage.now"', 'refuted_by = "lineage.now"'))
    _refused(p, file, "lineage.then", "refuted_by", "only an anchor with status 'refuted' names refuted_by")


def test_shipped_files_are_package_data():
    names = {p.name for p in resources.files("lawbench.anchors.law4").iterdir()}
    assert "history.toml" in names
    assert "seed000-history.toml" in {p.name for p in resources.files("lawbench.anchors.inventory").iterdir()}
