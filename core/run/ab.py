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
"""
from __future__ import annotations

import time
from typing import Any, Optional

from lawbench.core.errors import EngineError, EngineInterrupted, LawbenchError, NotApplicable, UsageError
from lawbench.core.models import Budget, Sample, Verdict
from lawbench.core.record.ab_json import GATE_WORDS, ABResult, gate_band

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


def is_speed_anchor(anchor: Any) -> bool:
    """Measured on an engine in tokens per second, as the anchor's own law reads it
    (``Law.measures_engine_speed``); an anchor of a law not installed here is not."""
    if not anchor.runs or anchor.kind not in SPEED_KINDS:
        return False
    from lawbench.core.laws.registry import get_registry

    law = get_registry().laws.get(anchor.law)
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
    speed = [la for la in chosen if is_speed_anchor(la.anchor)]
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
    except EngineInterrupted:
        raise
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
        # Stopped: the pairs and every visit so far ride on the interrupt to the record.
        signal = exc.signal_name if isinstance(exc, EngineInterrupted) else EngineInterrupted.signal_of(exc)
        kept = as_pairs(list(getattr(exc, "samples", [])))
        exc.ab_result = ABResult(**base, status="error", reason=f"interrupted by {signal}", samples=kept,  # type: ignore[union-attr]
                                 pairs=len(kept), ratios=pair_ratios(kept), protocol=sampler.protocol(),
                                 duration_s=round(time.monotonic() - started, 3))
        raise
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
