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

import time
import uuid
from typing import TYPE_CHECKING, Any, Callable, Optional

from lawbench.core.errors import EngineError, EngineInterrupted, LawbenchError, NotApplicable, UsageError
from lawbench.core.models import Anchor, Budget, Result, Sample, Verdict
from lawbench.core.record.ab_json import GATE_WORDS, ABResult, as_result, engine_of, gate_band, settings
from lawbench.core.models.run_record import not_every_result_passed
from lawbench.core.run.mode import Mode, Stopped

if TYPE_CHECKING:
    from lawbench.core.claims.loading import LoadedAnchor
    from lawbench.core.laws.law import Law
    from lawbench.core.models import HardwareProfile
    from lawbench.core.run.context import RunContext
    from lawbench.core.run.run import Run

SPEED_KINDS = ("measurement", "agreement", "ratio")


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


# --------------------------------------------------------------------------- selection


def is_speed_anchor(anchor: Anchor, laws: dict[str, Any]) -> bool:
    """Measured on an engine in tokens per second, as the anchor's own law reads it
    (``Law.measures_engine_speed``); an anchor of a law not in ``laws`` (the run's registry's) is not."""
    if not anchor.runs or anchor.kind not in SPEED_KINDS:
        return False
    law = laws.get(anchor.law)
    return law is not None and law.measures_engine_speed(anchor)


def select_anchors(ctx: "RunContext", k: Optional[str]) -> "list[LoadedAnchor]":
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


def measure_anchor(loaded: "LoadedAnchor", law: "Law", profile: "HardwareProfile", engines: dict[str, Any],
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
