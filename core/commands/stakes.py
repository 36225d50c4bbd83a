"""`lawbench stakes`: lock new stakes before a run, score them after it (lawbench.core.claims.stakes)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def add_stakes_parser(sub: Any) -> None:
    p = sub.add_parser("stakes", help="lock lawbench's own predictions before a run, score them after it")
    ssub = p.add_subparsers(dest="stakes_command", metavar="ACTION", required=True)
    lock = ssub.add_parser("lock", help="append a lock line (SHA-256) for every stake file not locked yet")
    lock.add_argument("--dir", default=None, help="the stakes folder (default: lawbench's anchors/stakes)")
    lock.set_defaults(func=cmd_lock)
    score = ssub.add_parser("score", help="score every staked anchor a run record measured")
    score.add_argument("record", help="a run.json")
    score.add_argument("--out", default=None, help="write the scores as JSON into this folder "
                                                   "(one file per stake and run; results/stakes in the repository)")
    score.set_defaults(func=cmd_score)
    ls = ssub.add_parser("list", help="the stakes, their lock state and their predictions")
    ls.set_defaults(func=cmd_list)


def _root(arg: Any) -> Path:
    from lawbench.core.claims.stakes import _package_root

    return Path(arg) if arg else Path(str(_package_root()))


def cmd_lock(args: argparse.Namespace) -> int:
    from lawbench.core.claims.stakes import load_stakes, lock_new

    root = _root(args.dir)
    load_stakes(root, require_lock=False)  # a malformed stake is refused before it is locked
    added = lock_new(root)
    print("locked: " + (", ".join(added) if added else "nothing new (every stake file already has its line)"))
    return 0


def _known_anchors() -> set[str]:
    from lawbench.core.hardware.profiles import plugin_profiles
    from lawbench.core.claims.loading import load_all
    from lawbench.core.laws.registry import get_registry

    reg = get_registry()
    return {la.anchor.id for la in load_all(reg, profiles=plugin_profiles(reg).keys()).anchors}


def cmd_score(args: argparse.Namespace) -> int:
    from lawbench.core.paths import writable_dir
    from lawbench.core.claims.stakes import load_stakes, score_run

    scores = score_run(Path(args.record), load_stakes(anchors=_known_anchors()))
    if args.out:  # checked before anything is printed as scored
        writable_dir(Path(args.out), "--out folder", fix="give a writable path")
    for s in scores:
        print(f"{s['score']:9}  {s['stake']}  {s['anchor']}: {s['why']}")
    if args.out:
        out = Path(args.out)
        by_stake: dict[str, list[dict]] = {}
        for s in scores:
            if s["score"] != "not run":
                by_stake.setdefault(s["stake"], []).append(s)
        for stake_id, rows in by_stake.items():
            path = out / f"{stake_id}.{rows[0]['run_id']}.json"
            if path.exists():  # scores are kept as first written, like the stakes
                print(f"kept: {path} (already scored)")
                continue
            path.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
            print(f"wrote {path}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from lawbench.core.claims.stakes import load_stakes

    for ls in load_stakes(anchors=_known_anchors()):
        print(f"{ls.stake.id} (staked {ls.stake.staked}, locked {ls.sha256[:12]}…): {ls.stake.why}")
        for p in ls.stake.prediction:
            lo, hi = p.band.interval(p.center)
            print(f"  {p.anchor}: [{lo:g}, {hi:g}]")
    return 0
