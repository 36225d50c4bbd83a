"""What does lawbench add on top of llama-bench? Wall time of one anchor evaluation vs the same
llama-bench invocations run bare, interleaved.

    python benchmarks/overhead.py                       # SmolLM2, syn-100m Q4_0, a two-arm ratio
    python benchmarks/overhead.py --rounds 8 --anchor law4.cpu.l15.syn-100m-q4_k_m

What is compared, per config:
  lawbench  `lawbench.core.run.evaluate.evaluate(anchor, Law4, policy, resources)`: predict (header read,
            model-store lookup), the sampler (warm-up visit per arm, then visits of bench.reps
            repetitions, A/B interleaved for two arms), environment snapshots, the bootstrap
            verdict. The budget is pinned (min = max samples) so every evaluation runs the same
            visits; the run's one-off costs (llama.cpp build/locate, RAM-bandwidth measurement,
            pytest collection, reports) are not in it.
  bare      the very same llama-bench command lines, in the same order (warm-up visits included,
            taken from the protocol record of a calibration evaluation), each run with
            subprocess.run and its output captured — what a person scripting llama-bench would do.
Rounds alternate which goes first (L B, B L, …) so drift falls on both. Printed: both medians and
lawbench / bare. Goal: ≤ 1.03.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from importlib import resources as ir
from pathlib import Path

from lawbench.core.engines.bench import bench_command
from lawbench.core.run.evaluate import RunPolicy, evaluate
from lawbench.core.hardware.bandwidth import measure_ram_bandwidth
from lawbench.core.hardware.profiles import load_profiles
from lawbench.core.claims.loading import load_anchors
from lawbench.core.models import Anchor, Budget, Fact
from lawbench.core.laws.resources import Resources
from lawbench.plugins.law4.law import Law4
from lawbench.plugins.law4.measure import arm_cases

GOAL = 1.03
DEFAULT = ("law4.cpu.l15.smollm2-135m-q4_1", "law4.cpu.l15.syn-100m-q4_0", "ratio:syn-100m")


def cpu_profile():
    cpu = load_profiles()["cpu"]
    bw = measure_ram_bandwidth(repeats=5)
    ram = cpu.tiers[0].model_copy(update={"bandwidth_measured_gbs": Fact(value=bw.median_gbs, source="overhead.py")})
    return cpu.model_copy(update={"tiers": [ram], "threads": bw.threads})


def pinned(anchor: Anchor) -> Anchor:
    """The anchor with a fixed number of samples: every evaluation runs the same visits."""
    n = 3 if anchor.arms else 6
    # The scope probe (case.scope) is a decision taken before the anchor's visits, not part of the
    # protocol whose overhead this times: left out, so both sides run the same visits.
    case = {k: v for k, v in anchor.case.items() if k != "scope"}
    return anchor.model_copy(update={"case": case, "finding": None,
                                     "budget": Budget(min_samples=n, max_samples=n, batch=n, timeout_s=600)})


def configs(names: list[str]) -> list[Anchor]:
    by_id = {la.anchor.id: la.anchor for la in
             load_anchors([ir.files("lawbench.anchors.law4") / "cpu.toml"], laws=["law4"],
                          profiles=load_profiles()).anchors}
    out = []
    for name in names:
        if name == "ratio:syn-100m":  # the Q4_0 / Q4_K_M two-arm anchor on the faster shape
            base = by_id["law4.cpu.v11.q2_k-per-byte-vs-q4_k_m.syn-400m"]
            out.append(base.model_copy(update={
                "id": "law4.cpu.ratio.q4_0-over-q4_k_m.syn-100m",
                "case": {**base.case, "model": "gguf:syn-100m-q4_0"},
                "arms": {"a": {"model": "gguf:syn-100m-q4_0"}, "b": {"model": "gguf:syn-100m-q4_k_m"}}}))
        elif name in by_id:
            out.append(by_id[name])
        else:
            sys.exit(f"overhead.py: no anchor {name!r} in anchors/law4/cpu.toml")
    return [pinned(a) for a in out]


def bare_plan(anchor: Anchor, result, res: Resources) -> list[list[str]]:
    """The llama-bench command lines a lawbench evaluation ran, in order, from its protocol record."""
    proto = result.measurement.protocol
    cases = arm_cases(anchor)
    return [bench_command(res.llama(), Path(proto["models"][v["arm"]]), repetitions=v["reps"],
                          warmup=cases[v["arm"]].bench.warmup, **proto["bench_params"][v["arm"]])
            for v in proto["visits"]]


def run_bare(cmds: list[list[str]]) -> float:
    t0 = time.perf_counter()
    for cmd in cmds:
        subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True)
    return time.perf_counter() - t0


def run_lawbench(anchor: Anchor, policy: RunPolicy, res: Resources, visits: int) -> float:
    t0 = time.perf_counter()
    r = evaluate(anchor, Law4(), policy, res)
    wall = time.perf_counter() - t0
    got = len(r.measurement.protocol["visits"]) if r.measurement else 0
    if got != visits:
        sys.exit(f"overhead.py: {anchor.id} ran {got} visits, the plan has {visits}: {r.verdict} {r.reason}")
    return wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--anchor", action="append", help="anchor id from anchors/law4/cpu.toml (repeatable)")
    ap.add_argument("--rounds", type=int, default=6, help="lawbench/bare pairs per config (default 6)")
    args = ap.parse_args()
    profile = cpu_profile()
    policy = RunPolicy(profile=profile, profiles={"cpu": profile}, on_own_runner=True)
    res = Resources(profile=profile)
    totals = {"lawbench": 0.0, "bare": 0.0}
    try:
        for anchor in configs(args.anchor or list(DEFAULT)):
            calibration = evaluate(anchor, Law4(), policy, res)  # builds/fetches, warms the page cache
            if calibration.measurement is None:
                sys.exit(f"overhead.py: {anchor.id}: {calibration.verdict} {calibration.reason}")
            plan = bare_plan(anchor, calibration, res)
            times: dict[str, list[float]] = {"lawbench": [], "bare": []}
            for i in range(args.rounds):
                order = ("lawbench", "bare") if i % 2 == 0 else ("bare", "lawbench")
                for who in order:
                    times[who].append(run_lawbench(anchor, policy, res, len(plan)) if who == "lawbench"
                                      else run_bare(plan))
            ml, mb = statistics.median(times["lawbench"]), statistics.median(times["bare"])
            totals["lawbench"] += ml
            totals["bare"] += mb
            print(f"{anchor.id}: {len(plan)} llama-bench runs per evaluation; median lawbench {ml:.3f} s, "
                  f"bare {mb:.3f} s, ratio {ml / mb:.3f}  (lawbench {[round(t, 2) for t in times['lawbench']]}, "
                  f"bare {[round(t, 2) for t in times['bare']]})", flush=True)
    finally:
        res.close()
    ratio = totals["lawbench"] / totals["bare"]
    print(f"all configs: lawbench {totals['lawbench']:.3f} s vs bare {totals['bare']:.3f} s "
          f"(sum of medians), ratio {ratio:.3f} — goal ≤ {GOAL}: {'met' if ratio <= GOAL else 'NOT met'}")
    return 0 if ratio <= GOAL else 1


if __name__ == "__main__":
    raise SystemExit(main())
