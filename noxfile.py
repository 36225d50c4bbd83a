"""Sessions a developer and CI both run: `nox -s anchors` (the main job) and `nox -s tests`."""
from __future__ import annotations

import os

import nox
import nox.command

nox.options.sessions = ["anchors"]
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = True


@nox.session
def anchors(session: nox.Session) -> None:
    """Verify the anchors for this machine's profile (or `-- --profile ID`), for real.

    Posargs go to `lawbench run`: e.g. `nox -s anchors -- --profile gtx1060 -k kv`.
    Exit 0 when everything that ran passed, 1 on any FAIL / ERROR / VOID, 2 on bad data, 130 / 143
    when stopped by SIGINT / SIGTERM: lawbench's own code, passed on as it is (_keep_exit_code).
    """
    # gpu: nvidia-ml-py, so a GPU runner is recognised through NVML (nvidia-smi is the fallback);
    # plots: matplotlib, so every run also writes its HTML report next to run.json.
    # The nightly (LAWBENCH_LOCKED=1, set by nightly.yml) installs exactly requirements/nightly.lock,
    # every file checked against its hash, not whatever the index serves that night; a newcomer's
    # `nox -s anchors` resolves the ranges in pyproject.toml (unlocked).
    locked = os.environ.get("LAWBENCH_LOCKED") == "1"
    if locked:
        session.install("--require-hashes", "-r", "requirements/nightly.lock")
        session.install("--no-deps", "--no-build-isolation", ".")
    else:
        session.install(".[gpu,plots]")
    # Law 2 ships as an outside contributor's package (examples/lawbench-law2): installed beside
    # lawbench, as a contributor's would be. --no-deps: "lawbench" on an index is another project.
    session.install("--no-deps", *(["--no-build-isolation"] if locked else []), "./examples/lawbench-law2")
    _keep_exit_code(session, "lawbench", "check")
    _keep_exit_code(session, "lawbench", "run", *session.posargs)


def _keep_exit_code(session: nox.Session, *args: str) -> None:
    """Run a command; when it fails, nox exits with its code, not nox's own 1: the workflow and
    scripts/nightly_runner.sh tell bad data (2) from a regression (1) and a stopped run (130 / 143)."""
    try:
        session.run(*args)
    except nox.command.CommandFailed as exc:
        if exc.return_code is None:  # nox's own failure (e.g. the program is missing): nox's 1
            raise
        raise SystemExit(exc.return_code) from None


@nox.session(default=False)
def ab(session: nox.Session) -> None:
    """A/B two engine builds on the same anchors, interleaved (docs/ab.md); posargs go to `lawbench ab`.

    e.g. `nox -s ab -- --b llama-cpp-python@0.3.36 -k syn-25m --gate-min-ratio 0.95`
    """
    session.install(".[gpu]")
    session.run("lawbench", "ab", *session.posargs)


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite, integration tests with a real llama.cpp build and real GGUF files included."""
    session.install("-e", ".[test]")
    session.install("--no-deps", "-e", "./examples/lawbench-law2")
    # The suite starts hundreds of lawbench processes. An editable install's modules are compiled
    # when first imported, and where PYTHONDONTWRITEBYTECODE is set (some images and sandboxes)
    # every process compiles all of them again: ~0.5 s of CPU each (`lawbench check` 1.8 -> 1.3 s).
    # Compiled once here, as pip compiles a regular install; stale files are never used (mtime).
    session.run("python", "-m", "compileall", "-q", "core", "plugins", "src", "examples/lawbench-law2",
                silent=True)
    if session.posargs:  # a developer's own selection, as given: `nox -s tests -- -k history`
        session.run("pytest", *session.posargs)
        return
    # Two passes (tests/conftest.py marks which test is which): most tests on every core, then
    # the serial ones one at a time with nothing beside them: a real engine's timed runs, and
    # runner-like runs that share this machine's cache and its one box lock. Both passes run
    # even when the first fails, so one run shows every failure.
    passes = {
        "parallel": ["-q", "-ra", "--durations=15", "-n", "auto", "-m", "not serial and not nightly"],
        "serial": ["-q", "-ra", "--durations=15", "-m", "serial and not nightly"],
        "lawbench-law2": ["-q", "-ra", "examples/lawbench-law2/tests"],  # as its author runs them
    }
    failed = []
    for name, args in passes.items():
        try:
            session.run("pytest", *args)
        except nox.command.CommandFailed:
            failed.append(name)
    if failed:
        session.error(f"tests failed in: {', '.join(failed)}")


@nox.session(default=False)
def lint(session: nox.Session) -> None:
    """Static checks (not part of the contract; run when you like)."""
    session.install("ruff")
    session.run("ruff", "check", "core", "plugins", "src", "tests", "noxfile.py")


@nox.session(default=False)
def benchmark(session: nox.Session) -> None:
    """Print lawbench's own overhead and header-scan figures (speed goals live here, not in tests),
    and whether the cpu profile's verdicts reproduce over three back-to-back runs."""
    session.install("-e", ".")
    for script in ("benchmarks/header_scan.py", "benchmarks/overhead.py", "benchmarks/reproducibility.py"):
        session.run("python", script, *session.posargs)
