"""The rich console every table is printed on.

A terminal keeps its own width. Anything else (a CI log, `nox` piping pytest, a file) gets 160
columns, not rich's 80: at 80 the verdict table cut the band column to "[0.75, 1." and split the
headline. ``COLUMNS`` still wins when set.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Optional

from lawbench.core.untrusted_text import terminal

LOG_WIDTH = 160


def console(file: Optional[Any] = None) -> Any:
    from rich.console import Console

    stream = file or sys.stdout
    tty = hasattr(stream, "isatty") and stream.isatty()
    return Console(file=file, width=None if tty or os.environ.get("COLUMNS") else LOG_WIDTH)


# The one rule for a record's text in a terminal lives in lawbench.core.untrusted_text.
printable = terminal


def text(value: Any, style: str = "") -> Any:
    """A rich Text of a record's string: never read as markup ("[bold]"), cut to a length and
    escape sequences written out. Every table cell or line that shows what a record says goes
    through here."""
    from rich.text import Text

    if isinstance(value, Text):
        plain = value.plain
        return value if printable(plain) == plain else Text(printable(plain), style=value.style)
    return Text(printable(value), style=style)
