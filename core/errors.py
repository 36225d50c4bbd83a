"""Errors for people: each says what was wrong, where (file, anchor id, field) and what to do."""
from __future__ import annotations

from typing import Optional

from lawbench.core.law import LawbenchError


class DataError(LawbenchError):
    """A data file (anchor, profile, manifest, model catalogue) is malformed. Exit code 2."""

    def __init__(self, file: str, message: str, anchor: Optional[str] = None,
                 field: Optional[str] = None):
        self.file, self.anchor, self.field, self.message = file, anchor, field, message
        where = [file]
        if anchor:
            where.append(f"anchor {anchor}")
        if field:
            where.append(f"field {field}")
        super().__init__(f"{': '.join(where)}: {message}")


class UsageError(LawbenchError):
    """The command line asked for something that does not exist (unknown profile, law). Exit 2."""
