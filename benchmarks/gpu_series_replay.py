"""The rate series rule on real GPU nights (issue 31): a lent H100's accepted nights of one
session are the baseline, and the same card's nights of a LATER session are "tonight", each judged
by the gate's own rate code as measured (a `slower` / `faster` is a false alarm: nothing reached
the engine) and with one format, then every format, planted X % slower (core/history/prove.plant:
values, geometric mean and interval scaled as an engine that ran X % slower reports them).

`lawbench gate prove` replays one session's nights against each other (leave one out); nights
taken minutes apart under-state what a day between nights brings. Here tonight comes from another
session of the machine, 8 minutes and an idle card later, which is closer to a runner's next night.

    python benchmarks/gpu_series_replay.py [FOLDER]   # default results/h200/series-2026-12-07

FOLDER holds call1-rates-bundle.tgz (history/night-*.json: the accepted nights) and
call2-rates-bundle.tgz (trials/trial-*/run.json: the later nights). Those later nights were sent
as Q4_K_M-planted, but the planting wrapper then matched no Q4_K_M file (llama-bench types it
"Q4_K - Medium"; fixed since), so they reached the gate unplanted; the script checks that from
the records themselves (the Q4_K_M rate within 3 % of the baseline's) before counting them so.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tarfile
from pathlib import Path

from lawbench.core.history.prove import plant
from lawbench.core.history.rates import TOLERANCE, accepted_readings, judge_rates, night_readings, rate_news
from lawbench.core.models.run_record import RunRecord

SIZES = (0.02, 0.03, 0.05, 0.10)
FOLDER = Path(__file__).resolve().parent.parent / "results" / "h200" / "series-2026-12-07"


def _records(bundle: Path, pattern: str) -> list[tuple[str, RunRecord]]:
    """The run records of a bundle whose names match ``pattern`` (one number group), in its order."""
    with tarfile.open(bundle) as tar:
        found = [(int(m[1]), name) for name in tar.getnames() if (m := re.fullmatch(pattern, name))]
        return [(name, RunRecord.model_validate_json(tar.extractfile(name).read())) for _, name in sorted(found)]


def _formats(rec: RunRecord) -> dict[str, str]:
    return {r.series.key: r.series.format for res in rec.results for r in res.rates if r.measured}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", nargs="?", type=Path, default=FOLDER)
    folder = ap.parse_args().folder
    nights = [r for _, r in _records(folder / "call1-rates-bundle.tgz", r"history/night-(\d+)\.json")]
    later = _records(folder / "call2-rates-bundle.tgz", r"trials/trial-(\d+)/run\.json")
    if not nights or not later:
        print(f"no nights in {folder}", file=sys.stderr)
        return 2
    base = accepted_readings(nights)
    means = {k: math.exp(sum(math.log(r.measured) for r in v) / len(v)) for k, v in base.items()}
    print(f"baseline: {len(nights)} accepted nights of one session ({nights[0].machine.get('gpus', [{}])[0].get('name')})")
    for k, v in base.items():
        logs = [math.log(r.measured) for r in v]
        m = sum(logs) / len(logs)
        sd = math.sqrt(sum((x - m) ** 2 for x in logs) / (len(logs) - 1))
        print(f"  {k}: mean {means[k]:.4g}, night-to-night sd {sd:.2%}")
    print(f"later session: {len(later)} nights; each judged as measured, then planted\n")
    old_alarms = new_alarms = 0
    hits: dict[tuple[str, float], int] = {}
    fmts = sorted({f for _, rec in later for f in _formats(rec).values()})
    for name, rec in later:
        now = night_readings(rec)
        shifts = {k: now[k].measured / means[k] - 1 for k in now if k in means}
        k4km = [s for k, s in shifts.items() if "Q4_K_M" in k]
        if not k4km or abs(k4km[0]) > 0.03:
            print(f"{name}: its Q4_K_M rate moved {k4km}: a plant reached it; not an unplanted night", file=sys.stderr)
            return 1
        old = judge_rates(base, list(now.values()), tolerance=0.0)
        new, _ = rate_news(rec, nights)
        old_alarms += bool(old)
        new_alarms += bool(new)
        print(f"{name.split('/')[1]:>9}: " + ", ".join(f"{k.split(' | ')[1]} {s:+.2%}" for k, s in sorted(shifts.items()))
              + f" | without the margin: {'; '.join(f'{n.kind} {n.size:+.2%}' for n in old) or 'no news'}"
              + f" | the gate: {'; '.join(n.why for n in new) or 'no news'}")
        for target in fmts + ["all formats"]:
            for size in SIZES:
                found, _ = rate_news(plant(rec, None if target == "all formats" else target, size), nights)
                hit = any(n.kind == "slower" and (target == "all formats" or
                                                  _formats(rec).get(n.anchor_id.removeprefix("rate: ")) == target)
                          for n in found)
                hits[(target, size)] = hits.get((target, size), 0) + hit
    n = len(later)
    print(f"\nfalse alarms on the {n} unplanted later nights: {new_alarms} with the gate's {TOLERANCE:.0%} margin, "
          f"{old_alarms} without it")
    print("\n| planted slowdown on | " + " | ".join(f"{s:.0%}" for s in SIZES) + " |")
    print("| --- | " + " | ".join("---" for _ in SIZES) + " |")
    for target in fmts + ["all formats"]:
        print(f"| {target} | " + " | ".join(f"{hits[(target, s)]}/{n}" for s in SIZES) + " |")
    print(json.dumps({"false_alarms": new_alarms, "false_alarms_without_margin": old_alarms, "nights": n,
                      "detected": {f"{t} {s:.0%}": hits[(t, s)] for t in fmts + ['all formats'] for s in SIZES}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
