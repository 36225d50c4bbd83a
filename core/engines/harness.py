"""Run a source's own published script (a register harness) and read the figure it prints.

Third-party code runs only from a checkout whose commit and script hash the anchor's reviewed TOML
pins: before every run the runner's checkout (its profile's `[[harness_checkouts]]`) must be at the
pinned commit, with no tracked file changed but those the anchor says the script writes and no
untracked module where the script imports from, and the script on disk must hash to the pinned SHA-256; anything else is refused, naming the anchor's
file, the anchor and the field. The script then runs as an argv list (never through a shell) in a
process group of its own through lawbench's one process runner (core/engines/tool_run.py: timeout,
interrupt, flood), in a scratch folder holding the links its hard-coded paths need, with the
checkout first on PYTHONPATH; the figure is the named group of the last printed line that matches.
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from lawbench.core.engines.tool_run import engine_error, log_tail, process_fault, run_process
from lawbench.core.errors import ANCHOR_FILE, DataError, EngineError, NotApplicable
from lawbench.core.models.harness import MODEL_DIR_PREFIX, HarnessCheckout, HarnessRun
from lawbench.core.models.profile import HardwareProfile
from lawbench.core.store.model_stamp import sha256_of
from lawbench.core.store.real import MODEL_DIR_ENV

GIT_TIMEOUT_S = 60.0
TOOL = "register harness"


@dataclass
class Checkout:
    """A profile's checkout with its paths expanded and found on this machine."""

    root: Path
    python: Path
    folders: dict[str, Path]


@dataclass
class Reading:
    figure: float
    line: str  # the printed line the figure was read from
    wall_s: float
    argv: list[str]
    head: str  # the checkout's commit it ran at
    log: str  # the tail of what it printed


def runner_path(raw: str, profile_id: str, where: str) -> Path:
    """A profile's path on this machine: "~/" is the runner's home, "${LAWBENCH_MODEL_DIR}/" the
    folder of its model files (NotApplicable, naming the variable, when it is not set)."""
    if raw.startswith(MODEL_DIR_PREFIX):
        base = os.environ.get(MODEL_DIR_ENV)
        if not base:
            raise NotApplicable(f"{where} {raw!r} (profile {profile_id}) needs ${MODEL_DIR_ENV}; set it to the "
                                "folder holding this runner's model files")
        return Path(base).expanduser() / raw[len(MODEL_DIR_PREFIX):]
    return Path(os.path.expanduser(raw))


def locate(run: HarnessRun, profile: HardwareProfile, field: str) -> Checkout:
    """The profile's checkout of the run's repository, with its Python and the folders the run
    needs; NotApplicable (a SKIP, a FAIL on the anchor's own runner) names what is missing."""
    entry: HarnessCheckout | None = profile.harness_checkout(run.repository)
    if entry is None:
        raise NotApplicable(f"profile {profile.id!r} names no checkout of {run.repository} "
                            f"(hardware_profiles/{profile.id}.toml, field harness_checkouts)")
    root = runner_path(entry.checkout, profile.id, "harness_checkouts.checkout")
    python = runner_path(entry.python, profile.id, "harness_checkouts.python")
    if not root.is_dir():
        raise NotApplicable(f"no checkout of {run.repository} at {root} (profile {profile.id}, "
                            "harness_checkouts.checkout): clone it there at the pinned commit")
    if not python.is_file():
        raise NotApplicable(f"no Python at {python} (profile {profile.id}, harness_checkouts.python) "
                            f"for {run.repository}'s scripts")
    folders: dict[str, Path] = {}
    for name in run.folders():
        if name not in entry.folders:
            raise NotApplicable(f"profile {profile.id} names no folder {name!r} for {run.repository} "
                                f"(harness_checkouts.folders), which {field} needs")
        path = runner_path(entry.folders[name], profile.id, f"harness_checkouts.folders.{name}")
        if not path.exists():
            raise NotApplicable(f"folder {name!r} is not on this machine: {path} (profile {profile.id}, "
                                "harness_checkouts.folders)")
        folders[name] = path
    return Checkout(root, python, folders)


def _git(root: Path, *args: str) -> str:
    cmd = ["git", "-C", str(root), *args]
    p = run_process(cmd, GIT_TIMEOUT_S)
    fault = process_fault(p, "git", f"checkout {root}", cmd, GIT_TIMEOUT_S)
    if fault:
        raise engine_error(p, fault, log=log_tail(p.stderr))
    return p.stdout


def verify(run: HarnessRun, checkout: Checkout, anchor_id: str, field: str) -> str:
    """Refuse to run unless the checkout is the pinned commit as published; returns its HEAD.

    :param field: where the run's fields live in the anchor ("harness" or "harness.runs.<name>")
    :raises DataError: naming the anchor, the field and what differs.
    """
    head = _git(checkout.root, "rev-parse", "HEAD").strip()
    if head != run.commit:
        raise DataError(ANCHOR_FILE, f"the checkout {checkout.root} is at commit {head}, the anchor pins "
                                     f"{run.commit}: refused to run {run.script} (check out the pinned commit)",
                        anchor=anchor_id, field=f"{field}.commit")
    changed = [p for p in _git(checkout.root, "diff", "--name-only", "HEAD").splitlines() if p]
    foreign = sorted(set(changed) - set(run.writes))
    if foreign:
        raise DataError(ANCHOR_FILE, f"the checkout {checkout.root} changes tracked file(s) {foreign} of commit "
                                     f"{run.commit}: refused to run {run.script} (restore them; a file the "
                                     "script itself writes is listed in writes)",
                        anchor=anchor_id, field=f"{field}.writes")
    shadows = _untracked_modules(checkout.root, run.script)
    if shadows:
        raise DataError(ANCHOR_FILE, f"the checkout {checkout.root} holds untracked module(s) {shadows} where "
                                     f"{run.script} imports from (the checkout's root, the script's folder): they "
                                     "would shadow the published code or its packages; refused (remove them)",
                        anchor=anchor_id, field=f"{field}.script")
    script = checkout.root / run.script
    if not script.is_file():
        raise DataError(ANCHOR_FILE, f"{run.script} is not in the checkout {checkout.root} at {head}",
                        anchor=anchor_id, field=f"{field}.script")
    digest = sha256_of(script)
    if digest != run.script_sha256:
        raise DataError(ANCHOR_FILE, f"{script} hashes to {digest}, the anchor pins {run.script_sha256}: "
                                     "refused to run it", anchor=anchor_id, field=f"{field}.script_sha256")
    return head


# What Python imports from a folder on sys.path ahead of site-packages: a module file or a regular
# package (a folder without __init__.py is a namespace package, which never wins over a real one).
_MODULE_SUFFIXES = (".py", ".pyc", ".so", ".pyd")


def _untracked_modules(root: Path, script: str) -> list[str]:
    """Importable entries of the checkout's root and of the script's folder (sys.path[0] when it
    runs by path) that the commit does not hold, ignored ones included (a stray `torch.py` there
    would run instead of torch)."""
    tracked = set(_git(root, "ls-files").splitlines())
    found: list[str] = []
    for folder in dict.fromkeys((root, (root / script).parent)):
        for entry in sorted(folder.iterdir()) if folder.is_dir() else []:
            rel = entry.relative_to(root).as_posix()
            importable = entry.is_file() and entry.name.endswith(_MODULE_SUFFIXES) or \
                entry.is_dir() and (entry / "__init__.py").is_file()
            if not importable:
                continue
            if entry.is_dir() and f"{rel}/__init__.py" in tracked or rel in tracked:
                continue
            found.append(rel)
    return found


def command(run: HarnessRun, checkout: Checkout) -> list[str]:
    return [str(checkout.python), str(checkout.root / run.script), *run.argv]


def run_once(run: HarnessRun, checkout: Checkout, anchor_id: str, field: str) -> Reading:
    """Verify, then run the script once and read its figure.

    :raises DataError: the checkout is not what the anchor pins (nothing ran).
    :raises EngineError: it could not start, exited non-zero, was killed, ran past its timeout, or
        printed no matching line; an EngineInterrupted when lawbench itself was stopped.
    """
    head = verify(run, checkout, anchor_id, field)
    env = {"PYTHONPATH": str(checkout.root), **run.env,
           **{var: str(checkout.folders[name]) for var, name in run.env_folders.items()}}
    cmd = command(run, checkout)
    scratch = Path(tempfile.mkdtemp(prefix="lawbench-harness-"))
    try:
        for rel, name in run.links.items():
            link = scratch / rel
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(checkout.folders[name], target_is_directory=checkout.folders[name].is_dir())
        p = run_process(cmd, run.timeout_s, env, cwd=str(scratch))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)  # the links only: rmtree never follows them
    tail = log_tail(p.stdout + ("\n--- stderr ---\n" + p.stderr if p.stderr.strip() else ""))
    fault = process_fault(p, TOOL, f"{run.repository}:{run.script} at {head[:12]} (anchor {anchor_id})",
                          cmd, run.timeout_s)
    if fault:
        raise engine_error(p, fault, log=tail)
    figure, line = read_figure(p.stdout, run)
    if figure is None:
        raise EngineError(f"{TOOL} {run.script} (anchor {anchor_id}) exited 0 but printed no line matching "
                          f"{field}.line {run.line!r}" + (f" ({line})" if line else ""), log=tail)
    return Reading(figure, line, round(p.wall_s, 3), cmd, head, tail)


def read_figure(stdout: str, run: HarnessRun) -> tuple[float | None, str]:
    """The named group of the last matching line as a number, and that line (None, and why,
    when no line matches or the group is not a number)."""
    pattern = re.compile(run.line)
    last = None
    for text in stdout.splitlines():
        m = pattern.search(text)
        if m:
            last = (m, text.strip())
    if last is None:
        return None, ""
    m, text = last
    raw = m.group(run.group)
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return None, f"its group {run.group!r} read {raw!r}, not a number, in: {text}"
    return value, text

