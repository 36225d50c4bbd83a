"""The pure analysis of benchmarks/reproducibility.py, over small hand-built run records.

The script's runs themselves (real `lawbench run`s, minutes each) are not run here.
"""
from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path
from typing import Optional

import pytest

from lawbench.core.models import Result
from lawbench.core.record.reports import RunRecord

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "reproducibility.py"


@pytest.fixture(scope="module")
def repro():
    spec = importlib.util.spec_from_file_location("reproducibility_benchmark", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]


def result(anchor_id: str, verdict: str, *, kind: str = "agreement", measured: Optional[float] = 1.0,
           **kw) -> Result:
    return Result(anchor_id=anchor_id, law="law4", kind=kind, profile="cpu", verdict=verdict,
                  reason="" if verdict == "PASS" else "why", measured=measured,
                  interval=None if measured is None else (measured - 0.05, measured + 0.05),
                  band=None if measured is None else (0.8, math.inf), **kw)


def record(*results: Result) -> RunRecord:
    return RunRecord.new("cpu").finish(results)


def history() -> Result:
    return result("law4.old", "SKIP", kind="measurement", detail={"status": "refuted", "refuted_by": "x"})


def prediction(verdict: str) -> Result:
    return result("law4.kv.pred", verdict, kind="prediction")


@pytest.fixture
def three_runs() -> list[RunRecord]:
    return [
        record(result("a.steady", "PASS"), result("b.flip", "PASS"), result("c.void", "PASS"),
               prediction("PASS"), history()),
        record(result("a.steady", "PASS"), result("b.flip", "FAIL", measured=0.7), result("c.void", "VOID"),
               prediction("FAIL"), history()),
        record(result("a.steady", "PASS"), result("b.flip", "PASS"),  # c.void missing from this run
               result("d.census", "FAIL", kind="census", measured=None), prediction("PASS"), history()),
    ]


def test_sequences_cover_measurement_anchors_only_in_first_seen_order(repro, three_runs):
    seqs = repro.sequences(three_runs)
    assert list(seqs) == ["a.steady", "b.flip", "c.void", "d.census"]  # no prediction, no history
    assert seqs["a.steady"] == ["PASS", "PASS", "PASS"]
    assert seqs["b.flip"] == ["PASS", "FAIL", "PASS"]
    assert seqs["c.void"] == ["PASS", "VOID", None]
    assert seqs["d.census"] == [None, None, "FAIL"]


def test_contradiction_is_pass_and_fail_of_one_anchor(repro, three_runs):
    # PASS/VOID is not a contradiction, a FAIL alone is not, and the prediction's PASS/FAIL is excluded
    assert repro.contradictions(three_runs) == ["b.flip"]


def test_void_share_counts_every_verdict_of_measurement_anchors(repro, three_runs):
    assert repro.verdict_counts(three_runs) == {"PASS": 6, "FAIL": 2, "VOID": 1, "SKIP": 0, "ERROR": 0}
    assert repro.void_share(three_runs) == pytest.approx(1 / 9)
    assert repro.void_share([record(prediction("PASS"), history())]) is None
    assert repro.void_share([]) is None


def test_statistics_per_run(repro, three_runs):
    stats = repro.statistics_table(three_runs)
    assert stats["b.flip"][1] == {"measured": 0.7, "interval": (pytest.approx(0.65), pytest.approx(0.75))}
    assert stats["c.void"][2] is None


def test_gate(repro, three_runs):
    failures = repro.gate_failures(three_runs, max_void=0.2)
    assert len(failures) == 1 and "b.flip" in failures[0]
    steady = [record(result("a", "PASS"), result("b", "VOID")), record(result("a", "PASS"), result("b", "PASS"))]
    assert repro.gate_failures(steady, max_void=0.25) == []  # 1/4 is at the limit: allowed
    assert "above 20%" in repro.gate_failures(steady, max_void=0.2)[0]
    assert repro.gate_failures([record(prediction("PASS"))]) == ["no measurement anchor was selected or ran"]
    assert repro.gate_failures([]) == ["no run left a run record"]


def test_report_lines(repro, three_runs):
    lines = repro.report(three_runs, ["run1", "run2", "run3"], max_void=0.2)
    text = "\n".join(lines)
    assert any(ln.split() == ["b.flip", "PASS", "FAIL", "PASS", "≥", "0.8"] for ln in lines)
    assert any(ln.split()[:4] == ["c.void", "PASS", "VOID", "-"] for ln in lines)
    assert "run2: 0.7 [0.65, 0.75]" in text
    census = lines.index(next(ln for ln in lines if ln.startswith("d.census")))
    assert lines[census].split() == ["d.census", "-", "-", "FAIL", "-"]
    assert lines[census + 1].startswith("contradictions")  # no statistics line for a census
    assert "contradictions (PASS in one run, FAIL in another): 1" in text
    assert "VOID share: 1/9 = 11.1% (limit 20%)" in text


def test_selection_keeps_predictions_out(repro):
    assert repro.selection(None) == "not prediction"
    assert repro.selection("census or smollm") == "(census or smollm) and not prediction"


def test_summary_is_standard_json(repro, three_runs, tmp_path):
    args = type("Args", (), {"profile": "cpu", "k": None, "runs": 3, "load": False, "max_void": 0.2})()
    runs = [repro.Run(i + 1, tmp_path / f"run-{i + 1}", tmp_path / f"run-{i + 1}.log", exit_code=1,
                      wall_s=10.0, record=rec) for i, rec in enumerate(three_runs)]
    runs.append(repro.Run(4, tmp_path / "run-4", tmp_path / "run-4.log", exit_code=2, problem="no run.json"))
    data = json.loads(json.dumps(repro.summary(runs, args, tmp_path), allow_nan=False))
    assert data["contradictions"] == ["b.flip"]
    assert data["sequences"]["c.void"] == ["PASS", "VOID", None]
    assert data["ok"] is False
    assert any("run 4 left no run record" in why for why in data["failures"])
    assert [r["wall_s"] for r in data["runs"]] == [10.0, 10.0, 10.0, 0.0]
