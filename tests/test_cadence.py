"""Cadence: which anchors a run selects by how often they run (quick / nightly / weekly / full)."""
import json

import pytest
from conftest import run_cli

from lawbench.core.models.anchor import Anchor


def _anchor(kind: str, cadence=None) -> Anchor:
    extra = {"value": 1.0, "band": {"rel": 0.1}} if kind != "census" else {"census": {"exact": {"x": 1}}}
    return Anchor(id="t.a", law="t", claim="c", quantity="q", unit="x", kind=kind, cadence=cadence,
                  provenance={"seed": "s"}, **extra)


@pytest.mark.parametrize("kind,cadence,quick,nightly,weekly", [
    ("prediction", None, True, True, False),   # arithmetic: quick by default
    ("census", None, True, True, False),       # one short engine visit: quick by default
    ("measurement", None, False, True, False),  # a measurement is nightly unless it says otherwise
    ("measurement", "quick", True, True, False),
    ("agreement", "weekly", False, False, True),
])
def test_cadence_selection_rule(kind, cadence, quick, nightly, weekly):
    a = _anchor(kind, cadence)
    assert (a.in_cadence("quick"), a.in_cadence("nightly"), a.in_cadence("weekly")) == (quick, nightly, weekly)
    assert a.in_cadence("full")


def test_an_unknown_cadence_is_refused_in_the_anchor_file():
    with pytest.raises(ValueError, match="cadence"):
        _anchor("measurement", "hourly")


def test_quick_cadence_leaves_the_measurement_and_says_so(cli_env, tmp_path):
    # The dummy's measurement anchor is nightly by default: a quick run of the profile leaves it
    # and names how many it left; -k / --law name anchors, so they run whatever their cadence.
    p = run_cli(["run", "--profile", "cpu", "--law", "dummy", "--cadence", "quick", "--out", "out",
                 "--no-history"], cli_env, tmp_path)
    record = json.loads((tmp_path / "out" / "run.json").read_text(encoding="utf-8"))
    ids = {r["anchor_id"] for r in record["results"] if not r["retired"]}
    assert ids == {"dummy.sum-pass", "dummy.sum-fail"}, p.stdout + p.stderr
    assert record["cadence"] == "quick"
    assert "cadence quick leaves 1 anchor(s)" in p.stdout
    p = run_cli(["run", "--profile", "cpu", "--law", "dummy", "--cadence", "weekly", "--out", "out2",
                 "--no-history"], cli_env, tmp_path)
    assert p.returncode == 2 and "no anchors selected" in p.stderr  # nothing of the dummy is weekly
    p = run_cli(["run", "--profile", "cpu", "--cadence", "hourly"], cli_env, tmp_path)
    assert p.returncode == 2 and "invalid choice" in p.stderr


def test_the_readme_lists_every_open_finding_of_the_quick_run_with_its_claim():
    # The quick run's promise is "exit 0, red only where a finding is open": the README names each
    # such finding with the claim it contradicts, so a newcomer can tell a finding from a failure.
    import re
    from pathlib import Path

    from lawbench.core.hardware.profiles import load_profiles
    from lawbench.core.claims.loading import load_all
    from lawbench.core.laws.registry import get_registry

    anchors = [la.anchor for la in load_all(get_registry(), profiles=load_profiles().keys()).anchors]
    # What a quick run of the generic profile runs: predictions everywhere, the rest bound to cpu.
    expected = {a.id: a for a in anchors if a.finding and a.runs and a.in_cadence("quick")
                and (a.kind == "prediction" or not a.profiles or "cpu" in a.profiles)}
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    table = readme.split("| open finding in the quick run |", 1)[1].split("\n\n", 1)[0]
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `([^`]+)` \| (.+?) \|", table, re.M)}
    assert sorted(rows) == sorted(expected)
    for anchor_id, claim in rows.items():
        assert claim == expected[anchor_id].claim, anchor_id  # the claim as the anchor states it
