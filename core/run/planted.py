"""Planted faults: the proof that a census anchor can turn red.

A census anchor that always passes proves nothing. Each census anchor of a built-in law declares
planted faults (`[[anchor.planted]]`: a case overlay that turns one fast path off with the
engine's own switch, or a placement that leaves the GPU, and the labels that must then break).
`lawbench census plant --profile P` runs, per anchor on this machine:

  1. the census as published                         -> must PASS
  2. the law's parity check on that configuration    -> the reference output (perplexity)
  3. per planted fault: the census with the overlay  -> must FAIL, naming every label in `breaks`
  4. per planted fault: the parity check, same switches -> must stay within PARITY_TOLERANCE of 2
  (a fault on a census that was red before it proves nothing)

A fault whose census stays green, or fails without naming its labels, or whose output moved
(then the switch changed the model's arithmetic, not only its path), is a failed proof: exit 1.
That is seed 002's landing-day bug, reproduced on purpose: parity green, fast path gone, and only
the census says so.

A proof is a run like any other (lawbench.core.run, its mode :class:`Plant`): its record is OUT/run.json and a
row of OUT/history.sqlite — per anchor its census result, per planted fault a result
"<anchor>~<fault>" that PASSes when the fault was proved — and OUT/planted.json is its view.
"""
from __future__ import annotations

import math
import uuid
from typing import TYPE_CHECKING, Any, Optional

from lawbench.core.errors import EngineError, LawbenchError, NotApplicable, UsageError
from lawbench.core.run.evaluate import RunPolicy, evaluate
from lawbench.core.models import Anchor, Result, Verdict
from lawbench.core.models.result import PlantProof
from lawbench.core.models.run_record import not_every_result_passed
from lawbench.core.run.mode import Mode, Stopped

if TYPE_CHECKING:
    from lawbench.core.claims.loading import LoadedAnchor
    from lawbench.core.run.context import RunContext
    from lawbench.core.run.run import Run

# Perplexity through another kernel path differs by rounding only: the H200 and CPU planted runs
# moved it by at most 0.021 % (results/h200/census/planted.json). 0.1 % keeps five times that margin
# and still catches garbage output on the synthetic models, whose perplexity is not the uniform one
# (syn-25m 31913 against 32000 for a uniform guess over its vocabulary: 0.28 % apart).
PARITY_TOLERANCE = 0.001


def _parity(law: Any, anchor: Anchor, policy: RunPolicy, resources: Any) -> dict[str, Any]:
    try:
        return law.parity(anchor, policy.profile, resources)
    except (NotApplicable, EngineError) as exc:
        return {"error": str(exc)}


def plant_anchor(anchor: Anchor, law: Any, policy: RunPolicy, resources: Any,
                 file: str | None = None, stop: Any = None) -> dict[str, Any]:
    """Run one census anchor unplanted and with each of its planted faults; the proof record.

    :param stop: the command's StopSignals: once it has received a signal, the anchor's proof so
        far is raised with :class:`Stopped`, as the record's results (the engine turned the signal
        into an ERROR result).
    """
    def check(record: dict[str, Any]) -> None:
        if stop is not None and stop.received:
            record.update(proved=False, problems=[f"interrupted by {stop.received}"])
            raise Stopped(stop.received, proof_results(anchor, record, policy.profile.id))

    base = evaluate(anchor, law, policy, resources, file=file)
    record: dict[str, Any] = {"anchor": anchor.id, "file": file, "unplanted": base.model_dump(mode="json"),
                              "parity": {}, "faults": []}
    check(record)
    # not runnable here (a skip, also one --strict turned into a FAIL): nothing to plant into
    if base.verdict in (Verdict.SKIP, Verdict.ERROR) or base.strict_skip:
        record.update(proved=False, skipped=base.verdict is Verdict.SKIP or bool(base.strict_skip),
                      problems=[f"the census itself is {base.verdict.value}: {base.reason}"])
        for fault in anchor.planted:
            record["faults"].append({"fault": fault.name, "why": fault.why, "case": fault.case, "breaks": fault.breaks,
                                     "result": None, "parity": {}, "parity_ratio": None, "proved": False,
                                     "problems": ["not run: the unplanted census did not run here"]})
        return record
    base_parity = record["parity"] = _parity(law, anchor, policy, resources)
    check(record)
    problems = []
    if base.verdict is not Verdict.PASS:
        problems.append(f"the census itself is {base.verdict.value}, not PASS: {base.reason}")
    for fault in anchor.planted:
        variant = anchor.with_fault(fault)
        got = evaluate(variant, law, policy, resources, file=file)
        check(record)
        par = _parity(law, variant, policy, resources)
        check(record)
        missing = [label for label in fault.breaks if f"{label}:" not in got.reason]
        ratio = (par["ppl"] / base_parity["ppl"]) if "ppl" in par and "ppl" in base_parity else None
        why = []
        if base.verdict is not Verdict.PASS:  # a red that was red before proves nothing
            why.append(f"the unplanted census is already {base.verdict.value}")
        if got.verdict is not Verdict.FAIL:
            why.append(f"the census stayed {got.verdict.value}" + (f" ({got.reason})" if got.reason else ""))
        elif missing:
            why.append(f"the census failed without naming {', '.join(missing)}: {got.reason}")
        if ratio is None:
            why.append(f"no parity reading: {par.get('error') or base_parity.get('error')}")
        elif not math.isfinite(ratio) or abs(ratio - 1) > PARITY_TOLERANCE:
            why.append(f"parity moved: perplexity x{ratio:.5f} of the unplanted run's (tolerance "
                       f"{PARITY_TOLERANCE:.1%}), so the switch changed the output, not only the path")
        record["faults"].append({"fault": fault.name, "why": fault.why, "case": fault.case,
                                 "breaks": fault.breaks, "result": got.model_dump(mode="json"),
                                 "parity": par, "parity_ratio": ratio,
                                 "proved": not why, "problems": why})
        problems += [f"{fault.name}: {w}" for w in why]
    record["proved"] = not problems
    record["problems"] = problems
    return record


def census_anchors(ctx: Any, ids: tuple[str, ...] = ()) -> list[Any]:
    """The census anchors this run context selects (or exactly ``ids``, each with a planted fault)."""
    available = [la for la in ctx.anchor_set.anchors
                 if la.anchor.kind == "census" and la.anchor.runs and ctx.selected(la)]
    chosen = [la for la in available if not ids or la.anchor.id in ids]
    unknown = set(ids) - {la.anchor.id for la in chosen}
    if unknown:
        here = [la.anchor.id for la in available] or ["none"]
        everything = {la.anchor.id: la.anchor for la in ctx.anchor_set.anchors}
        bad = sorted(unknown)[0]
        found = everything.get(bad)
        if found is None:
            hint = " (no such anchor)"
        elif found.kind != "census":
            hint = f" ({'an' if found.kind[0] in 'aeiou' else 'a'} {found.kind} anchor, not a census)"
        elif not found.planted:
            hint = " (it declares no planted fault: there is nothing to plant)"
        elif found.profiles and ctx.policy.profile.id not in found.profiles:
            hint = f" (it binds to {', '.join(found.profiles)}: give --profile {found.profiles[0]})"
        else:
            hint = f" (status {found.status}: it does not run)" if not found.runs else " (not selected)"
        raise UsageError(f"--anchor {bad!r}: no runnable census anchor of profile {ctx.policy.profile.id!r}{hint}; "
                         f"this profile's: {', '.join(here)}")
    bare = [la.anchor.id for la in chosen if ids and not la.anchor.planted]
    if bare:  # asked for by name, yet nothing could be planted into it
        raise UsageError(f"--anchor {bare[0]!r} declares no planted fault: there is nothing to plant into it "
                         "(docs/census.md says how a census without one is proved)")
    return chosen


def run_plant(profile_id: str, ids: tuple[str, ...] = (), out: Any = None, llama_dir: str | None = None,
              strict: bool = False) -> tuple[Any, dict[str, Any]]:
    """`lawbench census plant`: every selected census anchor unplanted and planted, as a Run.

    Returns the Run (its exit code: 0 only when every planted fault proved its anchor — red census,
    green parity; 1 when one did not, or did not run here (off its runner an anchor SKIPs and proves
    nothing); 128 + the signal's number when a signal stopped it, the record keeping what ran) and
    the planted.json view of its record, also written to ``out``.
    """
    from pathlib import Path

    from lawbench.core.engines.llamacpp import check_llama_dir
    from lawbench.core.run.run import Run
    from lawbench.core.run.context import RunContext

    check_llama_dir(llama_dir)
    ctx = RunContext(profile_id, strict=strict, llama_dir=llama_dir)
    mode = Plant(ids, llama_dir=llama_dir)
    chosen = mode.select(ctx)
    if not any(la.anchor.planted for la in chosen):  # before anything builds: nothing could be proved
        elsewhere = sorted({p for la in ctx.anchor_set.anchors if la.anchor.kind == "census" and la.anchor.planted
                            and la.anchor.runs for p in la.anchor.profiles})
        raise UsageError(f"no census anchor of profile {ctx.policy.profile.id!r} declares a planted fault: nothing "
                         f"to prove here (profiles whose census anchors do: {', '.join(elsewhere) or 'none'})")
    if out:  # before any engine runs: a proof that cannot be written is refused, not thrown away
        from lawbench.core.paths import writable_dir

        writable_dir(Path(out), "--out folder", fix="give a writable path")
    if strict and not ctx.policy.on_own_runner:  # as `lawbench run --strict`: refuse before building anything
        reasons = "; ".join(r.removeprefix("no: ") for r in ctx.policy.mismatch)
        raise LawbenchError(f"--strict: this machine does not match profile {ctx.policy.profile.id!r} ({reasons}): "
                            f"its planted faults run on a {ctx.policy.profile.id} runner")
    run = Run(ctx, mode=mode, out=Path(out) if out else None)
    record = run.measure(chosen)
    view = planted_view(record)
    if out:
        import json

        target = Path(out) / "planted.json"
        try:
            target.write_text(json.dumps(view, indent=1, default=str) + "\n", encoding="utf-8")
        except OSError as exc:  # the folder went away or filled up during the run
            run.output_error(f"cannot write the planted-fault record {target}: {exc.strerror or exc}")
    return run, view


class Plant(Mode):
    """`lawbench census plant`: per census anchor, its proof (plant_anchor) as the record's results —
    its census as measured, then per planted fault "<anchor>~<fault>" (proof_results).

    :param ids: the anchors asked for with --anchor (empty: every census anchor selected).
    """

    name = "plant"
    exit_rule = staticmethod(not_every_result_passed)

    def __init__(self, ids: tuple[str, ...] = (), llama_dir: Optional[str] = None):
        self.ids, self.llama_dir = tuple(ids), llama_dir

    def select(self, ctx: "RunContext") -> "list[LoadedAnchor]":
        return census_anchors(ctx, self.ids)

    def evaluate(self, run: "Run", loaded: "LoadedAnchor") -> list[Result]:
        anchor = loaded.anchor
        if not anchor.planted:
            rec = {"anchor": anchor.id, "file": loaded.file, "proved": False, "no_faults": True,
                   "problems": ["no planted fault declared: this command proves nothing about it"], "faults": []}
        else:  # a stop while an engine ran raises Stopped with the anchor's proof so far
            rec = plant_anchor(anchor, run.ctx.registry.law(anchor.law), run.policy, run.resources,
                               file=loaded.file, stop=run.stop)
        return proof_results(anchor, rec, run.policy.profile.id)

    def finish(self, run: "Run") -> dict[str, Any]:
        import platform

        return {"settings": {"anchors_asked": list(self.ids), "llama_dir": self.llama_dir, "host": platform.node(),
                             "parity_tolerance": PARITY_TOLERANCE},
                "run_id": f"plant-{uuid.uuid4().hex}", "gate": None}


def proof_results(anchor: Anchor, rec: dict[str, Any], profile: str) -> list[Result]:
    """One anchor's proof as run-record results: its census as measured (or, with no planted
    fault, a SKIP listed for the record only), then per fault "<anchor>~<fault>": PASS when the
    fault was proved, SKIP when it could not run here, ERROR when its census could not run,
    FAIL when it ran and proved nothing. Each result's ``plant`` (Result.plant) keeps the proof's record."""
    plant = PlantProof(anchor=anchor.id, **{k: rec[k] for k in ("file", "parity", "proved", "problems",
                                                                "skipped", "no_faults") if k in rec})
    if "unplanted" in rec:
        base = Result.model_validate(rec["unplanted"])
        base.plant = plant
    else:
        base = Result(anchor_id=anchor.id, law=anchor.law, kind=anchor.kind, profile=profile, verdict=Verdict.SKIP,
                      quantity=anchor.quantity, unit=anchor.unit, reason="; ".join(rec["problems"]),
                      listed_only=True, plant=plant)
    out = [base]
    for f in rec["faults"]:
        ran = f["result"] is not None
        verdict = Verdict.PASS if f["proved"] else Verdict.FAIL if ran else \
            Verdict.SKIP if rec.get("skipped") else Verdict.ERROR
        reason = "; ".join(f["problems"]) or (f"the census turned red naming {', '.join(f['breaks'])}, parity "
                                              f"x{f['parity_ratio']:.5f}: {f['result']['reason']}")
        out.append(Result(anchor_id=f"{anchor.id}~{f['fault']}", law=anchor.law, kind="census", profile=profile,
                          verdict=verdict, reason=reason, quantity=anchor.quantity, unit=anchor.unit,
                          duration_s=(f["result"] or {}).get("duration_s") or 0.0,
                          plant=PlantProof(anchor=anchor.id, fault=f)))
    return out


def planted_view(record: Any) -> dict[str, Any]:
    """OUT/planted.json of a plant run's record (docs/census.md): per anchor its census, parity
    and every fault's proof, as the command has always written it."""
    anchors: list[dict[str, Any]] = []
    by_anchor: dict[str, dict[str, Any]] = {}
    for r in record.results:
        if r.plant is None:
            continue
        if r.plant.fault is not None:  # a fault's proof joins its census anchor's entry
            by_anchor[r.plant.anchor]["faults"].append(r.plant.fault)
            continue
        proof = r.plant.model_dump(mode="json", exclude={"anchor", "fault"})
        proof = {k: v for k, v in proof.items() if v is not None or k == "file"}
        entry = by_anchor[r.plant.anchor] = {"anchor": r.anchor_id, **proof, "faults": []}
        if not r.plant.no_faults:
            entry["unplanted"] = r.model_dump(mode="json", exclude={"plant"})
        anchors.append(entry)
    s = record.settings
    return {"kind": "lawbench planted-fault run", "run_id": record.run_id, "profile": record.profile,
            "started": record.started, "finished": record.finished, "lawbench": record.lawbench_version,
            "commit": record.git_commit, "strict": record.strict, "anchors_asked": s.get("anchors_asked", []),
            "llama_dir": s.get("llama_dir"), "host": s.get("host"), "on_own_runner": record.profile_matches,
            "parity_tolerance": s.get("parity_tolerance"), "interrupted": record.interrupted, "anchors": anchors}


def summary_lines(record: dict[str, Any]) -> list[tuple[str, str, str, str, str]]:
    """(anchor, fault, census verdict, census reason, parity) rows for a table."""
    rows = []
    for r in record["anchors"]:
        un = r.get("unplanted") or {}
        par = r.get("parity") or {}
        rows.append((r["anchor"], "(none)", un.get("verdict", "-"), un.get("reason", "") or "; ".join(r["problems"]),
                     f"ppl {par['ppl']:.2f}" if "ppl" in par else (par.get("error") or "-")))
        for f in r["faults"]:
            res = f["result"] or {"verdict": "-", "reason": "; ".join(f["problems"])}
            ratio = f["parity_ratio"]
            rows.append((r["anchor"], f["fault"] + ("" if f["proved"] else "  NOT PROVED"), res["verdict"],
                         res["reason"], f"x{ratio:.5f}" if ratio is not None else (f["parity"].get("error") or "-")))
    return rows
