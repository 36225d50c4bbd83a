"""`lawbench`: the front door. Exit 0 when all that ran passed, 1 on FAIL / ERROR / VOID (or an
output that could not be written), 2 on a usage or data error (one line naming the file, anchor and
field — never a traceback), 130 / 143 when a run is stopped by SIGINT / SIGTERM."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Callable, Optional

from lawbench import __version__
from lawbench.core.law import LawbenchError

EXIT_OK, EXIT_BAD, EXIT_USAGE = 0, 1, 2


def _err(msg: str) -> None:
    print(f"lawbench: error: {msg}", file=sys.stderr)


# --------------------------------------------------------------------------- run


def cmd_run(args: argparse.Namespace) -> int:
    from lawbench.core.law import EngineInterrupted
    from lawbench.core.reports import interrupt_exit_code
    from lawbench.core.session import StopSignals

    # SIGTERM (a cancelled CI job) stops the run as Ctrl-C does; the anchor session installs its
    # own handler for the measuring part, which records the signal in the run record.
    stop = StopSignals()
    stop.install()
    try:
        return _run(args, stop)
    except KeyboardInterrupt as exc:
        name = stop.received or EngineInterrupted.signal_of(exc)
        _err(f"interrupted by {name}")
        return interrupt_exit_code(name)
    finally:
        stop.restore()


def _run(args: argparse.Namespace, stop) -> int:
    import pytest

    from lawbench.core.session import RunContext

    # Validate everything before pytest starts, so a data error is one line and exit 2.
    ctx = RunContext(args.profile, laws=tuple(args.law or ()), strict=args.strict, llama_dir=args.llama_dir)
    files = ctx.files()
    if not files:
        _err(f"no anchors selected for profile {ctx.policy.profile.id!r}")
        return EXIT_USAGE
    out = Path(args.out)
    junit = Path(args.junit) if args.junit else out / "junit.xml"
    problem = _unwritable(out, "--out folder") or _unwritable(junit, "--junit file", file=True)
    if problem:
        _err(problem)
        return EXIT_USAGE
    machine = "matches" if ctx.policy.on_own_runner else "does not match"
    print(f"lawbench {__version__}: profile {ctx.policy.profile.id} (detected: {ctx.detected}; "
          f"this machine {machine} it), {len(files)} anchor file(s)", flush=True)
    probe = _SessionProbe()
    rc = pytest.main(_pytest_args(args, ctx, files, out, junit), plugins=[probe])
    stop.closing = True  # the record is written: a late signal must not turn into a traceback
    return _run_exit_code(rc, probe.session, stop)


def _unwritable(path: Path, what: str, file: bool = False) -> Optional[str]:
    """Why `path` (a folder, or with `file` a file in a folder) cannot take lawbench's output."""
    import tempfile

    folder = path.parent if file else path
    if file and path.is_dir():
        return f"cannot write the {what} {path}: it is a folder; give a file path"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        return f"cannot write the {what} {path}: {exc.strerror or exc}; give a writable path"
    return None


def _pytest_args(args: argparse.Namespace, ctx, files: list[Path], out: Path, junit: Path) -> list[str]:
    pytest_args = [str(f) for f in files] + [
        "--lawbench-profile", ctx.policy.profile.id,
        "--lawbench-out", str(out),
        "--junitxml", str(junit),
        "-o", "junit_family=xunit2", "-o", "junit_suite_name=lawbench",
        "-p", "no:cacheprovider", "-c", os.devnull, "--rootdir", os.path.commonpath([str(f.parent) for f in files]),
        "-rfEsx", "--tb=short",
    ]
    for law in args.law or ():
        pytest_args += ["--lawbench-law", law]
    if args.strict:
        pytest_args.append("--lawbench-strict")
    if args.llama_dir:
        pytest_args += ["--lawbench-llama-dir", args.llama_dir]
    if args.no_history:
        pytest_args.append("--lawbench-no-history")
    if args.k:
        pytest_args += ["-k", args.k]
    if args.verbose:
        pytest_args.append("-v")
    return pytest_args + (args.pytest_args or [])


class _SessionProbe:
    """Keeps the anchor session once pytest.main returns: its record, its signal, its outputs."""

    session = None

    def pytest_sessionstart(self, session) -> None:
        from lawbench.core.pytest_plugin import SESSION_NAME

        self.session = session.config.pluginmanager.get_plugin(SESSION_NAME)


def _run_exit_code(rc: int, session, stop) -> int:
    import pytest

    from lawbench.core.reports import interrupt_exit_code

    record = getattr(session, "record", None)
    if record is not None and record.interrupted:
        return record.exit_code
    if rc == pytest.ExitCode.INTERRUPTED:  # stopped before the session could write a record
        return interrupt_exit_code(getattr(session, "stop", stop).received or stop.received or "SIGINT")
    if rc == pytest.ExitCode.NO_TESTS_COLLECTED:
        _err("no anchors matched the selection (-k / --law); nothing was run or recorded")
        return EXIT_USAGE
    if rc == pytest.ExitCode.USAGE_ERROR:
        return EXIT_USAGE
    code = EXIT_OK if rc == pytest.ExitCode.OK else EXIT_BAD  # internal error: never success
    return max(code, EXIT_BAD) if getattr(session, "output_errors", None) else code


# --------------------------------------------------------------------------- check / schema / laws


def cmd_check(args: argparse.Namespace) -> int:
    from lawbench.core.hardware.profiles import load_profiles
    from lawbench.core.loading import load_all
    from lawbench.core.registry import get_registry

    reg = get_registry()
    profiles = load_profiles(extra_dirs=reg.profile_dirs)
    anchors = load_all(reg, profiles=profiles.keys())
    n_models = ""
    try:
        from lawbench.core.store.catalog import load_catalog

        cat = load_catalog()
        n_models = f", {len(getattr(cat, 'model', []))} real + {len(getattr(cat, 'synthetic', []))} synthetic models"
    except ImportError:
        pass
    active = sum(1 for a in anchors.anchors if a.anchor.runs)
    print(f"ok: {len(reg.laws)} laws, {len(profiles)} profiles, {len(anchors.anchors)} anchors "
          f"({active} active){n_models}")
    return EXIT_OK


def cmd_schema(args: argparse.Namespace) -> int:
    from lawbench.core.models import AnchorFile, HardwareProfile
    from lawbench.core.reports import RunRecord

    schemas = {"anchors": AnchorFile, "profile": HardwareProfile, "run-record": RunRecord}
    try:
        from lawbench.core.store.catalog import Catalog

        schemas["models"] = Catalog
    except ImportError:
        pass
    from pydantic import TypeAdapter

    rendered = {name: TypeAdapter(model).json_schema() for name, model in schemas.items()}
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        for name, schema in rendered.items():
            (out / f"{name}.schema.json").write_text(json.dumps(schema, indent=2) + "\n")
            print(out / f"{name}.schema.json")
    else:
        print(json.dumps(rendered, indent=2))
    return EXIT_OK


def cmd_laws(args: argparse.Namespace) -> int:
    from lawbench.core.loading import load_anchors
    from lawbench.core.registry import get_registry

    reg = get_registry()
    for name, law in reg.laws.items():
        anchors = load_anchors(law.anchor_files()).anchors
        kinds: dict[str, int] = {}
        for la in anchors:
            kinds[la.anchor.kind] = kinds.get(la.anchor.kind, 0) + 1
        summary = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) or "no anchors"
        print(f"{name:8} {law.title}  [{summary}]  ({reg.law_origin[name]})")
    return EXIT_OK


# --------------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lawbench", description=__doc__)
    p.add_argument("--version", action="version", version=f"lawbench {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="verify the anchors for a hardware profile")
    run.add_argument("--profile", default="detect", help="profile id, or 'detect' (default) for this machine's")
    run.add_argument("-k", default=None, metavar="EXPR", help="select anchors by id / law / kind (pytest -k)")
    run.add_argument("--law", action="append", help="only this law (repeatable)")
    run.add_argument("--strict", action="store_true", help="every skip is a failure")
    run.add_argument("--out", default=os.environ.get("LAWBENCH_OUT", "lawbench-out"),
                     help="folder for run.json, junit.xml and history.sqlite (default: lawbench-out)")
    run.add_argument("--junit", default=None, help="JUnit XML path (default: OUT/junit.xml)")
    run.add_argument("--llama-dir", default=None, help="use this llama.cpp build (its bin folder)")
    run.add_argument("--no-history", action="store_true", help="do not append to the history store")
    run.add_argument("-v", "--verbose", action="store_true")
    run.add_argument("pytest_args", nargs="*", help="after --: passed to pytest")
    run.set_defaults(func=cmd_run)

    sub.add_parser("check", help="validate every data file and cross-reference").set_defaults(func=cmd_check)
    schema = sub.add_parser("schema", help="export JSON Schema for anchors, profiles and run records")
    schema.add_argument("--out", default=None, help="write one file per schema into this folder")
    schema.set_defaults(func=cmd_schema)
    sub.add_parser("laws", help="list registered laws and their anchors").set_defaults(func=cmd_laws)

    _optional(sub, "lawbench.core.hardware.cli", "add_profiles_parser")
    _optional(sub, "lawbench.plugins.law4.cli", "add_predict_parser")
    _optional(sub, "lawbench.core.engines.cli", "add_engine_parser")
    _optional(sub, "lawbench.core.history_cli", "add_history_parser")
    return p


def _optional(sub, module: str, attr: str) -> None:
    import importlib

    try:
        adder: Callable = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError):
        return
    adder(sub)


def main(argv: Optional[list[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args.func(args))
    except LawbenchError as exc:
        from lawbench.core.errors import DataError, UsageError
        from lawbench.core.registry import PluginError

        _err(str(exc))
        if isinstance(exc, (DataError, UsageError, PluginError)):
            return EXIT_USAGE
        return EXIT_BAD
    except KeyboardInterrupt:
        _err("interrupted")
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
