"""`lawbench history`: list runs, follow one anchor over time, compare two runs.

    lawbench history [--profile P] [--limit N]        the newest runs
    lawbench history --anchor ID [--profile P]        one anchor's time series
    lawbench history compare RUN_A RUN_B              a join of two runs (ids, prefixes, latest~N)

Every view takes --json to print the data instead of a table (data first, tables second).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any, Optional

from lawbench.core.compare import compare_runs, print_comparison
from lawbench.core.history import History, ResultRow, RunRow
from lawbench.core.law import LawbenchError
from lawbench.core.models import Verdict
from lawbench.core.reports import VERDICT_STYLE, fmt_num, fmt_pair, jsonable


def _common(suppress: bool) -> argparse.ArgumentParser:
    # The compare sub-parser repeats these with SUPPRESS defaults so that it never overwrites
    # values given before the word "compare" (an argparse quirk with nested sub-parsers).
    default: Any = argparse.SUPPRESS if suppress else None
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--db", default=default, metavar="PATH",
                   help="history file (default: $LAWBENCH_HOME/history.sqlite or "
                        "./lawbench-out/history.sqlite)")
    p.add_argument("--json", action="store_true",
                   default=argparse.SUPPRESS if suppress else False,
                   help="print the data as JSON instead of a table")
    p.add_argument("--profile", default=default, help="only runs on this profile")
    return p


def add_history_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add `history` (and `history compare`) to the CLI's sub-parsers; returns the parser."""
    p = subparsers.add_parser("history", parents=[_common(False)],
                              help="list past runs, follow one anchor, compare two runs",
                              description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--anchor", metavar="ID", help="show this anchor's time series")
    p.add_argument("--limit", type=int, default=20, help="how many runs to list (default 20)")
    actions = p.add_subparsers(dest="history_action", metavar="{compare}")
    c = actions.add_parser("compare", parents=[_common(True)],
                           help="join two runs' results by anchor id")
    c.add_argument("run_a", metavar="RUN_A", help="baseline: run id, unique prefix or latest~N")
    c.add_argument("run_b", metavar="RUN_B", help="candidate: run id, unique prefix or latest")
    p.set_defaults(func=history_command)
    return p


def history_command(args: argparse.Namespace, console: Any = None) -> int:
    """Run `lawbench history …`; returns the exit code (2 with one line on stderr on error)."""
    try:
        with History(getattr(args, "db", None), create=False) as history:
            if getattr(args, "history_action", None) == "compare":
                return _compare(history, args, console)
            if getattr(args, "anchor", None):
                return _anchor(history, args, console)
            return _runs(history, args, console)
    except LawbenchError as exc:
        print(f"lawbench history: error: {exc}", file=sys.stderr)
        return 2


def _print_json(rows: list[Any]) -> None:
    data = [dataclasses.asdict(r) if dataclasses.is_dataclass(r) else r for r in rows]
    print(json.dumps(jsonable(data), indent=2, allow_nan=False))


def _console(console: Any) -> Any:
    from rich.console import Console
    return console or Console()


def _runs(history: History, args: argparse.Namespace, console: Any) -> int:
    rows: list[RunRow] = history.runs(profile=args.profile, limit=getattr(args, "limit", 20))
    if args.json:
        _print_json(rows)
        return 0
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"{len(rows)} newest runs in {history.path}", title_justify="left")
    for name in ("run", "started", "profile", "detected", "commit", "lawbench", "exit", "verdicts"):
        # ids and times are what a user copies into the next command: never cut them
        table.add_column(name, no_wrap=name in ("run", "started", "exit"))
    for r in rows:
        verdicts = Text()
        for v in Verdict:
            if r.counts.get(v.value):
                verdicts.append(f"{r.counts[v.value]} {v.value} ", style=VERDICT_STYLE[v.value])
        table.add_row(r.run_id[:12], r.started, r.profile, r.detected_profile or "-",
                      (r.commit or "-")[:10], r.version or "-",
                      Text(str(r.exit_code), style="green" if r.exit_code == 0 else "red"),
                      verdicts)
    _console(console).print(table)
    return 0


def _interval(lo: Optional[float], hi: Optional[float]) -> str:
    return "-" if lo is None or hi is None else fmt_pair(lo, hi)


def _anchor(history: History, args: argparse.Namespace, console: Any) -> int:
    rows: list[ResultRow] = history.anchor_history(args.anchor, profile=args.profile)
    if not rows:
        raise LawbenchError(f"{history.path}: no results for anchor {args.anchor!r}"
                            f"{' on profile ' + args.profile if args.profile else ''}")
    if args.json:
        _print_json(rows)
        return 0
    from rich.table import Table
    from rich.text import Text

    unit = f" ({rows[-1].unit})" if rows[-1].unit else ""
    table = Table(title=f"{args.anchor}: {rows[-1].quantity or ''}{unit}, {len(rows)} runs",
                  title_justify="left")
    for name in ("started", "run", "profile", "commit", "verdict", "measured", "CI", "band",
                 "spread", "reason"):
        table.add_column(name, no_wrap=name in ("started", "run", "verdict", "measured"))
    for r in rows:
        table.add_row(r.started, r.run_id[:12], r.profile, (r.commit or "-")[:10],
                      Text(r.verdict, style=VERDICT_STYLE.get(r.verdict, "")),
                      fmt_num(r.measured), _interval(r.ci_lo, r.ci_hi),
                      _interval(r.band_lo, r.band_hi), fmt_num(r.spread, 2), Text(r.reason or ""))
    _console(console).print(table)
    return 0


def _compare(history: History, args: argparse.Namespace, console: Any) -> int:
    run_a = history.resolve(args.run_a, profile=args.profile)
    run_b = history.resolve(args.run_b, profile=args.profile)
    rows = compare_runs(history, run_a, run_b)
    if args.json:
        _print_json([{**dataclasses.asdict(r), "change": r.change, "worse": r.worse} for r in rows])
        return 0
    print_comparison(rows, run_a, run_b, console=_console(console))
    return 0
