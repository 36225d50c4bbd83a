"""Greedy parity across an engine's modes as a census (seed 002, r54: "greedy byte-identical,
three-way comparison: exp=1 vs exp=0"; "parity ×3, run once per mode: guards against math errors").

Each mode is an arm of the anchor (its env / unset_env: the default and MINFER_MMQ_Q6K_EXP=0); each
is run ``case.passes`` times, and every pass's greedy token stream (the contract's optional
``greedy_tokens`` stdout key, docs/minfer-contract.md §3.2) is digested. The counts:

  distinct greedy streams           1 when every pass of every mode decoded byte-identical tokens
  passes without a greedy stream    0: a pass that printed none compared nothing, and is not parity
  passes                            modes × passes: every pass ran

A math error on one path (the stand-in's ``bad-math``: the fast path forgets the −32 centering)
makes two streams; a census of the path labels cannot see it, and this cannot see a fast path that
never runs (the liveness census can): the two are read together.
"""
from __future__ import annotations

from typing import Any, Optional

from lawbench import Anchor, Census
from lawbench.plugins.minfer.case import Case, runs
from lawbench.plugins.minfer.contract import greedy
from lawbench.plugins.minfer.engine import child_env, run_engine

DISTINCT = "distinct greedy streams"
WITHOUT = "passes without a greedy stream"
PASSES = "passes"


def parity_census(argv: list[str], anchor: Anchor, case: Case, revisions: dict[str, str]) -> Census:
    streams: dict[str, list[Optional[str]]] = {}
    logs = []
    for name, (_, mode) in runs(anchor, case).items():
        env = child_env({**case.env, **mode.env}, [*case.unset_env, *mode.unset_env])
        label = mode.label or name
        for i in range(case.passes):
            what = f"minfer engine ({case.command}, mode {label}, pass {i + 1} of {case.passes})"
            done = run_engine(argv, env, case.timeout_s, what=what)
            streams.setdefault(label, []).append(greedy(done.stdout, what, log=done.log()).get("greedy_sha256"))
            logs.append(f"=== {what}\n{done.log()}")
    digests = [d for ds in streams.values() for d in ds]
    environment: dict[str, Any] = {"command": argv, "env": case.env, "unset_env": case.unset_env,
                                   "engine_revisions": revisions, "greedy_sha256": streams}
    return Census(counts={DISTINCT: len({d for d in digests if d is not None}),
                          WITHOUT: sum(d is None for d in digests), PASSES: len(digests)},
                  log="\n".join(logs)[-16000:], environment=environment)
