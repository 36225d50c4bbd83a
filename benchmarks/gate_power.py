"""The rate gate's power against slowdown size (issue 31), on simulated nights whose noise is the
night-to-night spread MEASURED on this project's cpu runner: every llama-bench arm of the committed
nights results/cpu-nights/night1-4.run.json (the 2-core AMD EPYC box, b11434), one geometric mean
per arm per night from the raw per-visit values. Each simulated runner-night draws every series
from its own measured spread, is judged by the gate's own test (core/history/rates.judge_rates, the
code a real night's gate calls), and is judged again with one series, then every series, planted X %
slower. False alarms: unplanted nights with any slower / faster.

    python benchmarks/gate_power.py [--trials 400] [--nights 5,10,20]
    python benchmarks/gate_power.py --ceiling [FOLDER]

Real nights: `lawbench gate prove` (results/gate-prove/) replays a runner's own accepted history.

--ceiling: the power no one-night rule on these series can exceed (the Neyman-Pearson bound), from
the night-to-night spread of every rate series in FOLDER's real nights (every night-*/run.json,
as benchmarks/cpu_nights.py writes them, whose gate was not red; default the committed cpu nights of 2026-12-07): each series judged by a one-sided
z-test with its sd known and its baseline known exactly, at the gate's split of the runner-night's
1 % (Holm's first step: alpha / m over the night's m series); then each format's series combined
in the best way their measured covariance allows, at alpha / (number of formats).
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
from statistics import NormalDist

from lawbench.core.history.rates import Reading, judge_rates

SIZES = (0.02, 0.03, 0.05, 0.10, 0.20, 0.40)
NIGHTS = Path(__file__).resolve().parent.parent / "results" / "cpu-nights"
CEILING_NIGHTS = NIGHTS.parent / "gate-prove" / "cpu-nights-2026-12-07"
ALPHA = 0.01  # the runner-night's false-alarm budget (core/history/rates.ALPHA)


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


# --------------------------------------------------------------------------- the ceiling


def ceiling_power(sd: float, size: float, alpha: float) -> float:
    """The power of the most powerful level-``alpha`` test that tonight's rate is ``size`` slower.

    On logs, tonight is x ~ N(mu, sd²) with mu and sd known (the best a gate could ever know).
    Against x ~ N(mu + ln(1 − size), sd²) the likelihood ratio is monotone in x, so by
    Neyman-Pearson the one-sided z-test (red when x − mu < −z₁₋α·sd) is most powerful, and
        power = Φ(−ln(1 − size) / sd − z₁₋α).
    A rule that estimates mu and sd from a few nights (the gate's t-test) can only do worse."""
    if sd <= 0:  # no spread at all: any slowdown is seen, and nothing else is
        return 1.0 if size > 0 else alpha
    z = NormalDist()
    return z.cdf(-math.log1p(-size) / sd - z.inv_cdf(1.0 - alpha))


def sd_needed(size: float, alpha: float, power: float = 0.90) -> float:
    """The largest night-to-night sd at which the ceiling still reaches ``power`` (the formula above
    solved for sd)."""
    z = NormalDist()
    return -math.log1p(-size) / (z.inv_cdf(1.0 - alpha) + z.inv_cdf(power))


def combined_sd(cov: list[list[float]]) -> float:
    """The sd of the best unbiased combination of series that all move by the same log amount
    (generalised least squares): 1 / sqrt(1ᵀ Σ⁻¹ 1). The NP test of a shift of all of them is a
    z-test on that combination, so ``ceiling_power(combined_sd(cov), …)`` is its bound."""
    import numpy as np

    ones = np.ones(len(cov))
    return float(1.0 / math.sqrt(ones @ np.linalg.solve(np.asarray(cov, dtype=float), ones)))


def sd_lower_limit(sd: float, n: int, confidence: float = 0.95) -> float:
    """The lower one-sided confidence limit of a normal sd estimated from n values (chi-square)."""
    from scipy.stats import chi2

    return sd * math.sqrt((n - 1) / chi2.ppf(confidence, n - 1))


def real_nights(folder: Path, statistic: str = "measured") -> tuple[list[dict[str, float]], dict[str, str], int]:
    """Each real night's log rate per series, from every night-*/run.json whose gate was not red
    (the nights a gate would accept; a planted night is not a night-*); the format of each series;
    how many red nights were left out. ``statistic``: the reading the gate judges (``measured``,
    the geometric mean of the night's visits) or the night's ``fastest`` visit."""
    nights, formats, red = [], {}, 0
    for f in sorted(folder.glob("night-*/run.json")):
        rec = json.loads(f.read_text(encoding="utf-8"))
        if (rec.get("gate") or {}).get("verdict") == "red":
            red += 1
            continue
        night = {}
        for res in rec.get("results", []):
            for rate in res.get("rates") or []:
                if rate.get("measured"):
                    s = rate["series"]
                    key = " · ".join((s["model"], s.get("placement") or "-", s["quantity"]))
                    value = max(rate["values"]) if statistic == "fastest" else rate["measured"]
                    night[key], formats[key] = math.log(value), s.get("format") or "-"
        if night:
            nights.append(night)
    if len(nights) < 3:
        raise SystemExit(f"{folder}: {len(nights)} accepted nights with rates (night-*/run.json); "
                         "the ceiling needs 3")
    return nights, formats, red


def ceiling_rows(sds: dict[str, tuple[float, int]], alpha: float) -> list[str]:
    """One Markdown row per series: its sd, nights, the bound at each size at ``alpha``, and at 10 %
    the bound if the true sd were as low as its 95 % lower confidence limit."""
    rows = []
    for key, (sd, n) in sds.items():
        cells = " | ".join(f"{ceiling_power(sd, size, alpha):.0%}" for size in SIZES)
        low = sd_lower_limit(sd, n)
        rows.append(f"| {key} | {n} | {sd:.1%} | {cells} | {ceiling_power(low, 0.10, alpha):.0%} (sd {low:.1%}) |")
    return rows


def ceiling(folder: Path, alpha: float = ALPHA, statistic: str = "measured") -> None:
    nights, formats, red = real_nights(folder, statistic)
    keys = sorted({k for night in nights for k in night}, key=lambda k: (formats[k], k))
    per = {k: [night[k] for night in nights if k in night] for k in keys}
    m = len(keys)
    head = " | ".join(f"{s:.0%}" for s in SIZES)
    reading = ("the geometric mean of its visits, what the gate judges" if statistic == "measured"
               else "its fastest visit")
    root = NIGHTS.parent.parent
    shown = folder.resolve().relative_to(root) if folder.resolve().is_relative_to(root) else folder
    print(f"ceiling: {shown} — {len(nights)} nights with rates ({red} red left out), {m} series; "
          f"a night's reading of a series: {reading}.\n"
          f"Most powerful one-night test: one-sided z, sd known, baseline known exactly.\n")
    print(f"Per series, at the gate's split: alpha {alpha:.0%} / {m} series = {alpha / m:.3%}\n")
    print(f"| series | nights | night-to-night sd | {head} | 10 % at the sd's 95 % lower limit |")
    print("|---|---|---|" + "---|" * (len(SIZES) + 1))
    for row in ceiling_rows({k: (statistics.stdev(v), len(v)) for k, v in per.items()}, alpha / m):
        print(row)
    print(f"\n90 % at a 10 % slowdown needs a night-to-night sd of at most {sd_needed(0.10, alpha / m):.2%} "
          f"(alpha / {m}).")
    groups: dict[str, list[str]] = defaultdict(list)
    for k in keys:
        groups[formats[k]].append(k)
    f = len(groups)
    print(f"\nPer format, its series combined (GLS on their measured covariance; a split the gate does not "
          f"make, kinder to it): alpha {alpha:.0%} / {f} formats = {alpha / f:.3%}\n")
    print(f"| format | series | nights | combined sd | {head} |")
    print("|---|---|---|---|" + "---|" * len(SIZES))
    for fmt, ks in groups.items():
        both = [night for night in nights if all(k in night for k in ks)]
        cols = [[night[k] for night in both] for k in ks]
        mean = [statistics.fmean(c) for c in cols]
        cov = [[sum((a - mean[i]) * (b - mean[j]) for a, b in zip(cols[i], cols[j])) / (len(both) - 1)
                for j in range(len(ks))] for i in range(len(ks))]
        sd = combined_sd(cov)
        cells = " | ".join(f"{ceiling_power(sd, size, alpha / f):.0%}" for size in SIZES)
        print(f"| {fmt} | {len(ks)} | {len(both)} | {sd:.1%} | {cells} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=400)
    ap.add_argument("--nights", default="5,10,20", help="accepted nights behind each judged night")
    ap.add_argument("--seed", type=int, default=None, help="default: a fresh seed each run")
    ap.add_argument("--ceiling", nargs="?", const=str(CEILING_NIGHTS), metavar="FOLDER",
                    help="print the Neyman-Pearson bound on these series instead of simulating "
                         "(default folder: the committed cpu nights of 2026-12-07)")
    ap.add_argument("--statistic", choices=("measured", "fastest"), default="measured",
                    help="with --ceiling: a night's reading of a series (default: what the gate judges)")
    args = ap.parse_args()
    if args.ceiling:
        ceiling(Path(args.ceiling), statistic=args.statistic)
        return
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
