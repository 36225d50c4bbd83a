"""Which minfer engine revisions an anchor's published number holds for, and which one is installed.

Seed 002 is one record (r54) of a campaign whose engine keeps moving: r56 adds a W_dsc plane under
the same gate ("another 363 MB"), r60 flips every MMQ gate's default. A number measured on r54 says
nothing about an r56 engine, so every minfer engine run carries a range,

    revisions = { min = "r54", before = "r56" }     # r54 <= revision < r56

and the installed engine is asked for its revision before it runs (the probe below). Outside the
range the anchor is not about this engine: EngineRevisionOutOfRange, a SKIP with the reason —
unless the profile's engine of record (hardware_profiles/gb10.toml, `engines_of_record`) lies in
the range: the anchor re-checks a figure of the engine of record, which this runner lacks
(EngineOfRecordMissing: a FAIL under --strict, naming it and how to provide it; else a SKIP).

Revisions are the campaign's record numbers written "r<N>" (r41, r53, r54, …) and compare by N.

The probe (part of the engine command's contract, docs/minfer-contract.md): the command is run
once with LAWBENCH_MINFER_PROBE=revision in its environment; it prints one JSON line
{"minfer_revision": "r54", "minfer_contract": 1} on stdout and exits 0 without running a pass. The
wrapper a runner already writes for the {"prefill_tok_s": …} line answers it, from the engine tree
it builds.
"""
from __future__ import annotations

import json
import re
from typing import Any, Mapping, Optional

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from lawbench import EngineError, EngineOfRecordMissing, NotApplicable, OutOfScope

PROBE_ENV = "LAWBENCH_MINFER_PROBE"
PROBE_KEY = "minfer_revision"
COMMIT_KEY = "minfer_commit"  # optional: the code commit the engine was built from
_REVISION = re.compile(r"r(0|[1-9][0-9]*)")


class EngineRevisionOutOfRange(OutOfScope):
    """The installed engine is another revision than the one the anchor's number was published for.

    Not a missing resource: the anchor is not about this engine, so even a runner of the anchor's
    own profile SKIPs it (core keeps an OutOfScope a SKIP there and under --strict)."""


def revision_number(text: str) -> int:
    """"r54" -> 54; ValueError for anything else (" r54", "R54", "r054", "54", "r54-dirty")."""
    m = _REVISION.fullmatch(text) if isinstance(text, str) else None
    if m is None:
        raise ValueError(f"{text!r} is not a revision: write r<N>, e.g. \"r54\"")
    return int(m.group(1))


class Revisions(BaseModel):
    """min <= revision < before; either end may be left out, not both."""

    model_config = ConfigDict(extra="forbid")

    min: Optional[str] = None
    before: Optional[str] = None

    @field_validator("min", "before")
    @classmethod
    def _is_revision(cls, v: Optional[str]) -> Optional[str]:
        if v is not None:
            revision_number(v)
        return v

    @model_validator(mode="after")
    def _a_range(self) -> "Revisions":
        if self.min is None and self.before is None:
            raise ValueError("min: a revision range needs min = \"r<N>\", before = \"r<N>\" or both")
        if self.min is not None and self.before is not None \
                and revision_number(self.min) >= revision_number(self.before):
            raise ValueError(f"before: {self.before} is not after min {self.min}; the range would be empty")
        return self

    def holds(self, revision: str) -> bool:
        n = revision_number(revision)
        return (self.min is None or n >= revision_number(self.min)) and \
            (self.before is None or n < revision_number(self.before))

    def describe(self) -> str:
        parts = ([f"{self.min} <="] if self.min else []) + ["revision"] + ([f"< {self.before}"] if self.before else [])
        return " ".join(parts)


def parse_probe(stdout: str, what: str, log: str = "") -> str:
    """The last {"minfer_revision": "r<N>"} line on stdout; EngineError when there is none or it is
    not a revision (the runner's wrapper breaks the contract: an ERROR, never a guess)."""
    found: Optional[str] = None
    for line in stdout.splitlines():
        line = line.strip()
        if not (line.startswith("{") and PROBE_KEY in line):
            continue
        try:
            value = json.loads(line).get(PROBE_KEY)
        except (json.JSONDecodeError, AttributeError):
            continue
        found = value if isinstance(value, str) else repr(value)
    if found is None:
        raise EngineError(f'{what} printed no {{"{PROBE_KEY}": "r<N>"}} line when run with {PROBE_ENV}=revision; '
                          "an anchor pinned to engine revisions needs it (contract: docs/minfer-contract.md)",
                          log=log)
    try:
        revision_number(found)
    except ValueError as exc:
        raise EngineError(f"{what} reported revision {found!r}: {exc}", log=log) from None
    return found


def parse_commit(stdout: str) -> Optional[str]:
    """The last {"minfer_commit": "<hex>"} the probe printed (an optional key), or None."""
    found: Optional[str] = None
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith("{") and COMMIT_KEY in line:
            try:
                value = json.loads(line).get(COMMIT_KEY)
            except (json.JSONDecodeError, AttributeError):
                continue
            found = value if isinstance(value, str) else None
    return found


def require_commit(wanted: str, reported: Optional[str], anchor_id: str, what: str, field: str,
                   command_env: str) -> None:
    """The build a figure was published on, or refused: NotApplicable (a SKIP here, a FAIL on the
    anchor's own runner), naming the commit to build. Abbreviated hashes match by prefix."""
    got = (reported or "").strip().lower()
    if got and (got.startswith(wanted) or wanted.startswith(got)) and len(got) >= 7:
        return
    said = f"reports commit {reported!r}" if reported else f'prints no {{"{COMMIT_KEY}": "<hex>"}} in its probe'
    raise NotApplicable(f"anchor {anchor_id} re-checks a figure published on minfer commit {wanted} ({field}); "
                        f"{what} {said}. Provide that build: check out minfer at {wanted}, build it, and point "
                        f"{command_env} at a wrapper that runs it and answers the probe with "
                        f'{{"{PROBE_KEY}": …, "{COMMIT_KEY}": "{wanted}"}} (docs/minfer-contract.md §4)')


def probe_env(env: Mapping[str, str]) -> dict[str, str]:
    return {**env, PROBE_ENV: "revision"}


def require(revisions: Revisions, revision: str, anchor_id: str, what: str, field: str) -> None:
    """EngineRevisionOutOfRange unless ``revision`` lies in the anchor's range."""
    if not revisions.holds(revision):
        raise EngineRevisionOutOfRange(
            f"{what} is revision {revision}, outside this anchor's {field} ({revisions.describe()}): "
            f"anchor {anchor_id} re-checks a number published for those revisions only")


def require_record(revisions: Revisions, revision: str, anchor_id: str, what: str, field: str,
                   record: Any, profile_id: str, command_env: str) -> None:
    """As require(); when the profile's minfer engine of record ``record`` lies in the anchor's
    range, an engine outside it means the runner lacks the engine of record: EngineOfRecordMissing."""
    try:
        require(revisions, revision, anchor_id, what, field)
    except EngineRevisionOutOfRange as exc:
        if record is None or not revisions.holds(record.published):
            raise
        raise EngineOfRecordMissing(
            f"the engine of record is missing: anchor {anchor_id} re-checks a figure published on "
            f"{record.describe()}, profile {profile_id}'s engine of record; {what} is revision {revision}, "
            f"outside {field} ({revisions.describe()}). Provide it: build minfer at commit {record.commit} "
            f"and point {command_env} at a wrapper that runs it (docs/RUNNERS.md)") from exc


def record_hint(record: Any, revisions: Optional[Revisions], profile_id: str) -> str:
    """What to add to "not configured" when the anchor is about the profile's engine of record."""
    if record is None or revisions is None or not revisions.holds(record.published):
        return ""
    return (f"; this anchor re-checks {record.describe()}, profile {profile_id}'s engine of record "
            "(docs/RUNNERS.md)")
