"""A register harness: the source's own published script, run from a checkout at a pinned commit,
and the figure it prints (lawbench.core.engines.harness runs it).

The anchor says what to run (`[anchor.harness]`): the repository, the commit, the script and its
SHA-256 at that commit, the argv, the environment, the links its hard-coded paths need, the line it
prints and the named group that is the figure. The runner's profile says where its checkout, its
Python and its data folders are (`[[harness_checkouts]]`). A harness with several named `runs`
(each laid over the shared fields) gives one sample per round of all of them, combined by
`figure`, an arithmetic expression over the runs' names ("orth - identity").
"""
from __future__ import annotations

import ast
import math
import re
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any, Optional

from pydantic import Field, field_validator, model_validator

from lawbench.core.models.base import FiniteFloat, Strict

if TYPE_CHECKING:
    from lawbench.core.claims.loading import AnchorSet
    from lawbench.core.models.profile import HardwareProfile

_SHA1 = re.compile(r"[0-9a-f]{40}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")
_RUN_NAME = re.compile(r"[a-z][a-z0-9_]*")
_ENV = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Set by the driver itself: a case may not override them (the checkout on the import path, the
# interpreter's own switches).
RESERVED_ENV = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONNOUSERSITE")
SINGLE_RUN = "run"  # the name of the one run of a harness without `runs`


def _check_repo(v: str) -> str:
    if not _REPO.fullmatch(v):
        raise ValueError(f"a repository is owner/name, e.g. \"FedericoTs/quantprobe\" (got {v!r})")
    return v


def _relative(v: str, what: str) -> str:
    p = PurePosixPath(v)
    if not v or p.is_absolute() or ".." in p.parts or "\\" in v:
        raise ValueError(f"{what} {v!r} must be a relative path with '/' and no '..'")
    return v


class HarnessRun(Strict):
    """One invocation of the source's script: `<python> <checkout>/<script> <argv...>` with ``env``,
    in a scratch folder holding ``links``, the checkout first on PYTHONPATH (the record runs its
    scripts as `python -m weights.x` from the checkout's root)."""

    repository: str  # "FedericoTs/quantprobe": the profile's checkout of it
    commit: str  # 40 hex digits: the checkout's HEAD must be exactly this
    script: str  # path in the repository
    script_sha256: str  # sha256 of the script's blob at `commit` (git show <commit>:<script> | sha256sum)
    argv: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    # environment variables set to one of the profile checkout's data folders: {VAR = "<folder name>"}
    env_folders: dict[str, str] = Field(default_factory=dict)
    # links in the scratch folder to the profile's data folders: {"<relative path>" = "<folder name>"}
    # (a script that hard-codes "D:/data/x" opens that relative path on Linux)
    links: dict[str, str] = Field(default_factory=dict)
    # tracked files the script is known to write in the checkout (a results log it appends to): the
    # only files of the checkout that may differ from the commit
    writes: list[str] = Field(default_factory=list)
    line: str  # regular expression of the printed line; searched in stdout, the last match counts
    group: str  # the named group of `line` that is the figure
    timeout_s: FiniteFloat = Field(gt=0)

    @field_validator("repository")
    @classmethod
    def _repo(cls, v: str) -> str:
        return _check_repo(v)

    @field_validator("commit")
    @classmethod
    def _commit(cls, v: str) -> str:
        if not _SHA1.fullmatch(v):
            raise ValueError(f"a pinned commit is the full 40 lower-case hex digits (got {v!r})")
        return v

    @field_validator("script_sha256")
    @classmethod
    def _sha(cls, v: str) -> str:
        if not _SHA256.fullmatch(v):
            raise ValueError(f"a sha256 is 64 lower-case hex digits (got {v!r})")
        return v

    @field_validator("script")
    @classmethod
    def _script(cls, v: str) -> str:
        return _relative(v, "script")

    @field_validator("writes")
    @classmethod
    def _writes(cls, v: list[str]) -> list[str]:
        return [_relative(p, "writes") for p in v]

    @field_validator("links")
    @classmethod
    def _links(cls, v: dict[str, str]) -> dict[str, str]:
        for path in v:
            _relative(path, "link")
        return v

    @field_validator("env", "env_folders")
    @classmethod
    def _env_names(cls, v: dict[str, str]) -> dict[str, str]:
        for name in v:
            if not _ENV.fullmatch(name):
                raise ValueError(f"{name!r} is not an environment variable name")
            if name in RESERVED_ENV:
                raise ValueError(f"{name} is set by lawbench (the checkout on the import path); leave it out")
        return v

    @model_validator(mode="after")
    def _line_has_group(self) -> "HarnessRun":
        try:
            pattern = re.compile(self.line)
        except re.error as exc:
            raise ValueError(f"line: not a regular expression ({exc})") from None
        if self.group not in pattern.groupindex:
            raise ValueError(f"group: {self.group!r} is not a named group of line "
                             f"(it has {sorted(pattern.groupindex) or 'none'}): write (?P<{self.group}>...)")
        both = set(self.env) & set(self.env_folders)
        if both:
            raise ValueError(f"env_folders: {sorted(both)} also set in env; one place per variable")
        return self

    def folders(self) -> list[str]:
        """The profile folders this run needs."""
        return sorted(set(self.env_folders.values()) | set(self.links.values()))


# The fields of HarnessRun a `runs.<name>` table may lay over the shared ones.
_RUN_FIELDS = tuple(HarnessRun.model_fields)
_OPS = (ast.Add, ast.Sub, ast.Mult, ast.Div)


def figure_names(expr: str) -> list[str]:
    """The run names ``expr`` uses; ValueError when it is anything but + - * / over names and numbers."""
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError:
        raise ValueError(f"figure {expr!r} is not an arithmetic expression") from None
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.append(node.id)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, _OPS):
            continue
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            continue
        elif isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
                and not isinstance(node.value, bool):
            continue
        elif isinstance(node, (ast.Expression, ast.Load, ast.operator, ast.unaryop)):
            continue
        else:
            raise ValueError(f"figure {expr!r}: only + - * / over run names and numbers "
                             f"(found {type(node).__name__})")
    return names


def evaluate_figure(expr: str, values: dict[str, float]) -> float:
    """``expr`` with each run name replaced by that run's figure (a division by zero is NaN:
    the verdict calls a non-finite statistic an ERROR, never drops it)."""
    def ev(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Name):
            return values[node.id]
        if isinstance(node, ast.Constant):
            return float(node.value)
        if isinstance(node, ast.UnaryOp):
            return -ev(node.operand)
        assert isinstance(node, ast.BinOp)
        a, b = ev(node.left), ev(node.right)
        if isinstance(node.op, ast.Add):
            return a + b
        if isinstance(node.op, ast.Sub):
            return a - b
        if isinstance(node.op, ast.Mult):
            return a * b
        return a / b if b != 0 else math.nan

    figure_names(expr)
    return ev(ast.parse(expr, mode="eval"))


class RegisterHarness(Strict):
    """`[anchor.harness]`: the shared fields of every run, the named runs, and the figure.

    Without `runs` the harness is one run (named "run") and the figure is its printed figure.
    One sample is one round: every run once, in the order written, so two arms of a difference
    are interleaved like a ratio's."""

    repository: Optional[str] = None
    commit: Optional[str] = None
    script: Optional[str] = None
    script_sha256: Optional[str] = None
    argv: Optional[list[str]] = None
    env: dict[str, str] = Field(default_factory=dict)
    env_folders: dict[str, str] = Field(default_factory=dict)
    links: dict[str, str] = Field(default_factory=dict)
    writes: list[str] = Field(default_factory=list)
    line: Optional[str] = None
    group: Optional[str] = None
    timeout_s: Optional[FiniteFloat] = None
    runs: dict[str, dict[str, Any]] = Field(default_factory=dict)
    figure: Optional[str] = None

    @model_validator(mode="after")
    def _complete(self) -> "RegisterHarness":
        for name, patch in self.runs.items():
            if not _RUN_NAME.fullmatch(name):
                raise ValueError(f"runs.{name}: a run's name is lower-case letters, digits and '_', starting "
                                 "with a letter (figure uses it as a name)")
            unknown = sorted(set(patch) - set(_RUN_FIELDS))
            if unknown:
                raise ValueError(f"runs.{name}: unknown field(s) {unknown}; a run sets any of {list(_RUN_FIELDS)}")
        # every run must be complete once laid over the shared fields
        self.resolved()
        if self.runs:
            if not self.figure:
                raise ValueError("figure: a harness with runs says how they combine, e.g. figure = \"a - b\"")
            unknown = sorted(set(figure_names(self.figure)) - set(self.runs))
            if unknown:
                raise ValueError(f"figure: {unknown} are not runs (runs: {sorted(self.runs)})")
            unused = sorted(set(self.runs) - set(figure_names(self.figure)))
            if unused:
                raise ValueError(f"runs: {unused} are run but not used by figure {self.figure!r}")
        elif self.figure is not None:
            raise ValueError("figure: only a harness with runs combines figures; one run's figure is its group")
        return self

    def resolved(self) -> dict[str, HarnessRun]:
        """Each run, the shared fields with its own laid over (tables merge key by key)."""
        shared = self.model_dump(exclude={"runs", "figure"}, exclude_none=True)
        out: dict[str, HarnessRun] = {}
        for name, patch in (self.runs or {SINGLE_RUN: {}}).items():
            merged = dict(shared)
            for key, value in patch.items():
                merged[key] = {**merged.get(key, {}), **value} if isinstance(value, dict) else value
            try:
                out[name] = HarnessRun.model_validate(merged)
            except Exception as exc:  # pydantic's message, placed under the run's name
                where = f"runs.{name}: " if self.runs else ""
                raise ValueError(f"{where}{_first_error(exc)}") from None
        return out

    def figure_of(self, values: dict[str, float]) -> float:
        return evaluate_figure(self.figure, values) if self.figure else values[SINGLE_RUN]


def _first_error(exc: Exception) -> str:
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return str(exc)
    e = errors()[0]
    loc = ".".join(str(p) for p in e.get("loc", ()))
    msg = str(e.get("msg", "")).removeprefix("Value error, ")
    return f"{loc}: {msg}" if loc else msg


class HarnessCheckout(Strict):
    """`[[harness_checkouts]]` of a runner's profile: where its clone of a repository is, the
    Python that runs its scripts (with the packages the record names), and its data folders by
    name. Paths are absolute or start with "~/" or "${LAWBENCH_MODEL_DIR}/" (the folder of the
    runner's model files, as the catalogue's source.path); lawbench checks out nothing itself."""

    repository: str
    checkout: str
    python: str
    folders: dict[str, str] = Field(default_factory=dict)

    @field_validator("repository")
    @classmethod
    def _repo(cls, v: str) -> str:
        return _check_repo(v)

    @field_validator("checkout", "python")
    @classmethod
    def _path(cls, v: str) -> str:
        return _runner_path(v)

    @field_validator("folders")
    @classmethod
    def _folders(cls, v: dict[str, str]) -> dict[str, str]:
        for name, path in v.items():
            _runner_path(path)
        return v


# A runner's model files live in its LAWBENCH_MODEL_DIR (core/store/real.py); a folder may name it.
MODEL_DIR_PREFIX = "${LAWBENCH_MODEL_DIR}/"


def _runner_path(v: str) -> str:
    if not (v.startswith("/") or v.startswith("~/") or v.startswith(MODEL_DIR_PREFIX)):
        raise ValueError(f"{v!r}: a runner's path is absolute, or starts with \"~/\" or \"{MODEL_DIR_PREFIX}\"")
    return v


def profile_problems(anchors: "AnchorSet", profiles: dict[str, "HardwareProfile"]) -> list[str]:
    """`lawbench check`: every active harness anchor binds to profiles, and each of them names a
    checkout of the run's repository with every data folder the run needs, so a runner's job never
    first learns of a missing entry as a failure at night."""
    out: list[str] = []
    for la in anchors.anchors:
        a = la.anchor
        if a.harness is None or not a.runs:
            continue
        if not a.profiles:
            out.append(f"{la.file}: anchor {a.id}: field profiles: a register-harness anchor binds to the "
                       "profiles whose runners keep a checkout of its repository (harness_checkouts)")
            continue
        for name, run in a.harness.resolved().items():
            field = f"harness.runs.{name}" if a.harness.runs else "harness"
            for pid in a.profiles:
                prof = profiles.get(pid)
                if prof is None:
                    continue  # an unknown profile is the anchor loader's to name
                entry = prof.harness_checkout(run.repository)
                if entry is None:
                    out.append(f"{la.file}: anchor {a.id}: field {field}.repository: profile {pid} names no "
                               f"checkout of {run.repository} (hardware_profiles/{pid}.toml, harness_checkouts)")
                    continue
                for folder in run.folders():
                    if folder not in entry.folders:
                        out.append(f"{la.file}: anchor {a.id}: field {field}: profile {pid} names no folder "
                                   f"{folder!r} for {run.repository} (hardware_profiles/{pid}.toml, "
                                   "harness_checkouts.folders)")
    return out
