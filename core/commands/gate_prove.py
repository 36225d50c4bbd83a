"""`lawbench gate prove`: the rate gate proves its power on this runner's own accepted history
(issue 31). The replay itself is lawbench.core.history.prove; this module reads the arguments,
opens the history and prints the table (Markdown, so the weekly report and README quote it as is).

  lawbench gate prove --profile P --baseline HISTORY [--sizes 2,3,5,10,20,40]
"""
from __future__ import annotations

import argparse
from typing import Any

from lawbench.core.errors import UsageError


def add_gate_prove_parser(sub: Any) -> None:
    gate = sub.add_parser("gate", help="the nightly gate's own proofs")
    actions = gate.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = actions.add_parser("prove", help="replay this runner's accepted nights with planted slowdowns: "
                                         "detection per size, false alarms on the unplanted nights",
                           description="Each accepted night of the profile's newest set-up (machine, engine "
                                       "build) in turn is tonight, the others its accepted nights; its rates are "
                                       "judged by the gate's rate test as measured (a slower/faster is a false "
                                       "alarm) and with one format, then every format, planted slower.")
    p.add_argument("--profile", required=True, help="profile id")
    p.add_argument("--baseline", required=True, metavar="HISTORY",
                   help="the runner's history: history.sqlite, or a folder of run records (the data branch's "
                        "runs/<profile>)")
    p.add_argument("--sizes", default="2,3,5,10,20,40", metavar="PCT,…",
                   help="planted slowdowns in percent (default: 2,3,5,10,20,40)")
    p.set_defaults(func=cmd_prove)


def _sizes(text: str) -> list[float]:
    try:
        sizes = [float(x) / 100.0 for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"--sizes {text!r}: give percentages separated by commas, e.g. 2,5,10") from None
    if not sizes or any(not 0.0 < s < 1.0 for s in sizes):
        raise UsageError(f"--sizes {text!r}: each slowdown must lie between 0 and 100 %")
    return sizes


def cmd_prove(args: argparse.Namespace) -> int:
    from lawbench.core.history.gate_inputs import open_baseline
    from lawbench.core.history.prove import proof_markdown, prove, runner_nights
    from lawbench.core.history.rates import MIN_NIGHTS

    sizes = _sizes(args.sizes)
    history, blind = open_baseline(args.baseline, args.profile)  # the gate's own reading of a baseline
    if blind:
        print(f"lawbench gate prove: cannot prove the gate's power on profile {args.profile}: {blind}")
        return 1
    nights, setup = runner_nights(history, args.profile)
    proof = prove(nights, sizes)
    proof.setup = setup
    if not proof.judged:
        why = proof.note or (f"{proof.nights} accepted nights with rates; each replayed night needs "
                             f"{MIN_NIGHTS} others" if nights else f"no night of profile {args.profile} in {args.baseline}")
        print(f"lawbench gate prove: cannot prove the gate's power on profile {args.profile}: {why}")
        return 1
    print(proof_markdown(proof))
    return 0
