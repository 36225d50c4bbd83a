"""`lawbench run`: verify the anchors for a hardware profile. The context is validated before
anything runs (a data error is one line, exit 2); pytest is the front end (items, -k, JUnit XML, the
terminal) and the Run (lawbench.core.run) the run: its record decides the exit code — 0 when all
that ran passed, 1 on FAIL / ERROR / VOID or an output that could not be written, 128 + the
signal's number when stopped. Nothing selected, or pytest's own usage error, is exit 2."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Callable, Optional

from lawbench import __version__

EXIT_OK, EXIT_BAD, EXIT_USAGE = 0, 1, 2


def _err(msg: str) -> None:
    print(f"lawbench: error: {msg}", file=sys.stderr)


def add_run_parser(sub: Any) -> argparse.ArgumentParser:
    """The `run` sub-command's arguments; the caller sets its function."""
    run = sub.add_parser("run", help="verify the anchors for a hardware profile")
    run.add_argument("--profile", default="detect", help="profile id, or 'detect' (default) for this machine's")
    run.add_argument("-k", default=None, metavar="EXPR", help="select anchors by id / law / kind (pytest -k)")
    run.add_argument("--law", action="append", help="only this law (repeatable)")
    run.add_argument("--cadence", choices=("quick", "nightly", "weekly", "full"), default=None,
                     help="anchors by how often they run: quick (a first look), nightly, weekly (the rest), "
                          "full (all). Default: quick on the generic cpu profile, nightly on a specific one; "
                          "full when -k or --law names anchors")
    run.add_argument("--slice", type=int, default=None, metavar="K", dest="weekly_slice",
                     help="with --cadence weekly: run slice K of the weekly's rotation instead of this week's "
                          "(a re-run; `lawbench plan --cadence weekly` lists the slices)")
    run.add_argument("--strict", action="store_true",
                     help="a runner job: this machine must match the profile (else exit 1 with the reasons) "
                          "and every skip is a failure")
    run.add_argument("--out", default=os.environ.get("LAWBENCH_OUT", "lawbench-out"),
                     help="folder for run.json, junit.xml and history.sqlite (default: lawbench-out)")
    run.add_argument("--junit", default=None, help="JUnit XML path (default: OUT/junit.xml)")
    run.add_argument("--llama-dir", default=None, help="use this llama.cpp build (its bin folder)")
    run.add_argument("--no-history", action="store_true", help="do not append to the history store")
    run.add_argument("--gate", choices=("absolute", "baseline"), default="absolute",
                     help="absolute (default): exit 1 on any FAIL / ERROR / VOID; baseline (the nightly): exit 1 only "
                          "on news against this runner's last accepted night in --baseline (every verdict stays "
                          "in the record either way)")
    run.add_argument("--baseline", default=None, metavar="HISTORY",
                     help="with --gate baseline: the history to judge against (history.sqlite, or a folder of run "
                          "records such as the data branch's runs/<profile>); one that is missing, unreadable, "
                          "empty, entirely refused or another profile's makes the night red: cannot judge")
    run.add_argument("--first-night", action="store_true",
                     help="with --gate baseline: declare this profile's first night (no run of it exists yet: the "
                          "nightly says so only when the data branch was fetched and holds no runs/<profile>/); "
                          "a --baseline given with it must not exist")
    run.add_argument("--acknowledged", default=None, metavar="FILE",
                     help="with --gate baseline: the reviewed standing reds (default: "
                          "hardware_profiles/acknowledged/<profile>.toml)")
    run.add_argument("--deadline", type=float, default=None, metavar="MINUTES",
                     help="stop taking new anchors whose worst case no longer fits in MINUTES from the start; "
                          "the record names the anchors not reached")
    run.add_argument("--contribute", default=None, metavar="PATH",
                     help="also write a contribution bundle (fingerprint, profile, measured machine terms, run record)")
    run.add_argument("-v", "--verbose", action="store_true")
    run.add_argument("pytest_args", nargs="*", help="after --: passed to pytest")
    return run


def cmd_run(args: argparse.Namespace, report_problems: Callable[[Any], None] = lambda registry: None) -> int:
    from lawbench.core.commands.streams import SteadyStream

    # `| head -1`, or a terminal that vanished, must not end the run without a record
    real_stdout, real_stderr = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = SteadyStream(real_stdout, "stdout"), SteadyStream(real_stderr, "stderr")
    try:
        return _run(args, report_problems)
    finally:
        sys.stdout, sys.stderr = real_stdout, real_stderr


def _run(args: argparse.Namespace, report_problems: Callable[[Any], None]) -> int:
    import pytest

    from lawbench.core.run.run import Run
    from lawbench.core.run.context import RunContext

    # Validate everything before pytest starts, so a data error is one line and exit 2. The
    # context and the Run are built once and handed to pytest, whose items run the anchors on it.
    if args.k is not None:
        from lawbench.core.run.items import selection
        selection(args.k)
    from lawbench.core.engines.llamacpp import check_llama_dir
    check_llama_dir(args.llama_dir)
    # Anchors named with -k or --law run whatever their cadence; otherwise the profile's default.
    cadence = args.cadence or ("full" if args.k or args.law else None)
    ctx = RunContext(args.profile, laws=tuple(args.law or ()), strict=args.strict, llama_dir=args.llama_dir,
                     cadence=cadence, deadline_min=args.deadline, weekly_slice=args.weekly_slice)
    if args.gate != "baseline" and (args.baseline or args.acknowledged or args.first_night):
        from lawbench.core.errors import UsageError
        raise UsageError("--baseline, --first-night and --acknowledged judge a night against its history: "
                         "give --gate baseline too")
    if args.gate == "baseline":  # opened and validated before anything runs
        from lawbench.core.history.gate_inputs import gate_setup
        nightly = ctx.policy.profile.nightly
        ctx.gate = gate_setup(ctx.policy.profile.id, args.baseline, args.acknowledged, first_night=args.first_night,
                              weekly=ctx.weekly_anchors() if ctx.cadence in ("quick", "nightly") else [],
                              deployed=bool(nightly and nightly.deployed), roster=ctx.absences())
    report_problems(ctx.registry)  # found while the context was built (a plugin's bad profile)
    files = ctx.files()
    if not files:
        _err(f"no anchors selected for profile {ctx.policy.profile.id!r}")
        return EXIT_USAGE
    out = Path(args.out)
    junit = Path(args.junit) if args.junit else out / "junit.xml"
    _check_outputs(out, junit)
    if args.contribute is not None:  # refused before measuring, like the other outputs
        from lawbench.core.record.contribute import check_bundle_path
        check_bundle_path(args.contribute)
    machine = "matches" if ctx.policy.on_own_runner else "does not match"
    print(f"lawbench {__version__}: profile {ctx.policy.profile.id} (detected: {ctx.detected}; "
          f"this machine {machine} it), cadence {ctx.cadence}, {len(files)} anchor file(s)", flush=True)
    ws = ctx.weekly_slice
    if ws is not None and ws.count > 1:
        print(f"lawbench: weekly slice {ws.index} of 0-{ws.count - 1} "
              f"({'chosen with --slice' if ws.chosen else f'this week, {ws.week}'}): "
              f"{len(ctx.rotation.slices[ws.index])} of the weekly's {sum(map(len, ctx.rotation.slices))} anchors; "
              f"every anchor runs once in {ws.count} weeks (`lawbench plan --profile {ctx.policy.profile.id} "
              "--cadence weekly`)", flush=True)
    if ctx.cadence != "full":
        left = ctx.left_by_cadence()
        if left:
            print(f"lawbench: note: cadence {ctx.cadence} leaves {left} anchor(s) of this profile for another "
                  f"cadence; `--cadence full` runs them all", flush=True)
    if args.profile in ("", "detect", None):
        for pid, n in ctx.bound_elsewhere().items():
            print(f"lawbench: note: this machine also matches profile {pid!r}: its {n} measured anchor(s) "
                  f"do not run under {ctx.policy.profile.id!r}; `lawbench run --profile {pid}` runs them",
                  flush=True)
    run = Run(ctx, out=out, history=not args.no_history)
    # pytest writes the JUnit file even for a selection that ran nothing; such a run records
    # nothing (README), so the file is put back as it was.
    before = junit.read_bytes() if junit.is_file() else None
    try:
        rc = pytest.main(_pytest_args(args, ctx, files, out, junit), plugins=[run])
    finally:
        if run.record is None:
            _put_back(junit, before)
    if ctx.policy.strict and not ctx.policy.on_own_runner:  # the record's exit code says so too
        _err(f"--strict on a machine that is not a {ctx.policy.profile.id} runner: the job fails "
             f"({'; '.join(ctx.policy.mismatch) or 'fingerprint does not match'})")
    if run.record is None:
        return _nothing_ran(rc, run)
    if args.contribute is not None:
        from lawbench.core.record.contribute import contribute_after_run
        if contribute_after_run(run.record, ctx.policy.profile, args.contribute):  # it said why
            run.output_errors.append(f"the contribution bundle {args.contribute}")
    return run.exit_code  # the record's (RunRecord.finish), 1 when an output could not be written


def _put_back(path: Path, content: Optional[bytes]) -> None:
    try:
        if content is None:
            path.unlink(missing_ok=True)
        else:
            path.write_bytes(content)
    except OSError:
        pass  # it could not be written either: nothing to undo


def _check_outputs(out: Path, junit: Path) -> None:
    """Refuse before measuring when run.json, the history or the JUnit XML could not be written."""
    from lawbench.core.errors import UsageError
    from lawbench.core.paths import writable_dir

    if junit.is_dir():
        raise UsageError(f"cannot write the --junit file {junit}: it is a folder; give a file path")
    writable_dir(out, "--out folder", fix="give a writable path")
    writable_dir(junit.parent, f"--junit file {junit}: its folder", fix="give a writable path")


# pytest's settings for an anchor run, passed with -c so that a project's own pytest
# configuration in the current folder never changes how anchors run.
RUN_INI = Path(__file__).with_name("anchor-run.ini")


def _pytest_args(args: argparse.Namespace, ctx, files: list[Path], out: Path, junit: Path) -> list[str]:
    pytest_args = [str(f) for f in files] + [
        "--lawbench-profile", ctx.policy.profile.id,
        "--lawbench-out", str(out),
        "--junitxml", str(junit),
        "-c", str(RUN_INI), "--rootdir", os.path.commonpath([str(f.parent) for f in files]),
    ]
    for law in args.law or ():
        pytest_args += ["--lawbench-law", law]
    if args.strict:
        pytest_args.append("--lawbench-strict")
    if args.llama_dir:
        pytest_args += ["--lawbench-llama-dir", args.llama_dir]
    pytest_args += ["--lawbench-cadence", ctx.cadence]
    if args.no_history:
        pytest_args.append("--lawbench-no-history")
    if args.k:
        pytest_args += ["-k", args.k]
    if args.verbose:
        pytest_args.append("-v")
    return pytest_args + (args.pytest_args or [])


def _nothing_ran(rc: int, run) -> int:
    """pytest ended before there was a run to record: nothing selected, a usage error, only
    collecting, or a stop signal before the session started."""
    import pytest

    if rc == pytest.ExitCode.INTERRUPTED:  # stopped before the session could write a record
        raise KeyboardInterrupt(run.stop.received or "SIGINT")  # main says so and exits 128 + its number
    if rc == pytest.ExitCode.NO_TESTS_COLLECTED:
        history = [r.anchor_id for r in run.listed]
        if history:  # superseded / refuted / retired: carried with a run, never run alone
            ids = ", ".join(history[:3]) + (" …" if len(history) > 3 else "")
            _err(f"the selection (-k / --law) matches only history anchors ({ids}): they are listed with "
                 "a run, never run; nothing was run or recorded")
        else:
            _err("no anchors matched the selection (-k / --law); nothing was run or recorded")
        return EXIT_USAGE
    if rc == pytest.ExitCode.USAGE_ERROR:
        return EXIT_USAGE
    return EXIT_OK if rc == pytest.ExitCode.OK else EXIT_BAD  # --collect-only
