"""Engine A/B: the same anchors under two llama.cpp builds, interleaved on one machine.

For every selected anchor that measures engine speed, the anchor's own law builds its sampler
twice — once seeing engine A, once engine B — and the A/B takes the anchor's subject (its only
case, or arm a of a two-arm anchor) from each: the same model, test, threads and repetitions, the
same per-visit rule. Those two visits become the arms of core's ArmSampler: one discarded warm-up
visit per engine, then pairs of visits in A B, B A, A B … order (each a fresh engine process), so a
slow drift of the machine biases neither engine. One sample is one pair's B/A; the ratio is their
geometric mean and its interval the Student-t interval on the log ratios (lawbench.core.stats.verdicts,
the rule ratio anchors use). With a gate (``--gate-min-ratio R``) the verdicts' sequential rule
decides against the band [R, ∞): the whole interval at or above R passes, wholly below is a
regression, and one that still straddles R when the pairs are spent is unresolved — never a pass.

All of the A/B's logic is here: the mode (:class:`AB`, a mode of the one Run: lawbench.core.run.mode),
its selection, the pairing of one anchor, its results in the run record and ab.json, its view.
`lawbench ab` (lawbench.core.commands.ab) parses the command line and prints.
"""
from __future__ import annotations

import math
import time
import uuid
from typing import TYPE_CHECKING, Any, Callable, Optional

from pydantic import BaseModel, Field

from lawbench.core.errors import EngineError, EngineInterrupted, LawbenchError, NotApplicable, UsageError
from lawbench.core.models import Budget, Measurement, Result, Sample, Verdict
from lawbench.core.models.result import AbFigures
from lawbench.core.models.run_record import not_every_result_passed
from lawbench.core.run.mode import Mode, Stopped

if TYPE_CHECKING:
    from lawbench.core.claims.loading import LoadedAnchor
    from lawbench.core.run.context import RunContext
    from lawbench.core.run.run import Run

SPEED_KINDS = ("measurement", "agreement", "ratio")
GATE_WORDS = {Verdict.PASS: "pass", Verdict.FAIL: "regression", Verdict.VOID: "unresolved"}
# ab.json: /2 is a view of the A/B's run record (run.json); /1, the A/B's only record before A/Bs
# were runs, is read as the run record it would be now (run_record_of)
RECORD_FORMAT = "lawbench-ab/2"
OLD_FORMAT = "lawbench-ab/1"
# An A/B's result in the run record is "<anchor id>~ab": its own series in the history, never
# mixed with the anchor's own measurements.
RESULT_SUFFIX = "~ab"


# --------------------------------------------------------------------------- ab.json, a view of the run record


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


# --------------------------------------------------------------------------- statistics


def pair_ratios(samples: list[Sample]) -> list[float]:
    """B/A of each pair: arm a of the A/B sampler is engine A, arm b engine B."""
    return [s.raw["value_b"] / s.raw["value_a"] for s in samples]


def as_pairs(samples: list[Sample]) -> list[Sample]:
    """The sampler's rounds (value A/B, order "ab"/"ba") as the record's pairs: value B/A, the
    order in engine letters ("AB" / "BA"), every visit's readings kept. An engine fault's samples
    also hold the cut-off visit's repetitions: those are no pair (the protocol's visits keep them)."""
    return [Sample(value=s.raw["value_b"] / s.raw["value_a"], arm="B/A", predecessor=s.predecessor,
                   raw={**s.raw, "order": str(s.raw.get("order", "")).upper()})
            for s in samples if "value_a" in s.raw and "value_b" in s.raw]


def ratio_interval(ratios: list[float], confidence: float) -> tuple[float, tuple[float, float]]:
    """The geometric mean of per-pair ratios and its Student-t interval on their logarithms."""
    from lawbench.core.stats.verdicts import location_interval

    return location_interval(ratios, confidence, log=True)


def budget_for(pairs: int, gated: bool, timeout_s: float, confidence: float) -> Budget:
    """Without a gate one look after ``pairs`` pairs; with one, looks after 4, 7, … up to ``pairs``
    (Bonferroni over them, lawbench.core.stats.verdicts), so a clear case stops early."""
    first = min(4, pairs) if gated else pairs
    return Budget(min_samples=max(3, first), max_samples=pairs, batch=3, timeout_s=timeout_s,
                  confidence=confidence)


def gate_band(gate: Optional[float]) -> tuple[float, float]:
    # Without a gate every interval lies inside (0, ∞): the rule stops at its one look.
    return (gate if gate is not None else 0.0, math.inf)


# --------------------------------------------------------------------------- selection


def is_speed_anchor(anchor: Any, laws: dict[str, Any]) -> bool:
    """Measured on an engine in tokens per second, as the anchor's own law reads it
    (``Law.measures_engine_speed``); an anchor of a law not in ``laws`` (the run's registry's) is not."""
    if not anchor.runs or anchor.kind not in SPEED_KINDS:
        return False
    law = laws.get(anchor.law)
    return law is not None and law.measures_engine_speed(anchor)


def select_anchors(ctx: Any, k: Optional[str]) -> list[Any]:
    """The run context's anchors for its profile that measure engine speed, narrowed by -k.

    :raises UsageError: nothing matched, or nothing that matched measures engine speed.
    """
    from lawbench.core.run.items import keyword_filter

    keep = keyword_filter(k)
    chosen = [la for la in ctx.anchor_set.anchors if ctx.selected(la) and la.anchor.runs and keep(la)]
    profile = ctx.policy.profile.id
    if not chosen:
        raise UsageError(f"no anchors of profile {profile!r} match the selection (-k {k!r}, --law); "
                         "nothing was measured")
    speed = [la for la in chosen if is_speed_anchor(la.anchor, ctx.registry.laws)]
    if not speed:
        ids = ", ".join(la.anchor.id for la in chosen[:3]) + (" …" if len(chosen) > 3 else "")
        raise UsageError(f"the selection ({ids}) has no anchor that measures engine speed "
                         "(a measurement, agreement or ratio anchor in tok/s); select one with -k")
    return speed


# --------------------------------------------------------------------------- one anchor


def measure_anchor(loaded: Any, law: Any, profile: Any, engines: dict[str, Any],
                   budget: Budget, gate: Optional[float], subject: Optional[str] = None) -> ABResult:
    """Pairs of visits of one anchor's subject on engines A and B, decided by the verdicts' rule.

    :param engines: per side, the run's Resources with that side's engine
        (``resources.with_engine(build)``: the run's lock and model store, ``comparing_engines``).
    :param subject: the arm to pair (default: the only case, or arm a); an engine upgrade night
        pairs every arm (lawbench.core.run.upgrade).
    """
    from lawbench.core.stats.protocol import ArmSampler
    from lawbench.core.stats.verdicts import decide_sequential, median

    anchor = loaded.anchor
    base = {"anchor_id": anchor.id, "law": anchor.law}
    started = time.monotonic()
    try:
        per_engine = {side: law.sampler(anchor, profile, res) for side, res in engines.items()}
    except NotApplicable as exc:
        return ABResult(**base, status="skip", reason=str(exc))
    except EngineInterrupted as exc:  # stopped while a model was made: no pair to keep
        raise Stopped(exc.signal_name) from None
    except LawbenchError as exc:  # the engine, or a model the store could not fetch or build
        return ABResult(**base, status="error", reason=str(exc).splitlines()[0])
    sa, sb = per_engine["a"], per_engine["b"]
    if not isinstance(sa, ArmSampler) or not isinstance(sb, ArmSampler):
        return ABResult(**base, status="skip", reason=f"law {anchor.law!r} does not measure this anchor "
                        "in engine visits (an ArmSampler), so its engines cannot be paired")
    subject = subject if subject in sa.arms else "main" if "main" in sa.arms else "a"
    label = sa.labels.get(subject, subject)
    sampler = ArmSampler({"a": sa.arms[subject], "b": sb.arms[subject]},
                         labels={"a": f"A: {label}", "b": f"B: {label}"}, reps_per_visit=sa.reps,
                         per_visit=sa.per_visit,
                         protocol={"subject": subject, "pair_statistic": "B/A",
                                   "anchor_protocol": {k: v for k, v in sa.protocol().items() if k != "visits"}})
    base.update(subject=subject, test=label)
    try:
        decision = decide_sequential(sampler.draw, pair_ratios, gate_band(gate), budget)
    except (EngineInterrupted, KeyboardInterrupt) as exc:
        # Stopped: the pairs and every visit so far are what the interrupt keeps for the record.
        signal = exc.signal_name if isinstance(exc, EngineInterrupted) else EngineInterrupted.signal_of(exc)
        kept = as_pairs(list(getattr(exc, "samples", [])))
        partial = ABResult(**base, status="error", reason=f"interrupted by {signal}", samples=kept,
                           pairs=len(kept), ratios=pair_ratios(kept), protocol=sampler.protocol(),
                           duration_s=round(time.monotonic() - started, 3))
        raise Stopped(signal, [as_result(partial, profile.id, gate)]) from None
    except EngineError as exc:
        kept = as_pairs(list(exc.samples))
        return ABResult(**base, status="error", reason=str(exc).splitlines()[0], samples=kept,
                        pairs=len(kept), ratios=pair_ratios(kept), protocol=sampler.protocol(),
                        duration_s=round(time.monotonic() - started, 3))
    samples = as_pairs(decision.samples)
    result = ABResult(**base, status="measured", reason=decision.reason, samples=samples,
                      pairs=len(samples), ratios=decision.values, ratio=decision.statistic,
                      interval=decision.interval, confidence=decision.confidence,
                      median_a=median([s.raw["value_a"] for s in samples]) if samples else None,
                      median_b=median([s.raw["value_b"] for s in samples]) if samples else None,
                      protocol=sampler.protocol(), environment=sampler.environment(),
                      duration_s=round(time.monotonic() - started, 3))
    if decision.verdict is Verdict.ERROR:
        result.status = "error"
    elif gate is not None:
        result.gate = GATE_WORDS.get(decision.verdict)
    return result


# --------------------------------------------------------------------------- the mode


class AB(Mode):
    """`lawbench ab`: per selected speed anchor, pairs of visits on engine A and engine B, one result
    "<anchor>~ab" each (the B/A ratio with its interval against the gate's band).

    :param k: the -k selection; :param pairs: pairs per anchor (with a gate, the most it may take);
    :param confidence: the interval's; :param gate: ``--gate-min-ratio`` or None;
    :param timeout_s: the longest one anchor's pairs may take;
    :param said: called with each anchor's ABResult as it is measured (the command's progress line).
    Before :meth:`evaluate`, :meth:`use_engines` hands it the two builds.
    """

    name = "ab"
    exit_rule = staticmethod(not_every_result_passed)

    def __init__(self, k: Optional[str], pairs: int, confidence: float, gate: Optional[float], timeout_s: float,
                 said: Callable[[ABResult], None] = lambda r: None):
        self.k, self.pairs, self.confidence, self.gate, self.said = k, pairs, confidence, gate, said
        self.budget = budget_for(pairs, gate is not None, float(timeout_s), confidence)
        self.builds: dict[str, Any] = {}  # "a", "b" -> the llama.cpp build
        self.described: dict[str, dict[str, Any]] = {}  # "a", "b" -> the record's description of it
        self._engines: dict[str, Any] = {}

    def use_engines(self, builds: dict[str, Any], described: dict[str, dict[str, Any]]) -> None:
        """The two builds (engine A is also the run's: its llama-quantize makes the models both read)."""
        self.builds, self.described = dict(builds), dict(described)

    def engine(self) -> dict[str, Any]:
        """The run record's ``engine``: both builds (engine_of)."""
        return engine_of(self.described)

    def select(self, ctx: "RunContext") -> "list[LoadedAnchor]":
        return select_anchors(ctx, self.k)

    def evaluate(self, run: "Run", loaded: "LoadedAnchor") -> list[Result]:
        run.resources.lock()  # one job per box, for every pair of every anchor
        if not self._engines:
            self._engines = {side: run.resources.with_engine(build) for side, build in self.builds.items()}
        profile = run.policy.profile
        law = run.ctx.registry.law(loaded.anchor.law)
        r = measure_anchor(loaded, law, profile, self._engines, self.budget, self.gate)
        self.said(r)
        return [as_result(r, profile.id, self.gate)]

    def finish(self, run: "Run") -> dict[str, Any]:
        return {"settings": settings(self.pairs, self.confidence, self.gate), "engine": self.engine(),
                "run_id": f"ab-{uuid.uuid4().hex}", "gate": None}


# --------------------------------------------------------------------------- in the run record


def settings(pairs: int, confidence: float, gate: Optional[float]) -> dict[str, Any]:
    """What the A/B was asked for, as the run record's ``settings``."""
    from lawbench.core.stats.verdicts import METHOD

    return {"pairs_budget": pairs, "confidence": confidence, "method": f"per-pair B/A; {METHOD}",
            "gate_min_ratio": gate}


def engine_of(engines: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The run record's ``engine``: both builds, under a name that joins an A/B only with A/Bs of
    the same two builds (lawbench.core.history.run_keys.engine_key)."""
    from lawbench.core.history.run_keys import engine_key

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


def ab_view(record: Any, exit_code: Optional[int] = None) -> ABRecord:
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


def run_record_of(ab: ABRecord) -> Any:
    """An ab.json written before A/Bs were run records (format lawbench-ab/1, e.g. results/cpu-nights/
    ab-*.json) as the run record it would be now: what `lawbench history import` and the report read."""
    from lawbench.core.models.run_record import RunRecord

    results = [as_result(r, ab.profile, ab.gate_min_ratio) for r in ab.results]
    record = RunRecord(run_id=ab.run_id, started=ab.started, argv=ab.argv, lawbench_version=ab.lawbench_version,
                       git_commit=ab.commit, profile=ab.profile, profile_matches=True, mode="ab",
                       settings=settings(ab.pairs_budget, ab.confidence, ab.gate_min_ratio) | {"method": ab.method},
                       machine=ab.machine, environment=ab.environment, engine=engine_of(ab.engines))
    record.finish(results, interrupted=ab.interrupted)
    record.finished = ab.finished or record.started
    return record
