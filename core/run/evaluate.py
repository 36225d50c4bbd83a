"""Run one anchor to a Result: predict, measure under the protocol, decide the verdict.

The skip policy lives here, in one place: a skip is not a pass. On a runner whose fingerprint
matches the anchor's profile (or with --strict) a skip becomes a FAIL; on other hardware the
anchor's measurements are skipped with the reason and its predictions still run.
"""
from __future__ import annotations

import math
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Optional

from lawbench.core.errors import (DataError, EngineError, EngineOfRecordMissing, LawbenchError, NotApplicable,
                                  OutOfScope)
from lawbench.core.laws.law import Law
from lawbench.core.models import Anchor, Budget, HardwareProfile, Measurement, Result, Verdict
from lawbench.core.models.result import Sampling
from lawbench.core.engines.harness_sampler import harness_sampler
from lawbench.core.record.census import census_problems, judged_labels
from lawbench.core.stats.verdicts import classify, decide_sequential, looks, median, relative_spread


@dataclass
class RunPolicy:
    profile: HardwareProfile  # the profile this run was asked for
    profiles: dict[str, HardwareProfile]
    on_own_runner: bool  # this machine's fingerprint matches the requested profile
    strict: bool = False
    mismatch: tuple[str, ...] = ()  # what this machine lacks of the profile ("no: …" lines)


def _base(anchor: Anchor, profile_id: str) -> dict[str, Any]:
    return dict(anchor_id=anchor.id, law=anchor.law, kind=anchor.kind, profile=profile_id,
                quantity=anchor.quantity, unit=anchor.unit, published=anchor.value)


def retired_result(anchor: Anchor, profile_id: str) -> Result:
    """Superseded / refuted / retired anchors are shown as history, never run."""
    ref = anchor.successor
    why = f"{anchor.status}" + (f" by {ref}" if ref else "")
    return Result(**_base(anchor, profile_id), verdict=Verdict.SKIP, reason=f"history: {why}",
                  retired=anchor.status, retired_by=ref)


def _prediction_profile(anchor: Anchor, policy: RunPolicy) -> HardwareProfile:
    # A prediction runs anywhere; it prices the case with the constants of the profile it binds to.
    if anchor.profiles and policy.profile.id not in anchor.profiles:
        return policy.profiles[anchor.profiles[0]]
    return policy.profile


def _skip(anchor: Anchor, policy: RunPolicy, reason: str, profile_id: str) -> Result:
    # A prediction bound to another profile (it reads a file only that profile's runner holds)
    # is that runner's to run: here its skip is a plain SKIP, even under --strict.
    ours = not anchor.profiles or policy.profile.id in anchor.profiles
    if policy.strict and ours:  # a runner job that cannot measure fails, finding or not (see _apply_finding)
        return Result(**_base(anchor, profile_id), verdict=Verdict.FAIL,
                      reason=f"skipped under --strict: {reason}", strict_skip=True)
    if policy.on_own_runner and anchor.kind != "prediction":
        return Result(**_base(anchor, profile_id), verdict=Verdict.FAIL,
                      reason=f"a skip on the anchor's own runner is a failure: {reason}",
                      strict_skip=True)
    return Result(**_base(anchor, profile_id), verdict=Verdict.SKIP, reason=reason)


def evaluate(anchor: Anchor, law: Law, policy: RunPolicy, resources: Any = None,
             file: Optional[str] = None) -> Result:
    """:param file: the anchor's file, so that a data error found while running names it."""
    started = time.monotonic()
    if not anchor.runs:
        return retired_result(anchor, policy.profile.id)
    profile = _prediction_profile(anchor, policy) if anchor.kind == "prediction" else policy.profile
    try:
        result = _evaluate(anchor, law, profile, policy, resources)
    except EngineOfRecordMissing as exc:  # a runner job must bring the engine of record
        result = _skip(anchor, policy, str(exc), profile.id) if policy.strict else \
            Result(**_base(anchor, profile.id), verdict=Verdict.SKIP, reason=str(exc))
    except OutOfScope as exc:  # the anchor's own stated scope (a rule, engine builds): a plain SKIP, on any runner
        result = Result(**_base(anchor, profile.id), verdict=Verdict.SKIP, reason=str(exc), out_of_scope=str(exc),
                        detail={"out_of_scope": exc.detail} if exc.detail else {})
    except NotApplicable as exc:
        result = _skip(anchor, policy, str(exc), profile.id)
    except EngineError as exc:
        m = Measurement(samples=exc.samples, log=exc.log[-4000:] if exc.log else None)
        result = Result(**_base(anchor, profile.id), verdict=Verdict.ERROR, reason=str(exc), measurement=m)
    except DataError as exc:
        reason = str(exc.located(file, anchor.id) if file else exc)
        result = Result(**_base(anchor, profile.id), verdict=Verdict.ERROR, reason=reason)
    except LawbenchError as exc:
        result = Result(**_base(anchor, profile.id), verdict=Verdict.ERROR, reason=str(exc))
    except Exception as exc:  # a plugin bug: report it on the anchor, keep the run going
        tb = traceback.format_exc(limit=6)
        result = Result(**_base(anchor, profile.id), verdict=Verdict.ERROR,
                        reason=f"{type(exc).__name__} in law {law.name!r}: {exc!r} (a bug in the law plugin, "
                               "or a case field its case_model does not check)", detail={"traceback": tb})
    result.duration_s = round(time.monotonic() - started, 3)
    return _note_print_limited(anchor, _apply_expected_void(anchor, _apply_finding(anchor, result)))


def _apply_expected_void(anchor: Anchor, result: Result) -> Result:
    """A source that scored its own run VOID claims the instrument cannot resolve the band at that
    budget: VOID confirms the claim (PASS), a resolved interval, in the band or out, refutes it."""
    if anchor.expect != "VOID" or result.verdict not in (Verdict.PASS, Verdict.FAIL, Verdict.VOID):
        return result
    result.expected_void = anchor.expect_reason
    if result.verdict is Verdict.VOID:
        n = result.sampling.n if result.sampling else 0
        if n < anchor.budget.max_samples:  # stopped early (timeout, a stop): the source's n was not reached
            result.reason = (f"VOID after {n} of the {anchor.budget.max_samples} samples the source's claim "
                             f"is about: not a confirmation; {result.reason}")
            return result
        result.verdict = Verdict.PASS
        result.reason = f"VOID, as the source found ({anchor.expect_reason}): {result.reason}".rstrip(": ")
    else:
        was = result.verdict.value
        result.verdict = Verdict.FAIL
        result.reason = (f"the interval resolved the band ({was}) where the source could not "
                         f"({anchor.expect_reason}): {result.reason}").rstrip(": ")
    return result


def _note_print_limited(anchor: Anchor, result: Result) -> Result:
    """A print-limited band is the nearest basis the source gives, not its own: every report shows
    that beside the verdict, with the reason (docs/bands.md)."""
    if anchor.resolution and not result.retired:
        result.print_limited = anchor.resolution_reason
        note = f"print-limited band: {anchor.resolution_reason}"
        result.reason = f"{result.reason}; {note}" if result.reason else note
    return result


def _apply_finding(anchor: Anchor, result: Result) -> Result:
    """An open finding is expected to FAIL; if it passes, the finding has closed and someone must
    update the anchor (pytest's strict xfail, in the user's words)."""
    if not anchor.finding or result.strict_skip:
        return result
    if result.verdict is Verdict.FAIL:
        result.open_finding = anchor.finding
        result.reason = f"open finding (expected FAIL, does not fail the build): {result.reason}"
    elif result.verdict is Verdict.PASS:
        result.verdict = Verdict.FAIL
        result.finding_closed = anchor.finding  # news for the nightly gate (core/history/gate.py)
        result.reason = ("the open finding no longer reproduces: the law now lands in the published band; "
                         "close it (remove `finding` from the anchor)")
    return result


def rate_budget(budget: Budget, sampler: Any, profile: HardwareProfile) -> Budget:
    """The anchor's budget, its first look no earlier than the profile's nightly rate_visits when
    its sampler also reads the runner's rate series (issue 31): the rate test reads a night's
    fastest visit, and the more visits, the less a night's reading depends on which of them a
    neighbour slowed. Never beyond the anchor's max_samples; other anchors keep their budget."""
    want = profile.nightly.rate_visits if profile.nightly else 0
    if not want or not getattr(sampler, "series", None):
        return budget
    first = min(max(budget.min_samples, want), budget.max_samples)
    return budget if first == budget.min_samples else budget.model_copy(update={"min_samples": first})


def _evaluate(anchor: Anchor, law: Law, profile: HardwareProfile, policy: RunPolicy,
              resources: Any) -> Result:
    base = _base(anchor, profile.id)
    if anchor.kind == "prediction":
        pred = law.predict(anchor, profile, resources)
        if not isinstance(pred.value, (int, float)) or not math.isfinite(pred.value):
            raise LawbenchError(f"anchor {anchor.id}: law {law.name!r} predicted {pred.value!r}, not a finite number")
        band = anchor.band_interval()
        verdict = classify((pred.value, pred.value), band)
        assert verdict is not None  # a point is never straddling
        reason = "" if verdict is Verdict.PASS else \
            f"the law predicts {pred.value:.6g} {anchor.unit}, outside the published band [{band[0]:.6g}, {band[1]:.6g}]"
        return Result(**base, verdict=verdict, reason=reason, predicted=pred.value, measured=None,
                      interval=(pred.value, pred.value), band=band, detail=pred.detail,
                      statistic="the law's prediction (a point: no sampling)")

    if anchor.profiles and profile.id not in anchor.profiles:
        raise NotApplicable(f"anchor binds to {', '.join(anchor.profiles)}, not {profile.id}")
    if not policy.on_own_runner:
        lacks = "; ".join(r.removeprefix("no: ") for r in policy.mismatch)
        raise NotApplicable(f"this machine does not match profile {profile.id!r}"
                            + (f" (it lacks: {lacks})" if lacks else "")
                            + f"; its measurements run on a {profile.id} runner")

    if anchor.kind == "census":
        census = law.census(anchor, profile, resources)
        return _census_result(anchor, base, census)

    # The sampler first, so that what keeps the anchor from being measured here (a case outside
    # the law's measured scope, a model this machine lacks) decides the result before any price.
    # Both are handed the run's resources; the law answers the same in either order.
    if anchor.harness is not None:  # the source's own script measures it, whatever the law
        sampler = harness_sampler(anchor, profile)
    else:
        sampler = law.sampler(anchor, profile, resources)
    predicted: Optional[float] = None
    calibrated: Optional[Callable[[float], float]] = None
    detail: dict[str, Any] = {}
    if anchor.kind == "agreement":
        prediction = law.predict(anchor, profile, resources)
        predicted, calibrated = prediction.value, prediction.from_reference
        if not predicted or predicted <= 0 or not math.isfinite(predicted):
            raise LawbenchError(f"anchor {anchor.id}: the law predicted {predicted!r}, cannot form a ratio")
        if calibrated is not None and not anchor.arms:
            raise LawbenchError(f"anchor {anchor.id}: a prediction calibrated on a reference arm needs arms a and b")
        detail.update(predicted=predicted, predicted_unit=anchor.unit, prediction=prediction.detail)

    def statistic(samples):
        if calibrated is not None:
            # Per round: arm a measured over the law's arm a, priced with arm b of the same round.
            return [s.raw["value_a"] / calibrated(s.raw["value_b"]) for s in samples]
        values = sampler.statistic(samples)
        return [v / predicted for v in values] if predicted else values

    band = anchor.band_interval()
    budget = rate_budget(anchor.budget, sampler, profile)
    decision = decide_sequential(sampler.draw, statistic, band, budget,
                                 log=getattr(sampler, "log_scale", True))
    m = Measurement(samples=decision.samples, protocol=sampler.protocol(), environment=sampler.environment())
    raw = sampler.statistic(decision.samples) if decision.samples else []
    sampling = Sampling(method=decision.method, confidence_per_look=round(decision.confidence, 6),
                        looks=looks(budget), n=len(decision.values),
                        family_confidence=budget.confidence)
    if calibrated is not None:
        detail["calibrated_on"] = "arm b, round by round"
    if predicted:
        # One statistic per result: the band, the value and the interval are all measured/predicted;
        # the raw speed (in the anchor's unit) is kept beside the prediction, in the detail.
        if calibrated is not None:  # the raw speed is arm a's; a/b alone means nothing here
            raw, unit = [s.raw["value_a"] for s in decision.samples], "tok/s of arm a"
        else:
            unit = anchor.unit
        detail.update(measured_median=median(raw) if raw else None, measured_unit=unit)
    reason = decision.reason
    if decision.verdict is Verdict.FAIL:
        reason = (f"interval [{decision.interval[0]:.4g}, {decision.interval[1]:.4g}] lies outside the band "
                  f"[{band[0]:.4g}, {band[1]:.4g}]")
    base.update(unit="x" if predicted else anchor.unit,
                statistic=_statistic_name(anchor, predicted is not None, decision.method))
    return Result(**base, verdict=decision.verdict, reason=reason, measured=decision.statistic,
                  interval=decision.interval, band=band, spread=relative_spread(decision.values),
                  measurement=m, sampling=sampling, detail=detail, agreement_predicted=predicted,
                  rates=sampler.rates() if hasattr(sampler, "rates") else [])


def _statistic_name(anchor: Anchor, agreement: bool, method: str) -> str:
    what = "measured/predicted" if agreement else anchor.quantity
    unit = "per interleaved round" if anchor.arms else "per engine visit"
    centre = "geometric mean" if "log" in method else "mean"
    return f"{centre} of {what}, one sample {unit}"


def _census_result(anchor: Anchor, base: dict[str, Any], census: Any) -> Result:
    spec = anchor.census
    assert spec is not None
    problems = census_problems(spec, census.counts)
    verdict = Verdict.FAIL if problems else Verdict.PASS
    m = Measurement(environment=census.environment, log=census.log[-4000:] if census.log else None)
    return Result(**base, verdict=verdict, reason="; ".join(problems), measurement=m,
                  census_counts=dict(census.counts), census_judged=judged_labels(spec, census.counts),
                  statistic="label counts from one engine run")
