"""Errors for people: each says what was wrong, where (file, anchor id, field) and what to do.

Every lawbench error lives here, below everything else (no lawbench imports), so any module may
raise one without an import cycle. The CLI maps them to exit codes: DataError, UsageError and
PluginError are 2; an EngineError inside a run is an ERROR verdict.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional

from pydantic import ValidationError

if TYPE_CHECKING:
    from lawbench.core.models import Sample


class LawbenchError(Exception):
    """An error for people: says what was wrong, where, and what to do."""


# The file a law names in a DataError about an anchor: a law does not know which file the anchor
# came from; core puts the real path in (DataError.located).
ANCHOR_FILE = "<anchor file>"


class NotApplicable(LawbenchError):
    """The anchor cannot run here (missing GPU, wrong profile, …): a SKIP with this reason."""


class OutOfScope(NotApplicable):
    """The anchor's own stated scope puts this case outside it here: the law's scope rule, measured
    on this machine (a model that fits in the CPU's cache), or the engine builds the published
    figure is about (another revision installed). Not a missing resource, not a finding: a SKIP
    with its reason (and ``detail``, the figures it rests on) on any runner, under --strict too."""

    def __init__(self, message: str, detail: Optional[dict] = None):
        super().__init__(message)
        self.detail = dict(detail or {})


class EngineOfRecordMissing(NotApplicable):
    """The anchor re-checks a figure published on the profile's engine of record, and the engine
    installed here is another build. A runner job (--strict) must provide the engine of record:
    there this is a FAIL naming it and how to provide it; elsewhere a SKIP with that reason."""


class EngineError(LawbenchError):
    """The engine is missing, crashed, was killed or timed out: an ERROR verdict.

    ``samples`` keeps whatever was measured before the fault, so nothing is lost.
    """

    def __init__(self, message: str, samples: Optional[list["Sample"]] = None, log: str = ""):
        super().__init__(message)
        self.samples = list(samples or [])
        self.log = log


class EngineInterrupted(EngineError):
    """The run was stopped (SIGINT / SIGTERM) while the engine ran; the engine's process group is
    already ended. An EngineError so that the samples taken so far ride through the samplers to the
    record like any fault's; the runner records the anchor as ERROR and then stops the run.
    """

    def __init__(self, message: str, signal_name: str = "SIGINT",
                 samples: Optional[list["Sample"]] = None, log: str = ""):
        super().__init__(message, samples=samples, log=log)
        self.signal_name = signal_name

    @staticmethod
    def signal_of(exc: BaseException) -> str:
        """The signal behind a KeyboardInterrupt: lawbench's handlers raise it with the signal's
        name; Python's own SIGINT handler raises it bare."""
        name = exc.args[0] if exc.args else None
        return name if isinstance(name, str) and name.startswith("SIG") else "SIGINT"


class DataError(LawbenchError):
    """A data file (anchor, profile, manifest, model catalogue) is malformed. Exit code 2."""

    def __init__(self, file: str, message: str, anchor: Optional[str] = None,
                 field: Optional[str] = None, claim: Optional[str] = None):
        self.file, self.anchor, self.field, self.message = file, anchor, field, message
        self.claim = claim
        where = [file]
        if anchor:
            where.append(f"anchor {anchor}")
        if claim:  # a line of the claims inventory (lawbench.core.claims.inventory)
            where.append(f"claim {claim}")
        if field:
            where.append(f"field {field}")
        super().__init__(f"{': '.join(where)}: {message}")

    def located(self, file: str, anchor: Optional[str] = None) -> "DataError":
        """This error placed in the anchor file it is about: a law checking a case names the
        anchor and the field but not the file (it writes a placeholder such as ANCHOR_FILE).
        An error about another file (a manifest or catalogue the case reads) stays about that
        file, and says which anchor read it."""
        if self.file and not self.file.startswith("<") and self.file != file:
            return DataError(self.file, f"{self.message} (read for anchor {self.anchor or anchor} in {file})",
                             field=self.field)
        return DataError(file, self.message, anchor=self.anchor or anchor, field=self.field)


class UsageError(LawbenchError):
    """The command line asked for something that does not exist (unknown profile, law). Exit 2."""


class PluginError(LawbenchError):
    """A plugin registered something malformed or duplicate, or broke while checking an anchor."""


def field_path(loc: tuple) -> str:
    """pydantic's error location as a dotted field path: ('band', 'rel') -> 'band.rel'."""
    return ".".join(str(p) for p in loc) or "(top level)"


# A model validator names the field it is about by starting its message "<field>: …"
# (pydantic has no location for a rule across fields); the formatters below read it back.
FIELD_PREFIX = re.compile(r"^([A-Za-z_][\w.-]*): (.*)$", re.S)


def named_field(err: dict) -> Optional[re.Match]:
    """The "<field>: message" a model validator wrote, or None."""
    if err.get("type") != "value_error":
        return None
    return FIELD_PREFIX.match(str(err.get("msg", "")).removeprefix("Value error, "))


def typo_first(errors: list) -> tuple[dict, str]:
    """The error to name, and a hint. A misspelt required field shows twice: the spelling as
    unknown, the field as missing. The unknown one is the cause, so it is named first, with the
    missing field it most resembles ("; did you mean 'unit'? …"), which then needs no line of its own."""
    unknown = [e for e in errors if e.get("type") == "extra_forbidden"]
    if not unknown:
        return errors[0], ""
    import difflib

    err = unknown[0]
    parent, typo = tuple(err.get("loc", ()))[:-1], str(tuple(err.get("loc", ("",)))[-1])
    missing = [str(e["loc"][-1]) for e in errors
               if e.get("type") == "missing" and e.get("loc") and tuple(e["loc"])[:-1] == parent]
    close = difflib.get_close_matches(typo, missing, n=1, cutoff=0.6)
    return err, (f"; did you mean {close[0]!r}? (it is required and missing)" if close else "")


def validation_error(file: str, exc: ValidationError, anchor: Optional[str] = None,
                     prefix: str = "") -> DataError:
    """A pydantic ValidationError as one DataError for people: the file, the anchor and the field
    (under ``prefix``, e.g. "case"), the likeliest typo first. Pass ``ANCHOR_FILE`` for ``file``
    where core knows the real one."""
    errors = exc.errors()
    err, hint = typo_first(errors)
    loc = tuple(err.get("loc", ()))
    msg = err.get("msg", "invalid")
    named = named_field(err)
    if named:
        loc, msg = (*loc, named.group(1)), named.group(2)
    where = field_path(loc)
    if prefix:
        where = f"{prefix}.{where}" if where != "(top level)" else prefix
    if err.get("type") == "extra_forbidden":
        msg = f"unknown field{hint or ' (check the spelling; see `lawbench schema`)'}"
    more = len(errors) - (2 if hint else 1)
    if more:
        msg += f" (and {more} more problem{'s' if more > 1 else ''})"
    return DataError(file, msg, anchor=anchor, field=where)
