"""What every data model shares: unknown fields are errors, ids are stable, numbers are finite."""
from __future__ import annotations

import re
from typing import Annotated, Callable, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

ID_RE = re.compile(r"[a-z0-9][a-z0-9._-]*")


def _whole_match(pattern: "re.Pattern[str]", message: str) -> Callable[[str], str]:
    """A validator that takes a string only when ``pattern`` matches all of it."""
    def check(v: str) -> str:
        # fullmatch: `$` also matches before a final newline, and "l4.x\n" would pass as a look-alike of "l4.x"
        if not pattern.fullmatch(v):
            raise ValueError(message)
        return v
    return check


_check_id = _whole_match(ID_RE, "an id must be lower-case letters, digits, '.', '_' or '-'")


# Every id a data file defines (profile, anchor, model, manifest): stable, lower-case, never reused.
Id = Annotated[str, AfterValidator(_check_id)]

# The anchor a result is about: an anchor id, or "<anchor id>~<planted fault>" for a census anchor
# run with one of its planted faults (Anchor.with_fault; `lawbench census plant`).
RESULT_ID_RE = re.compile(r"[a-z0-9][a-z0-9._-]*(~[a-z0-9][a-z0-9._-]*)?")


_check_result_id = _whole_match(RESULT_ID_RE, "an id must be lower-case letters, digits, '.', '_' or '-' "
                                              "(a planted fault's run: <anchor id>~<fault>)")


ResultId = Annotated[str, AfterValidator(_check_result_id)]

# A number a data file gives. TOML reads `nan` and `inf`: NaN slips through every comparison a
# check makes and an infinite band accepts anything, so neither is a number lawbench takes.
FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]


class Strict(BaseModel):
    # Half-open bands hold ±inf; "strings" keeps them readable in JSON instead of turning into null.
    # defer_build: a model's validator is built when it first validates, not when its module is
    # imported — every `lawbench` command imports every law's models and most use a few of them.
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings", defer_build=True)


# What kind of figure a measured anchor reads, for the noise it carries (docs/bands.md): a profile's
# `noise` table says, per kind, how far such a figure moves on that box; an anchor names its kind
# (`noise`) where its unit does not say it (lawbench.core.stats.resolution.noise_kind). "deterministic":
# counts, bytes of a file, arithmetic — nothing to resolve, so no band is refused for it.
NoiseKind = Literal["decode", "prefill", "stream", "ratio", "memory", "acceptance", "perplexity", "deterministic"]
