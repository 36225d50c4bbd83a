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
from typing import Any

from lawbench.core.compare import compare_runs, print_comparison
from lawbench.core.errors import LawbenchError
from lawbench.core.history import History, ResultRow, RunRow
from lawbench.core.models import Verdict
from lawbench.core.reports import VERDICT_STYLE, fmt_band_edges, fmt_num, fmt_pair, jsonable


def _common(suppress: bool) -> argparse.ArgumentParser:
    # The compare sub-parser repeats these with SUPPRESS defaults so that it never overwrites
    # values given before the word "compare" (an argparse quirk with nested sub-parsers).
    default: Any = argparse.SUPPRESS if suppress else None
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--db", default=default, metavar="PATH",
                   help="history file (default: $LAWBENCH_OUT/history.sqlite or "
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


def _print_rows(console: Any, title: str, columns: dict[str, list[Any]],
                narrow_drop: tuple[str, ...] = ()) -> None:
    """A table whose cells wrap at spaces but never cut a word (an id, a number, a time).

    Below 120 columns the `narrow_drop` columns give way; the JSON view always has them all.
    """
    from rich.table import Table

    console = _console(console)
    if console.width < 120:
        columns = {k: v for k, v in columns.items() if k not in narrow_drop}
    table = Table(title=title, title_justify="left")
    for name, cells in columns.items():
        if name == "reason":
            table.add_column(name, overflow="fold")
            continue
        words = [w for c in cells for w in str(c).split()] + name.split()
        table.add_column(name, min_width=min(30, max(map(len, words))))
    for row in zip(*columns.values()):
        table.add_row(*row)
    console.print(table)


def _runs(history: History, args: argparse.Namespace, console: Any) -> int:
    rows: list[RunRow] = history.runs(profile=args.profile, limit=getattr(args, "limit", 20))
    if args.json:
        _print_json(rows)
        return 0
    from rich.text import Text

    def verdicts(r: RunRow) -> Text:
        text = Text()
        for v in Verdict:
            if r.counts.get(v.value):
                text.append(f"{r.counts[v.value]} {v.value} ", style=VERDICT_STYLE[v.value])
        return text

    _print_rows(console, f"{len(rows)} newest runs in {history.path}", {
        "run": [r.run_id[:12] for r in rows],
        "started (UTC)": [_when(r.started) for r in rows],
        "profile": [r.profile for r in rows],
        "detected": [r.detected_profile or "-" for r in rows],
        "commit": [(r.commit or "-")[:10] for r in rows],
        "exit": [Text(str(r.exit_code), style="green" if r.exit_code == 0 else "red")
                 for r in rows],
        "verdicts": [verdicts(r) for r in rows]}, narrow_drop=("detected",))
    return 0


def _when(started: str) -> str:
    return started[:16].replace("T", " ")  # minutes are enough to tell nightly runs apart


def _measured(r: ResultRow) -> str:
    if r.measured is None:
        return "-"
    if r.ci_lo is None or r.ci_hi is None:
        return fmt_num(r.measured)
    return f"{fmt_num(r.measured)} {fmt_pair(r.ci_lo, r.ci_hi)}"


def _anchor(history: History, args: argparse.Namespace, console: Any) -> int:
    rows: list[ResultRow] = history.anchor_history(args.anchor, profile=args.profile)
    if not rows:
        raise LawbenchError(f"{history.path}: no results for anchor {args.anchor!r}"
                            f"{' on profile ' + args.profile if args.profile else ''}")
    if args.json:
        _print_json(rows)
        return 0
    from rich.text import Text

    console = _console(console)
    unit = f" ({rows[-1].unit})" if rows[-1].unit else ""
    _print_rows(console, f"{args.anchor}: {rows[-1].quantity or ''}{unit}, {len(rows)} runs", {
        "started (UTC)": [_when(r.started) for r in rows],
        "run": [r.run_id[:12] for r in rows],
        "profile": [r.profile for r in rows],
        "commit": [(r.commit or "-")[:10] for r in rows],
        "verdict": [Text(r.verdict, style=VERDICT_STYLE.get(r.verdict, "")) for r in rows],
        "predicted": [fmt_num(r.predicted) for r in rows],
        "measured [CI]": [_measured(r) for r in rows],
        "band": ["-" if r.band_lo is None or r.band_hi is None
                 else fmt_band_edges(r.band_lo, r.band_hi) for r in rows],
        "reason": [Text(r.reason or "") for r in rows]},
        narrow_drop=("profile", "commit", "reason"))
    if console.width < 120:  # the reasons follow the table rather than squeeze into it
        for r in rows:
            if r.reason:
                style = VERDICT_STYLE.get(r.verdict, "")
                console.print(Text(f"  {r.run_id[:12]} ") + Text(r.verdict, style=style)
                              + Text(f": {r.reason}"))
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
