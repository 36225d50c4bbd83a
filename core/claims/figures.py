"""The figures a claims-inventory line accounts for (issue 34): the numbers a quote prints, which of
them a line's anchors state, and which a line repeated from another (same_as) judges through it.

A figure is compared as printed: 0.70 and 0.7 are one figure, and a figure printed with decimals is
the same figure as a stated value that rounds to it there (the seed's 9.1 is a record's 9.14).
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:
    from lawbench.core.claims.inventory import Claim
    from lawbench.core.models import Anchor


_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


def numbers(text: str) -> set[float]:
    """The numbers a text prints, as values (0.70 and 0.7 are one figure; 1,521,237,632 one number)."""
    out = set()
    for m in _NUMBER.finditer(text):
        try:
            out.add(float(m.group().replace(",", "")))
        except ValueError:
            continue
    return out


def same_number(value: float, among: Iterable[float]) -> bool:
    return any(abs(value - n) <= 1e-9 * max(1.0, abs(value)) for n in among)


def printed(text: str) -> set[str]:
    """The numbers a text prints, as printed (thousands separators dropped)."""
    return {m.group().replace(",", "") for m in _NUMBER.finditer(text)}


def as_printed(figure: str, stated: Iterable[float]) -> bool:
    """Whether one of the stated values is this printed figure: the same value, or, for a figure
    printed with decimals, a value that rounds to it there (the seed's 9.1 is the record's 9.14)."""
    value = float(figure)
    decimals = len(figure.partition(".")[2])
    tol = 1e-9 * max(1.0, abs(value))
    return any(abs(s - value) <= tol or (decimals and abs(round(s, decimals) - value) <= tol) for s in stated)


def repeated_figures(claim: Claim) -> set[str]:
    """The figure(s) a same_as line repeats, as printed: the numbers of its quote, a bare digit (a k,
    a count of arms) left out where the quote prints a larger figure beside it."""
    found = printed(claim.quote)
    big = {n for n in found if not (float(n).is_integer() and float(n) < 10)}
    return big or found


def stated_by(anchor: Anchor) -> set[float]:
    """The numbers an anchor states: in what it claims, its value and its band."""
    band = anchor.band.model_dump() if hasattr(anchor.band, "model_dump") else anchor.band
    return numbers(" ".join([anchor.claim, str(anchor.value if anchor.value is not None else ""),
                              str(band or "")]))


def judges_figure(anchor: Anchor, figures: set[str]) -> bool:
    """Whether an anchor states one of these printed figures."""
    stated = stated_by(anchor)
    return any(as_printed(f, stated) for f in figures)


def encoded_figures(claim: Claim, anchors: list[Anchor]) -> set[float]:
    """The numbers of a line's quote that the line accounts for (issue 34: a number inside the quote
    of a line encoded for another number is not covered by it). A line not encoded (explained, work
    left) or repeated (same_as) accounts for its whole quote; a quote with one number, for that one;
    else the numbers its anchors state and its reviewed also_judged list. A line's id and notes are
    never read: they may name a figure to say it is NOT judged (L-12: "Not encoded: '667 t/s at
    100%'"), so a mention is not coverage; a figure judged in another form (a reciprocal) is listed
    in also_judged."""
    quoted = printed(claim.quote)
    if claim.unencoded is not None or claim.same_as is not None or len(quoted) <= 1:
        return {float(n) for n in quoted}
    named = numbers(" ".join(claim.also_judged))
    for a in anchors:
        named |= stated_by(a)
    return {float(n) for n in quoted if as_printed(n, named)}


def same_quantity(line: Claim, twin_anchors: list[Anchor]) -> bool:
    """A same_as line is judged through its twin only where an anchor of the twin states the figure
    the line repeats (issue 34: a perplexity repeated from an entry whose anchors judge its speed is
    not encoded by them)."""
    figures = repeated_figures(line)
    return any(judges_figure(a, figures) for a in twin_anchors)
