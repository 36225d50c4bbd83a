"""How often an engine upgrade night calls a planted one-format slowdown `slower` (issue 31).

Each trial pairs one rate series exactly as an upgrade night does (lawbench.core.run.upgrade: the
arm on both builds, up to the profile's upgrade_pairs (10 by default), looks after 4, 7, 10, …, decided against 1 − 1 % at a family-wise
1 % over SERIES series): build A is the real llama.cpp, build B the same build behind the planting
wrapper (tests/standin/planted_llama_bench.py) reporting the arm's format FACTOR times as fast as it
ran. FACTOR 1 is the control: a `slower` there is a false alarm.

    flock /tmp/heavy.lock python benchmarks/upgrade_power.py --llama-dir DIR --trials 10 --factors 1 0.97 0.9

The arm is the test anchor of tests/test_engine_upgrade.py (syn-25m Q4_0, 16 tokens, 3 repetitions
a visit, fastest kept, one thread): every published cpu-tier anchor is out of Law 4's scope on a
machine whose last-level cache holds its models.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SERIES = 2  # the test anchor's two arms: the night's Bonferroni divides alpha by them


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--llama-dir", required=True, help="the real llama.cpp bin folder (both builds)")
    p.add_argument("--profile", default="cpu")
    p.add_argument("--trials", type=int, default=10)
    p.add_argument("--factors", type=float, nargs="+", default=[1.0, 0.97, 0.9])
    args = p.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    from standin.planted_llama_bench import make_wrapper
    from test_engine_upgrade import ANCHOR

    from lawbench.core.claims.loading import LoadedAnchor
    from lawbench.core.engines.llamacpp import locate_llamacpp
    from lawbench.core.models import Anchor
    from lawbench.core.run.ab import measure_anchor
    from lawbench.core.run.context import RunContext
    from lawbench.core.laws.resources import Resources
    from lawbench.core.history.rates import TOLERANCE
    from lawbench.core.run.upgrade import upgrade_budget

    ctx = RunContext(args.profile)
    profile = ctx.policy.profile
    loaded = LoadedAnchor(anchor=Anchor.model_validate(ANCHOR), file=__file__)
    law = ctx.registry.law("law4")
    wrapper = make_wrapper(Path(tempfile.mkdtemp(prefix="upgrade-power-")) / "llama", Path(args.llama_dir))
    real, planted = locate_llamacpp(args.llama_dir), locate_llamacpp(wrapper)
    shared = Resources(profile=profile, engine=real)
    engines = {"a": shared.with_engine(real), "b": shared.with_engine(planted)}
    budget = upgrade_budget(profile, SERIES)  # the profile's pairs, as its upgrade night takes
    fmt = "Q4_0"
    print("factor\ttrial\tnew/old\tinterval\tpairs\tverdict\tseconds", flush=True)
    table = {}
    try:
        for factor in args.factors:
            (wrapper / "planted.json").write_text(json.dumps({"slow": {fmt: factor}} if factor != 1 else {}), encoding="utf-8")
            slower = 0
            for t in range(args.trials):
                t0 = time.monotonic()
                r = measure_anchor(loaded, law, profile, engines, budget, 1 - TOLERANCE, subject="a")
                verdict = "slower" if r.gate == "regression" else r.gate or r.status
                slower += verdict == "slower"
                lo, hi = r.interval or (float("nan"), float("nan"))
                print(f"{factor}\t{t + 1}\t{r.ratio:.4f}\t[{lo:.4f}, {hi:.4f}]\t{r.pairs}\t{verdict}\t"
                      f"{time.monotonic() - t0:.0f}", flush=True)
            table[factor] = slower
    finally:
        shared.close()
    print(f"\n{fmt} reported at factor x: `slower` in n of {args.trials} trials (1 = no change: false alarms)")
    for factor, n in table.items():
        print(f"  x{factor}: {n}/{args.trials}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
