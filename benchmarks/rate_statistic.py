"""A night's reading of a rate series: the mean of its visits, or its fastest visit (issue 31)?

Replays the real nights in FOLDER (every night-*/run.json whose gate was not red, as
benchmarks/cpu_nights.py writes them) through the gate's own test (core/history/rates.judge_rates),
each night in turn against the others (leave one out), with each reading:

- the mean: the geometric mean of the night's visits, with its interval;
- the fastest: the night's fastest visit, which is what the gate reads.

For each reading it gives the false alarms on the nights as measured, and how many nights find a
planted 20 % and 40 % slowdown of one format (core/history/prove.plant scales every value). The
replay cannot read a series again, so a false alarm here is one the gate's re-read
(core/run/recheck.py) might still have taken away on the real night.

    python benchmarks/rate_statistic.py results/gate-prove/cpu-nights-2026-12-07b
    python benchmarks/rate_statistic.py --trials results/h200/series-2026-12-07b/call3-rates-bundle.tgz

--trials: a bundle of scripts/h200_rates.sh (history/night-N.json, trials/trial-N/run.json). Each
planted night, as the engine reported it, is judged again with each reading against the accepted
nights its gate was judged against (the bundle's first `gate.baseline_runs` nights).
"""
from __future__ import annotations

import argparse
import re
import tarfile
from pathlib import Path

from lawbench.core.history.prove import plant
from lawbench.core.history.rates import accepted_readings, judge_rates, night_readings
from lawbench.core.models.run_record import RunRecord

SIZES = (0.20, 0.40)


def nights(folder: Path) -> list[RunRecord]:
    out = []
    for f in sorted(folder.glob("night-*/run.json")):
        rec = RunRecord.model_validate_json(f.read_text(encoding="utf-8"))
        if rec.gate is None or rec.gate.verdict != "red":
            out.append(rec)
    return out


def replay(recs: list[RunRecord], fastest: bool) -> str:
    formats = sorted({r.series.format for rec in recs for res in rec.results for r in res.rates})
    alarms, found = 0, {(f, s): 0 for f in formats for s in SIZES}
    for i, tonight in enumerate(recs):
        accepted = accepted_readings(recs[:i] + recs[i + 1:], fastest=fastest)
        news = judge_rates(accepted, list(night_readings(tonight, fastest=fastest).values()))
        alarms += any(n.kind in ("slower", "faster") for n in news)
        for fmt in formats:
            for size in SIZES:
                planted = night_readings(plant(tonight, fmt, size), fastest=fastest)
                found[fmt, size] += any(n.kind == "slower" and f"| {fmt} |" in n.series
                                        for n in judge_rates(accepted, list(planted.values())))
    cells = "; ".join(f"{s:.0%}: " + ", ".join(f"{f} {found[f, s]}/{len(recs)}" for f in formats) for s in SIZES)
    return f"{'fastest visit' if fastest else 'mean of visits'}: false alarms {alarms}/{len(recs)}; {cells}"


def trials(bundle: Path) -> None:
    """Each planted night of an h200_rates.sh bundle judged again with each reading."""
    with tarfile.open(bundle) as tar:
        def records(pattern: str) -> list[RunRecord]:
            found = sorted((int(m[1]), n) for n in tar.getnames() if (m := re.fullmatch(pattern, n)))
            return [RunRecord.model_validate_json(tar.extractfile(n).read()) for _, n in found]
        accepted, planted = records(r"history/night-(\d+)\.json"), records(r"trials/trial-(\d+)/run\.json")
    print(f"{bundle}: {len(planted)} planted nights, each against the accepted nights its gate had")
    # The last reading is what the gate calls after its re-read: against the first round's, the
    # re-read's cost in power (a second round only raises the fastest visit, shrinking the size).
    readings = (("mean of visits", False, False), ("fastest visit, first round", True, True),
                ("fastest visit, both rounds (the gate's, after the re-read)", True, False))
    for name, fastest, first_round in readings:
        red = []
        for rec in planted:
            base = accepted_readings(accepted[:rec.gate.baseline_runs], fastest=fastest)
            news = judge_rates(base, list(night_readings(rec, fastest=fastest, first_round=first_round).values()))
            red.append(next((f"{n.size:+.2%}" for n in news if n.kind == "slower"), "green"))
        print(f"{name}: slower on {sum(r != 'green' for r in red)} of {len(red)}: {', '.join(red)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path, nargs="?")
    ap.add_argument("--trials", type=Path, help="an h200_rates.sh bundle (rates-bundle.tgz)")
    args = ap.parse_args()
    if args.trials:
        trials(args.trials)
        return
    recs = nights(args.folder)
    print(f"{args.folder}: {len(recs)} nights whose gate was not red, each against the others")
    for fastest in (False, True):
        print(replay(recs, fastest))


if __name__ == "__main__":
    main()
