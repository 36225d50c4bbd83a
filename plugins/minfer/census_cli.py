"""`lawbench census run`: minfer's path-label census of any contract command.

    lawbench census run [--anchor ID] [--exact LABEL=N …] [--minimum LABEL=N …] [--maximum LABEL=N …]
                        [--forbid LABEL …] [--memory] [--json] [--timeout S] -- COMMAND [ARGS…]

`run` starts COMMAND once, the way a census anchor starts the minfer engine command (its own process
group, MINFER_MMQ_RAW_NB_DEBUG=1; the lawbench minfer contract, docs/minfer-contract.md), counts
the B-path labels on its stderr, with --memory reads the peak per-PID GPU memory of its process
tree, and checks the expectations with the rule every census anchor is judged by
(lawbench.core.record.census.census_problems): the anchor's [census] table with --anchor (which also
brings the anchor's env, unset_env, timeout and engine revisions), else the flags.

Exit 0 when every expectation holds (or none was given: then it only counts), 1 when one fails,
when the command printed no label at all (VOID: nothing could be checked), or when the command
fails (non-zero exit, timeout, a broken contract), 2 on bad input (one line).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from typing import Any, Optional

from lawbench import EngineError, NotApplicable, UsageError, number_between

EXAMPLE = "lawbench census run --exact W_exp-cp.async=27 --forbid 'in-kernel-expand(fallback!)' -- ./run-minfer"
DEFAULT_TIMEOUT_S = 600.0
_timeout = number_between(0, math.inf, "a timeout is a number of seconds above 0", "600")


HELP = "run a command that speaks the minfer contract once and check its labels"


def add_arguments(run: argparse.ArgumentParser) -> None:
    """`lawbench census run`'s arguments (the minfer plugin adds the action to core's census group)."""
    run.add_argument("--anchor", default=None, metavar="ID",
                     help="check a minfer census anchor's [census] table, with its env and revisions")
    run.add_argument("--exact", action="append", default=[], metavar="LABEL=N", help="LABEL counted exactly N times")
    run.add_argument("--minimum", action="append", default=[], metavar="LABEL=N", help="LABEL counted N times or more")
    run.add_argument("--maximum", action="append", default=[], metavar="LABEL=N", help="LABEL counted N times or fewer")
    run.add_argument("--forbid", action="append", default=[], metavar="LABEL", help="LABEL must never appear")
    run.add_argument("--memory", action="store_true",
                     help="read the peak per-PID GPU memory of the command's process tree (NVML / nvidia-smi)")
    run.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    run.add_argument("--timeout", type=_timeout, default=None, metavar="S",
                     help=f"kill the command after S seconds (default: the anchor's, else {DEFAULT_TIMEOUT_S:g})")
    run.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARGS…]",
                     help="the command, after --")


@dataclass
class Plan:
    argv: list[str]
    spec: Any  # a CensusSpec, or None: count only
    env: dict[str, str]  # set on top of this environment
    unset_env: list[str] = field(default_factory=list)
    timeout_s: float = DEFAULT_TIMEOUT_S
    anchor: Optional[Any] = None
    revisions: Optional[Any] = None  # the anchor's engine revision range


# --------------------------------------------------------------------------- input

def parse_count(text: str, flag: str) -> tuple[str, int]:
    """"LABEL=N" -> (LABEL, N); the last "=" splits, so "in-kernel-expand(exp=off)=27" works."""
    label, eq, n = text.rpartition("=")
    if not eq or not label or not n.isdigit():
        raise UsageError(f"{flag} {text!r}: write LABEL=N with N a whole number, e.g. {flag} W_exp-cp.async=27")
    return check_label(label, flag), int(n)


def check_label(label: str, flag: str) -> str:
    from lawbench.plugins.minfer.labels import STATES, labels_in_line

    if labels_in_line(label) != [label]:
        raise UsageError(f"{flag} {label!r} is not a B-path label the census can count "
                         f"(the contract's labels: {', '.join(STATES)})")
    if label not in STATES:  # a fifth state is counted under its own name, but a typo would be too
        print(f"lawbench: warning: {flag} {label!r} is not one of the contract's four states "
              f"({', '.join(STATES)}); it counts only a label spelled exactly so", file=sys.stderr)
    return label


def spec_from_flags(args: argparse.Namespace) -> Any:
    from lawbench.host import CensusSpec

    tables: dict[str, dict[str, int]] = {"exact": {}, "minimum": {}, "maximum": {}}
    for flag in tables:
        for text in getattr(args, flag):
            label, n = parse_count(text, f"--{flag}")
            if label in tables[flag]:
                raise UsageError(f"--{flag} names {label!r} twice")
            tables[flag][label] = n
    forbidden = [check_label(label, "--forbid") for label in args.forbid]
    for label in {*tables["exact"], *tables["minimum"], *tables["maximum"], *forbidden}:
        ex = tables["exact"].get(label)
        lo = max(v for v in (ex, tables["minimum"].get(label), 0) if v is not None)
        his = [v for v in (ex, tables["maximum"].get(label), 0 if label in forbidden else None) if v is not None]
        if his and lo > min(his):  # no count could pass: a typo, not a census
            raise UsageError(f"the expectations on {label!r} contradict each other (at least {lo}, at most "
                             f"{min(his)}): no count could pass")
    if not (any(tables.values()) or forbidden):
        return None
    return CensusSpec(**tables, forbidden=forbidden)


def plan_from_anchor(anchor_id: str, argv: list[str]) -> Plan:
    from lawbench.host import get_registry, load_all, plugin_profiles
    from lawbench.plugins.minfer.case import check_case

    reg = get_registry()
    third_party = set(reg.laws) - set(reg.builtin_laws)  # a broken outside plugin never blocks this
    found = load_all(reg, profiles=plugin_profiles(reg).keys(), lenient=third_party).by_id().get(anchor_id)
    if found is None:
        raise UsageError(f"--anchor {anchor_id!r}: no such anchor (`lawbench laws minfer` lists its anchors)")
    anchor = found.anchor
    if anchor.kind != "census" or anchor.law != "minfer":
        raise UsageError(f"--anchor {anchor_id}: a {anchor.kind} anchor of law {anchor.law!r}; `census run` checks "
                         "the label census anchors of law 'minfer' (run the others with `lawbench run`)")
    case = check_case(anchor)
    if case.measure is not None:
        raise UsageError(f"--anchor {anchor_id}: its census reads {case.measure} (the model file's header), "
                         "not a command's labels; run it with `lawbench run`")
    return Plan(argv=argv, spec=anchor.census, env=dict(case.env), unset_env=list(case.unset_env),
                timeout_s=case.timeout_s, anchor=anchor, revisions=case.revisions)


def make_plan(args: argparse.Namespace) -> Plan:
    argv = list(args.argv)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        raise UsageError(f"no command to run: give it after --, e.g. {EXAMPLE}")
    if args.anchor and (args.exact or args.minimum or args.maximum or args.forbid):
        raise UsageError("give --anchor or --exact / --minimum / --maximum / --forbid, not both: the anchor's [census] "
                         "table is the expectation")
    plan = plan_from_anchor(args.anchor, argv) if args.anchor else Plan(argv=argv, spec=spec_from_flags(args), env={})
    if args.timeout is not None:
        plan.timeout_s = args.timeout
    found = shutil.which(argv[0])
    if found is None:
        if os.path.isdir(argv[0]):
            raise UsageError(f"{argv[0]!r} is a folder, not a command (give the program to run)")
        raise UsageError(f"command not found: {argv[0]!r} (give a path or a program on PATH)")
    with open(found, "rb") as f:  # it is run without a shell: the kernel must be able to start it
        head = f.read(4)
    if not (head.startswith(b"#!") or head == b"\x7fELF"):
        raise UsageError(f"{found!r} is not a program: no #! line and not an ELF executable (it is run "
                         "without a shell; wrap it, e.g. -- sh FILE)")
    return plan


# --------------------------------------------------------------------------- running

def cmd_run(args: argparse.Namespace) -> int:
    from lawbench.plugins.minfer.contract import DEBUG_ENV, greedy
    from lawbench.plugins.minfer.engine import child_env, engine_revision, run_engine
    from lawbench.plugins.minfer.labels import count_labels
    from lawbench.plugins.minfer.revisions import require

    plan = make_plan(args)
    env = child_env({**DEBUG_ENV, **plan.env}, plan.unset_env)
    shown = shlex.join(plan.argv)
    what = f"command {shown if len(shown) <= 100 else shown[:99] + '…'!r}"
    memory, peak = _open_memory() if args.memory else (None, [])
    out: dict[str, Any] = {"command": plan.argv, "anchor": plan.anchor.id if plan.anchor else None,
                           "env": {**DEBUG_ENV, **plan.env}, "unset_env": plan.unset_env}
    try:
        if plan.revisions is not None:  # the anchor's number holds for these engine builds only
            out["engine_revision"] = engine_revision(plan.argv, env, what)
            try:
                require(plan.revisions, out["engine_revision"], plan.anchor.id, what, "case.revisions")
            except NotApplicable as exc:
                raise UsageError(f"{exc}; nothing was run") from None
        poll = None
        if memory is not None and not isinstance(memory, NotApplicable):
            def poll(pids: set[int]) -> None:
                mib = memory.used_by(pids)
                if mib is not None:
                    peak.append(mib)
        done = run_engine(plan.argv, env, plan.timeout_s, poll=poll, what=what)
        out.update(greedy(done.stdout, what, log=done.log()))
    except EngineError as exc:
        return _engine_failed(args, out, exc)
    from lawbench.host import census_problems
    from lawbench.plugins.minfer.engine import prefill_tok_s

    counts = count_labels(done.stderr)
    problems = census_problems(plan.spec, counts) if plan.spec is not None else []
    # No label at all: --forbid / --maximum would hold for a command that never spoke the contract,
    # so the census could not look; that is VOID, not PASS.
    silent = not any(counts.values())
    verdict = ("FAIL" if problems else "VOID" if silent and plan.spec is not None
               else "PASS" if plan.spec is not None else "COUNTED")
    out.update(counts=counts, duration_s=round(done.duration_s, 3),
               expectations=plan.spec.model_dump() if plan.spec is not None else None,
               problems=problems, verdict=verdict, memory=_memory_record(memory, peak, args.memory))
    try:
        out["prefill_tok_s"] = prefill_tok_s(done, what)
    except EngineError:
        out["prefill_tok_s"] = None  # a census needs no rate; the contract's throughput anchors do
    if args.json:
        first = ("verdict", "problems", "anchor", "command", "counts", "expectations", "memory")
        print(json.dumps({**{k: out[k] for k in first}, **out}, indent=1))
    else:
        _print_table(out, plan)
    if silent:
        print("lawbench: warning: the command printed no B-path label at all; does it speak the lawbench "
              "minfer contract (labels on stderr under MINFER_MMQ_RAW_NB_DEBUG=1, docs/minfer-contract.md)?",
              file=sys.stderr)
    return 1 if verdict in ("FAIL", "VOID") else 0


def _engine_failed(args: argparse.Namespace, out: dict[str, Any], exc: EngineError) -> int:
    out.update(verdict="ERROR", reason=str(exc))
    if args.json:
        print(json.dumps({**out, "log": exc.log}, indent=1))
    print(f"lawbench: error: {exc}", file=sys.stderr)
    said = "".join(line for line in (exc.log or "").splitlines() if not line.startswith("--- "))
    if said.strip() and not args.json:  # what the command printed, when it printed anything
        print(exc.log[-3000:], file=sys.stderr)
    return 1


def _open_memory() -> tuple[Any, list[float]]:
    from lawbench.hardware import PerPidMemory

    try:
        return PerPidMemory.open(), []
    except NotApplicable as exc:
        return exc, []  # the reason stands in for the instrument: reported as a SKIP


def _memory_record(memory: Any, peak: list[float], asked: bool) -> Optional[dict[str, Any]]:
    if not asked:
        return None
    if isinstance(memory, NotApplicable):
        return {"verdict": "SKIP", "reason": str(memory)}
    if not peak:
        return {"verdict": "SKIP", "instrument": memory.instrument,
                "reason": "the command's process tree never appeared in the per-process GPU memory list with a "
                          f"number ({memory.instrument}); it may not use the GPU, or ended before a reading"}
    return {"verdict": "READ", "peak_mib": max(peak), "readings": len(peak), "instrument": memory.instrument}


# --------------------------------------------------------------------------- output

def _expected(spec: Any, label: str) -> str:
    if spec is None:
        return ""
    parts = []
    if label in spec.exact:
        parts.append(f"exactly {spec.exact[label]}")
    if label in spec.minimum:
        parts.append(f"at least {spec.minimum[label]}")
    if label in spec.maximum:
        parts.append(f"at most {spec.maximum[label]}")
    if label in spec.forbidden:
        parts.append("never")
    return ", ".join(parts)


def _print_table(out: dict[str, Any], plan: Plan) -> None:
    from rich.console import Console
    from rich.table import Table

    from lawbench.host import census_problems

    spec = plan.spec
    labels = list(out["counts"])
    if spec is not None:
        named = [*spec.exact, *spec.minimum, *spec.maximum, *spec.forbidden]
        labels += [label for label in dict.fromkeys(named) if label not in labels]
    print(f"census of: {' '.join(plan.argv)}" + (f"  (anchor {plan.anchor.id})" if plan.anchor else ""))
    table = Table()
    for name, justify in (("label", "left"), ("counted", "right"), ("expected", "left"), ("", "left")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for label in labels:
        got = out["counts"].get(label, 0)
        expected = _expected(spec, label)
        state = ""
        if expected:
            only = type(spec)(**{k: ({label: v[label]} if isinstance(v, dict) and label in v else
                                     [label] if isinstance(v, list) and label in v else type(v)())
                                 for k, v in spec.model_dump().items()})
            state = "FAIL" if census_problems(only, out["counts"]) else "ok"
        table.add_row(label, str(got), expected, state)
    console = Console(highlight=False, width=max(100, shutil.get_terminal_size((100, 20)).columns))
    console.print(table)
    lines = []
    if out.get("engine_revision"):
        lines.append(f"engine revision: {out['engine_revision']}")
    if out.get("prefill_tok_s") is not None:
        lines.append(f"prefill_tok_s: {out['prefill_tok_s']}")
    if out.get("greedy_sha256"):
        lines.append(f"greedy tokens: {out['greedy_tokens']} (sha256 {out['greedy_sha256'][:16]})")
    memory = out.get("memory")
    if memory is not None:
        lines.append(f"memory: peak {memory['peak_mib']:g} MiB over the command's process tree "
                     f"({memory['instrument']}, {memory['readings']} readings)" if memory["verdict"] == "READ"
                     else f"memory: SKIP: {memory['reason']}")
    if out["verdict"] == "VOID":
        lines.append("VOID: the command printed no B-path label at all, so no expectation could be checked")
    elif out["verdict"] == "COUNTED":
        lines.append("counted only: no expectations given (--anchor, --exact, --minimum, --maximum, --forbid)")
    elif out["problems"]:
        lines += [f"FAIL {p}" for p in out["problems"]]
    else:
        lines.append("PASS: every expectation holds")
    for line in lines:
        print(line)
    sys.stdout.flush()
