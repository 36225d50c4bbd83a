"""How many pairs an engine upgrade's in-night A/B needs on a GPU runner (issue 31).

The pair-to-pair scatter of new/old is read from real `lawbench ab` trials (ab-*/ab.json in a
results bundle: per-pair B/A of fresh llama-bench processes, one build against itself behind the
planting wrapper). Each trial's log ratios are centred on that trial's own mean (so the planted
factor drops out) and pooled; a simulated A/B draws pairs from that pool (resampled, not a fitted
normal) shifted by a true slowdown, and is decided by the A/B's own sequential rule
(lawbench.core.stats.verdicts.decide_sequential with core.run.ab.budget_for, against 1 − TOLERANCE at
the night's family-wise ALPHA over SERIES series), for each maximum number of pairs.

    python benchmarks/ab_pairs_power.py [BUNDLE] [--pairs 10 16 20 30] [--trials 4000]

BUNDLE defaults to results/h200/series-2026-12-07/call2-rates-bundle.tgz (a lent H100, four trials).
Prints, per maximum: the share of planted 3 % (and 2 %, 5 %) slowdowns called slower, the false
alarms at no change, and the mean pairs taken.
"""
from __future__ import annotations

import argparse
import json
import math
import random
import tarfile
from pathlib import Path

from lawbench.core.history.rates import ALPHA, TOLERANCE
from lawbench.core.models.result import Sample, Verdict
from lawbench.core.record.ab_json import gate_band
from lawbench.core.run.ab import budget_for
from lawbench.core.run.upgrade import TIMEOUT_S
from lawbench.core.stats.verdicts import decide_sequential

BUNDLE = (Path(__file__).resolve().parent.parent / "results" / "h200" / "series-2026-12-07"
          / "call2-rates-bundle.tgz")
SERIES = 2  # the h200 format anchor's two rate series: the night's Bonferroni divides alpha by them


def residuals(bundle: Path) -> tuple[list[float], list[int]]:
    """Per-pair log(B/A) of every trial, each centred on its own trial's mean; pairs per trial."""
    out, sizes = [], []
    with tarfile.open(bundle) as tar:
        for m in sorted(n for n in tar.getnames() if n.endswith("/ab.json") and n.startswith("ab-")):
            for r in json.load(tar.extractfile(m))["results"]:
                logs = [math.log(s["raw"]["value_b"] / s["raw"]["value_a"]) for s in r.get("samples", [])
                        if s.get("raw", {}).get("value_a")]
                if len(logs) >= 2:
                    mean = sum(logs) / len(logs)
                    out += [x - mean for x in logs]
                    sizes.append(len(logs))
    return out, sizes


def trial(pool: list[float], true: float, pairs: int, rng: random.Random) -> tuple[bool, int]:
    budget = budget_for(pairs, True, TIMEOUT_S, 1 - ALPHA / SERIES)

    def draw(n: int) -> list[Sample]:
        return [Sample(value=true * math.exp(rng.choice(pool))) for _ in range(n)]

    d = decide_sequential(draw, lambda ss: [s.value for s in ss], gate_band(1 - TOLERANCE), budget)
    return d.verdict == Verdict.FAIL, len(d.values)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("bundle", nargs="?", type=Path, default=BUNDLE)
    p.add_argument("--pairs", type=int, nargs="+", default=[10, 16, 20, 30])
    p.add_argument("--sizes", type=float, nargs="+", default=[0.02, 0.03, 0.05])
    p.add_argument("--trials", type=int, default=4000)
    p.add_argument("--seed", type=int, default=31)
    args = p.parse_args()
    pool, sizes = residuals(args.bundle)
    # centring on a trial's own mean shrinks the spread by sqrt((n-1)/n): put it back
    scale = math.sqrt(sum(sizes) / (sum(sizes) - len(sizes)))
    pool = [x * scale for x in pool]
    sd = math.sqrt(sum(x * x for x in pool) / len(pool))
    print(f"{args.bundle.name}: {len(sizes)} trials, {len(pool)} pairs, per-pair sd of log(new/old) "
          f"{sd:.2%}; rule: against {1 - TOLERANCE:g}, family-wise {ALPHA:g} over {SERIES} series")
    print("pairs\t" + "\t".join(f"{s:.0%} slower" for s in args.sizes) + "\tfalse alarms\tmean pairs at 3 %")
    rng = random.Random(args.seed)
    for n in args.pairs:
        cells, used = [], []
        for size in args.sizes:
            hits = 0
            for _ in range(args.trials):
                hit, k = trial(pool, 1 - size, n, rng)
                hits += hit
                if abs(size - 0.03) < 1e-9:
                    used.append(k)
            cells.append(f"{hits / args.trials:.1%}")
        false = sum(trial(pool, 1.0, n, rng)[0] for _ in range(args.trials)) / args.trials
        mean_used = f"{sum(used) / len(used):.1f}" if used else "-"
        print(f"{n}\t" + "\t".join(cells) + f"\t{false:.2%}\t{mean_used}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
