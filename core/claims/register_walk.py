"""Every number in the register's entries, walked against the claims inventory (issue 34).

The register (sources/register/quantprobe-REGISTER.json) prints far more numbers than its `laws`
lines quote: every text field of every law, lever, dead end and contradiction. A number there is
covered only the way a seed's number is (tests/test_seed_numbers.py): a line of the inventory for
that entry, or a line of another source whose quote stands in the entry's text, accounts for it
(figures.encoded_figures: a number inside a quote counts only for the figure its line encodes).
What is not a claim is said explicitly: a reviewed class of identifiers (dates, ids, format and
model names …), each with why and with real figures it must leave alone, or a listed fragment of
one entry with why (sources/register/not-claims.toml). Everything else is uncovered; the still
uncovered figures are a counted list that may only shrink (sources/register/still-uncovered.toml).
"""
from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Optional, Union

from pydantic import Field, ValidationError, field_validator

from lawbench.core.claims.figures import encoded_figures, same_number
from lawbench.core.claims.inventory import Claim
from lawbench.core.claims.public_record import pieces, words
from lawbench.core.errors import DataError, validation_error
from lawbench.core.models import Anchor, Id, Strict
from lawbench.core.toml_read import read_toml

FilePath = Union[str, os.PathLike]  # where a TOML file of the walk is read from

# the lists of entries whose text states findings; `untried` (predictions not yet measured) and
# `external` (other projects to read) state none of the register's own measurements
WALKED = ("laws", "levers", "dead_ends", "contradictions")
# an entry's own id and the name of its list are labels, not sentences
LABELS = ("id", "kind")
# every run of digits is a number, glued to a unit or a name or not: "1.5GB/s" and "7B" are both
# read, and only a reviewed class may say the second is a name
NUMBER = re.compile(r"\d(?:[\d,]*\d)?(?:\.\d+)?")
# a quote of another source covers an entry's number only where it is a sentence the entry repeats,
# not a short fragment that happens to recur ("4 bits")
OTHER_SOURCE_MIN = 24


class NotClaimClass(Strict):
    """A shape of number that names something (a date, an id, a format) rather than measuring it."""

    name: Id
    pattern: str = Field(min_length=1)  # every number inside a match is not a claim
    why: str = Field(min_length=1)
    marks: list[str] = Field(min_length=1)  # register text it must take whole
    # real figures it must leave alone, in [brackets] where the example holds a name too ("Q4_0 [23.73]")
    spares: list[str] = Field(min_length=1)

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, v: str) -> str:
        try:
            re.compile(v)
        except re.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from None
        return v


class NotClaimFragment(Strict):
    """Words of one entry whose numbers are not claims, with why (no shape tells them apart)."""

    entry: str = Field(min_length=1)
    quote: str = Field(min_length=1)
    why: str = Field(min_length=1)


class NotClaims(Strict):
    rule: list[NotClaimClass] = Field(default_factory=list)
    fragment: list[NotClaimFragment] = Field(default_factory=list)


class StillUncovered(Strict):
    entry: str = Field(min_length=1)
    field: str = Field(min_length=1)
    figures: list[str] = Field(min_length=1)  # as printed, in the order the field prints them


class Allowlist(Strict):
    count: int = Field(ge=0)  # the number of figures listed: the list may only shrink
    uncovered: list[StillUncovered] = Field(default_factory=list)


@dataclass(frozen=True)
class Number:
    entry: str
    field: str
    printed: str
    context: str
    status: str  # "covered", "class:<name>", "fragment", or "uncovered"


def _read(path: FilePath, model: type[Strict]) -> Strict:
    try:
        return model.model_validate(read_toml(path))
    except ValidationError as exc:
        raise validation_error(str(path), exc) from None


def load_not_claims(path: FilePath) -> NotClaims:
    return _read(path, NotClaims)  # type: ignore[return-value]


def load_allowlist(path: FilePath) -> Allowlist:
    return _read(path, Allowlist)  # type: ignore[return-value]


def entries(register: dict) -> list[dict]:
    return [e for kind in WALKED for e in register.get(kind, []) if isinstance(e, dict) and "id" in e]


def _fields(entry: dict) -> list[tuple[str, str]]:
    return [(f, words(v)) for f, v in entry.items() if f not in LABELS and isinstance(v, str)]


def _mark_quote(mask: bytearray, text: str, piece: str, figures: set[float]) -> None:
    i = text.find(piece)
    while i >= 0:
        for m in NUMBER.finditer(piece):
            if same_number(float(m.group().replace(",", "")), figures):
                mask[i + m.start():i + m.end()] = b"\1" * (m.end() - m.start())
        i = text.find(piece, i + 1)


def walk(register: dict, lines: Iterable[Claim], citing: dict[str, list[Anchor]],
         not_claims: NotClaims) -> list[Number]:
    """Every number of every walked entry's text fields, and what accounts for it."""
    lines = list(lines)
    classes = [(r.name, re.compile(r.pattern)) for r in not_claims.rule]
    out: list[Number] = []
    for e in entries(register):
        own = [c for c in lines if c.register_id == e["id"]]
        others = [c for c in lines if c.register_id != e["id"]]
        for field, text in _fields(e):
            covered = bytearray(len(text))
            for c in own:
                for p in pieces(c.quote):
                    _mark_quote(covered, text, p, encoded_figures(c, citing.get(c.id, [])))
            for c in others:
                ps = pieces(c.quote)
                if all(len(p) >= OTHER_SOURCE_MIN and p in text for p in ps):
                    for p in ps:
                        _mark_quote(covered, text, p, encoded_figures(c, citing.get(c.id, [])))
            named: list[Optional[str]] = [None] * len(text)
            for f in not_claims.fragment:
                if f.entry == e["id"]:
                    i = text.find(words(f.quote))
                    while i >= 0:
                        named[i:i + len(words(f.quote))] = ["fragment"] * len(words(f.quote))
                        i = text.find(words(f.quote), i + 1)
            for name, rx in classes:
                for m in rx.finditer(text):
                    for k in range(m.start(), m.end()):
                        named[k] = named[k] or f"class:{name}"
            for m in NUMBER.finditer(text):
                printed = m.group().replace(",", "")
                if covered[m.start()]:
                    status = "covered"
                elif all(named[k] for k in range(m.start(), m.end())):
                    status = named[m.start()]
                else:
                    status = "uncovered"
                ctx = text[max(0, m.start() - 50):m.end() + 30]
                out.append(Number(e["id"], field, printed, ctx, status))
    return out


def fragments_found(register: dict, not_claims: NotClaims) -> list[str]:
    """Each listed fragment that is not in its entry's text: a stale list is an error, not a no-op."""
    texts = {e["id"]: " ".join(t for _, t in _fields(e)) for e in entries(register)}
    return [f"fragment {f.quote[:60]!r}: not in entry {f.entry}" for f in not_claims.fragment
            if words(f.quote) not in texts.get(f.entry, "")]


def uncovered_by_place(numbers: Iterable[Number]) -> dict[tuple[str, str], list[str]]:
    out: dict[tuple[str, str], list[str]] = {}
    for n in numbers:
        if n.status == "uncovered":
            out.setdefault((n.entry, n.field), []).append(n.printed)
    return out


def ratchet(numbers: list[Number], allow: Allowlist, file: str) -> list[str]:
    """What the still-uncovered list gets wrong: a figure uncovered and not listed (the list grew),
    a listed figure now covered (take it off), or a count that is not the list's length."""
    now = {k: Counter(v) for k, v in uncovered_by_place(numbers).items()}
    listed: dict[tuple[str, str], Counter] = {}
    for u in allow.uncovered:
        listed.setdefault((u.entry, u.field), Counter()).update(u.figures)
    problems = []
    for place in sorted(set(now) | set(listed)):
        grew = now.get(place, Counter()) - listed.get(place, Counter())
        shrank = listed.get(place, Counter()) - now.get(place, Counter())
        for fig in sorted(grew.elements()):
            ctx = next(n.context for n in numbers if (n.entry, n.field) == place and n.printed == fig
                       and n.status == "uncovered")
            problems.append(f"{place[0]}.{place[1]}: {fig!r} has no inventory line and is not listed (…{ctx}…)")
        for fig in sorted(shrank.elements()):
            problems.append(f"{place[0]}.{place[1]}: {fig!r} is listed in {file} but is covered now (or gone): "
                            "take it off the list")
    total = sum(len(u.figures) for u in allow.uncovered)
    if allow.count != total:
        problems.append(f"{file}: count = {allow.count}, but the list holds {total} figures")
    return problems


def allowlist_toml(numbers: Iterable[Number]) -> str:
    """The still-uncovered list as TOML, for a reviewer to write after covering figures (it may only shrink)."""
    places = uncovered_by_place(numbers)
    out = [f"count = {sum(len(v) for v in places.values())}", ""]
    for (entry, field), figs in places.items():
        out += ["[[uncovered]]", f'entry = "{entry}"', f'field = "{field}"',
                "figures = [" + ", ".join(f'"{f}"' for f in figs) + "]", ""]
    return "\n".join(out)


def _spared(example: str) -> tuple[str, list[tuple[int, int]]]:
    """An example of spares with its real figure(s) in [brackets] ("Q4_0 [23.73]"; none: every number
    of it), as the text without brackets and the spans of those figures."""
    text, spans, at = "", [], 0
    for m in re.finditer(r"\[([^\]]*)\]", example):
        text += example[at:m.start()]
        spans.append((len(text), len(text) + len(m.group(1))))
        text, at = text + m.group(1), m.end()
    text += example[at:]
    return text, spans or [m.span() for m in NUMBER.finditer(text)]


def check_not_claims(not_claims: NotClaims, file: str) -> list[DataError]:
    """Each class takes every example it names whole and leaves every real figure it names alone."""
    problems = []
    for i, r in enumerate(not_claims.rule):
        rx = re.compile(r.pattern)
        for ex in r.marks:
            spans = [m.span() for m in rx.finditer(ex)]
            if not all(any(a <= m.start() and m.end() <= b for a, b in spans) for m in NUMBER.finditer(ex)):
                problems.append(DataError(file, f"class {r.name}: does not take every number of {ex!r}",
                                          field=f"rule.{i}.marks"))
        for ex in r.spares:
            text, figures = _spared(ex)
            spans = [m.span() for m in rx.finditer(text)]
            if any(a < e and s < b for a, b in spans for s, e in figures):
                problems.append(DataError(file, f"class {r.name}: swallows the real figure in {ex!r}",
                                          field=f"rule.{i}.spares"))
    return problems
