"""How stable are a weekly's slices when an anchor is added? (docs/RUNNERS.md quotes the figures)

    python benchmarks/weekly_slices.py                  # gtx1060's weekly, 200 added anchors
    python benchmarks/weekly_slices.py --profile gtx1060 --added 500

For each of N random added anchors (an id beside an existing one, a worst case of 10 to 120 min),
the number of the weekly's anchors whose slice changed, for the rotation lawbench uses
(lawbench.core.run.slices: hash of the id, probing to the next slice with room) and for filling
slices in id order (first fit), the other way a deterministic split could be cut. Additions that
change N are counted apart (a new N reshuffles either way). Then how often random weeklies leave
a slice empty before empty slices are dropped (a week that would run nothing).
"""
from __future__ import annotations

import argparse
import math
import random
import statistics

from lawbench.core.claims.loading import load_all
from lawbench.core.hardware.profiles import plugin_profiles
from lawbench.core.laws.registry import get_registry
from lawbench.core.run import slices
from lawbench.core.run.plan import plan, weekly_window_min


def first_fit(costs: list[tuple[str, float]], window_min: int) -> list[list[str]]:
    cap, fit, n = 60.0 * window_min, sorted(costs), 1
    while True:
        out: list[list[str]] = [[] for _ in range(n)]
        used = [0.0] * n
        for a, c in fit:
            k = next((k for k in range(n) if used[k] + c <= cap), None)
            if k is None:
                break
            out[k].append(a)
            used[k] += c
        else:
            return out
        n += 1


def moved(cut, costs, new) -> int | None:
    a, b = cut(costs), cut([*costs, new])
    if len(a) != len(b):
        return None
    sa = {x: k for k, s in enumerate(a) for x in s}
    sb = {x: k for k, s in enumerate(b) for x in s}
    return sum(sa[x] != sb[x] for x in sa)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="gtx1060")
    ap.add_argument("--added", type=int, default=200)
    args = ap.parse_args()
    reg = get_registry()
    profiles = plugin_profiles(reg)
    pl = plan(profiles[args.profile], load_all(reg, profiles=profiles.keys()), "weekly", profiles=profiles)
    window = weekly_window_min(profiles[args.profile], profiles)
    costs = [(r.anchor_id, r.worst_s) for r in pl.rows]
    print(f"{args.profile}: weekly of {len(costs)} anchors, {pl.worst_min:.0f} min worst case, window {window} min, "
          f"{pl.rotation.count} slices")
    rng = random.Random(1)
    for name, cut in (("hash (lawbench)", lambda c: slices.rotate(c, window).slices),
                      ("first fit by id", lambda c: first_fit(c, window))):
        rng.seed(1)
        counts, new_n = [], 0
        for i in range(args.added):
            base = rng.choice(costs)[0]
            new = (base[:rng.randint(5, len(base))] + f".new{i}", 60.0 * rng.choice([10, 30, 60, 90, 120]))
            m = moved(cut, costs, new)
            if m is None:
                new_n += 1
            else:
                counts.append(m)
        print(f"  {name}: anchors moved per added anchor: median {statistics.median(counts):g}, mean "
              f"{statistics.mean(counts):.1f}, max {max(counts)} (of {len(costs)}); {new_n} of {args.added} changed N")
    rng = random.Random(7)
    empty = total = 0
    for t in range(3000):
        cs = [(f"x{t}.{i}", 60.0 * rng.choice([1, 10, 30, 60, 90, 120, 240, 667])) for i in range(rng.randint(1, 30))]
        w = rng.choice([120, 300, 700])
        fit = sorted((a, c) for a, c in cs if c <= 60 * w)
        if not fit:
            continue
        n = max(1, math.ceil(sum(c for _, c in fit) / (60 * w)))
        while (cut := slices._assign(fit, n, 60.0 * w)) is None:
            n += 1
        total += 1
        empty += any(not s for s in cut)
    print(f"random weeklies with an empty slice before empty slices are dropped: {empty} of {total}")


if __name__ == "__main__":
    main()
