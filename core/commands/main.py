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
from lawbench.core.models.harness import profile_problems as harness_problems

EXIT_OK, EXIT_BAD, EXIT_USAGE = 0, 1, 2


def _err(msg: str) -> None:
    try:
        print(f"lawbench: error: {msg}", file=sys.stderr)
    except OSError:  # stderr is gone (a vanished terminal): the exit code still says it
        pass


# --------------------------------------------------------------------------- check / schema / laws


def cmd_check(args: argparse.Namespace) -> int:
    from lawbench.core.hardware.profiles import plugin_profiles
    from lawbench.core.claims.inventory import check_inventory, load_inventory
    from lawbench.core.claims.stakes import load_stakes
    from lawbench.core.claims.loading import load_all
    from lawbench.core.laws.registry import get_registry
    from lawbench.core.stats.resolution import basis_summary, check_resolution
    from lawbench.core.store.catalog import load_catalog

    reg = get_registry()
    profiles = plugin_profiles(reg, strict=True)
    cat = load_catalog()  # before the anchors: an anchor naming a model reads it
    anchors = load_all(reg, profiles=profiles.keys())  # each anchor checked by its own law
    coverage, problems = check_inventory(load_inventory(), anchors, reg)
    too_narrow = check_resolution(anchors.anchors, profiles)  # docs/bands.md
    from lawbench.core.claims.faithful import unfaithful_findings
    too_narrow += unfaithful_findings(anchors.anchors, reg, next(iter(profiles.values())))  # issue 34
    stakes = load_stakes(anchors=anchors.by_id().keys())  # edited after staking: refused here
    active = sum(1 for a in anchors.anchors if a.anchor.runs)
    summary = (f"{len(reg.laws)} laws, {len(profiles)} profiles, {len(anchors.anchors)} anchors "
               f"({active} active), {len(cat.model)} real + {len(cat.synthetic)} synthetic models; "
               f"{coverage.summary()}; {len(stakes)} locked stake(s)")
    from lawbench.core.run.findings import finding_problems
    from lawbench.core.commands.gate import acknowledged_problems
    from lawbench.core.run.plan import window_problems

    ack_warnings: list[str] = []  # a date only warns: it never stops a run (issue 30, item 1)
    rotations: list[str] = []  # a weekly larger than its window rotates in slices (issue 30, item 8)
    problems = [*problems, *window_problems(profiles, anchors, notes=rotations),
                *finding_problems(anchors, reg, profiles), *harness_problems(anchors, profiles),
                *acknowledged_problems(anchors, profiles, warnings=ack_warnings)]
    for warning in ack_warnings:
        print(f"lawbench: warning: {warning}", file=sys.stderr)
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
    for note in rotations:
        print(f"note: {note}")
    return EXIT_OK


def cmd_schema(args: argparse.Namespace) -> int:
    from pydantic import TypeAdapter

    from lawbench.core.errors import UsageError
    from lawbench.core.models import AnchorFile, HardwareProfile
    from lawbench.core.laws.registry import get_registry
    from lawbench.core.record.reports import RunRecord
    from lawbench.core.store.catalog import Catalog

    schemas: dict[str, Any] = {"anchors": AnchorFile, "profile": HardwareProfile, "run-record": RunRecord,
                               "models": Catalog}
    for name, law in get_registry().laws.items():
        if law.case_model is not None:  # the `case` table of that law's anchors
            schemas[f"case-{name}"] = law.case_model
        if law.profile_model is not None:  # that law's table of a hardware profile, [laws.<name>]
            schemas[f"profile-{name}"] = law.profile_model
    rendered = {name: TypeAdapter(model).json_schema() for name, model in schemas.items()}
    if not args.out:
        print(json.dumps(rendered, indent=2))
        return EXIT_OK
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, schema in rendered.items():
            (out / f"{name}.schema.json").write_text(json.dumps(schema, indent=2) + "\n", encoding="utf-8")
            print(out / f"{name}.schema.json")
    except OSError as exc:
        raise UsageError(f"cannot write the schemas into --out {out}: {exc.strerror or exc}; "
                         "give a writable folder") from None
    return EXIT_OK


def cmd_laws(args: argparse.Namespace) -> int:
    from lawbench.core.errors import UsageError
    from lawbench.core.claims.loading import load_anchors
    from lawbench.core.laws.registry import get_registry

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
    from lawbench.core.commands.ab import add_ab_parser
    from lawbench.core.commands.engine import add_engine_parser
    from lawbench.core.commands.profiles import add_profiles_parser
    from lawbench.core.commands.history import add_history_parser
    from lawbench.core.commands.report import add_report_parser
    from lawbench.core.commands.census import add_census_parser
    from lawbench.core.commands.register import add_register_parser
    from lawbench.core.claims.public_record import add_record_parser
    from lawbench.core.commands.run import add_run_parser, cmd_run
    from lawbench.core.commands.stakes import add_stakes_parser

    p = argparse.ArgumentParser(prog="lawbench", description=__doc__)
    p.add_argument("--version", action="version", version=f"lawbench {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    # `lawbench run`: core/commands/run.py; it reports plugin problems found while its context is built
    add_run_parser(sub).set_defaults(func=lambda args: cmd_run(args, report_problems=_report_plugin_problems))

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
    from lawbench.core.commands.gate import add_gate_parsers
    add_gate_parsers(sub)  # plan, baseline propose (the nightly gate: core/history/gate.py)
    from lawbench.core.commands.gate_prove import add_gate_prove_parser
    add_gate_prove_parser(sub)  # gate prove (core/history/prove.py)
    groups = {"census": add_census_parser(sub)}  # laws' "census <action>" commands join it below
    # Core's command names are what its modules added above (asv's habit: never listed twice);
    # a plugin's command that takes one is set aside and named, and every other command works.
    own = {*sub.choices, *(f"{g} {action}" for g, gp in groups.items() for action in gp.choices)}
    # Commands the laws bring (lawbench_commands): core names none of them.
    for name, command in sorted((registry.commands if registry is not None else {}).items()):
        if name in own:
            registry.report(f"{registry.command_origin[name]}: command {name!r} is one of lawbench's own "
                            "(set aside: lawbench's own command runs)")
            continue
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
    from lawbench.core.errors import DataError, PluginError, UsageError
    from lawbench.core.run import signals
    from lawbench.core.laws.registry import get_registry
    from lawbench.core.commands.streams import escape_unencodable, guard_std_fds

    guard_std_fds()  # a closed stdout's fd 1 must not become the history file's
    escape_unencodable()  # a non-UTF-8 locale's terminal gets \u2014, not a traceback
    # Every command stops on SIGINT / SIGTERM / SIGHUP the same way (lawbench.core.run.signals, installed
    # here once): its engine's process group ended, 128 + the signal's number; a Run records first.
    stop = signals.install()
    registry = None
    try:
        registry = get_registry()
        _report_plugin_problems(registry)
        parser = build_parser(registry)
        _report_plugin_problems(registry)  # a command set aside while the parser was built
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
        from lawbench.core.record.reports import interrupt_exit_code

        name = stop.received or EngineInterrupted.signal_of(exc)
        _err(f"interrupted by {name}")
        return interrupt_exit_code(name)
    except BrokenPipeError:  # `lawbench predict … | head`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    finally:
        signals.restore()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
