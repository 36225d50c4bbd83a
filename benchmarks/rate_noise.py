"""Can a cpu runner's night-to-night rate noise be cut inside a night (issue 31)? Back-to-back
"nights" on this box, each measuring every format's syn-100m decode rate interleaved with a
reference format's arm (syn-100m-f16) in one core ArmSampler (A B B A rounds, one discarded
warm-up visit per arm, llama-bench tg16 threads=1 -ngl 0, 3 repetitions per visit, the fastest
kept: the cpu law4 anchors' protocol), ROUNDS rounds per format.

Two questions, one measurement. Each night's first 4 rounds are the default design (what a night's
anchor takes: min_samples 4), all ROUNDS (default 12) the 3x design:
- absolute series (each arm's geometric mean of its visits): is the spread across nights
  sampling noise (more visits shrink it) or the box's state (it does not shrink)?
- the interleaved ratio format / F16 (geometric mean of the per-round ratios): does measuring both
  arms inside one anchor cancel the time-local noise, and how far do more pairs shrink the rest?
Each also with a night's fastest visit in place of the geometric mean of its visits.
For each design: the sd of the log across nights, the mean within-night standard error (what more
visits can remove), and the Neyman-Pearson ceiling at the gate's split of 1 % (benchmarks/
gate_power.py: one-sided z, sd known) for a 10 % one-format slowdown.

    python benchmarks/rate_noise.py --nights 12 [--rounds 12] [--gap 15] --out results/gate-prove/noise-X/nights.jsonl
    python benchmarks/rate_noise.py --analyse results/gate-prove/noise-X/nights.jsonl
    python benchmarks/rate_noise.py --analyse-runs results/gate-prove/cpu-nights-2026-12-07

Each night takes the box lock (core.lock, as a run does: waits while another job holds it) and
gives it back for --gap seconds after; one JSON line per night keeps every visit's value and the load average.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parent.parent
FORMATS = ("Q8_0", "Q4_0", "Q2_K")
REFERENCE = "F16"
DEFAULT_ROUNDS = 4  # a night's anchor takes min_samples = 4 rounds
PARAMS = {"n_gen": 16, "threads": 1, "n_gpu_layers": 0}
REPS = 3

_spec = importlib.util.spec_from_file_location("gate_power", ROOT / "benchmarks" / "gate_power.py")
gate_power = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gate_power)  # type: ignore[union-attr]


def _model(fmt: str) -> str:
    return f"gguf:syn-100m-{fmt.lower()}"


def one_night(llama_dir: str, rounds: int) -> dict:
    """Every format against the reference, ``rounds`` interleaved rounds each, under the box lock."""
    from lawbench.core.errors import EngineError
    from lawbench.core.laws.resources import Resources
    from lawbench.core.stats.protocol import ArmSampler, Visit
    from lawbench.engines import run_bench
    from lawbench.store import model_file

    def visit(llama, path):
        def run(reps: int) -> Visit:
            r = run_bench(llama, path, timeout_s=60, repetitions=reps, **PARAMS)
            return Visit(values=[v for ts in r.samples_ts for v in ts], wall_s=r.wall_s)
        return run

    while True:
        res = Resources(llama_dir=llama_dir)
        try:
            res.lock()
            break
        except EngineError as exc:  # another job holds the box: wait for it, as a run would
            res.close()
            print(f"waiting: {exc}", file=sys.stderr, flush=True)
            time.sleep(5)
    try:
        llama = res.llama()
        night = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "engine": llama.version,
                 "load_before": os.getloadavg()[0], "formats": {}}
        ref = model_file(_model(REFERENCE), res)
        for fmt in FORMATS:
            s = ArmSampler({"a": visit(llama, model_file(_model(fmt), res)), "b": visit(llama, ref)},
                           labels={"a": _model(fmt), "b": _model(REFERENCE)}, reps_per_visit=REPS,
                           per_visit=lambda v: max(v) if v else None)
            samples = s.draw(rounds)
            night["formats"][fmt] = {"a": [x.raw["value_a"] for x in samples],
                                     "b": [x.raw["value_b"] for x in samples]}
        night["load_after"] = os.getloadavg()[0]
        return night
    finally:
        res.close()


# --------------------------------------------------------------------------- analysis (pure)


def _gm_se(values: list[float]) -> tuple[float, float]:
    """log of the geometric mean and its standard error."""
    logs = [math.log(v) for v in values]
    return statistics.fmean(logs), statistics.stdev(logs) / math.sqrt(len(logs))


def designs(nights: list[dict], rounds: int) -> dict[str, dict[str, list[tuple[float, Optional[float]]]]]:
    """{design: {series: [(log value, within-night se or None) per night]}} over the first ``rounds``
    rounds. Two statistics of a night: the geometric mean of its visits (what Result.rates
    records and the gate judges) and its fastest visit (a neighbour only ever slows a visit down)."""
    out: dict[str, dict[str, list[tuple[float, Optional[float]]]]] = {
        "absolute": {}, "ratio to F16": {}, "absolute, fastest visit": {}, "ratio of fastest visits": {}}
    for n in nights:
        for fmt, arms in n["formats"].items():
            a, b = arms["a"][:rounds], arms["b"][:rounds]
            pairs = {f"syn-100m-{fmt.lower()}": a}
            # the reference arm is visited once per format: its first anchor's visits are its series
            if fmt == FORMATS[0]:
                pairs[f"syn-100m-{REFERENCE.lower()}"] = b
            for key, vals in pairs.items():
                out["absolute"].setdefault(key, []).append(_gm_se(vals))
                out["absolute, fastest visit"].setdefault(key, []).append((math.log(max(vals)), None))
            ratio = f"{fmt} / {REFERENCE}"
            out["ratio to F16"].setdefault(ratio, []).append(_gm_se([x / y for x, y in zip(a, b)]))
            out["ratio of fastest visits"].setdefault(ratio, []).append((math.log(max(a) / max(b)), None))
    return out


def run_designs(folder: Path) -> dict[str, dict[str, list[tuple[float, Optional[float]]]]]:
    """The same decomposition for real nights (every night-*/run.json whose gate was not red, as
    benchmarks/cpu_nights.py writes them): each rate series' visits, and each two-arm anchor's
    per-round ratios (its arms inside one anchor: the same format, syn-100m against syn-400m)."""
    out: dict[str, dict[str, list[tuple[float, Optional[float]]]]] = {
        "absolute": {}, "ratio inside one anchor": {}, "absolute, fastest visit": {}}
    for f in sorted(folder.glob("night-*/run.json")):
        rec = json.loads(f.read_text(encoding="utf-8"))
        if (rec.get("gate") or {}).get("verdict") == "red":
            continue
        for res in rec["results"]:
            for rate in res.get("rates") or []:
                if len(rate["values"]) >= 2:
                    out["absolute"].setdefault(rate["series"]["model"], []).append(_gm_se(rate["values"]))
                    out["absolute, fastest visit"].setdefault(rate["series"]["model"], []).append(
                        (math.log(max(rate["values"])), None))
            ratios = [s["value"] for s in (res.get("measurement") or {}).get("samples", []) if s.get("arm") == "a/b"]
            if len(ratios) >= 2:
                out["ratio inside one anchor"].setdefault(res["anchor_id"], []).append(_gm_se(ratios))
    return out


def table(rows: list[tuple[str, dict]], alpha: float = gate_power.ALPHA) -> list[str]:
    """One Markdown row per (rounds, design, series): the sd across nights, the within-night standard
    error (the part more visits can remove), and the ceiling at a 10 % slowdown at alpha / m, m the
    design's series."""
    lines = ["| design | rounds | series | sd across nights | within-night se | "
             "ceiling at 10 % (alpha / m) |", "|---|---|---|---|---|---|"]
    for rounds, ds in rows:
        for name, series in ds.items():
            m = len(series)
            for key, vals in series.items():
                sd = statistics.stdev(v for v, _ in vals)
                ses = [s for _, s in vals if s is not None]
                se = f"{math.sqrt(statistics.fmean(s * s for s in ses)):.1%}" if ses else "-"
                lines.append(f"| {name} | {rounds} | {key} | {sd:.1%} | {se} | "
                             f"{gate_power.ceiling_power(sd, 0.10, alpha / m):.0%} (m = {m}) |")
    return lines


def report(nights: list[dict], rounds: int) -> list[str]:
    head = [f"{len(nights)} nights, {nights[0]['started']} … {nights[-1]['started']}, engine "
            f"{nights[0]['engine']}; load average {min(n['load_before'] for n in nights):.2f}-"
            f"{max(n['load_before'] for n in nights):.2f}", ""]
    return head + table([(str(r), designs(nights, r)) for r in sorted({DEFAULT_ROUNDS, rounds})])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nights", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=3 * DEFAULT_ROUNDS)
    ap.add_argument("--gap", type=float, default=15.0, help="seconds between nights, the lock given back")
    ap.add_argument("--out", help="JSON lines, one per night (appended)")
    ap.add_argument("--analyse", metavar="JSONL", help="print the table of nights already measured")
    ap.add_argument("--analyse-runs", metavar="FOLDER",
                    help="the same table for real nights' run.json (night-*/run.json, gate not red)")
    ap.add_argument("--llama-dir", help="the real llama.cpp bin folder (default: the cached pinned build)")
    args = ap.parse_args()
    if args.analyse_runs:
        folder = Path(args.analyse_runs)
        reds = sum((json.loads(f.read_text()).get("gate") or {}).get("verdict") == "red"
                   for f in folder.glob("night-*/run.json"))
        print(f"{folder}: {len(list(folder.glob('night-*/run.json'))) - reds} nights ({reds} red left out)\n")
        print("\n".join(table([("as run", run_designs(folder))])))
        return 0
    if args.analyse:
        nights = [json.loads(x) for x in Path(args.analyse).read_text().splitlines() if x.strip()]
        rounds = min(len(a["a"]) for n in nights for a in n["formats"].values())
        print("\n".join(report(nights, rounds)))
        return 0
    if not args.out:
        ap.error("--out is required when measuring")
    if args.llama_dir:
        llama_dir = args.llama_dir
    else:
        from lawbench.core.engines.build import build_llamacpp

        llama_dir = str(build_llamacpp(progress=None).bin_dir)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    nights = []
    for i in range(args.nights):
        t0 = time.monotonic()
        night = one_night(llama_dir, args.rounds)
        night["wall_s"] = round(time.monotonic() - t0, 1)
        nights.append(night)
        with out.open("a") as fh:
            fh.write(json.dumps(night) + "\n")
        print(f"night {i + 1}: {night['wall_s']} s, load {night['load_before']:.2f}", flush=True)
        if i + 1 < args.nights:
            time.sleep(args.gap)
    print("\n".join(report(nights, args.rounds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
