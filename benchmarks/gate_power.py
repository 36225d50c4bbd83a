"""The rate gate's power against slowdown size (issue 31), on simulated nights whose noise is the
night-to-night spread MEASURED on this project's cpu runner: every llama-bench arm of the committed
nights results/cpu-nights/night1-4.run.json (the 2-core AMD EPYC box, b11434), one geometric mean
per arm per night from the raw per-visit values. Each simulated runner-night draws every series
from its own measured spread, is judged by the gate's own test (core/history/rates.judge_rates, the
code a real night's gate calls), and is judged again with one series, then every series, planted X %
slower. False alarms: unplanted nights with any slower / faster.

    python benchmarks/gate_power.py [--trials 400] [--nights 5,10,20]

Real nights: `lawbench gate prove` (results/gate-prove/) replays a runner's own accepted history.
"""
from __future__ import annotations

import argparse
import glob
import json
import math
import random
import statistics
from collections import defaultdict
from pathlib import Path

from lawbench.core.history.rates import Reading, judge_rates

SIZES = (0.02, 0.03, 0.05, 0.10, 0.20, 0.40)
NIGHTS = Path(__file__).resolve().parent.parent / "results" / "cpu-nights"


def measured_spreads() -> list[float]:
    """The night-to-night sd (of log rate) of every arm seen on at least 3 committed cpu nights."""
    per: dict[str, list[float]] = defaultdict(list)
    for f in sorted(glob.glob(str(NIGHTS / "night*.run.json"))):
        for q in json.load(open(f, encoding="utf-8"))["results"]:
            m = q.get("measurement") or {}
            arms = (m.get("protocol") or {}).get("arms") or {}
            for a, label in arms.items():
                vs = [s["raw"][f"value_{a}"] for s in m.get("samples", []) if (s.get("raw") or {}).get(f"value_{a}")]
                if len(vs) >= 2:
                    per[label].append(math.exp(statistics.fmean(math.log(v) for v in vs)))
    return [statistics.stdev(math.log(x) for x in v) for v in per.values() if len(v) >= 3]


def trial(rng: random.Random, sds: list[float], k: int, plant: dict[int, float]) -> list:
    accepted = {f"s{i}": [Reading(f"s{i}", math.exp(rng.gauss(0, sd)), engine="b") for _ in range(k)]
                for i, sd in enumerate(sds)}
    tonight = [Reading(f"s{i}", math.exp(rng.gauss(0, sd)) * (1 - plant.get(i, 0.0)), engine="b")
               for i, sd in enumerate(sds)]
    return judge_rates(accepted, tonight)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=400)
    ap.add_argument("--nights", default="5,10,20", help="accepted nights behind each judged night")
    ap.add_argument("--seed", type=int, default=None, help="default: a fresh seed each run")
    args = ap.parse_args()
    sds = measured_spreads()
    rng = random.Random(args.seed)
    print(f"measured noise: {len(sds)} series on 4 cpu nights, night-to-night sd median "
          f"{statistics.median(sds):.1%}, max {max(sds):.1%}; {args.trials} simulated nights per cell\n")
    print("| accepted nights | planted on | " + " | ".join(f"{s:.0%}" for s in SIZES) + " | false alarms |")
    print("|---|---|" + "---|" * (len(SIZES) + 1))
    median_i = sorted(range(len(sds)), key=lambda i: sds[i])[len(sds) // 2]
    for k in (int(x) for x in args.nights.split(",")):
        fa = sum(bool(trial(rng, sds, k, {})) for _ in range(args.trials))
        for label, targets in (("one series (median noise)", [median_i]), ("all series", range(len(sds)))):
            cells = []
            for size in SIZES:
                hits = 0
                for _ in range(args.trials):
                    news = trial(rng, sds, k, {i: size for i in targets})
                    hits += any(n.kind == "slower" and (label == "all series" or n.series == f"s{median_i}")
                                for n in news)
                cells.append(f"{hits / args.trials:.0%}")
            print(f"| {k} | {label} | " + " | ".join(cells) + f" | {fa / args.trials:.1%} |")


if __name__ == "__main__":
    main()
