"""`lawbench history`: list runs, follow one anchor over time, compare two runs, import runs,
find drift and stale runners. docs/history.md describes each.

    lawbench history [--profile P] [--limit N]        the newest runs
    lawbench history --anchor ID [--profile P]        one anchor's time series
    lawbench history compare RUN_A RUN_B              a join of two runs (ids, prefixes, latest~N)
    lawbench history import PATH...                   run.json files, bundles, folders of them
    lawbench history export FOLDER                    every runner's run as FOLDER/<profile>/<run_id>.json
    lawbench history drift [--profile P] [--alpha A]  step changes per anchor, profile and engine
    lawbench history stale [--hours H] [--profile P]  profiles without a completed run lately

Every view takes --json to print the data instead of a table (data first, tables second).
Exit codes: 0; 1 when `stale` finds a stale profile; 2 on an error or a refused import.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from pathlib import Path
from typing import Any

from lawbench.core.console import console as make_console, printable, text
from lawbench.core.laws.command import number_between, whole_number
from lawbench.core.history.compare import comparability, compare_runs, print_comparison
from lawbench.core.errors import LawbenchError, UsageError
from lawbench.core.history.store import History, ResultRow, RunRow
from lawbench.core.history.imports import export_runs, file_records, import_paths, quarantine
from lawbench.core.models import Verdict
from lawbench.core.record.reports import VERDICT_STYLE, fmt_band_edges, fmt_num, fmt_pair, jsonable


def _common(suppress: bool, profile: bool = True) -> argparse.ArgumentParser:
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
    if profile:
        p.add_argument("--profile", default=default, help="only runs on this profile")
    return p


def add_history_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add `history` (and `history compare`) to the CLI's sub-parsers; returns the parser."""
    p = subparsers.add_parser("history", parents=[_common(False)],
                              help="list past runs, follow one anchor, compare two runs",
                              description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--anchor", metavar="ID", help="show this anchor's time series")
    p.add_argument("--limit", type=whole_number(1), default=20, help="how many runs to list (default 20)")
    actions = p.add_subparsers(dest="history_action", metavar="{compare,import,export,drift,stale}")
    c = actions.add_parser("compare", parents=[_common(True)],
                           help="join two runs' results by anchor, profile and engine build")
    c.add_argument("run_a", metavar="RUN_A", help="baseline: run id, unique prefix or latest~N")
    c.add_argument("run_b", metavar="RUN_B", help="candidate: run id, unique prefix or latest")
    i = actions.add_parser("import", parents=[_common(True, profile=False)],
                           help="add run records and contribution bundles (idempotent)")
    i.add_argument("paths", nargs="+", metavar="PATH",
                   help="a run.json, a contribution bundle, or a folder (every *.json below it)")
    i.add_argument("--contribution", action="store_true",
                   help="mark every run of this import a contribution (a bundle always is one): "
                        "shown, never counted for a runner's drift, staleness or latest")
    i.add_argument("--require-binding", action="store_true",
                   help="a run record must carry a binding to the nightly workflow run that made it, which "
                        "verifies (docs/history.md); one without is refused (the collect step's import)")
    i.add_argument("--quarantine", metavar="DIR",
                   help="copy each refused file into DIR with a .reason.txt, and exit 0 when every "
                        "refused file is kept there (the others go in either way)")
    i.add_argument("--file-into", metavar="DATA",
                   help="file each record that is in the history under DATA/runs/<profile>/<run_id>.json "
                        "(a contribution under DATA/contributions/...), never overwriting one")
    e = actions.add_parser("export", parents=[_common(True)],
                           help="write every runner's run as FOLDER/<profile>/<run_id>.json (a data branch; not contributions)")
    e.add_argument("folder", metavar="FOLDER", help="where the run records go")
    d = actions.add_parser("drift", parents=[_common(True)],
                           help="step changes of a statistic against its own history (a warning)")
    d.add_argument("--alpha", type=float, default=0.01,
                   help="false-alarm rate per series (default 0.01)")
    st = actions.add_parser("stale", parents=[_common(True, profile=False)],
                            help="exit 1 when a profile has no completed run within --hours")
    st.add_argument("--hours", type=number_between(0, math.inf, "the window is a finite number of hours above 0", "36"),
                    default=36.0, help="the window (default 36)")
    st.add_argument("--profile", dest="stale_profiles", action="append", metavar="P",
                    help="check this profile (repeatable; default: every profile with "
                         "runner_labels)")
    st.add_argument("--now", default=None, metavar="TIME",
                    help="measure ages from this ISO-8601 time instead of the clock")
    p.set_defaults(func=history_command)
    return p


def history_command(args: argparse.Namespace, console: Any = None) -> int:
    """Run `lawbench history …`; returns the exit code (2 with one line on stderr on error)."""
    action = getattr(args, "history_action", None)
    try:
        if action == "stale":
            return _stale(args, console)
        with History(getattr(args, "db", None), create=action == "import") as history:
            if action == "import":
                return _import(history, args)
            if action == "export":
                return _export(history, args)
            if action == "drift":
                return _drift(history, args, console)
            if action == "compare":
                return _compare(history, args, console)
            if getattr(args, "anchor", None):
                return _anchor(history, args, console)
            return _runs(history, args, console)
    except LawbenchError as exc:
        print(printable(f"lawbench history: error: {exc}"), file=sys.stderr)
        return 2


def _print_json(rows: list[Any]) -> None:
    data = [dataclasses.asdict(r) if dataclasses.is_dataclass(r) else r for r in rows]
    print(json.dumps(jsonable(data), indent=2, allow_nan=False))


def _console(console: Any) -> Any:
    return console or make_console()


def _print_rows(console: Any, title: str, columns: dict[str, list[Any]],
                narrow_drop: tuple[str, ...] = ()) -> None:
    """A table whose cells wrap at spaces but never cut a word (an id, a number, a time).

    Below 120 columns the `narrow_drop` columns give way; the JSON view always has them all.
    """
    from rich.table import Table

    console = _console(console)
    if console.width < 120:
        columns = {k: v for k, v in columns.items() if k not in narrow_drop}
    table = Table(title=text(title), title_justify="left")
    for name, cells in columns.items():
        if name == "reason":
            table.add_column(name, overflow="fold")
            continue
        words = [w for c in cells for w in str(c).split()] + name.split()
        table.add_column(name, min_width=min(30, max(map(len, words))))
    for row in zip(*columns.values()):
        table.add_row(*map(text, row))  # a record's strings: never markup, never escapes
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
        "from": ["contribution" if r.source == "contribution" else r.binding.short() if r.binding else "runner"
                 for r in rows],
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


def _census_counts(history: History, rows: list[ResultRow]) -> dict[str, dict]:
    """Per run, the label counts a census verdict rests on: they live in the run's record, not in
    the results table (a census has no number)."""
    out = {}
    for r in rows:
        if r.kind == "census":
            found = next((x for x in history.record(r.run_id).results if x.anchor_id == r.anchor_id), None)
            if found is not None and found.census_judged:
                out[r.run_id] = found.census_judged
    return out


def _anchor(history: History, args: argparse.Namespace, console: Any) -> int:
    rows: list[ResultRow] = history.anchor_history(args.anchor, profile=args.profile)
    if not rows:
        raise LawbenchError(f"{history.path}: no results for anchor {args.anchor!r}"
                            f"{' on profile ' + args.profile if args.profile else ''}")
    judged = _census_counts(history, rows)
    if args.json:
        _print_json([{**dataclasses.asdict(r), **({"judged": judged[r.run_id]} if r.run_id in judged else {})}
                     for r in rows])
        return 0
    from rich.text import Text

    from lawbench.core.record.reports import fmt_judged

    console = _console(console)
    unit = f" ({rows[-1].unit})" if rows[-1].unit else ""
    _print_rows(console, f"{args.anchor}: {rows[-1].quantity or ''}{unit}, {len(rows)} runs", {
        "started (UTC)": [_when(r.started) for r in rows],
        "run": [r.run_id[:12] for r in rows],
        "profile": [r.profile for r in rows],
        "engine build": [r.engine for r in rows],
        "commit": [(r.commit or "-")[:10] for r in rows],
        "verdict": [Text(r.verdict, style=VERDICT_STYLE.get(r.verdict, "")) for r in rows],
        "predicted": [fmt_num(r.predicted) for r in rows],
        "measured [CI]": [fmt_judged(judged[r.run_id]) if r.run_id in judged else _measured(r) for r in rows],
        "band": ["-" if r.band_lo is None or r.band_hi is None
                 else fmt_band_edges(r.band_lo, r.band_hi) for r in rows],
        "reason": [Text(r.reason or "") for r in rows]},
        narrow_drop=("profile", "engine build", "commit", "reason"))
    if console.width < 120:  # the reasons follow the table rather than squeeze into it
        for r in rows:
            if r.reason:
                style = VERDICT_STYLE.get(r.verdict, "")
                console.print(Text(f"  {r.run_id[:12]} ") + text(r.verdict, style=style)
                              + text(f": {r.reason}"))
    return 0


def _compare(history: History, args: argparse.Namespace, console: Any) -> int:
    run_a = history.resolve(args.run_a, profile=args.profile)
    run_b = history.resolve(args.run_b, profile=args.profile)
    rows = compare_runs(history, run_a, run_b)
    verdict = comparability(history, run_a, run_b)
    if args.json:
        data = {"run_a": run_a, "run_b": run_b, **dataclasses.asdict(verdict),
                "rows": [{**dataclasses.asdict(r), "change": r.change, "worse": r.worse} for r in rows]}
        print(json.dumps(jsonable(data), indent=2, allow_nan=False))  # one object, as docs/history.md says
        return 0
    print_comparison(rows, run_a, run_b, console=_console(console), verdict_of=verdict)
    return 0


def _known_profiles(ids: list[str]) -> None:
    from lawbench.core.hardware.profiles import get_profile, plugin_profiles
    from lawbench.core.laws.registry import get_registry

    profiles = plugin_profiles(get_registry())
    for pid in ids:
        get_profile(pid, profiles)  # unknown: one line naming the known ones


def _import(history: History, args: argparse.Namespace) -> int:
    if any(not p.strip() for p in args.paths):  # "" would import the current folder, recursively
        raise UsageError("history import: an empty PATH (an unset shell variable?); give run.json files, "
                         "bundles or folders")
    if args.contribution and args.require_binding:
        raise UsageError("history import: --contribution and --require-binding contradict each other: a "
                         "contribution is never bound to a runner's workflow run")
    outcomes = import_paths(history, args.paths, contribution=args.contribution,
                            require_binding=args.require_binding)
    refused = sum(o.status == "refused" for o in outcomes)
    kept_aside = quarantine(outcomes, Path(args.quarantine)) if args.quarantine and refused else None
    filed = file_records(outcomes, Path(args.file_into)) if args.file_into else []
    unfiled = [o for o in filed if o.status == "refused"]
    if args.json:
        _print_json(outcomes + filed)  # the filed records follow, each with its place on DATA
        for problem in kept_aside or []:
            print(printable(f"lawbench history: error: {problem}"), file=sys.stderr)
    else:
        for o in outcomes:
            if o.status == "refused":
                print(printable(f"refused   {o.message}"), file=sys.stderr)
            else:
                print(printable(f"{'imported' if o.status == 'imported' else 'already '}  {o.source}: "
                                f"{o.message}"))
        if not outcomes:
            print(f"no .json files under {', '.join(args.paths)}: nothing to import")
        imported = sum(o.status == "imported" for o in outcomes)
        for o in filed:
            print(printable(f"{'filed   ' if o.status == 'imported' else 'refused ' if o.status == 'refused' else 'already '}"
                            f"  {o.message}"), file=sys.stderr if o.status == "refused" else sys.stdout)
        for problem in kept_aside or []:
            print(printable(f"lawbench history: error: {problem}"), file=sys.stderr)
        print(f"{imported} imported, {len(outcomes) - imported - refused} already in the history, "
              f"{refused} refused, into {history.path}"
              + (f"; the refused files are quarantined in {args.quarantine}" if kept_aside == [] else
                 "; fix or drop the refused files" + (" (the others are in)" if refused < len(outcomes) else "")
                 if refused else ""))
    if unfiled or kept_aside:
        return 2
    return 2 if refused and kept_aside is None else 0


def _export(history: History, args: argparse.Namespace) -> int:
    from lawbench.core.paths import writable_dir

    folder = writable_dir(Path(args.folder), "export folder", fix="give a writable folder")
    outcomes = export_runs(history, folder, profile=args.profile)
    refused = [o for o in outcomes if o.status == "refused"]
    if args.json:
        _print_json(outcomes)
    else:
        for o in refused:
            print(printable(f"refused   {o.message}"), file=sys.stderr)
        written = sum(o.status == "imported" for o in outcomes)
        left = len(history.runs(profile=args.profile, limit=None)) - len(outcomes)
        print(f"{written} written, {len(outcomes) - written - len(refused)} already there, "
              f"{len(refused)} refused, into {folder}"
              + (f"; {left} contribution(s) left out (a contribution is never written among runners' runs)"
                 if left else ""))
    return 2 if refused else 0


def _drift(history: History, args: argparse.Namespace, console: Any) -> int:
    from lawbench.core.history.drift import MIN_SIDE, STEP_METHOD, find_drifts, series

    if not 0 < args.alpha < 1:
        raise UsageError(f"--alpha must be between 0 and 1 (got {args.alpha:g})")
    drifts = find_drifts(history, profile=args.profile, alpha=args.alpha)
    if args.json:
        _print_json(drifts)
        return 0
    console = _console(console)
    if not drifts:
        lengths = [len(points) for points in series(history, profile=args.profile).values()]
        testable = sum(n >= 2 * MIN_SIDE for n in lengths)
        console.print(f"no drift at alpha = {args.alpha:g}: {len(lengths)} series, {testable} long "
                      f"enough to test (a step needs {MIN_SIDE} runs on each side); {STEP_METHOD}")
        return 0
    _print_rows(console, f"{len(drifts)} series drifted (a warning; alpha = {args.alpha:g})", {
        "anchor": [d.anchor_id for d in drifts],
        "profile": [d.profile for d in drifts],
        "engine build": [d.engine for d in drifts],
        "first run that moved": [f"{d.first_run_id[:12]} {_when(d.first_started)}" for d in drifts],
        "before -> after": [f"{fmt_num(d.before)} -> {fmt_num(d.after)} "
                            f"({d.after / d.before - 1:+.1%})" for d in drifts],
        "p": [f"{d.p_value:.2g}" for d in drifts],
        "runs": [str(d.runs) for d in drifts]}, narrow_drop=("engine build", "runs"))
    console.print(f"method: {STEP_METHOD}")
    return 0


def _stale(args: argparse.Namespace, console: Any) -> int:
    from lawbench.core.history.store import default_path
    from lawbench.core.history.stale import check_stale, parse_time, runner_profiles

    top = getattr(args, "profile", None)  # `history --profile P stale` names one too
    profiles = args.stale_profiles or ([top] if top else runner_profiles())
    _known_profiles(profiles)  # a typo must not open a "runner offline" issue
    now = parse_time(args.now) if args.now else None
    path = Path(args.db) if getattr(args, "db", None) else default_path()
    if path.exists():  # a folder or an empty file is refused by History, never read as "no runs"
        with History(path, create=False) as history:
            rows = check_stale(history, profiles, args.hours, now)
    else:  # no history yet: no profile has a completed run
        rows = check_stale(None, profiles, args.hours, now)
    stale = [r for r in rows if r.stale]
    if args.json:
        _print_json(rows)
    else:
        for r in rows:
            age = "no completed run" if r.run_id is None else \
                f"newest completed run {r.run_id[:12]} finished {_when(r.finished or '')} UTC, " \
                f"{r.age_hours:.1f} h ago"
            print(printable(f"{'STALE' if r.stale else 'ok   '}  {r.profile}: {age}"))
        if stale:
            print(f"{len(stale)} profile(s) without a completed run in the last {args.hours:g} h: "
                  f"{', '.join(r.profile for r in stale)}")
    return 1 if stale else 0
