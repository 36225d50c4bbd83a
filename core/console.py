"""The rich console every table is printed on.

A terminal keeps its own width. Anything else (a CI log, `nox` piping pytest, a file) gets 160
columns, not rich's 80: at 80 the verdict table cut the band column to "[0.75, 1." and split the
headline. ``COLUMNS`` still wins when set.
"""
from __future__ import annotations

import os
import re
import sys
from typing import Any, Optional

LOG_WIDTH = 160


def console(file: Optional[Any] = None) -> Any:
    from rich.console import Console

    stream = file or sys.stdout
    tty = hasattr(stream, "isatty") and stream.isatty()
    return Console(file=file, width=None if tty or os.environ.get("COLUMNS") else LOG_WIDTH)


# Control characters (C0 but tab and newline, DEL, C1) and the bidirectional overrides that reorder
# what a terminal shows: a record from elsewhere may hold any of them in any string.
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(value: Any) -> str:
    """A record's text as a terminal shows it literally: escape sequences written out (``\\x1b``)."""
    return _UNPRINTABLE.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                            else f"\\u{ord(m.group()):04x}", str(value))


def text(value: Any, style: str = "") -> Any:
    """A rich Text of a record's string: never read as markup ("[bold]"), escape sequences
    written out. Every table cell or line that shows what a record says goes through here."""
    from rich.text import Text

    if isinstance(value, Text):
        return value if not _UNPRINTABLE.search(value.plain) else Text(printable(value.plain), style=value.style)
    return Text(printable(value), style=style)
