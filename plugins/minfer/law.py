"""minfer — the user's CUDA engine on a GB10 (seed 002): gates, path labels, per-PID memory.

What this law checks:
  census       run the engine once with MINFER_MMQ_RAW_NB_DEBUG=1 and count the q6_K B-path labels
               (27 fast / 0 fallback! is the liveness census of seed 002);
  measurement  per-PID GPU memory, whole-prefill tok/s, or the mean GPU time per launch of one
               kernel at one grid (CUPTI tracer, contract §9) of one engine pass, or the difference
               of two interleaved arms;
  ratio        whole-prefill tok/s or kernel time of two interleaved arms (EXP=0 vs default);
  prediction   the W_exp plane's bytes, Σ od × id over the model's q6_K tensors (pure arithmetic),
               in the anchor's unit: B, MiB, GB, or % of a card of case.card_gb GB;
  census       (measure = "q6k_tensors") the q6_K tensors of the model file, from its GGUF header;
  census       (measure = "test_suite") the engine's own test suite: passed / failed / ignored from
               libtest's summary lines (contract §10);
  census       (measure = "gate_switch") one gate's switch semantics: three traced passes (unset, its on
               value, "0") and how many kernels' counts differ between them (contract §9).

The engine is the user's own: set LAWBENCH_MINFER_CMD to a command line that runs one whole-prefill
pass and speaks the lawbench minfer contract (docs/minfer-contract.md). Without it every engine anchor is
NotApplicable — a SKIP elsewhere, a FAIL on a gb10 runner, where a skip is not a pass. Every engine
run names the engine revisions its number was published for; the engine is asked its revision
first, and outside the range the anchor SKIPs — or, when the range holds the profile's engine of
record, fails under --strict naming it (lawbench.plugins.minfer.revisions).
"""
from __future__ import annotations

from typing import Any, Optional

from lawbench import Anchor, Census, HardwareProfile, Law, NotApplicable, Prediction, Sampler
from lawbench.hardware import PerPidMemory
from lawbench.plugins.minfer.case import SAMPLED_MEASURES, PERCENT, PLANE_UNITS, Case, Run, check_case, runs
from lawbench.plugins.minfer.contract import DEBUG_ENV, greedy
from lawbench.plugins.minfer.engine import child_env, engine_argv, engine_identity, run_engine
from lawbench.plugins.minfer.labels import count_labels
from lawbench.plugins.minfer.model_census import q6k_census
from lawbench.plugins.minfer.revisions import record_hint, require_commit, require_record
from lawbench.plugins.minfer.sampling import EngineReader
from lawbench.plugins.minfer.gates import gate_census
from lawbench.plugins.minfer.parity import parity_census
from lawbench.plugins.minfer.suite import suite_census

PLANE_ROW_MULTIPLE = 256  # seed 002: the plane is registered only where id % 256 == 0


def _lock(resources: Any) -> None:
    # One job per box: a co-tenant skews timing and memory (seed 002 lost two suite cases to one).
    lock = getattr(resources, "lock", None)
    if callable(lock):
        lock()


class Minfer(Law):
    name = "minfer"
    title = "minfer engine: q6_K W_exp plane, path-label census, per-PID memory (seed 002)"
    case_model = Case

    def check_anchor(self, anchor: Anchor) -> None:
        check_case(anchor)

    anchors_package = "lawbench.anchors.minfer"

    def predict(self, anchor: Anchor, profile: HardwareProfile, resources: Any = None) -> Prediction:
        case = check_case(anchor)
        # plane_bytes: the plane in the anchor's unit; agreement: in MiB, the unit memory is read in.
        agreement = anchor.kind == "agreement" and case.measure == "per_pid_memory_mib"
        if case.measure != "plane_bytes" and not agreement:
            raise NotApplicable(f"law 'minfer' has no prediction for anchor {anchor.id!r}")
        if not case.shapes:
            raise NotApplicable(f"anchor {anchor.id}: case.shapes is empty; nothing to price")
        total, parts, excluded = 0, {}, []
        for s in case.shapes:
            if s.id % PLANE_ROW_MULTIPLE:
                excluded.append(s.name)  # no plane: the kernel keeps in-kernel expand for it
                continue
            # One int8 byte per element, od × id per tensor: rows beyond od are zero-filled by the
            # copy, not stored, so no tile padding enters the plane.
            parts[s.name] = s.count * s.od * s.id
            total += parts[s.name]
        detail = {"bytes": total, "bytes_per_group": parts, "no_plane": excluded, "mib": round(total / 2 ** 20, 3)}
        if agreement:
            return Prediction(total / PLANE_UNITS["MiB"], detail)
        if anchor.unit == PERCENT:  # check_case: card_gb is set exactly when the unit is %
            assert case.card_gb is not None
            detail["card_bytes"] = case.card_gb * 1e9  # the seed's GB are 10^9 B (see the anchors' notes)
            return Prediction(100.0 * total / detail["card_bytes"], detail)
        # An exact integer stays exact: B is compared as the integer the arithmetic gives.
        return Prediction(total / PLANE_UNITS[anchor.unit] if anchor.unit != "B" else float(total), detail)

    def census(self, anchor: Anchor, profile: HardwareProfile, resources: Any) -> Census:
        case = check_case(anchor)
        if case.measure == "q6k_tensors":
            counts, environment = q6k_census(case.model_env)
            return Census(counts=counts, environment=environment)
        modes = {name: run for name, (_, run) in runs(anchor, case).items()}
        revisions = engine_revisions(anchor, modes if case.measure == "greedy_parity" else {"main": case}, profile)
        argv = engine_argv(case.command)
        _lock(resources)
        if case.measure == "greedy_parity":
            return parity_census(argv, anchor, case, revisions)
        if case.measure == "test_suite":
            return suite_census(argv, case, revisions.get("main"))
        if case.measure == "gate_switch":
            return gate_census(argv, case, revisions.get("main"))
        env = child_env({**DEBUG_ENV, **case.env}, case.unset_env)
        done = run_engine(argv, env, case.timeout_s, what=f"minfer engine ({case.command})")
        counts = count_labels(done.stderr)
        # The greedy tokens' digest rides along: a path that changed while the output did not (seed
        # 002's r53 map-key bug) shows as a red census beside an unchanged digest.
        output = greedy(done.stdout, f"minfer engine ({case.command})", log=done.log())
        return Census(counts=counts, log=done.log(),
                      environment={"command": argv, "env": {**DEBUG_ENV, **case.env},
                                   "unset_env": case.unset_env, "duration_s": round(done.duration_s, 3),
                                   "engine_revision": revisions.get("main"), **output})

    def sampler(self, anchor: Anchor, profile: HardwareProfile, resources: Any) -> Sampler:
        case = check_case(anchor)
        if case.measure not in SAMPLED_MEASURES:
            raise NotApplicable(f"law 'minfer' cannot measure anchor {anchor.id!r} "
                                f"(case.measure = {case.measure!r})")
        arms: dict[str, Run]
        if anchor.kind == "ratio" or case.statistic == "difference":
            if set(anchor.arms) != {"a", "b"}:
                raise NotApplicable(f"anchor {anchor.id}: a paired reading needs arms.a and arms.b")
            arms = {name: run for name, (_, run) in runs(anchor, case).items()}
            combine = "ratio" if anchor.kind == "ratio" else "difference"
        else:
            arms = {"main": case}
            combine = "ratio"  # unused with one arm: every reading is a sample
        revisions = engine_revisions(anchor, arms, profile)  # another engine revision: SKIP before anything runs
        reader = EngineReader(case, arms, revisions=revisions)  # resolves the commands: unset -> SKIP
        if case.measure == "per_pid_memory_mib":
            reader.memory = PerPidMemory.open()
        sampler = reader.sampler(combine)
        _lock(resources)
        return sampler


def engine_revisions(anchor: Anchor, arms: dict[str, Run], profile: Optional[HardwareProfile] = None
                     ) -> dict[str, str]:
    """Ask each minfer engine of the anchor its revision and SKIP (EngineRevisionOutOfRange) when
    one lies outside its run's range — or, when the range holds the profile's engine of record,
    report that engine missing (EngineOfRecordMissing: a FAIL under --strict). Called before any
    other command is resolved, so an old anchor SKIPs on a new engine before a missing llama.cpp
    command is even looked at."""
    record = profile.engine_of_record("minfer") if profile is not None else None
    profile_id = profile.id if profile is not None else "?"
    out: dict[str, str] = {}
    for name, run in arms.items():
        if run.revisions is None:  # llama.cpp (check_case makes every minfer engine run carry one)
            continue
        try:
            argv = engine_argv(run.command)
        except NotApplicable as exc:
            raise NotApplicable(f"{exc}{record_hint(record, run.revisions, profile_id)}") from None
        what = f"minfer engine ({run.command})"
        out[name], commit = engine_identity(argv, child_env(run.env, run.unset_env), what)
        where = "case" if name == "main" else f"arms.{name}"
        if run.commit is not None:  # a figure of one build: another build is a runner that lacks it
            require_commit(run.commit, commit, anchor.id, what, f"{where}.commit", run.command)
        field = f"{where}.revisions"
        require_record(run.revisions, out[name], anchor.id, what, field, record, profile_id, run.command)
    return out
