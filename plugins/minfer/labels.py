"""Count minfer's q6_K B-path liveness labels in an engine's stderr.

Under MINFER_MMQ_RAW_NB_DEBUG=1 every q6_K launch eprintlns one line naming the path it took
(seed 002, §3.2). Four states:

  W_exp-cp.async               the fast path: B staged by cp.async from the W_exp plane
  in-kernel-expand             raw 210-B weights that never had a plane: NOT a fallback
  in-kernel-expand(exp=off)    the user's deliberate MINFER_MMQ_Q6K_EXP=0
  in-kernel-expand(fallback!)  a plane was expected but the map missed: a bug

The same line also reports KDR and A-transpose, so a label is found anywhere on its line. The
unqualified label is a prefix of the two qualified ones; the qualifier is part of the token, so each
launch lands in exactly one state.
"""
from __future__ import annotations

import re
from typing import Iterable, Union

FAST = "W_exp-cp.async"
RAW = "in-kernel-expand"
EXP_OFF = "in-kernel-expand(exp=off)"
FALLBACK = "in-kernel-expand(fallback!)"
STATES = (FAST, RAW, EXP_OFF, FALLBACK)

# A label is a whole token: not glued to a longer word on either side ("xW_exp-cp.async2" is not
# one). After "in-kernel-expand" an optional "(…)" qualifier belongs to the token; a qualifier the
# seed does not name is kept verbatim, so an unknown fifth state shows up in the census instead of
# being counted as the unqualified (legitimate) one.
_TOKEN = re.compile(
    r"(?<![\w-])"
    r"(?P<label>W_exp-cp\.async|in-kernel-expand(?:\([^()\s]*\))?)"
    r"(?![\w-])"
)


def labels_in_line(line: str) -> list[str]:
    """Every B-path label on one line, in order (normally exactly one per q6_K launch)."""
    return [m.group("label") for m in _TOKEN.finditer(line)]


def count_labels(text: Union[str, Iterable[str]]) -> dict[str, int]:
    """Count each path label in an engine's stderr.

    The four known states are always present in the result (0 when absent) so a report shows what
    was looked for; any unknown qualified label is added under its own verbatim name.
    """
    lines = text.splitlines() if isinstance(text, str) else text
    counts = {state: 0 for state in STATES}
    for line in lines:
        for label in labels_in_line(line):
            counts[label] = counts.get(label, 0) + 1
    return counts
