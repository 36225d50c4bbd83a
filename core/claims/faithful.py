"""A finding must be a contradiction (issue 34): an open finding freezes its anchor red, so the
anchor's own printed inputs must be unable to reach the band. Where an input's printed rounding
alone carries the prediction into the band, the disagreement is the print's precision, not the
law's: `lawbench check` refuses the finding and names the input.
"""
from __future__ import annotations

import itertools
from decimal import Decimal
from typing import Any, Iterable

from lawbench.core.errors import DataError, LawbenchError

MAX_INPUTS = 4  # every corner of the inputs' rounding box is priced: 2**4 predictions at most


def half_step(x: float) -> float:
    """Half a unit of the last printed digit: 46.7 -> 0.05. The shortest repr is what TOML held."""
    exp = Decimal(repr(float(x))).as_tuple().exponent
    return 0.5 * 10.0 ** exp if isinstance(exp, int) and exp < 0 else 0.0


def printed_inputs(case: dict[str, Any]) -> dict[str, float]:
    """The case's decimal inputs: a float carries a print's rounding; an integer is a count."""
    return {k: v for k, v in case.items() if isinstance(v, float) and not isinstance(v, bool) and half_step(v)}


def unfaithful_findings(anchors: Iterable[Any], registry: Any, profile: Any) -> list[DataError]:
    """One error per open finding that its own inputs' rounding can reach; a law that cannot price
    the anchor without resources (a manifest, an engine) is outside this arithmetic check."""
    problems = []
    for la in anchors:
        a = la.anchor
        if not a.finding or a.kind != "prediction" or a.arms or a.value is None or a.band is None:
            continue
        inputs = dict(list(printed_inputs(a.case).items())[:MAX_INPUTS])
        if not inputs:
            continue
        law = registry.law(a.law)
        got = []
        try:
            for signs in itertools.product((-1, 1), repeat=len(inputs)):
                case = {**a.case, **{k: v + s * half_step(v) for (k, v), s in zip(inputs.items(), signs)}}
                got.append(law.predict(a.model_copy(update={"case": case}), profile).value)
        except (LawbenchError, KeyError, TypeError, ValueError):
            continue
        lo, hi = a.band_interval(a.value)
        if min(got) <= hi and max(got) >= lo:
            shown = ", ".join(f"case.{k} = {v} (printed: {v - half_step(v):g}–{v + half_step(v):g})"
                              for k, v in inputs.items())
            problems.append(DataError(
                la.file, f"the finding is not a contradiction: {shown} prices {min(got):.6g}–{max(got):.6g}, "
                f"which overlaps the band {lo:.6g}–{hi:.6g}; the print's precision is the limit (docs/register.md)",
                anchor=a.id, field="finding"))
    return problems
