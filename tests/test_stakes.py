"""Stakes: locked before the run, refused when edited, scored after it; and REGISTER.md is what the
data gives (CI fails when it is stale)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import run_cli

from lawbench.core.errors import DataError
from lawbench.core.models import Band
from lawbench.core.claims.stakes import StakedPrediction, load_stakes, lock_new, score_one, score_run, stake_files

ROOT = Path(__file__).resolve().parents[1]
STAKE = """[stake]
id = "lb-test"
staked = "2026-12-01T10:00:00+00:00"
by = "a test"
why = "an expectation"

[[stake.prediction]]
anchor = "x.one"
band = { lo = 0.9, hi = 1.1 }
rationale = "why"
"""


def test_the_shipped_stakes_are_locked_and_name_real_anchors():
    stakes = load_stakes(anchors=_anchor_ids())
    assert stakes and all(len(s.sha256) == 64 for s in stakes)


def _anchor_ids() -> set[str]:
    from lawbench.core.hardware.profiles import plugin_profiles
    from lawbench.core.claims.loading import load_all
    from lawbench.core.laws.registry import get_registry

    reg = get_registry()
    return {la.anchor.id for la in load_all(reg, profiles=plugin_profiles(reg).keys()).anchors}


def test_lock_then_edit_is_refused_and_the_lock_is_append_only(tmp_path):
    (tmp_path / "a.toml").write_text(STAKE, encoding="utf-8")
    with pytest.raises(DataError, match="a.toml: field stake: is not locked"):
        load_stakes(tmp_path)
    assert lock_new(tmp_path) == ["a.toml"]
    first = (tmp_path / "LOCK").read_text(encoding="utf-8")
    assert load_stakes(tmp_path, anchors={"x.one"})[0].stake.id == "lb-test"
    (tmp_path / "b.toml").write_text(STAKE.replace("lb-test", "lb-two"), encoding="utf-8")
    assert lock_new(tmp_path) == ["b.toml"] and (tmp_path / "LOCK").read_text(encoding="utf-8").startswith(first)
    (tmp_path / "a.toml").write_text(STAKE.replace("hi = 1.1", "hi = 1.5"), encoding="utf-8")  # widened after the fact
    with pytest.raises(DataError, match="a.toml: field stake: was edited after it was staked"):
        load_stakes(tmp_path)
    assert lock_new(tmp_path) == []  # re-locking does not bless an edit: the old line stays
    with pytest.raises(DataError, match="was edited after it was staked"):
        load_stakes(tmp_path)


def test_a_removed_stake_and_a_stake_of_an_unknown_anchor_are_refused(tmp_path):
    (tmp_path / "a.toml").write_text(STAKE, encoding="utf-8")
    lock_new(tmp_path)
    with pytest.raises(DataError, match="field stake.prediction.0.anchor: stakes anchor 'x.one', which does not exist"):
        load_stakes(tmp_path, anchors={"other"})
    (tmp_path / "a.toml").unlink()
    with pytest.raises(DataError, match="LOCK: field a.toml: locks a.toml, which is gone"):
        load_stakes(tmp_path)


def test_a_malformed_stake_is_refused_before_it_is_locked(tmp_path):
    (tmp_path / "a.toml").write_text(STAKE.replace('rationale = "why"\n', ""), encoding="utf-8")
    done = run_cli(["stakes", "lock", "--dir", str(tmp_path)], env=None, cwd=tmp_path)
    assert done.returncode == 2 and "a.toml" in done.stderr and "rationale" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "LOCK").exists()


P = StakedPrediction(anchor="x.one", band=Band(lo=0.9, hi=1.1), rationale="r")


@pytest.mark.parametrize("result, score", [
    ({"verdict": "PASS", "measured": 1.0, "interval": [0.95, 1.05]}, "hit"),
    ({"verdict": "FAIL", "measured": 1.2, "interval": [1.15, 1.25]}, "near-miss"),  # 0.1 past, band 0.2 wide
    ({"verdict": "FAIL", "measured": 1.5, "interval": [1.45, 1.55]}, "miss"),
    ({"verdict": "PASS", "measured": 1.1, "interval": [1.05, 1.15]}, "VOID"),  # straddles a staked edge
    ({"verdict": "VOID", "measured": 1.0, "interval": [0.7, 1.3]}, "VOID"),
    ({"verdict": "SKIP", "reason": "no GPU"}, "not run"),
    (None, "not run"),
])
def test_scores(result, score):
    assert score_one(P, result)[0] == score


def test_the_committed_h200_scores_are_what_the_committed_run_gives():
    record = ROOT / "results" / "h200" / "run-1.json"  # the first run after staking scores the stake
    committed = json.loads(next((ROOT / "results" / "stakes").glob("lb-h200-gpu-tier.*.json")).read_text(encoding="utf-8"))
    scored = [s for s in score_run(record, load_stakes(anchors=_anchor_ids())) if s["score"] != "not run"]
    assert [(s["anchor"], s["score"], s["why"]) for s in scored] == \
        [(s["anchor"], s["score"], s["why"]) for s in committed]


# --------------------------------------------------------------------------- REGISTER.md


def test_register_md_is_what_the_data_gives(tmp_path):
    done = run_cli(["register", "--results", str(ROOT / "results"), "--check", str(ROOT / "REGISTER.md")],
                   env=None, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_stale_register_md_fails_the_check(tmp_path):
    stale = tmp_path / "REGISTER.md"
    shutil.copy(ROOT / "REGISTER.md", stale)
    stale.write_text(stale.read_text(encoding="utf-8").replace("encoded", "encoded!", 1), encoding="utf-8")
    done = run_cli(["register", "--results", str(ROOT / "results"), "--check", str(stale)], env=None, cwd=ROOT)
    assert done.returncode == 1 and "is stale: regenerate it with `lawbench register" in done.stderr


def test_register_md_lists_every_claim_history_and_stake():
    text = (ROOT / "REGISTER.md").read_text(encoding="utf-8")
    from lawbench.core.claims.inventory import load_inventory

    for cid in load_inventory().claims:
        assert f"`{cid}`" in text, cid
    for s in stake_files():
        assert s.name and "lb-h200-gpu-tier" in text
    assert "## History" in text and "missed" in text and "## Open findings" in text


# --------------------------------------------------------------------------- bad input: one line, exit 2

def _one_line_exit_2(done) -> str:
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    return line


def test_register_refuses_a_results_folder_that_is_not_there(tmp_path):
    """Without run records every verdict would be written as "not run yet": refused, not a silent pass.
    The default --results is relative, so running outside the repository says where it looked."""
    line = _one_line_exit_2(run_cli(["register", "--results", str(tmp_path / "nope"), "--out", "R.md"], env=None,
                                    cwd=tmp_path))
    assert f"--results {tmp_path / 'nope'} does not exist" in line and not (tmp_path / "R.md").exists()
    line = _one_line_exit_2(run_cli(["register", "--check", str(ROOT / "REGISTER.md")], env=None, cwd=tmp_path))
    assert "--results results does not exist" in line and f"(here: {tmp_path})" in line


def test_register_check_and_out_name_the_file_they_cannot_use(tmp_path):
    res = ["register", "--results", str(ROOT / "results")]
    line = _one_line_exit_2(run_cli([*res, "--check", str(tmp_path / "none.md")], env=None, cwd=tmp_path))
    assert f"--check {tmp_path / 'none.md'}: cannot read it" in line
    (tmp_path / "afile").write_text("x", encoding="utf-8")
    line = _one_line_exit_2(run_cli([*res, "--out", str(tmp_path / "afile" / "R.md")], env=None, cwd=tmp_path))
    assert f"cannot write --out {tmp_path / 'afile' / 'R.md'}" in line


def test_stakes_score_refuses_what_is_not_a_run_record_and_an_out_it_cannot_write(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "a record"}', encoding="utf-8")
    line = _one_line_exit_2(run_cli(["stakes", "score", str(bad)], env=None, cwd=tmp_path))
    assert f"{bad}: not a lawbench run record" in line
    (tmp_path / "afile").write_text("x", encoding="utf-8")
    record = ROOT / "results" / "h200" / "run.json"
    line = _one_line_exit_2(run_cli(["stakes", "score", str(record), "--out", str(tmp_path / "afile")], env=None,
                                    cwd=tmp_path))
    assert f"cannot write the --out folder {tmp_path / 'afile'}" in line


def test_an_empty_record_or_a_results_folder_without_records_is_named(tmp_path):
    (tmp_path / "empty.json").write_text("", encoding="utf-8")
    line = _one_line_exit_2(run_cli(["stakes", "score", str(tmp_path / "empty.json")], env=None, cwd=tmp_path))
    assert "empty.json: the file is empty, not a run record" in line
    (tmp_path / "res").mkdir()
    (tmp_path / "res" / "notes.json").write_text('{"not": "a record"}', encoding="utf-8")
    line = _one_line_exit_2(run_cli(["register", "--results", str(tmp_path / "res")], env=None, cwd=tmp_path))
    assert f"--results {tmp_path / 'res'} holds no lawbench run record" in line
