"""The plots of one run: verdict counts, a forest plot per law, predicted vs measured.

Anchors of one law carry different units (tok/s, KB/pos, a ratio), so the forest plot places each
row relative to its own band — lower edge at −1, upper edge at +1 — and prints the real numbers
beside it; the scatter is log-log, where y = x is the same line for every unit.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from lawbench.core.html.figures import (BAND_COLOUR, finite, new_figure, plain, png_data_uri, rows_height,
                                        text_width_in, verdict_colour)
from lawbench.core.models import Result, Verdict
from lawbench.core.record.reports import fmt_band, fmt_num, fmt_pair

NAMED = 10  # the scatter names its FAIL / VOID / ERROR points when there are at most this many
LIMIT = 4.0  # the forest axis shows ±4 band half-widths; a row further out is drawn at the edge


def counts_figure(counts: dict[str, int]) -> str:
    labels = [v.value for v in Verdict]
    values = [counts.get(v, 0) for v in labels]
    fig = new_figure(6.5, 1.9)
    ax = fig.add_subplot()
    bars = ax.barh(labels[::-1], values[::-1], color=[verdict_colour(v) for v in labels[::-1]])
    ax.bar_label(bars, padding=3)
    ax.set_xlim(0, max(values + [1]) * 1.15)
    ax.set_xlabel("results")
    ax.spines[["top", "right"]].set_visible(False)
    return png_data_uri(fig)


# --------------------------------------------------------------------------- forest plot


def point_of(r: Result) -> Optional[float]:
    """The number the verdict is about: the measured statistic, or a prediction's own value."""
    return r.measured if r.measured is not None else r.predicted


def band_position(x: float, band: tuple[float, float]) -> float:
    """Where ``x`` sits against the band: −1 at the lower edge, +1 at the upper edge.

    A half-open band is given a nominal width of its finite edge's magnitude, so a point one
    edge-magnitude inside it sits at +1 (or −1) and the scale stays comparable across rows.
    """
    lo, hi = band
    if math.isfinite(lo) and math.isfinite(hi):
        mid, half = (lo + hi) / 2, (hi - lo) / 2
        half = half or max(abs(mid) * 1e-9, 1e-300)
        return (x - mid) / half
    if math.isfinite(lo):
        return -1 + 2 * (x - lo) / (abs(lo) or 1.0)
    return 1 - 2 * (hi - x) / (abs(hi) or 1.0)


def forest_rows(results: list[Result]) -> list[Result]:
    """Results that have a band (not "any") and a number to place against it."""
    return [r for r in results if r.band is not None and point_of(r) is not None
            and (finite(r.band[0]) or finite(r.band[1]))]


def value_label(r: Result) -> str:
    point = point_of(r)
    text = fmt_num(point)
    if r.measured is not None and r.interval is not None:
        text += " " + fmt_pair(*r.interval)
    unit = f" {r.unit}" if r.unit else ""
    return f"{text}{unit}  band {fmt_band(r)}"


def _clip(t: float) -> float:
    return max(-LIMIT, min(LIMIT, t))


def forest_figure(law: str, rows: list[Result]) -> str:
    """One row per anchor: the band as a blue span, the interval as a bar, the point as a dot."""
    from matplotlib.collections import LineCollection

    left_labels = [plain(_short(r.anchor_id, law)) for r in rows]
    right_labels = [plain(value_label(r)) for r in rows]
    probe = new_figure(1.0, 1.0, margins_in=(0, 0, 0, 0))  # measures the labels, draws nothing
    sides = (text_width_in(probe, left_labels, 8) + 0.15, text_width_in(probe, right_labels, 8) + 0.15)
    fig = new_figure(max(12.0, sum(sides) + 6.0), rows_height(len(rows)),
                     margins_in=(sides[0], sides[1], 0.35, 0.75))
    ax = fig.add_subplot()
    n = len(rows)
    # One call per kind of mark (not one per row): a figure of 100 rows draws as fast as one of 10.
    lefts, widths, segments, seg_colours = [], [], [], []
    points: dict[str, tuple[list[float], list[float], list[str]]] = {}
    for i, r in enumerate(rows):
        y = n - 1 - i  # first anchor at the top, as in the table
        lo, hi = r.band
        left = -1.0 if math.isfinite(lo) else -LIMIT
        lefts.append(left)
        widths.append((1.0 if math.isfinite(hi) else LIMIT) - left)
        colour = verdict_colour(r.verdict.value)
        if r.interval is not None and r.measured is not None:
            a, b = sorted(band_position(v, r.band) for v in r.interval)
            segments.append([(_clip(a), y), (_clip(b), y)])
            seg_colours.append(colour)
        t = band_position(point_of(r), r.band)
        xs, ys, cs = points.setdefault("o" if abs(t) <= LIMIT else (">" if t > 0 else "<"), ([], [], []))
        xs.append(_clip(t))
        ys.append(y)
        cs.append(colour)
    ax.barh(range(n - 1, -1, -1), widths, left=lefts, height=0.7, color=BAND_COLOUR, zorder=1)
    ax.add_collection(LineCollection(segments, colors=seg_colours, linewidths=2.2, capstyle="butt",
                                     zorder=2))
    for marker, (xs, ys, cs) in points.items():
        ax.scatter(xs, ys, c=cs, marker=marker, s=36, zorder=3)
    ax.set_ylim(-0.7, n - 0.3)
    ax.set_xlim(-LIMIT - 0.2, LIMIT + 0.2)
    ax.axvline(-1, color="#57606a", lw=0.6, ls=":")
    ax.axvline(1, color="#57606a", lw=0.6, ls=":")
    ax.set_xticks([-4, -3, -2, -1, 0, 1, 2, 3, 4],
                  ["-4", "-3", "-2", "lower\nedge", "0", "upper\nedge", "2", "3", "4"])
    ax.set_xlabel("position against the anchor's own band (band half-widths from its centre; "
                  "< / > : further out than shown)")
    ticks = list(range(n - 1, -1, -1))
    ax.set_yticks(ticks, left_labels)
    right_axis = ax.twinx()
    right_axis.set_ylim(ax.get_ylim())
    right_axis.set_yticks(ticks, right_labels)
    ax.set_title(plain(f"{law}: measured interval (or prediction) against the band, {n} anchors"))
    ax.grid(axis="x", color="#eaeef2", zorder=0)
    return png_data_uri(fig)


def _short(anchor_id: str, law: str) -> str:
    return anchor_id[len(law) + 1:] if anchor_id.startswith(law + ".") else anchor_id


# --------------------------------------------------------------------------- predicted vs measured


@dataclass(frozen=True)
class Pair:
    """One anchor as a point on the predicted-vs-measured plot, in one unit."""

    result: Result
    x: float  # what the law (or the register) said
    y: float  # what was measured (for a prediction anchor: what the law says now)
    interval: Optional[tuple[float, float]]
    band: tuple[float, float]
    marker: str


def pair_of(r: Result) -> Optional[Pair]:
    """A prediction anchor: published (x) vs the law's value (y), band around published.

    An agreement anchor's statistic is measured/predicted (docs/run-record.md), so with the
    prediction in ``agreement_predicted`` the measurement is statistic × prediction, in that unit.
    """
    band = r.band or (-math.inf, math.inf)
    predicted = r.agreement_predicted
    if r.kind == "agreement" and isinstance(predicted, (int, float)) and r.measured is not None:
        p = float(predicted)
        interval = None if r.interval is None else (r.interval[0] * p, r.interval[1] * p)
        return Pair(r, p, r.measured * p, interval, (band[0] * p, band[1] * p), "s")
    if r.kind == "prediction" and r.published is not None and r.predicted is not None:
        return Pair(r, r.published, r.predicted, None, band, "o")
    reference = r.published if r.published is not None else r.predicted
    if r.measured is not None and reference is not None:
        return Pair(r, reference, r.measured, r.interval, band, "^")
    return None


def scatter_figure(title: str, pairs: list[Pair]) -> tuple[str, int]:
    """Log-log scatter with y = x; returns the image and how many pairs could not be drawn
    (a value ≤ 0 has no place on a log axis). Bad points are named when there are few."""
    from matplotlib.collections import LineCollection

    shown = [p for p in pairs if p.x > 0 and p.y > 0]
    values = [v for p in shown for v in (p.x, p.y, *(p.interval or ()))
              if v > 0 and math.isfinite(v)]
    lo, hi = min(values) / 2, max(values) * 2
    named = sum(p.result.verdict.bad for p in shown) <= NAMED  # more labels would overlap
    fig = new_figure(6.2, 5.6, margins_in=(0.8, 0.15, 0.35, 0.55))
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.plot([lo, hi], [lo, hi], color="#57606a", lw=0.8, ls="--", label="y = x", zorder=1)
    bands, intervals, interval_colours = [], [], []
    for p in shown:
        b0 = p.band[0] if p.band[0] > 0 and math.isfinite(p.band[0]) else lo
        b1 = p.band[1] if math.isfinite(p.band[1]) else hi
        if b1 > b0:
            bands.append([(p.x, b0), (p.x, b1)])
        colour = verdict_colour(p.result.verdict.value)
        if p.interval is not None and all(v > 0 for v in p.interval):
            intervals.append([(p.x, max(p.interval[0], lo)), (p.x, min(p.interval[1], hi))])
            interval_colours.append(colour)
        if p.result.verdict.bad and named:  # the points a maintainer looks for; PASS would clutter
            ax.annotate(plain(p.result.anchor_id.rsplit(".", 1)[-1]), (p.x, p.y), fontsize=6.5,
                        xytext=(4, -3), textcoords="offset points", color=colour)
    ax.add_collection(LineCollection(bands, colors=BAND_COLOUR, linewidths=6, alpha=0.8,
                                     capstyle="butt", zorder=1))
    ax.add_collection(LineCollection(intervals, colors=interval_colours, linewidths=1.4, zorder=2))
    for marker in sorted({p.marker for p in shown}):
        group = [p for p in shown if p.marker == marker]
        ax.scatter([p.x for p in group], [p.y for p in group], marker=marker, s=25, zorder=3,
                   c=[verdict_colour(p.result.verdict.value) for p in group], edgecolors="white",
                   linewidths=0.5)
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.plot([], [], "o", color="#57606a", label="prediction: published (x) vs the law now (y)")
    ax.plot([], [], "s", color="#57606a", label="agreement: predicted (x) vs measured (y)")
    if any(p.marker == "^" for p in shown):
        ax.plot([], [], "^", color="#57606a", label="measurement: published (x) vs measured (y)")
    ax.plot([], [], color=BAND_COLOUR, lw=6, label="band")
    ax.legend(loc="upper left")
    ax.set_xlabel("predicted / published (each anchor in its own unit)")
    ax.set_ylabel("measured / law's value")
    ax.set_title(plain(title))
    ax.grid(color="#eaeef2", which="major")
    return png_data_uri(fig), len(pairs) - len(shown)
