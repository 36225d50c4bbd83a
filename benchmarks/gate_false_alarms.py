"""How often is an unplanted night red? Simulated runners judged night after night by the real gate
(lawbench.core.history.gate.judge: every rule — verdicts, void-twice, flapping, skips, findings,
drift, rate series — against a real SQLite history; no acknowledgements), with nothing planted.

    python benchmarks/gate_false_alarms.py                          # 200 runners x 12 nights, seed 30
    python benchmarks/gate_false_alarms.py --runners 50 --scatter 0.05 --seed 31

One runner's night (a cpu nightly's shape, 35 anchors):
  20 predictions   PASS every night (arithmetic: the same every night)
   2 out of scope  SKIP every night (the same scope decision every night)
  10 measured      agreement anchors, band [0.75, 1.25]; each anchor's true value drawn once,
                   log-uniform in [--lo, --hi]; a night's reading is the true value times
                   exp(N(0, se) + N(0, scatter)), se drawn per night in [1 %, 3 %], its 95 % interval
                   +-1.96 se; the verdict is core.stats.verdicts.classify (straddling an edge: VOID).
                   Each carries one rate series (decode tok/s, per-visit values with the night's se).
   3 open findings the same, with a true value at 0.5 (outside the band): an expected FAIL.
The first night of each runner starts its baseline; every later night is one runner-night. A
runner-night is a false alarm when the gate says red. Printed: red runner-nights, per news kind,
and the measured anchors' VOID rate per anchor-night (what flapping and void-twice feed on).

The verdict rules (turned, void-twice, flapping, new-not-green) have no alpha: how often they are
red is how often an anchor does not PASS, which its true value's distance to the band's edge sets.
So each red runner-night is also counted by the least flaky anchor red that night: its chance of
not being PASS on a night (computed from its true value, the scatter and the se's distribution,
not simulated), 0 for a statistical rule (drift, finding-moved, slower). A night red only from
anchors that miss PASS on >= 5 % of their nights is an instrument that flips at its band's edge:
by design news, reported apart from the nights red on a healthy anchor.
"""
from __future__ import annotations

import argparse
import collections
import math
import random
import sys
import tempfile
import time
from pathlib import Path

from lawbench.core.history.gate import judge
from lawbench.core.history.store import History
from lawbench.core.models import RateSample, RateSeries, Result, Verdict
from lawbench.core.record.reports import RunRecord
from lawbench.core.stats.verdicts import classify

MACHINE = {"hostname": "sim", "cpu_model": "Sim CPU", "cpu_count_logical": 2, "ram_total_gb": 8.0, "gpus": []}
ENGINE = {"name": "llama.cpp", "build_number": 11434, "backend": "cpu"}
BAND = (0.75, 1.25)
BUCKETS = (0.01, 0.05)  # a red runner-night by its least flaky red anchor: not PASS on < 1 %, 1-5 %, >= 5 % of nights


def not_pass(true: float, scatter: float) -> float:
    """The chance that a measured anchor of true value ``true`` is not PASS on a night: its reading
    is log-normal about it with sd sqrt(se^2 + scatter^2), se uniform in [1 %, 3 %], PASS when its
    +-1.96 se interval lies inside BAND (core.stats.verdicts.classify). Midpoint rule over se."""
    def phi(x: float) -> float:
        return 0.5 * (1 + math.erf(x / math.sqrt(2)))

    lo, hi, mu, steps = math.log(BAND[0]), math.log(BAND[1]), math.log(true), 200
    ok = 0.0
    for i in range(steps):
        se = 0.01 + 0.02 * (i + 0.5) / steps
        sd = math.sqrt(se * se + scatter * scatter)
        ok += max(0.0, phi((hi - 1.96 * se - mu) / sd) - phi((lo + 1.96 * se - mu) / sd)) / steps
    return 1 - ok


def measured(anchor: str, true: float, rng: random.Random, scatter: float, finding: bool) -> Result:
    se = rng.uniform(0.01, 0.03)
    m = true * math.exp(rng.gauss(0, se) + rng.gauss(0, scatter))
    interval = (m * math.exp(-1.96 * se), m * math.exp(1.96 * se))
    verdict = classify(interval, BAND) or Verdict.VOID
    speed = 50.0 * math.exp(rng.gauss(0, scatter))
    values = [speed * math.exp(rng.gauss(0, se)) for _ in range(5)]
    gm = math.exp(sum(map(math.log, values)) / 5)
    rate = RateSample(series=RateSeries(model=f"m-{anchor}", format="Q4_0", placement="ngl=0",
                                        quantity="decode tok/s"),
                      engine="b11434", values=values, measured=gm, interval=(gm * (1 - 2 * se), gm * (1 + 2 * se)))
    return Result(anchor_id=anchor, law="law4", kind="agreement", profile="sim", verdict=verdict,
                  reason=f"{verdict.value} (simulated)", measured=m, interval=interval, band=BAND, rates=[rate],
                  open_finding="known: the law does not reproduce this" if finding and verdict is Verdict.FAIL
                  else None)


def runner(history: History, rng: random.Random, args: argparse.Namespace, tally: collections.Counter) -> None:
    trues = {f"m{i}": math.exp(rng.uniform(math.log(args.lo), math.log(args.hi))) for i in range(10)}
    flaky = {a: not_pass(t, args.scatter) for a, t in trues.items()}
    for night in range(args.nights):
        results = [Result(anchor_id=f"p{i}", law="law4", kind="prediction", profile="sim", verdict=Verdict.PASS,
                          measured=1.0, band=BAND) for i in range(20)]
        results += [Result(anchor_id=f"s{i}", law="law4", kind="ratio", profile="sim", verdict=Verdict.SKIP,
                           reason="out of this tier's scope", out_of_scope="out of this tier's scope")
                    for i in range(2)]
        results += [measured(a, t, rng, args.scatter, False) for a, t in trues.items()]
        results += [measured(f"f{i}", 0.5, rng, args.scatter, True) for i in range(3)]
        tally["VOID"] += sum(r.verdict is Verdict.VOID for r in results if r.anchor_id.startswith("m"))
        tally["measured"] += 10
        rec = RunRecord.new("sim", profile_matches=True, strict=True, cadence="nightly", machine=MACHINE,
                            engine=ENGINE, started=f"2026-11-{night + 1:02d}T02:17:00+00:00")
        rec.finish(results, gate=lambda r: judge(r, history, None, deployed=True))
        history.append(rec)
        if night == 0:
            continue  # the first night starts the baseline
        tally["nights"] += 1
        if rec.gate.verdict == "red":
            tally["red"] += 1
            for kind in sorted({n.kind for n in rec.gate.red_news}):
                tally[f"kind:{kind}"] += 1
            least = min(flaky.get(n.anchor_id, 0.0) for n in rec.gate.red_news)
            tally[f"bucket:{sum(least >= b for b in BUCKETS)}"] += 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runners", type=int, default=200)
    p.add_argument("--nights", type=int, default=12)
    p.add_argument("--scatter", type=float, default=0.03, help="night-to-night scatter beyond the intervals (log)")
    p.add_argument("--lo", type=float, default=0.85, help="lowest true value of a measured anchor (band 0.75-1.25)")
    p.add_argument("--hi", type=float, default=1.15)
    p.add_argument("--seed", type=int, default=30)
    args = p.parse_args(argv)
    rng = random.Random(args.seed)
    tally: collections.Counter = collections.Counter()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="lawbench-gate-sim-") as tmp:
        for i in range(args.runners):
            with History(Path(tmp) / f"r{i}.sqlite") as history:
                runner(history, rng, args, tally)
    n, red = tally["nights"], tally["red"]
    print(f"seed {args.seed}, {args.runners} runners x {args.nights} nights, scatter {args.scatter:g}, "
          f"true values {args.lo:g}-{args.hi:g}: {red} red of {n} runner-nights = {100 * red / n:.2f} % "
          f"({time.monotonic() - started:.0f} s)")
    print(f"  measured anchors VOID on {tally['VOID']} of {tally['measured']} anchor-nights "
          f"({100 * tally['VOID'] / tally['measured']:.2f} %)")
    for k, v in sorted(tally.items()):
        if k.startswith("kind:"):
            print(f"  red with {k[5:]}: {v} runner-night(s)")
    names = (f"< {BUCKETS[0]:.0%} (or a statistical rule)", f"{BUCKETS[0]:.0%}-{BUCKETS[1]:.0%}",
             f">= {BUCKETS[1]:.0%}")
    for i, name in enumerate(names):
        v = tally[f"bucket:{i}"]
        print(f"  red, the least flaky red anchor not PASS on {name} of nights: {v} runner-night(s) "
              f"= {100 * v / n:.2f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
