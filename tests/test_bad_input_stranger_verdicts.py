"""Issue 32 item 4: every verdict a stranger's record states is re-derived on import — a census's
from its counts and the anchor's rule, a SKIP's from what it holds — through the real
`lawbench history import`, and a record that disagrees is refused naming the field."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import run_cli

from lawbench.core.record.checks import check_record
from lawbench.core.record.reports import RunRecord

ROOT = Path(__file__).resolve().parents[1]
NIGHT4 = ROOT / "results" / "cpu-nights" / "night4.run.json"  # a real cpu night: two census PASSes
REPACK = "law4.cpu.census.q4_0-repack"  # minimum: repacked_tensors >= 70


@pytest.fixture(scope="module")
def night(tmp_path_factory, dummy_site):
    """One real run of the dummy law (a PASS, a FAIL, a VOID, a retired anchor): its run.json."""
    base = tmp_path_factory.mktemp("night")
    env = dict(os.environ, PYTHONPATH=str(dummy_site), LAWBENCH_CACHE=str(base / "cache"))
    env.pop("LAWBENCH_DISABLE_PLUGIN_AUTOLOAD", None)
    env.pop("GITHUB_STEP_SUMMARY", None)
    p = run_cli(["run", "--profile", "cpu", "--law", "dummy", "--out", "n1"], env, base)
    assert p.returncode == 1, p.stdout + p.stderr
    return json.loads((base / "n1" / "run.json").read_text(encoding="utf-8"))


def _import(record: dict, tmp_path, cli_env):
    f = tmp_path / "run.json"
    f.write_text(json.dumps(record), encoding="utf-8")
    return run_cli(["history", "import", "--db", str(tmp_path / "h.sqlite"), str(f)], cli_env, tmp_path)


def _index(record: dict, anchor_id: str) -> int:
    return next(i for i, r in enumerate(record["results"]) if r["anchor_id"] == anchor_id)


def test_a_census_pass_under_its_minimum_is_refused(tmp_path, cli_env):
    record = json.loads(NIGHT4.read_text(encoding="utf-8"))
    i = _index(record, REPACK)
    assert record["results"][i]["verdict"] == "PASS"
    record["results"][i]["detail"]["counts"]["repacked_tensors"] = 3  # 3 of 70 tensors repacked: a lost fast path
    p = _import(record, tmp_path, cli_env)
    out = p.stdout + p.stderr
    assert p.returncode != 0 and "Traceback" not in out, out
    assert f"results.{i}.verdict" in out and "repacked_tensors" in out and "at least 70" in out, out


def test_the_genuine_census_night_imports(tmp_path, cli_env):
    p = _import(json.loads(NIGHT4.read_text(encoding="utf-8")), tmp_path, cli_env)
    assert p.returncode == 0, p.stdout + p.stderr


def test_a_census_fail_whose_counts_meet_the_rule_is_refused(tmp_path, cli_env):
    """The other way round: a good census turned FAIL (a forged red for a runner) is refused too."""
    record = json.loads(NIGHT4.read_text(encoding="utf-8"))
    i = _index(record, REPACK)
    record["results"][i].update(verdict="FAIL", reason="planted")
    record["counts"]["PASS"] -= 1
    record["counts"]["FAIL"] += 1
    p = _import(record, tmp_path, cli_env)
    assert p.returncode != 0 and f"results.{i}.verdict" in p.stdout + p.stderr, p.stdout + p.stderr


def _is_run_record(path: Path) -> bool:
    data = json.loads(path.read_text(encoding="utf-8"))
    return isinstance(data, dict) and "schema_version" in data and "results" in data


RECORDS = [p for p in sorted((ROOT / "results").rglob("*.json")) if _is_run_record(p)]


def test_there_are_committed_census_records():
    assert len(RECORDS) >= 5 and NIGHT4 in RECORDS and any("census" in str(p) for p in RECORDS), RECORDS


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_committed_record_survives_the_re_derivation(path):
    """The rules refuse forgeries, never a real night: every committed run record passes them."""
    from lawbench.core.history.imports import census_rule

    check_record(RunRecord.model_validate_json(path.read_text(encoding="utf-8")), str(path),
                 census_rules=census_rule)


def _relabel_skip(record: dict, anchor_id: str, **changes) -> tuple[dict, int]:
    forged = json.loads(json.dumps(record))
    i = _index(forged, anchor_id)
    was = forged["results"][i]["verdict"]
    forged["results"][i].update(verdict="SKIP", **changes)
    forged["counts"][was] -= 1
    forged["counts"]["SKIP"] += 1
    return forged, i


def test_a_fail_relabelled_skip_is_refused(night, tmp_path, cli_env):
    """The FAIL keeps its prediction and interval; counts and exit code are made to agree."""
    forged, i = _relabel_skip(night, "dummy.sum-fail")
    p = _import(forged, tmp_path, cli_env)
    out = p.stdout + p.stderr
    assert p.returncode != 0 and "Traceback" not in out, out
    assert f"results.{i}.verdict" in out and "holds a reading" in out, out


def test_a_void_relabelled_skip_with_its_reading_stripped_keeps_the_fail_s_words(night, tmp_path, cli_env):
    """A forger strips the reading but keeps the reason a run writes only for a failed skip."""
    forged, i = _relabel_skip(night, "dummy.noisy-void", measured=None, interval=None, band=None,
                              measurement=None, sampling=None, spread=None,
                              reason="a skip on the anchor's own runner is a failure: no engine")
    p = _import(forged, tmp_path, cli_env)
    assert f"results.{i}.verdict" in p.stdout + p.stderr and p.returncode != 0, p.stdout + p.stderr


def test_a_skip_that_says_it_was_a_strict_skip_is_refused(night, tmp_path, cli_env):
    forged, i = _relabel_skip(night, "dummy.noisy-void", measured=None, interval=None, band=None,
                              measurement=None, sampling=None, spread=None, reason="no engine", strict_skip=True)
    p = _import(forged, tmp_path, cli_env)
    assert f"results.{i}.strict_skip" in p.stdout + p.stderr and p.returncode != 0, p.stdout + p.stderr


def test_a_skip_without_a_reason_is_refused(night, tmp_path, cli_env):
    forged, i = _relabel_skip(night, "dummy.noisy-void", measured=None, interval=None, band=None,
                              measurement=None, sampling=None, spread=None, reason="")
    p = _import(forged, tmp_path, cli_env)
    assert f"results.{i}.reason" in p.stdout + p.stderr and p.returncode != 0, p.stdout + p.stderr
