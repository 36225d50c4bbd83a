"""ab.json, the record format of `lawbench ab` (docs/ab.md): format lawbench-ab/2 is a view of the
A/B's run record (ab_view); lawbench-ab/1, the A/B's only record before A/Bs were runs, is read as
the run record it would be now (run_record_of) by the record's readers (record/reports.py) and
`lawbench history import`. The measuring itself is lawbench.core.run.ab's."""
from __future__ import annotations

import math
from typing import Any, Optional

from pydantic import BaseModel, Field

from lawbench.core.models import Measurement, Result, Sample, Verdict
from lawbench.core.models.result import AbFigures
from lawbench.core.models.run_record import RunRecord
from lawbench.core.record.run_keys import engine_key
from lawbench.core.stats.verdicts import METHOD

GATE_WORDS = {Verdict.PASS: "pass", Verdict.FAIL: "regression", Verdict.VOID: "unresolved"}
# ab.json: /2 is a view of the A/B's run record (run.json); /1, the A/B's only record before A/Bs
# were runs, is read as the run record it would be now (run_record_of)
RECORD_FORMAT = "lawbench-ab/2"
OLD_FORMAT = "lawbench-ab/1"
# An A/B's result in the run record is "<anchor id>~ab": its own series in the history, never
# mixed with the anchor's own measurements.
RESULT_SUFFIX = "~ab"


class ABResult(BaseModel):
    model_config = {"extra": "forbid"}

    anchor_id: str
    law: str
    subject: str = ""  # the arm measured: "main" or "a"
    test: str = ""  # the llama-bench test of the subject, e.g. "syn-25m-q4_0 tg16 threads=1"
    unit: str = "tok/s"
    status: str  # "measured", "skip" or "error"
    reason: str = ""
    median_a: Optional[float] = None  # per-visit values of engine A, their median
    median_b: Optional[float] = None
    ratio: Optional[float] = None  # B/A: geometric mean of the per-pair ratios
    interval: Optional[tuple[float, float]] = None
    confidence: Optional[float] = None  # per look (Bonferroni over the planned looks)
    pairs: int = 0
    gate: Optional[str] = None  # "pass", "regression", "unresolved"; None without a gate
    ratios: list[float] = Field(default_factory=list)
    samples: list[Sample] = Field(default_factory=list)
    protocol: dict[str, Any] = Field(default_factory=dict)
    environment: dict[str, Any] = Field(default_factory=dict)
    duration_s: Optional[float] = None


class ABRecord(BaseModel):
    """One ``lawbench ab`` as OUT/ab.json shows it: both engines, the machine, every pair with its
    order. The run record (run.json, the history) holds the same; this is made from it (ab_view)."""

    model_config = {"extra": "forbid"}

    format: str = RECORD_FORMAT
    run_id: str  # the fallback writer (reports.write_fallback) names the file after it
    started: str
    finished: Optional[str] = None
    argv: list[str] = Field(default_factory=list)
    lawbench_version: str = ""
    commit: Optional[str] = None
    profile: str
    machine: dict[str, Any] = Field(default_factory=dict)
    environment: dict[str, Any] = Field(default_factory=dict)
    engines: dict[str, dict[str, Any]] = Field(default_factory=dict)  # "a", "b"
    pairs_budget: int
    confidence: float
    method: str = ""
    gate_min_ratio: Optional[float] = None
    results: list[ABResult] = Field(default_factory=list)
    interrupted: Optional[str] = None
    exit_code: Optional[int] = None


def gate_band(gate: Optional[float]) -> tuple[float, float]:
    # Without a gate every interval lies inside (0, ∞): the rule stops at its one look.
    return (gate if gate is not None else 0.0, math.inf)


def settings(pairs: int, confidence: float, gate: Optional[float]) -> dict[str, Any]:
    """What the A/B was asked for, as the run record's ``settings``."""
    return {"pairs_budget": pairs, "confidence": confidence, "method": f"per-pair B/A; {METHOD}",
            "gate_min_ratio": gate}


def engine_of(engines: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The run record's ``engine``: both builds, under a name that joins an A/B only with A/Bs of
    the same two builds (lawbench.core.record.run_keys.engine_key)."""
    def key(e: dict[str, Any]) -> str:
        extra = " ".join([*(e.get("bench_args") or []), *(f"{k}={v}" for k, v in (e.get("bench_env") or {}).items())])
        return engine_key({"name": "llama.cpp", **e}) + (f" +{extra}" if extra else "")

    return {"name": "A/B", "version": f"{key(engines['a'])} vs {key(engines['b'])}",
            "backend": engines["a"].get("backend"), "a": engines["a"], "b": engines["b"]}


_VERDICT = {None: Verdict.PASS, "pass": Verdict.PASS, "regression": Verdict.FAIL, "unresolved": Verdict.VOID}
_ON_RESULT = {"anchor_id", "law", "reason", "ratio", "interval", "samples", "protocol", "environment"}


def as_result(r: ABResult, profile: str, gate: Optional[float]) -> Result:
    """One anchor's A/B as a run record's result "<anchor>~ab": the B/A ratio with its interval
    against the gate's band [R, ∞) (without a gate (0, ∞): PASS when measured), every pair."""
    verdict = _VERDICT.get(r.gate, Verdict.VOID) if r.status == "measured" else \
        Verdict.SKIP if r.status == "skip" else Verdict.ERROR
    return Result(anchor_id=r.anchor_id + RESULT_SUFFIX, law=r.law, kind="ratio", profile=profile,
                  verdict=verdict, reason=r.reason, quantity="decode speed, engine B / engine A", unit="x",
                  statistic="geometric mean of the per-pair B/A", measured=r.ratio, interval=r.interval,
                  band=gate_band(gate), duration_s=r.duration_s or 0.0,
                  measurement=Measurement(samples=r.samples, protocol=r.protocol, environment=r.environment),
                  ab=AbFigures(**r.model_dump(mode="json", exclude=_ON_RESULT)))


def ab_result_of(result: Result) -> ABResult:
    m = result.measurement or Measurement()
    figures = result.ab.model_dump(mode="json") if result.ab else {"status": "error"}
    return ABResult(**figures, anchor_id=result.anchor_id.removesuffix(RESULT_SUFFIX), law=result.law,
                    reason=result.reason, ratio=result.measured, interval=result.interval, samples=m.samples,
                    protocol=m.protocol, environment=m.environment)


def ab_view(record: RunRecord, exit_code: Optional[int] = None) -> ABRecord:
    """OUT/ab.json of an A/B's run record (docs/ab.md); ``exit_code``: the command's, when an output
    could not be written."""
    s = record.settings
    return ABRecord(run_id=record.run_id, started=record.started, finished=record.finished, argv=record.argv,
                    lawbench_version=record.lawbench_version, commit=record.git_commit, profile=record.profile,
                    machine=record.machine, environment=record.environment,
                    engines={k: (record.engine or {}).get(k, {}) for k in ("a", "b")},
                    pairs_budget=s["pairs_budget"], confidence=s["confidence"], method=s["method"],
                    gate_min_ratio=s.get("gate_min_ratio"), results=[ab_result_of(r) for r in record.results],
                    interrupted=record.interrupted,
                    exit_code=record.exit_code if exit_code is None else exit_code)


def run_record_of(ab: ABRecord) -> RunRecord:
    """An ab.json written before A/Bs were run records (format lawbench-ab/1, e.g. results/cpu-nights/
    ab-*.json) as the run record it would be now: what `lawbench history import` and the report read."""
    results = [as_result(r, ab.profile, ab.gate_min_ratio) for r in ab.results]
    record = RunRecord(run_id=ab.run_id, started=ab.started, argv=ab.argv, lawbench_version=ab.lawbench_version,
                       git_commit=ab.commit, profile=ab.profile, profile_matches=True, mode="ab",
                       settings=settings(ab.pairs_budget, ab.confidence, ab.gate_min_ratio) | {"method": ab.method},
                       machine=ab.machine, environment=ab.environment, engine=engine_of(ab.engines))
    record.finish(results, interrupted=ab.interrupted)
    record.finished = ab.finished or record.started
    return record