"""`lawbench ab`: two engine builds, the same anchors, interleaved pairs, the B/A ratio with its interval.

Exit 0 when every selected anchor was measured (and, with ``--gate-min-ratio R``, every interval
lies at or above R); 1 on a regression (an interval wholly below R), an unresolved gate (the
interval still straddles R when the pairs are spent), an anchor that could not be measured, or a
failed engine build; 2 on bad input (an engine spec, a version the index does not have, a folder
without llama-bench, a selection without speed anchors); 130 / 143 when stopped by SIGINT / SIGTERM
(the pairs taken so far are written). An A/B is a run like any other (lawbench.core.run.ab.AB, a mode of the Run):
its record is OUT/run.json and a row of OUT/history.sqlite, one result "<anchor>~ab" per anchor;
OUT/ab.json is the A/B's own view of it (docs/ab.md).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from lawbench.core.console import console as _console
from lawbench.core.laws.command import number_between, whole_number
from lawbench.core.engines.record import DEFAULT_LLAMA_VERSION, LLAMA_VERSION_ENV


_ratio = number_between(0, 1e6, "a ratio gate is a finite number above 0", "0.95")
_confidence = number_between(0.5, 1, "a confidence lies between 0.5 and 1", "0.95")


def add_ab_parser(sub: argparse._SubParsersAction) -> None:
    default_a = f"llama.cpp@{os.environ.get(LLAMA_VERSION_ENV, DEFAULT_LLAMA_VERSION)}"
    p = sub.add_parser("ab", help="A/B two engine builds on the same anchors, interleaved (docs/ab.md)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--a", default=default_a, metavar="ENGINE",
                   help=f"the baseline engine (default {default_a}); ENGINE is llama.cpp[@VERSION], "
                        "llama-cpp-python@VERSION, dir:PATH or record (the profile's engine of record), "
                        "then optionally +args=OPTIONS, +env=NAME=VALUE")
    p.add_argument("--b", required=True, metavar="ENGINE", help="the engine compared with A")
    p.add_argument("--profile", default="detect", help="profile id, or 'detect' (default) for this machine's")
    p.add_argument("-k", default=None, metavar="EXPR", help="select anchors by id / law / kind (pytest -k)")
    p.add_argument("--law", action="append", help="only this law (repeatable)")
    p.add_argument("--pairs", type=whole_number(3), default=6,
                   help="pairs of visits per anchor (default 6; with a gate: the most it may take)")
    p.add_argument("--confidence", type=_confidence, default=0.95, help="interval confidence (default 0.95)")
    p.add_argument("--timeout-s", type=whole_number(1), default=1800,
                   help="the longest one anchor's pairs may take, in seconds (default 1800)")
    p.add_argument("--gate-min-ratio", type=_ratio, default=None, metavar="R",
                   help="exit 1 unless every anchor's whole B/A interval lies at or above R")
    p.add_argument("--out", default=os.environ.get("LAWBENCH_OUT", "lawbench-out"),
                   help="folder for ab.json (default: lawbench-out)")
    p.add_argument("--json", action="store_true", help="print the record as JSON instead of the table")
    p.set_defaults(func=cmd_ab)


def cmd_ab(args: argparse.Namespace) -> int:
    from lawbench.core.engines.specs import describe, parse_engine, resolve_engine, with_record
    from lawbench.core.errors import UsageError
    from lawbench.core.paths import writable_dir
    from lawbench.core.laws.resources import Resources
    from lawbench.core.record.ab_json import ab_view
    from lawbench.core.run.ab import AB
    from lawbench.core.run.context import RunContext
    from lawbench.core.run.run import Run

    default_version = os.environ.get(LLAMA_VERSION_ENV, DEFAULT_LLAMA_VERSION)
    specs = {"a": parse_engine(args.a, "--a", default_version), "b": parse_engine(args.b, "--b", default_version)}
    ctx = RunContext(args.profile, laws=tuple(args.law or ()))
    profile = ctx.policy.profile
    specs = {side: with_record(spec, profile, f"--{side}") for side, spec in specs.items()}
    if not ctx.policy.on_own_runner:
        raise UsageError(f"--profile {profile.id}: this machine does not match it (detected: {ctx.detected}); "
                         "an A/B measures on the profile's own hardware")
    mode = AB(args.k, args.pairs, args.confidence, args.gate_min_ratio, float(args.timeout_s),
              said=lambda r: print(f"  {r.anchor_id}: {_short(r)}", file=sys.stderr, flush=True))
    anchors = mode.select(ctx)  # a selection without speed anchors is refused before anything builds
    out = Path(args.out)
    writable_dir(out, "--out folder", fix="give a writable path")
    probe = Resources(profile=profile)
    backend, arch = probe.backend(), probe.cuda_arch() if probe.backend() == "cuda" else "90"
    llamas = {side: resolve_engine(spec, backend=backend, cuda_arch=arch, option=f"--{side}")
              for side, spec in specs.items()}
    mode.use_engines(llamas, {side: describe(specs[side], llamas[side]) for side in specs})
    # engine A is the run's engine: its llama-quantize makes the synthetic models both engines read
    run = Run(ctx, mode=mode, out=out, engine=llamas["a"])
    engines = mode.engine()
    print(f"lawbench ab: profile {profile.id}, {len(anchors)} anchor(s), up to {args.pairs} pairs each\n"
          f"  A = {_engine_line(engines['a'])}\n  B = {_engine_line(engines['b'])}",
          file=sys.stderr, flush=True)
    record = run.measure(anchors)
    view = ab_view(record, run.exit_code)
    path = _save_view(run, view, out)
    if record.interrupted:
        print(f"lawbench: error: interrupted by {record.interrupted}", file=sys.stderr)
    elif args.json:
        from lawbench.core.record.reports import to_json

        sys.stdout.write(to_json(view))
    else:
        print_ab_table(view)
        print(f"record: {path}\nrun record: {run.record_path} (mode ab, in the history with every run)")
    return run.exit_code


def _save_view(run: Any, view: Any, out: Path) -> Any:
    """OUT/ab.json, the A/B's view of its run record; one that cannot be written is an output error
    (exit 1), and the run record keeps everything it shows."""
    from lawbench.core.record.reports import write_json

    try:
        return write_json(view, out / "ab.json")
    except OSError as exc:
        run.output_error(f"cannot write {out / 'ab.json'}: {exc.strerror or exc}")
        return None


def _engine_line(engine: dict) -> str:
    extra = " ".join([*(engine.get("bench_args") or []),
                      *(f"{k}={v}" for k, v in (engine.get("bench_env") or {}).items())])
    return (f"{engine['spec']}: {engine['source']}, build {engine.get('build_number') or 'unknown'}, "
            f"commit {engine.get('commit')}" + (f", with {extra}" if extra else ""))


def _short(r: Any) -> str:
    from lawbench.core.record.reports import fmt_num, fmt_pair

    if r.status != "measured":
        return f"{r.status.upper()}: {r.reason}"
    ci = fmt_pair(*r.interval) if r.interval else "[-]"
    return f"B/A {fmt_num(r.ratio)} {ci} over {r.pairs} pairs" + (f", gate: {r.gate}" if r.gate else "")


def print_ab_table(record: Any, console: Any = None) -> None:
    """anchor, A median, B median, ratio [interval], pairs, and the gate's verdict when there is one."""
    from rich.table import Table

    from lawbench.core.record.reports import fmt_num, fmt_pair

    # A log or a pipe has no width of its own: wide enough that anchor ids and intervals never fold.
    console = console or _console()
    gate = record.gate_min_ratio
    looks = {r.confidence for r in record.results if r.confidence is not None}
    per_look = f", {max(looks):.4g} per look" if looks and max(looks) != record.confidence else ""
    title = (f"B/A per anchor, {record.confidence:.0%} intervals (Student-t on log ratios{per_look})"
             + (f"; gate: whole interval >= {fmt_num(gate)}" if gate is not None else ""))
    table = Table(title=title, title_justify="left")
    table.add_column("anchor", overflow="fold", min_width=24)
    for name in ("A median", "B median", "B/A [CI]", "pairs"):
        table.add_column(name, justify="right", no_wrap=True)
    if gate is not None:
        table.add_column("gate")
    for r in record.results:
        if r.status == "measured":
            ratio = f"{fmt_num(r.ratio)} {fmt_pair(*r.interval) if r.interval else '[-]'}"
            row = [r.anchor_id, f"{fmt_num(r.median_a)} {r.unit}", f"{fmt_num(r.median_b)} {r.unit}",
                   ratio, str(r.pairs)]
        else:
            row = [r.anchor_id, "-", "-", f"{r.status.upper()}: {r.reason}", str(r.pairs)]
        if gate is not None:
            row.append(r.gate or r.status)
        table.add_row(*row)
    console.print(table)
