"""One escaping and length rule for every view of a record's text: a record may come from a
stranger, and each of its strings may hold anything.

What a string may carry, and where it would act: escape sequences that retitle, clear or rewrite a
terminal; a Markdown image that loads a tracker on a job page, a link, raw HTML; a `$` that
matplotlib reads as mathematics; 100 KB that stall a plot's layout (issue 32 item 4). So every view
first cuts a string to a length (`cut`), then escapes it for where it goes:

- a terminal: `terminal` (control characters and bidi overrides written out as ``\\x1b``);
- Markdown (the step summary, `baseline show`): `markdown` for prose, `markdown_code` inside code
  spans — never an image, a link, HTML, emphasis or a broken table;
- HTML: the page escaper of lawbench.core.html.page escapes everything; `cut` first;
- a plot's label or title: `plot_label`.

A shared leaf of core: it imports nothing of lawbench, so every folder may use it.
"""
from __future__ import annotations

import re
from typing import Any, Optional

# A field (an engine build, a fingerprint, a news's before/after) is a few dozen characters; a
# reason a few hundred. Beyond these a string is cut, saying how much was left out.
FIELD = 200
PROSE = 4000  # a reason, a why, a one-line message (a log tail is kept to 4000 characters too)
LABEL = 120  # a line of a plot's label or title
LABEL_LINES = 3

# Control characters (C0 but tab and newline, DEL, C1) and the bidirectional overrides that reorder
# what a terminal shows: a record from elsewhere may hold any of them in any string.
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# What in Markdown could act: a link or an image (`](` / `][` close its text), a code span, a table
# cell, emphasis, an autolink (`://`, `www.`, `@`); CommonMark lets any ASCII punctuation be escaped,
# so these are, and a bracket that opens nothing ("48.03 [47.5, 48.6]") stays as written. A
# stranger's text never starts a line here (a newline becomes <br>), so `#`, `-`, `>` at a line's
# start need no care; `<`, `>` and `&` become entities (no HTML).
_MARKDOWN = re.compile(r"[\\`*|@]|\](?=[(\[])|:(?=//)|(?<=[wW]{3})\.")
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def cut(value: Any, limit: Optional[int] = FIELD) -> str:
    """``value`` as text, at most ``limit`` characters and a note of how many were left out."""
    s = str(value)
    if limit is None or len(s) <= limit:
        return s
    return f"{s[:limit]}… ({len(s) - limit} more characters)"


def terminal(value: Any, limit: Optional[int] = PROSE) -> str:
    """A record's text as a terminal shows it literally: cut, escape sequences written out (``\\x1b``)."""
    return _UNPRINTABLE.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                            else f"\\u{ord(m.group()):04x}", cut(value, limit))


def markdown(value: Any, limit: Optional[int] = PROSE) -> str:
    """Prose for Markdown (a table cell or a line): shown as written, never read as Markdown or HTML.
    A newline becomes ``<br>`` (the one tag this writes), so a table row stays one row."""
    s = _MARKDOWN.sub(lambda m: "\\" + m.group(), terminal(value, limit))
    s = "".join(_HTML.get(c, c) for c in s)
    return s.replace("\r", "").replace("\n", "<br>")


def markdown_code(value: Any, limit: Optional[int] = FIELD) -> str:
    """A code span holding ``value`` literally (an id, an engine build, a file): nothing inside a
    code span is Markdown, so only its fence and a table's pipe need care."""
    s = terminal(value, limit).replace("\r", "").replace("\n", " ").replace("|", "\\|")
    fence = "`" * (max((len(run) for run in re.findall("`+", s)), default=0) + 1)
    pad = " " if s.startswith("`") or s.endswith("`") or not s.strip() else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def plot_label(value: Any, limit: Optional[int] = LABEL) -> str:
    """A label or title for matplotlib: at most LABEL_LINES lines, each cut, control characters
    written out, and ``$`` never opening mathematics (mathtext would parse what a stranger wrote)."""
    return "\n".join(terminal(line, limit).replace("$", r"\$") for line in str(value).split("\n")[:LABEL_LINES])
