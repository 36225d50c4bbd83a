"""How many visits a night's rate needs for the series rule to see 3 % on a GPU runner (issue 31).

A night's rate reading is the geometric mean of its visits (fresh llama-bench processes). On a lent
H100 (results/h200/series-2026-12-07b, 10 accepted nights of 4 visits each) the visits of one night
scattered about as much as the nights did, so most of the night-to-night spread the rule must beat
is the visits' own. This replays that: each series' night-to-night spread is split into a part
between nights (the nights' variance less their visits' share, never below 0) and the visits'
scatter (pooled residuals about each night's mean, resampled, not a fitted normal); simulated
nights of N visits are judged by the gate's own rate code (core/history/rates.judge_rates, with
the interval core.stats.ArmSampler.rates gives a reading), BASELINE accepted nights against one
tonight, with one format planted X % slower, and unplanted for the false alarms.

    python benchmarks/gpu_rate_visits.py [BUNDLE] [--visits 4 10] [--trials 2000]

It checks itself against the real planted nights: at 4 visits a night it should land near what
the same session's planted 3 % nights gave through the engine (3 of 9 red).
"""
from __future__ import annotations

import argparse
import json
import math
import random
import re
import tarfile
from pathlib import Path

from lawbench.core.history.rates import Reading, judge_rates
from lawbench.core.stats.verdicts import location_interval

BUNDLE = (Path(__file__).resolve().parent.parent / "results" / "h200" / "series-2026-12-07b"
          / "call3-rates-bundle.tgz")


def nights(bundle: Path) -> dict[str, list[list[float]]]:
    """Per series key, the accepted nights' visit values, in night order."""
    out: dict[str, list[list[float]]] = {}
    with tarfile.open(bundle) as tar:
        names = sorted(((int(m[1]), n) for n in tar.getnames()
                        if (m := re.fullmatch(r"history/night-(\d+)\.json", n))))
        for _, name in names:
            rec = json.load(tar.extractfile(name))
            for res in rec["results"]:
                for rate in res.get("rates", []):
                    if rate.get("values"):
                        key = rate["series"]["format"]
                        out.setdefault(key, []).append([float(v) for v in rate["values"]])
    return out


def components(series: list[list[float]]) -> tuple[float, float, list[float]]:
    """log mean, sd between nights, pooled within-night residuals (log), from one series' nights."""
    logs = [[math.log(v) for v in night] for night in series]
    means = [sum(x) / len(x) for x in logs]
    grand = sum(means) / len(means)
    resid = []
    for x, m in zip(logs, means):
        k = len(x)
        resid += [(v - m) * math.sqrt(k / (k - 1)) for v in x]
    within = sum(r * r for r in resid) / len(resid)
    per_night = sum(len(x) for x in logs) / len(logs)
    var_means = sum((m - grand) ** 2 for m in means) / (len(means) - 1)
    return grand, math.sqrt(max(var_means - within / per_night, 0.0)), resid


def reading(key: str, mu: float, between: float, resid: list[float], visits: int, factor: float,
            rng: random.Random) -> Reading:
    night = mu + rng.gauss(0.0, between) + math.log(factor)
    values = [math.exp(night + rng.choice(resid)) for _ in range(visits)]
    measured, interval = location_interval(values, 0.95)
    return Reading(series=key, measured=measured, interval=interval, n=visits, engine="e")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("bundle", nargs="?", type=Path, default=BUNDLE)
    p.add_argument("--visits", type=int, nargs="+", default=[4, 6, 10])
    p.add_argument("--sizes", type=float, nargs="+", default=[0.02, 0.03, 0.05, 0.10])
    p.add_argument("--baseline", type=int, default=10, help="accepted nights the test rests on")
    p.add_argument("--planted", default="Q4_0", help="the format planted slower")
    p.add_argument("--trials", type=int, default=2000)
    p.add_argument("--seed", type=int, default=31)
    args = p.parse_args()
    data = nights(args.bundle)
    parts = {k: components(v) for k, v in data.items()}
    for k, (mu, between, resid) in parts.items():
        sd_w = math.sqrt(sum(r * r for r in resid) / len(resid))
        print(f"{k}: {len(data[k])} nights, between-night sd {between:.2%}, visit sd {sd_w:.2%}")
    rng = random.Random(args.seed)
    print("visits\t" + "\t".join(f"{s:.0%} slower" for s in args.sizes) + "\tfalse alarms")
    for n in args.visits:
        def night(planted: dict[str, float]) -> list[Reading]:
            return [reading(k, *parts[k], n, planted.get(k, 1.0), rng) for k in parts]

        cells = []
        for size in args.sizes:
            hits = 0
            for _ in range(args.trials):
                accepted: dict[str, list[Reading]] = {k: [] for k in parts}
                for _ in range(args.baseline):
                    for r in night({}):
                        accepted[r.series].append(r)
                news = judge_rates(accepted, night({args.planted: 1 - size}))
                hits += any(x.kind == "slower" and x.series == args.planted for x in news)
            cells.append(f"{hits / args.trials:.1%}")
        false = 0
        for _ in range(args.trials):
            accepted = {k: [] for k in parts}
            for _ in range(args.baseline):
                for r in night({}):
                    accepted[r.series].append(r)
            false += any(x.kind in ("slower", "faster") for x in judge_rates(accepted, night({})))
        print(f"{n}\t" + "\t".join(cells) + f"\t{false / args.trials:.2%}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
