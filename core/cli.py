"""`lawbench`: the front door. Exit 0 when all that ran passed, 1 on FAIL / ERROR / VOID (or an
output that could not be written), 2 on a usage or data error (one line naming the file, anchor and
field — never a traceback), 130 / 143 when a run is stopped by SIGINT / SIGTERM."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable, Optional

from lawbench import __version__
from lawbench.core.errors import LawbenchError

EXIT_OK, EXIT_BAD, EXIT_USAGE = 0, 1, 2


def _err(msg: str) -> None:
    print(f"lawbench: error: {msg}", file=sys.stderr)


# --------------------------------------------------------------------------- run


def cmd_run(args: argparse.Namespace) -> int:
    from lawbench.core.errors import EngineInterrupted
    from lawbench.core.reports import interrupt_exit_code
    from lawbench.core.signals import StopSignals

    # SIGTERM (a cancelled CI job) stops the run as Ctrl-C does; the anchor session installs its
    # own handler for the measuring part, which records the signal in the run record.
    from lawbench.core.streams import SteadyStdout

    stop = StopSignals()
    stop.install()
    real_stdout = sys.stdout
    sys.stdout = SteadyStdout(real_stdout)  # `| head -1` must not end the run without a record
    try:
        return _run(args, stop)
    except KeyboardInterrupt as exc:
        name = stop.received or EngineInterrupted.signal_of(exc)
        _err(f"interrupted by {name}")
        return interrupt_exit_code(name)
    finally:
        stop.restore()
        sys.stdout = real_stdout


def _run(args: argparse.Namespace, stop) -> int:
    import pytest

    from lawbench.core.session import RunContext

    # Validate everything before pytest starts, so a data error is one line and exit 2. The
    # context is built once and handed to pytest, which runs the anchors on it.
    if args.k is not None:
        from lawbench.core.items import selection
        selection(args.k)
    from lawbench.core.engines.llamacpp import check_llama_dir
    check_llama_dir(args.llama_dir)
    # Anchors named with -k or --law run whatever their cadence; otherwise the profile's default.
    cadence = args.cadence or ("full" if args.k or args.law else None)
    ctx = RunContext(args.profile, laws=tuple(args.law or ()), strict=args.strict, llama_dir=args.llama_dir,
                     cadence=cadence, deadline_min=args.deadline)
    if args.gate != "baseline" and (args.baseline or args.acknowledged):
        from lawbench.core.errors import UsageError
        raise UsageError("--baseline and --acknowledged judge a night against its history: give --gate baseline too")
    if args.gate == "baseline":  # opened and validated before anything runs
        from lawbench.core.gate import gate_setup
        ctx.gate = gate_setup(ctx.policy.profile.id, args.baseline, args.acknowledged,
                              weekly=ctx.weekly_anchors() if ctx.cadence in ("quick", "nightly") else [])
    _report_plugin_problems(ctx.registry)
    files = ctx.files()
    if not files:
        _err(f"no anchors selected for profile {ctx.policy.profile.id!r}")
        return EXIT_USAGE
    out = Path(args.out)
    junit = Path(args.junit) if args.junit else out / "junit.xml"
    _check_outputs(out, junit)
    if args.contribute is not None:  # refused before measuring, like the other outputs
        from lawbench.core.contribute import check_bundle_path
        check_bundle_path(args.contribute)
    machine = "matches" if ctx.policy.on_own_runner else "does not match"
    print(f"lawbench {__version__}: profile {ctx.policy.profile.id} (detected: {ctx.detected}; "
          f"this machine {machine} it), cadence {ctx.cadence}, {len(files)} anchor file(s)", flush=True)
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
    # pytest writes the JUnit file even for a selection that ran nothing; such a run records
    # nothing (README), so the file is put back as it was.
    before = junit.read_bytes() if junit.is_file() else None
    try:
        rc = pytest.main(_pytest_args(args, ctx, files, out, junit), plugins=[ctx])
    finally:
        if getattr(ctx.session, "record", None) is None:
            _put_back(junit, before)
    stop.closing = True  # the record is written: a late signal must not turn into a traceback
    code = _run_exit_code(rc, ctx.session, stop)
    if ctx.policy.strict and not ctx.policy.on_own_runner:  # the record's exit code says so too
        _err(f"--strict on a machine that is not a {ctx.policy.profile.id} runner: the job fails "
             f"({'; '.join(ctx.policy.mismatch) or 'fingerprint does not match'})")
        code = max(code, EXIT_BAD)
    if args.contribute is not None and code != EXIT_USAGE:  # a run that recorded nothing has nothing to send
        from lawbench.core.contribute import contribute_after_run
        code = max(code, contribute_after_run(getattr(ctx.session, "record", None), ctx.policy.profile,
                                              args.contribute))
    return code


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


def _run_exit_code(rc: int, session, stop) -> int:
    import pytest

    from lawbench.core.reports import interrupt_exit_code

    record = getattr(session, "record", None)
    if record is not None and (record.interrupted or record.gate is not None or record.not_reached):
        # the record decided it (RunRecord.finish): the gate's colour, not pytest's absolute one
        code = record.exit_code
        return max(code, EXIT_BAD) if getattr(session, "output_errors", None) else code
    if rc == pytest.ExitCode.INTERRUPTED:  # stopped before the session could write a record
        return interrupt_exit_code(getattr(session, "stop", stop).received or stop.received or "SIGINT")
    if rc == pytest.ExitCode.NO_TESTS_COLLECTED:
        history = [la.anchor.id for la in getattr(session, "history", None) or ()]
        if history:  # superseded / refuted / retired: carried with a run, never run alone
            ids = ", ".join(history[:3]) + (" …" if len(history) > 3 else "")
            _err(f"the selection (-k / --law) matches only history anchors ({ids}): they are listed with "
                 "a run, never run; nothing was run or recorded")
        else:
            _err("no anchors matched the selection (-k / --law); nothing was run or recorded")
        return EXIT_USAGE
    if rc == pytest.ExitCode.USAGE_ERROR:
        return EXIT_USAGE
    code = EXIT_OK if rc == pytest.ExitCode.OK else EXIT_BAD  # internal error: never success
    return max(code, EXIT_BAD) if getattr(session, "output_errors", None) else code


# --------------------------------------------------------------------------- check / schema / laws


def cmd_check(args: argparse.Namespace) -> int:
    from lawbench.core.hardware.profiles import plugin_profiles
    from lawbench.core.inventory import check_inventory, load_inventory
    from lawbench.core.stakes import load_stakes
    from lawbench.core.loading import load_all
    from lawbench.core.registry import get_registry
    from lawbench.core.resolution import basis_summary, check_resolution
    from lawbench.core.store.catalog import load_catalog

    reg = get_registry()
    profiles = plugin_profiles(reg, strict=True)
    cat = load_catalog()  # before the anchors: an anchor naming a model reads it
    anchors = load_all(reg, profiles=profiles.keys())  # each anchor checked by its own law
    coverage, problems = check_inventory(load_inventory(), anchors, reg)
    too_narrow = check_resolution(anchors.anchors, profiles)  # docs/bands.md
    stakes = load_stakes(anchors=anchors.by_id().keys())  # edited after staking: refused here
    active = sum(1 for a in anchors.anchors if a.anchor.runs)
    summary = (f"{len(reg.laws)} laws, {len(profiles)} profiles, {len(anchors.anchors)} anchors "
               f"({active} active), {len(cat.model)} real + {len(cat.synthetic)} synthetic models; "
               f"{coverage.summary()}; {len(stakes)} locked stake(s)")
    from lawbench.core.gate_cli import acknowledged_problems
    from lawbench.core.plan import window_problems

    problems = [*problems, *window_problems(profiles, anchors), *acknowledged_problems(anchors, profiles)]
    for problem in problems + too_narrow:
        _err(str(problem))
    if reg.broken:
        _report_plugin_problems(reg)
    if problems or too_narrow or reg.broken:
        _err(f"{len(reg.broken)} plugin problem(s), {len(problems)} claims-inventory problem(s), "
             f"{len(too_narrow)} band problem(s) (docs/bands.md) above; checked the rest: {summary}")
        return EXIT_USAGE
    print(f"ok: {summary}")
    print(basis_summary(anchors.anchors))
    return EXIT_OK


def cmd_schema(args: argparse.Namespace) -> int:
    from pydantic import TypeAdapter

    from lawbench.core.errors import UsageError
    from lawbench.core.models import AnchorFile, HardwareProfile
    from lawbench.core.registry import get_registry
    from lawbench.core.reports import RunRecord
    from lawbench.core.store.catalog import Catalog

    schemas: dict[str, Any] = {"anchors": AnchorFile, "profile": HardwareProfile, "run-record": RunRecord,
                               "models": Catalog}
    for name, law in get_registry().laws.items():
        if law.case_model is not None:  # the `case` table of that law's anchors
            schemas[f"case-{name}"] = law.case_model
    rendered = {name: TypeAdapter(model).json_schema() for name, model in schemas.items()}
    if not args.out:
        print(json.dumps(rendered, indent=2))
        return EXIT_OK
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, schema in rendered.items():
            (out / f"{name}.schema.json").write_text(json.dumps(schema, indent=2) + "\n")
            print(out / f"{name}.schema.json")
    except OSError as exc:
        raise UsageError(f"cannot write the schemas into --out {out}: {exc.strerror or exc}; "
                         "give a writable folder") from None
    return EXIT_OK


def cmd_laws(args: argparse.Namespace) -> int:
    from lawbench.core.errors import UsageError
    from lawbench.core.loading import load_anchors
    from lawbench.core.registry import get_registry

    reg = get_registry()
    unknown = [name for name in args.law if name not in reg.laws]
    if unknown:
        raise UsageError(f"no law named {', '.join(map(repr, unknown))}; registered: {', '.join(reg.laws)}")
    listing = bool(args.law) or args.anchors  # naming a law asks for its anchors
    for name, law in reg.laws.items():
        if args.law and name not in args.law:
            continue
        try:
            anchors = load_anchors(law.anchor_files()).anchors
        except (ImportError, OSError) as exc:
            reg.report(f"{reg.origin_of(law)}: law {name!r}: anchors_package {law.anchors_package!r} "
                       f"cannot be read ({type(exc).__name__}: {exc})")
            anchors = []
        kinds: dict[str, int] = {}
        for la in anchors:
            kinds[la.anchor.kind] = kinds.get(la.anchor.kind, 0) + 1
        summary = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) or "no anchors"
        print(f"{name:8} {law.title}  [{summary}]  ({reg.law_origin[name]})")
        if listing:
            for la in sorted(anchors, key=lambda la: la.anchor.id):
                a = la.anchor
                where = ", ".join(a.profiles) or "every profile"
                status = "" if a.status == "active" else f"  ({a.status})"
                print(f"  {a.id}  {a.kind}  [{where}]{status}")
    _report_plugin_problems(reg)
    return EXIT_OK


_reported: set[str] = set()


def _report_plugin_problems(registry: Any) -> None:
    """Each broken plugin once per command, on stderr: the rest keeps working."""
    for problem in registry.broken:
        if problem not in _reported:
            _reported.add(problem)
            print(f"lawbench: warning: broken plugin: {problem}", file=sys.stderr)


# --------------------------------------------------------------------------- parser


def build_parser(registry: Any = None) -> argparse.ArgumentParser:
    from lawbench.core.ab_cli import add_ab_parser
    from lawbench.core.engines.cli import add_engine_parser
    from lawbench.core.hardware.cli import add_profiles_parser
    from lawbench.core.history_cli import add_history_parser
    from lawbench.core.html.cli import add_report_parser
    from lawbench.core.census_cli import add_census_parser
    from lawbench.core.register_md import add_register_parser
    from lawbench.core.record import add_record_parser
    from lawbench.core.stakes_cli import add_stakes_parser

    p = argparse.ArgumentParser(prog="lawbench", description=__doc__)
    p.add_argument("--version", action="version", version=f"lawbench {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="verify the anchors for a hardware profile")
    run.add_argument("--profile", default="detect", help="profile id, or 'detect' (default) for this machine's")
    run.add_argument("-k", default=None, metavar="EXPR", help="select anchors by id / law / kind (pytest -k)")
    run.add_argument("--law", action="append", help="only this law (repeatable)")
    run.add_argument("--cadence", choices=("quick", "nightly", "weekly", "full"), default=None,
                     help="anchors by how often they run: quick (a first look), nightly, weekly (the rest), "
                          "full (all). Default: quick on the generic cpu profile, nightly on a specific one; "
                          "full when -k or --law names anchors")
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
                          "records such as the data branch's runs/<profile>)")
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
    run.set_defaults(func=cmd_run)

    sub.add_parser("check", help="validate every data file and cross-reference").set_defaults(func=cmd_check)
    schema = sub.add_parser("schema", help="export JSON Schema for anchors, cases, profiles and run records")
    schema.add_argument("--out", default=None, help="write one file per schema into this folder")
    schema.set_defaults(func=cmd_schema)
    laws = sub.add_parser("laws", help="list registered laws and their anchors")
    laws.add_argument("law", nargs="*", help="only these laws, each with its anchors listed")
    laws.add_argument("--anchors", action="store_true", help="list every anchor: id, kind, profiles")
    laws.set_defaults(func=cmd_laws)
    add_profiles_parser(sub)
    add_engine_parser(sub)
    add_ab_parser(sub)
    add_history_parser(sub)
    add_report_parser(sub)
    add_stakes_parser(sub)
    add_register_parser(sub)
    add_record_parser(sub)
    from lawbench.core.gate_cli import add_gate_parsers
    add_gate_parsers(sub)  # plan, baseline propose (the nightly gate: core/gate.py)
    groups = {"census": add_census_parser(sub)}  # laws' "census <action>" commands join it below
    # Commands the laws bring (lawbench_commands): core names none of them.
    for name, command in sorted((registry.commands if registry is not None else {}).items()):
        group, _, action = name.rpartition(" ")
        cp = (groups[group] if group else sub).add_parser(
            action, help=command.help, description=command.description or command.help,
            formatter_class=argparse.RawDescriptionHelpFormatter)
        command.add_arguments(cp)  # tried on a scratch parser when the plugin was loaded
        cp.set_defaults(func=_plugin_command(command, registry.command_origin[name]))
    return p


def _plugin_command(command: Any, origin: str) -> Callable[[argparse.Namespace], int]:
    """A plugin's command, run so that its bug is one line naming it, never a traceback."""
    def run(args: argparse.Namespace) -> int:
        try:
            rc = command.run(args)
        except (LawbenchError, KeyboardInterrupt, BrokenPipeError):
            raise
        except Exception as exc:
            _err(f"command {command.name!r} of {origin} failed: {' '.join(f'{type(exc).__name__}: {exc}'.split())}")
            return EXIT_BAD
        return EXIT_OK if rc is None else int(rc)
    return run


def main(argv: Optional[list[str]] = None) -> int:
    from lawbench.core.errors import DataError, UsageError
    from lawbench.core.registry import PluginError, get_registry
    from lawbench.core.signals import StopSignals

    from lawbench.core.streams import guard_std_fds

    guard_std_fds()  # a closed stdout's fd 1 must not become the history file's
    # Every command stops on SIGTERM (a cancelled CI job) as on Ctrl-C: its engine's process group
    # ended, 128 + the signal's number. `run` and `ab` install their own, which write a record first.
    stop = StopSignals()
    stop.install()
    registry = None
    try:
        registry = get_registry()
        _report_plugin_problems(registry)
        parser = build_parser(registry)
        args = parser.parse_args(argv)
        if not getattr(args, "func", None):
            parser.print_help()
            return EXIT_USAGE
        rc = int(args.func(args))
        _report_plugin_problems(registry)  # found while the command ran (a plugin's bad profile)
        return rc
    except LawbenchError as exc:
        if registry is not None:
            _report_plugin_problems(registry)  # often the reason for what follows
        _err(str(exc))
        if isinstance(exc, (DataError, UsageError, PluginError)):
            return EXIT_USAGE
        return EXIT_BAD
    except KeyboardInterrupt as exc:
        from lawbench.core.errors import EngineInterrupted
        from lawbench.core.reports import interrupt_exit_code

        name = stop.received or EngineInterrupted.signal_of(exc)
        _err(f"interrupted by {name}")
        return interrupt_exit_code(name)
    except BrokenPipeError:  # `lawbench predict … | head`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    finally:
        stop.restore()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
