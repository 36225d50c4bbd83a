"""Can an anchor's instrument resolve its band? The band rule of docs/bands.md, enforced.

A measured anchor (measurement, ratio, agreement) is judged from an interval: PASS needs the whole
interval inside the band (lawbench.core.stats.verdicts). The interval cannot be narrower than what the
anchor's budget buys on its box, and a figure measured in another session than the published one
carries that box's between-session drift on top. So a band narrower than

    between + t(per-look confidence, n - 1) * within / sqrt(n)      (relative, n = max_samples)

plus the reading's own floor can only ever end VOID or FAIL on its own runner: `lawbench check`
refuses it. The noise figures are data, per profile and kind of figure (HardwareProfile.noise),
each citing the register's published noise for that box or what lawbench measured there.

Exempt: predictions, census anchors and figures whose noise kind is "deterministic" (counts, bytes
of a file, arithmetic), and one-sided bands without a value ("at least 1.0"), whose claim is a direction, not a tolerance.
"""
from __future__ import annotations

import math
from collections import Counter
from typing import Any, Iterable, Mapping, Optional

from lawbench.core.errors import DataError
from lawbench.core.models import Anchor, HardwareProfile, Noise
from lawbench.core.stats.verdicts import _t_quantile, per_look_confidence

MEASURED = ("measurement", "ratio", "agreement")
SPEED_UNITS = ("tok/s",)
MEMORY_UNITS = ("MiB", "GiB", "MB", "GB")
RATIO_UNITS = ("x", "ratio")
DETERMINISTIC_UNITS = ("B", "bytes", "bit", "count", "tensors", "launches")


def noise_kind(anchor: Anchor) -> Optional[str]:
    """The row of the profile's noise table this anchor's figure reads; None: no default (the
    anchor must name one with `noise`)."""
    if anchor.noise:
        return anchor.noise
    if anchor.unit in DETERMINISTIC_UNITS:
        return "deterministic"
    if anchor.kind == "ratio" or (anchor.kind == "agreement" and anchor.unit in RATIO_UNITS):
        return "ratio"  # interleaved arms, or measured/priced per interleaved round
    if anchor.unit in SPEED_UNITS:
        return "decode"
    if anchor.unit in MEMORY_UNITS:
        return "memory"
    return None


def band_geometry(anchor: Anchor) -> Optional[tuple[float, float]]:
    """(centre, half-width) of the band in the anchor's unit; None for a one-sided band."""
    band = anchor.band
    assert band is not None
    if band.lo is not None or band.hi is not None:
        if band.lo is None or band.hi is None:
            return None
        return (band.lo + band.hi) / 2.0, (band.hi - band.lo) / 2.0
    centre = 1.0 if anchor.kind == "agreement" else anchor.value
    assert centre is not None  # the Anchor model requires a value for a ±abs / ±rel band
    half = band.abs if band.abs is not None else abs(centre) * band.rel  # type: ignore[operator]
    return centre, half


def resolvable_half_width(anchor: Anchor, noise: Noise, centre: float) -> float:
    """The narrowest half-width this anchor's budget can resolve on a box with this noise."""
    n = max(anchor.budget.max_samples, 2)
    t = _t_quantile(0.5 + per_look_confidence(anchor.budget) / 2.0, n - 1)
    rel = noise.between + t * noise.within / math.sqrt(n)
    floor = noise.floor if noise.floor is not None and noise.floor_unit == anchor.unit else 0.0
    return rel * abs(centre) + floor


def check_resolution(loaded: Iterable[Any], profiles: Mapping[str, HardwareProfile]) -> list[DataError]:
    """Every active measured anchor whose band its instrument cannot resolve on a profile it binds
    to, as one-line errors naming file, anchor id and field."""
    out: list[DataError] = []
    for la in loaded:
        a: Anchor = la.anchor
        if not a.runs or a.kind not in MEASURED or a.band is None:
            continue
        geometry = band_geometry(a)
        if geometry is None:
            continue  # one-sided: the claim is a direction
        centre, half = geometry
        kind = noise_kind(a)
        if kind is None:
            out.append(DataError(la.file, f"unit {a.unit!r} does not say which noise this figure carries; "
                                          "name it: noise = \"decode\" | \"prefill\" | \"stream\" | \"ratio\" | \"memory\" | "
                                          "\"acceptance\" | \"perplexity\" | \"deterministic\" (docs/bands.md)",
                                 anchor=a.id, field="noise"))
            continue
        if kind == "deterministic":
            continue  # a count, a file's bytes, arithmetic: the printed digits are its precision
        for pid in (a.profiles or sorted(profiles)):
            profile = profiles.get(pid)
            if profile is None:
                continue  # an unknown profile is load_anchors' error
            noise = profile.noise.get(kind)  # type: ignore[call-overload]
            if noise is None:
                out.append(DataError(la.file, f"profile {pid!r} states no noise for a {kind} figure: add "
                                              f"[noise.{kind}] to its profile with the source that measured it, "
                                              "or name the nearest kind it does state (noise = ...) and mark the "
                                              "anchor resolution = \"print-limited\" with a reason",
                                     anchor=a.id, field="noise"))
                continue
            need = resolvable_half_width(a, noise, centre)
            if half < need * (1 - 1e-9):
                out.append(DataError(
                    la.file, f"band half-width {half:.4g} {a.unit} ({_pct(half, centre)}) is narrower than "
                             f"{need:.4g} {a.unit} ({_pct(need, centre)}), what {a.budget.max_samples} samples "
                             f"resolve of a {kind} figure on profile {pid!r} ({_describe(noise)}); widen it "
                             "to the source's own tolerance for this figure (docs/bands.md)",
                    anchor=a.id, field="band"))
            elif noise.reproduction is not None and half < noise.reproduction * abs(centre) * (1 - 1e-9):
                # Rule 2's floor: a narrower published error bar (one session's) or a print's
                # rounding interval does not say how far the next session moves the figure.
                out.append(DataError(
                    la.file, f"band half-width {half:.4g} {a.unit} ({_pct(half, centre)}) is narrower than the "
                             f"reproduction figure for a {kind} figure on profile {pid!r} "
                             f"(±{100 * noise.reproduction:g} %: {noise.reproduction_source}); the band is that "
                             "figure, band_basis = \"reproduction\", and the rationale says why (docs/bands.md)",
                    anchor=a.id, field="band"))
    return out


def _pct(x: float, centre: float) -> str:
    return f"±{100 * x / abs(centre):.2f} %" if centre else f"±{x:g}"


def _describe(noise: Noise) -> str:
    parts = [f"within {100 * noise.within:g} % a sample"]
    if noise.between:
        parts.append(f"between sessions {100 * noise.between:g} %")
    if noise.floor is not None:
        parts.append(f"floor {noise.floor:g} {noise.floor_unit}")
    return ", ".join(parts)


BASES = ("published", "reproduction", "law", "print-limited", "deterministic", "unstated")


def basis_counts(loaded: Iterable[Any]) -> dict[str, Counter]:
    """Per profile, the active measured anchors by the basis of their band (docs/bands.md)."""
    counts: dict[str, Counter] = {}
    for la in loaded:
        a: Anchor = la.anchor
        if not a.runs or a.kind not in MEASURED:
            continue
        if noise_kind(a) == "deterministic":
            basis = "deterministic"
        else:
            basis = "print-limited" if a.resolution else (a.band_basis or "unstated")
        for pid in a.profiles or ["(every profile)"]:
            counts.setdefault(pid, Counter())[basis] += 1
    return counts


def basis_summary(loaded: Iterable[Any]) -> str:
    """One line: per profile, bands from a published ±, a reproduction figure, the law, and the
    print-limited exceptions."""
    counts = basis_counts(loaded)
    parts = []
    for pid in sorted(counts):
        c = counts[pid]
        parts.append(f"{pid} " + " / ".join(f"{c[b]} {b}" for b in BASES if c[b]))
    return "bands of active measured anchors by basis (docs/bands.md): " + "; ".join(parts)
