"""`lawbench report`: the HTML page of one run, or of the whole history.

    lawbench report RUN.json [--out FILE]                   a run record file
    lawbench report --run REF [--db PATH] [--out FILE]      a run in the history: id, prefix, latest~N
    lawbench report --history [--db PATH] [--profile P] [--limit N] [--out FILE]

Default --out: report.html beside RUN.json; report-<run>.html or history.html beside the history.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from lawbench.core.errors import UsageError


def add_report_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add `report` to the CLI's sub-parsers; returns the parser."""
    p = subparsers.add_parser("report", help="write a self-contained HTML page with plots for a run "
                                             "or the history", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("record", nargs="?", metavar="RUN.json", help="a run record file")
    p.add_argument("--run", metavar="REF", help="a run in the history: id, unique prefix, latest, latest~N")
    p.add_argument("--history", action="store_true", help="one page for the whole history")
    p.add_argument("--db", metavar="PATH", help="history file (default: $LAWBENCH_OUT/history.sqlite "
                                                "or ./lawbench-out/history.sqlite)")
    p.add_argument("--profile", help="only runs on this profile (--history; with --run, for latest~N)")
    p.add_argument("--limit", type=int, default=None, metavar="N",
                   help="--history: only the newest N runs (default: all)")
    p.add_argument("--out", metavar="FILE", help="where to write the page")
    p.set_defaults(func=report_command)
    return p


def report_command(args: argparse.Namespace) -> int:
    from lawbench.core.history.store import History
    from lawbench.core.html import history_page, require_matplotlib, run_page, write_page
    from lawbench.core.record.reports import read_json

    chosen = [name for name, given in (("RUN.json", args.record), ("--run", args.run),
                                       ("--history", args.history)) if given]
    if len(chosen) != 1:
        raise UsageError("lawbench report: give one of RUN.json, --run REF or --history"
                         + (f" (got {' and '.join(chosen)})" if chosen else ""))
    if args.limit is not None and args.limit < 1:
        raise UsageError(f"lawbench report: --limit must be at least 1, not {args.limit}")
    require_matplotlib()
    began = time.perf_counter()
    if args.record:
        record = _record_or_bundle(args.record, read_json)
        text, what = run_page(record), f"run {record.run_id[:12]}, {len(record.results)} results"
        out = Path(args.out) if args.out else Path(args.record).parent / "report.html"
    else:
        with History(args.db, create=False) as history:
            if args.history:
                text = history_page(history, profile=args.profile, limit=args.limit)
                what = f"history {history.path}"
                out = Path(args.out) if args.out else history.path.parent / "history.html"
            else:
                record = history.record(history.resolve(args.run, profile=args.profile))
                text, what = run_page(record), f"run {record.run_id[:12]}, {len(record.results)} results"
                out = Path(args.out) if args.out else history.path.parent / f"report-{record.run_id[:12]}.html"
    write_page(text, out)
    print(f"wrote {out} ({what}; {len(text) / 1e6:.2f} MB, {time.perf_counter() - began:.1f} s)")
    return 0


def _record_or_bundle(path: str, read_json: Any) -> Any:
    """A run.json, or the run record inside a contribution bundle (`lawbench run --contribute`),
    checked as `history import` checks it: a page is drawn only from a record that could be one
    (a forged 1e308 or an "Infinity" interval would stop the plots, 10**6 results the page)."""
    import json

    from lawbench.core.record.contribute import is_bundle, read_bundle
    from lawbench.core.errors import DataError
    from lawbench.core.history.imports import census_rule
    from lawbench.core.record.checks import MAX_RECORD_BYTES, check_record, check_shape

    file = Path(path)
    try:
        if file.is_file() and file.stat().st_size > MAX_RECORD_BYTES:  # refused before it is read
            raise DataError(path, f"is over {MAX_RECORD_BYTES // 2**20} MiB; a run record is at most that")
        raw = file.read_bytes()
    except OSError:
        return read_json(path)  # its own one-line error names what is wrong with the path
    check_shape(raw, path)
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return read_json(path)  # its own one-line error names what is wrong with the file
    bundle = is_bundle(data)
    record = read_bundle(raw, path).record if bundle else read_json(path)
    check_record(record, path, prefix="record." if bundle else "", census_rules=census_rule)
    return record
