"""Do a profile's measurement anchors keep their verdicts when the run is repeated? K back-to-back
runs of `lawbench run`, optionally with a busy-loop neighbour on one core, and what changed between them.

    python benchmarks/reproducibility.py                         # profile cpu, 3 runs
    python benchmarks/reproducibility.py --runs 5 --load         # one core kept busy throughout
    python benchmarks/reproducibility.py --runs 2 -k census --json repro.json

Each run is `lawbench run --profile P -k "not prediction" --no-history --out WORKDIR/run-i` in a
subprocess, its output in WORKDIR/run-i.log (`-k EXPR` becomes `(EXPR) and not prediction`).
Predictions are deterministic, so they are deselected; history anchors are not scored.
Printed: each anchor's verdict sequence and its statistic [interval] per run; the contradictions
(PASS in one run, FAIL in another); the VOID share (VOIDs over all verdicts of measurement anchors,
all runs together); each run's wall time. Exit 0 when nothing contradicts and the VOID share is at
most --max-void (0.20), else 1, so it can gate; 2 on bad arguments.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from lawbench.core.errors import DataError
from lawbench.core.models import Result, Verdict
from lawbench.core.record.reports import RunRecord, fmt_band, fmt_measured, is_retired, jsonable, read_json

MAX_VOID = 0.20
# The neighbour: spins on one CPU until killed, or until its parent is gone (even a SIGKILLed one).
SPIN = ("import os, sys\n"
        "os.sched_setaffinity(0, {int(sys.argv[1])})\n"
        "parent = os.getppid()\n"
        "while os.getppid() == parent:\n"
        "    for _ in range(1_000_000):\n"
        "        pass\n")


# --------------------------------------------------------------------------- analysis (pure)


def measurement_results(record: RunRecord) -> list[Result]:
    """The results that measured something here: not predictions, not history."""
    return [r for r in record.results if r.kind != "prediction" and not is_retired(r)]


def by_anchor(records: list[RunRecord]) -> dict[str, list[Optional[Result]]]:
    """Each measurement anchor's result in each run (None where a run lacks it), first seen first."""
    table: dict[str, list[Optional[Result]]] = {}
    for i, record in enumerate(records):
        for r in measurement_results(record):
            table.setdefault(r.anchor_id, [None] * len(records))[i] = r
    return table


def sequences(records: list[RunRecord]) -> dict[str, list[Optional[str]]]:
    """Each measurement anchor's verdict per run, e.g. {"law4.cpu.agree.x": ["PASS", "PASS", "VOID"]}."""
    return {aid: [None if r is None else r.verdict.value for r in row]
            for aid, row in by_anchor(records).items()}


def contradictions(records: list[RunRecord]) -> list[str]:
    """Anchors that PASSed in one run and FAILed in another: the register cannot both hold and not."""
    return [aid for aid, seq in sequences(records).items() if "PASS" in seq and "FAIL" in seq]


def verdict_counts(records: list[RunRecord]) -> dict[str, int]:
    """Verdicts of measurement anchors over all runs, one key per verdict."""
    counts = {v.value: 0 for v in Verdict}
    for record in records:
        for r in measurement_results(record):
            counts[r.verdict.value] += 1
    return counts


def void_share(records: list[RunRecord]) -> Optional[float]:
    """VOIDs / verdicts of measurement anchors, all runs together; None when nothing was measured."""
    counts = verdict_counts(records)
    total = sum(counts.values())
    return None if total == 0 else counts["VOID"] / total


def gate_failures(records: list[RunRecord], max_void: float = MAX_VOID) -> list[str]:
    """Why the gate fails, one line each; empty when it passes."""
    out = []
    if not records:
        return ["no run left a run record"]
    bad = contradictions(records)
    if bad:
        out.append(f"{len(bad)} contradiction(s): {', '.join(bad)}")
    share = void_share(records)
    if share is None:
        out.append("no measurement anchor was selected or ran")
    elif share > max_void:
        out.append(f"VOID share {share:.1%} is above {max_void:.0%}")
    return out


def statistics_table(records: list[RunRecord]) -> dict[str, list[Optional[dict[str, Any]]]]:
    """Each measurement anchor's statistic and its interval per run, as data."""
    return {aid: [None if r is None else {"measured": r.measured, "interval": r.interval} for r in row]
            for aid, row in by_anchor(records).items()}


# --------------------------------------------------------------------------- running


@dataclass
class Run:
    index: int
    out: Path
    log: Path
    exit_code: Optional[int] = None
    wall_s: float = 0.0
    record: Optional[RunRecord] = None
    problem: str = ""  # why there is no record


def selection(k: Optional[str]) -> str:
    return f"({k}) and not prediction" if k else "not prediction"


def lawbench_run(profile: str, k: Optional[str], out: Path) -> list[str]:
    return [sys.executable, "-m", "lawbench.core.commands.main", "run", "--profile", profile, "-k", selection(k),
            "--out", str(out), "--no-history"]


def end(proc: subprocess.Popen, grace_s: float) -> None:
    """Let a child finish what it is writing (its run record), then stop it."""
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_once(run: Run, cmd: list[str]) -> Run:
    (run.out / "run.json").unlink(missing_ok=True)  # a reused --workdir: never read an old record
    t0 = time.monotonic()
    with open(run.log, "w", encoding="utf-8") as log:  # unbuffered, so `tail -f` follows the run
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            run.exit_code = proc.wait()
        except BaseException:
            end(proc, grace_s=15)  # Ctrl-C reached it too (same process group): let it write its record
            raise
    run.wall_s = time.monotonic() - t0
    try:
        run.record = read_json(run.out / "run.json")
    except DataError as exc:
        run.problem = str(exc)
    return run


def start_load(cpu: int) -> subprocess.Popen:
    # A session of its own: Ctrl-C is for us, and we end it in `finally`.
    return subprocess.Popen([sys.executable, "-c", SPIN, str(cpu)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # so SIGTERM runs the `finally` that kills the load too


# --------------------------------------------------------------------------- printing


def progress_line(run: Run, runs: int) -> str:
    text = f"run {run.index}/{runs}: exit {run.exit_code} in {run.wall_s:.1f} s"
    if run.record is None:
        return f"{text}; no run record ({run.problem}); log {run.log}"
    counts = verdict_counts([run.record])
    text += "; " + ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    return f"{text}; log {run.log}"


def report(records: list[RunRecord], labels: list[str], max_void: float) -> list[str]:
    """The printed report: sequences with statistics, contradictions, VOID share."""
    table = by_anchor(records)
    width = max((len(aid) for aid in table), default=0)
    lines = [f"{'anchor':<{width}}  {' '.join(f'{lab:<5}' for lab in labels)}  band"]
    for aid, row in table.items():
        seq = " ".join(f"{'-' if r is None else r.verdict.value:<5}" for r in row)
        band = next((fmt_band(r) for r in row if r is not None), "-")
        lines.append(f"{aid:<{width}}  {seq}  {band}")
        if any(r is not None and r.measured is not None for r in row):  # a census has no statistic
            lines.append("    " + "  |  ".join(f"{lab}: {'-' if r is None else fmt_measured(r)}"
                                             for lab, r in zip(labels, row)))
    seqs = sequences(records)
    bad = contradictions(records)
    lines.append(f"contradictions (PASS in one run, FAIL in another): {len(bad)}")
    lines += [f"  {aid}  {' '.join(v or '-' for v in seqs[aid])}" for aid in bad]
    counts = verdict_counts(records)
    share = void_share(records)
    total = sum(counts.values())
    lines.append(f"VOID share: {counts['VOID']}/{total} = "
                 f"{'-' if share is None else f'{share:.1%}'} (limit {max_void:.0%}); "
                 + ", ".join(f"{n} {v}" for v, n in counts.items()))
    return lines


def summary(runs: list[Run], args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    records = [r.record for r in runs if r.record is not None]
    failures = gate_failures(records, args.max_void)
    failures += [f"run {r.index} left no run record: {r.problem}" for r in runs if r.record is None]
    return jsonable({
        "profile": args.profile, "k": selection(args.k), "runs_asked": args.runs, "load": args.load,
        "max_void": args.max_void, "workdir": str(workdir),
        "runs": [{"index": r.index, "exit_code": r.exit_code, "wall_s": round(r.wall_s, 1),
                  "run_id": r.record.run_id if r.record else None,
                  "record": str(r.out / "run.json"), "log": str(r.log)} for r in runs],
        "sequences": sequences(records), "statistics": statistics_table(records),
        "contradictions": contradictions(records), "verdict_counts": verdict_counts(records),
        "void_share": void_share(records), "failures": failures, "ok": not failures,
    })


# --------------------------------------------------------------------------- main


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="cpu", help="profile id (default cpu)")
    ap.add_argument("-k", default=None, metavar="EXPR", help="select anchors (pytest -k), predictions stay out")
    ap.add_argument("--runs", type=int, default=3, metavar="K", help="back-to-back runs (default 3)")
    ap.add_argument("--load", action="store_true", help="keep one core busy (a pinned busy loop) throughout")
    ap.add_argument("--load-cpu", type=int, default=None, metavar="N",
                    help="the CPU the load spins on (default: the last one this process may use)")
    ap.add_argument("--max-void", type=float, default=MAX_VOID, help=f"VOID share the gate allows (default {MAX_VOID})")
    ap.add_argument("--json", type=Path, default=None, metavar="PATH", help="also write the summary as JSON")
    ap.add_argument("--workdir", type=Path, default=None,
                    help="where the runs' records and logs go (default: a fresh temporary folder, kept)")
    args = ap.parse_args(argv)
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    allowed = sorted(os.sched_getaffinity(0))
    cpu = allowed[-1] if args.load_cpu is None else args.load_cpu
    if args.load and cpu not in allowed:
        ap.error(f"--load-cpu {cpu}: this process may use CPUs {allowed}")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="lawbench-repro-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"reproducibility: {args.runs} run(s) of `lawbench run --profile {args.profile} -k "
          f"\"{selection(args.k)}\"`{f', busy loop on CPU {cpu}' if args.load else ''}; records and logs in "
          f"{workdir}", flush=True)

    runs: list[Run] = []
    load = None
    interrupted = False
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        if args.load:
            load = start_load(cpu)
        for i in range(1, args.runs + 1):
            run = Run(i, workdir / f"run-{i}", workdir / f"run-{i}.log")
            runs.append(run_once(run, lawbench_run(args.profile, args.k, run.out)))
            print(progress_line(run, args.runs), flush=True)
    except KeyboardInterrupt:
        interrupted = True
        print(f"reproducibility: interrupted; reporting the {len(runs)} finished run(s)", file=sys.stderr)
    finally:
        if load is not None:
            load.kill()
            load.wait()
        signal.signal(signal.SIGTERM, previous)

    if interrupted and not runs:
        return 130
    done = [r for r in runs if r.record is not None]
    print()
    print("\n".join(report([r.record for r in done], [f"run{r.index}" for r in done], args.max_void)))
    print("wall time per run: " + ", ".join(f"run {r.index} {r.wall_s:.1f} s" for r in runs))
    result = summary(runs, args, workdir)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    share = result["void_share"]
    n_anchors = len(result["sequences"])
    print(f"reproducibility {'ok' if result['ok'] else 'FAILED'}: {n_anchors} measurement anchor(s) x "
          f"{len(done)} run(s), {len(result['contradictions'])} contradiction(s), VOID share "
          f"{'-' if share is None else f'{share:.1%}'} (limit {args.max_void:.0%}), "
          f"{sum(r.wall_s for r in runs):.0f} s in all"
          + "".join(f"\n  {why}" for why in result["failures"]))
    return 130 if interrupted else 0 if result["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
