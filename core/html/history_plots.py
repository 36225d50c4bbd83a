"""The plots of a history: each series over runs with its band, and verdict counts over time."""
from __future__ import annotations

import math
from typing import Optional

from lawbench.core.html.figures import BAND_COLOUR, new_figure, plain, png_data_uri, verdict_colour
from lawbench.core.html.run_plots import point_of
from lawbench.core.html.series import RunInfo, Series
from lawbench.core.models import Verdict

COLUMNS = 4
PER_FIGURE = 24  # small multiples per image: 6 rows of 4 stay readable on one screen
MARKER = {"PASS": "o", "FAIL": "X", "VOID": "D", "ERROR": "*", "SKIP": "s"}


def counts_over_time(runs: list[RunInfo]) -> str:
    """Stacked bars: one per run, oldest left, a segment per verdict."""
    fig = new_figure(12.0, 3.0)
    ax = fig.add_subplot()
    xs = [r.index for r in runs]
    bottom = [0] * len(runs)
    for v in Verdict:
        heights = [r.counts.get(v.value, 0) for r in runs]
        ax.bar(xs, heights, bottom=bottom, color=verdict_colour(v.value), label=v.value, width=0.8)
        bottom = [b + h for b, h in zip(bottom, heights)]
    ax.set_xticks(xs, [_run_label(r) for r in runs], rotation=90 if len(runs) > 12 else 0)
    ax.set_ylabel("results")
    ax.set_xlabel("run (oldest left)")
    ax.legend(ncols=5, loc="upper left", bbox_to_anchor=(0, 1.18), frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    return png_data_uri(fig)


def _run_label(r: RunInfo) -> str:
    return f"#{r.index} {r.started[5:16].replace('T', ' ')}"


def series_figures(title: str, series: list[Series], n_runs: int,
                   drift_at: dict[tuple[str, str, str], int], labelled: bool) -> list[str]:
    """Small multiples, PER_FIGURE to an image; ``drift_at`` maps a series key to the run index
    where drift starts (drawn as a red dashed line); ``labelled`` adds profile and engine."""
    images = []
    for start in range(0, len(series), PER_FIGURE):
        chunk = series[start:start + PER_FIGURE]
        rows = math.ceil(len(chunk) / COLUMNS)
        # Fixed margins (figures.new_figure): room for the y ticks and unit at the left, a
        # two-line panel title and the run ticks between rows, the suptitle above.
        fig = new_figure(12.0, 0.5 + 2.3 * rows, margins_in=(0.75, 0.2, 0.85, 0.3), hspace=0.5, wspace=0.4)
        fig.suptitle(plain(f"{title} ({start + 1}–{start + len(chunk)} of {len(series)})"))
        for i, s in enumerate(chunk):
            ax = fig.add_subplot(rows, COLUMNS, i + 1)
            _draw_series(ax, s, n_runs, drift_at.get(s.key), labelled)
        images.append(png_data_uri(fig))
    return images


def _draw_series(ax, s: Series, n_runs: int, drift_index: Optional[int], labelled: bool) -> None:
    values: list[float] = []
    for info, r in s.points:
        if r.band is not None:
            lo, hi = r.band
            values += [v for v in (lo, hi) if math.isfinite(v)]
        point = point_of(r)
        if point is not None:
            values.append(point)
        if r.interval is not None and r.measured is not None:
            values += list(r.interval)
    if not values:
        values = [0.0, 1.0]
    lo_y, hi_y = min(values), max(values)
    pad = (hi_y - lo_y) * 0.12 or abs(hi_y) * 0.05 or 1.0
    lo_y, hi_y = lo_y - pad, hi_y + pad
    for info, r in s.points:
        x = info.index
        colour = verdict_colour(r.verdict.value)
        if r.band is not None:
            b0, b1 = max(r.band[0], lo_y), min(r.band[1], hi_y)
            ax.fill_between([x - 0.45, x + 0.45], [b0, b0], [b1, b1], color=BAND_COLOUR, lw=0, zorder=1)
        point = point_of(r)
        if point is None:  # ERROR / SKIP without a number: marked on the floor of the plot
            ax.plot([x], [lo_y + pad * 0.3], marker=MARKER.get(r.verdict.value, "o"), color=colour,
                    ls="none", ms=6, zorder=3)
            continue
        if r.interval is not None and r.measured is not None:
            ax.plot([x, x], list(r.interval), color=colour, lw=1.6, zorder=2)
        ax.plot([x], [point], marker=MARKER.get(r.verdict.value, "o"), color=colour, ls="none", ms=6,
                zorder=3, markeredgecolor="white", markeredgewidth=0.4)
    title = s.anchor_id.removeprefix(s.law + ".")
    if labelled:
        title += f"\n{s.profile} · {s.engine}"
    if drift_index is not None:
        ax.axvline(drift_index - 0.5, color=verdict_colour("FAIL"), ls="--", lw=1.2, zorder=4)
        title = "DRIFT: " + title
    unit = s.points[-1][1].unit
    ax.set_title(plain(title), fontsize=7.5, color=verdict_colour("FAIL") if drift_index is not None else "#1f2328")
    ax.set_ylim(lo_y, hi_y)
    ax.set_xlim(-0.6, n_runs - 0.4)
    ax.set_xticks(range(n_runs) if n_runs <= 12 else range(0, n_runs, max(1, n_runs // 6)))
    ax.tick_params(labelsize=7)
    ax.ticklabel_format(axis="y", useOffset=False)  # an offset ("+8.985e4") hides the real values
    if unit:
        ax.set_ylabel(plain(unit), fontsize=7)
    ax.grid(color="#eaeef2", zorder=0)
