"""Issue 33: a Run's modes are objects with one interface (select, evaluate, finish, what an
interrupt keeps); the Run holds one and never asks which; each mode's exit rule is the one the
record is judged by on import. A real Run of the cpu profile's context, a mode written here."""
import re
from pathlib import Path

import pytest

from lawbench.core.models.result import Result, Verdict
from lawbench.core.models.run_record import EXIT_RULES, RunRecord

ROOT = Path(__file__).resolve().parents[1]


def _modes():
    from lawbench.core.run.ab import AB
    from lawbench.core.run.planted import Plant
    from lawbench.core.run.verify import Verify

    return [Verify, AB, Plant]


def test_every_mode_names_the_exit_rule_its_records_are_judged_by():
    from typing import get_args

    from lawbench.core.models.run_record import RunMode

    modes = _modes()
    assert sorted(m.name for m in modes) == sorted(get_args(RunMode)) == sorted(EXIT_RULES)
    for mode in modes:
        assert mode.exit_rule is EXIT_RULES[mode.name], mode


def test_the_run_and_the_record_never_ask_which_mode():
    """No `mode ==` / `mode !=` / `mode in` branch in the Run, its front end, its outputs or the record."""
    branch = re.compile(r"\bmode\s*(==|!=|\bin\b|\bnot in\b)")
    for rel in ("core/run/run.py", "core/run/session.py", "core/run/outputs.py", "core/run/mode.py",
                "core/models/run_record.py"):
        code = [line for line in (ROOT / rel).read_text(encoding="utf-8").splitlines()
                if not line.lstrip().startswith("#")]
        found = [line.strip() for line in code if branch.search(line)]
        assert found == [], (rel, found)


def test_the_branch_finder_finds_a_branch():
    assert re.search(r"\bmode\s*(==|!=|\bin\b|\bnot in\b)", 'if self.mode != "run":')


def _result(anchor_id, verdict=Verdict.PASS, **kw):
    return Result(anchor_id=anchor_id, law="x", kind="prediction", profile="cpu", verdict=verdict, **kw)


@pytest.mark.parametrize("mode, verdicts, bad", [
    ("run", [Verdict.PASS, Verdict.SKIP], False),  # a skip the policy let stand is no failure of a run
    ("ab", [Verdict.PASS, Verdict.SKIP], True),  # a pair not measured proves nothing
    ("plant", [Verdict.PASS], False),
    ("plant", [], True),  # nothing judged proves nothing
    ("run", [Verdict.PASS, Verdict.FAIL], True),
])
def test_a_record_from_elsewhere_is_judged_by_its_mode_s_rule(mode, verdicts, bad):
    record = RunRecord(profile="cpu", mode=mode, results=[_result(f"a{i}", v) for i, v in enumerate(verdicts)])
    assert record.judged_bad() is bad


class _Counting:
    """A mode written against the interface alone: two anchors' results, then a stop signal while the
    third runs, whose interrupt keeps one result."""

    name = "run"
    exit_rule = staticmethod(EXIT_RULES["run"])

    def select(self, ctx):
        return [la for la in ctx.anchor_set.anchors if la.anchor.kind == "prediction"][:3]

    def evaluate(self, run, loaded):
        from lawbench.core.run.mode import Stopped

        if len(run.results) == 2:
            raise Stopped("SIGTERM", [_result(loaded.anchor.id, Verdict.ERROR, reason="interrupted by SIGTERM")])
        return [_result(loaded.anchor.id)]

    def finish(self, run):
        return {"settings": {"counted": len(run.results)}, "run_id": "counting-1", "gate": None}

    def measured(self, run):
        raise AssertionError("an interrupted run pairs nothing")

    def notes(self, record, history):
        return []


def test_a_stopped_anchor_keeps_what_its_interrupt_carries(tmp_path):
    from lawbench.core.run.context import RunContext
    from lawbench.core.run.run import Run

    run = Run(RunContext("cpu"), mode=_Counting(), out=tmp_path / "out")
    try:
        record = run.measure()
    finally:
        run.close()
    assert record.run_id == "counting-1" and record.settings == {"counted": 3}
    assert [r.verdict for r in record.results] == [Verdict.PASS, Verdict.PASS, Verdict.ERROR]
    assert record.interrupted == "SIGTERM" and record.exit_code == 143 == run.exit_code
    assert (tmp_path / "out" / "run.json").is_file() and (tmp_path / "out" / "history.sqlite").is_file()


def test_an_ab_stopped_between_pairs_keeps_the_pairs_it_took(tmp_path, monkeypatch):
    """The A/B's interrupt (one Stopped, no exc.ab_result any more): a law whose engine is ended on
    the seventh visit (two warm-ups, two pairs, then SIGTERM) leaves an ERROR result with both pairs."""
    from lawbench import ArmSampler, Visit
    from lawbench.core.errors import EngineInterrupted
    from lawbench.core.run.ab import AB
    from lawbench.core.run.context import RunContext
    from lawbench.core.run.run import Run

    monkeypatch.setenv("LAWBENCH_CACHE", str(tmp_path / "cache"))  # its own box lock: no engine runs here
    visits = []

    def visit(reps):
        visits.append(reps)
        if len(visits) == 7:
            raise EngineInterrupted("the engine was ended", "SIGTERM")
        return Visit(values=[10.0 + len(visits) % 2])

    class Paired:
        name = "law4"

        def sampler(self, anchor, profile, resources):
            return ArmSampler({"main": visit}, labels={"main": "syn tg16"})

    ctx = RunContext("cpu")
    monkeypatch.setitem(ctx.registry.laws, "law4", Paired())
    (loaded,) = [la for la in ctx.anchor_set.anchors if la.anchor.id == "law4.cpu.l15.syn-25m-q4_0"]
    mode = AB(None, pairs=6, confidence=0.95, gate=None, timeout_s=60)
    mode.use_engines({"a": None, "b": None}, {"a": {"spec": "a"}, "b": {"spec": "b"}})
    run = Run(ctx, mode=mode, out=tmp_path / "out")
    try:
        record = run.measure([loaded])
    finally:
        run.close()
    (r,) = record.results
    assert r.anchor_id == "law4.cpu.l15.syn-25m-q4_0~ab" and r.verdict is Verdict.ERROR
    assert r.reason == "interrupted by SIGTERM" and r.ab.pairs == 2 and len(r.measurement.samples) == 2
    assert record.interrupted == "SIGTERM" and record.exit_code == 143 and record.mode == "ab"
    assert record.run_id.startswith("ab-") and record.engine["a"] == {"spec": "a"}
