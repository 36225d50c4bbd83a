"""`lawbench census …`: liveness censuses outside a full run (docs/census.md).

  lawbench census plant --profile P [--anchor ID …] [--out DIR] [--strict]
      every census anchor of P unplanted and with each of its planted faults (lawbench.core.run.planted);
      exit 0 only when every fault turned its census red, naming its labels, while parity stayed
      green; 1 when one did not or could not run here; 130 / 143 when stopped (the record kept).
      A run like any other: OUT/run.json and the history (mode "plant"), OUT/planted.json its view.

Laws add their own actions to the group (a lawbench.Command named "census <action>"): minfer adds
`lawbench census run -- COMMAND`, the census of any command that speaks its contract
(docs/minfer-contract.md).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from lawbench.core.console import console as _console


def add_census_parser(sub: Any) -> Any:
    """The `census` command group with core's `plant`; returns its sub-parsers for the laws' actions."""
    p = sub.add_parser("census", help="liveness censuses: planted-fault proofs, and the laws' own actions",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = p.add_subparsers(dest="census_command", metavar="ACTION", required=True)
    add_plant_parser(actions)
    return actions


def add_plant_parser(actions: Any) -> None:
    plant = actions.add_parser("plant", help="prove each census anchor can fail: planted faults turn it red, "
                                             "parity stays green",
                               description="Run every census anchor of the profile unplanted (it must PASS) and "
                                           "with each of its planted faults (it must FAIL, naming the labels the "
                                           "fault breaks), with llama-perplexity on the same switches for parity "
                                           "(within 0.1 %). Exit 0 when every fault is proved. docs/census.md")
    plant.add_argument("--profile", default="detect", help="profile id, or 'detect' (default)")
    plant.add_argument("--anchor", action="append", default=[], metavar="ID", help="only this anchor (repeatable)")
    plant.add_argument("--out", default=os.environ.get("LAWBENCH_OUT", "lawbench-out"),
                       help="folder for planted.json (default: lawbench-out)")
    plant.add_argument("--llama-dir", default=None, help="use this llama.cpp build (its bin folder)")
    plant.add_argument("--strict", action="store_true", help="a runner job: an anchor that skips is a failure")
    plant.add_argument("--json", action="store_true", help="print the record as JSON instead of a table")
    plant.set_defaults(func=cmd_plant)


def cmd_plant(args: argparse.Namespace) -> int:
    from lawbench.core.run.planted import run_plant, summary_lines

    run, record = run_plant(args.profile, tuple(args.anchor), out=args.out, llama_dir=args.llama_dir,
                            strict=args.strict)
    code = run.exit_code
    if args.json:
        print(json.dumps(record, indent=1, default=str))
        return code
    from rich.table import Table

    table = Table(title=f"planted faults, profile {record['profile']}")
    for col in ("anchor", "fault", "census", "what the census said", "parity"):
        table.add_column(col, overflow="fold")
    for row in summary_lines(record):
        table.add_row(*row)
    _console().print(table)
    faults = [(r, f) for r in record["anchors"] for f in r["faults"]]  # never empty: run_plant refuses that
    proved = sum(1 for _, f in faults if f["proved"])
    skipped = sum(1 for r, _ in faults if r.get("skipped"))
    bare = [r["anchor"] for r in record["anchors"] if r.get("no_faults")]
    print(f"{proved}/{len(faults)} planted faults proved" + (f", {skipped} not run here (the census skipped)" if skipped else "")
          + (f"; no planted fault: {', '.join(bare)}" if bare else "")
          + f"; record: {os.path.join(args.out, 'planted.json')} (the run record: {run.record_path})")
    if record["interrupted"]:
        print(f"lawbench: error: interrupted by {record['interrupted']}; the record keeps what ran", file=sys.stderr)
    elif skipped:
        print("lawbench: error: a fault not run here is not proved: run it on the profile's own runner",
              file=sys.stderr)
    return code
