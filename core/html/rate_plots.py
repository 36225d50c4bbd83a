"""Each rate series the gate judged tonight, drawn against its accepted band (issue 31).

One panel per series (lawbench.core.models.gate.RateCheck): the accepted nights as points over
night index, oldest left; the band tonight had to leave to be news as a shaded span, the baseline
(their geometric mean) as a dashed line; tonight at the right as a diamond coloured by its news.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from lawbench.core.history.rates import TOLERANCE
from lawbench.core.html.figures import BAND_COLOUR, new_figure, plain, plotting, png_data_uri, verdict_colour
from lawbench.core.models.gate import RateCheck

if TYPE_CHECKING:
    from matplotlib.axes import Axes

COLUMNS = 3
PER_FIGURE = 12  # panels per image: four rows of three stay readable on one screen
# tonight's marker by its news: slower is red like a FAIL, faster is said like a note, none is fine
TONIGHT_COLOUR = {"slower": verdict_colour("FAIL"), "faster": "#0550ae", None: verdict_colour("PASS")}
NIGHT_COLOUR = "#57606a"
KIND_ORDER = {"slower": 0, "faster": 1, None: 2}


def ordered(checks: Sequence[RateCheck]) -> list[RateCheck]:
    """Slower first, then faster, then the series that made no news (a record's own order aside)."""
    return sorted(checks, key=lambda c: (KIND_ORDER[c.kind], c.series))


def band_figures(checks: Sequence[RateCheck]) -> list[str]:
    """Small multiples, PER_FIGURE panels to an image, as PNG data URIs; [] for no series."""
    checks = ordered(checks)
    images = []
    with plotting():
        for start in range(0, len(checks), PER_FIGURE):
            chunk = checks[start:start + PER_FIGURE]
            columns = min(COLUMNS, len(chunk))
            rows = math.ceil(len(chunk) / columns)
            # Fixed margins (figures.new_figure): y ticks and unit at the left, a three-line panel
            # title above each row, night ticks below it.
            fig = new_figure(4.0 * columns, 0.3 + 2.6 * rows, margins_in=(0.75, 0.2, 0.6, 0.45),
                             hspace=0.75, wspace=0.35)
            for i, check in enumerate(chunk):
                _draw(fig.add_subplot(rows, columns, i + 1), check)
            images.append(png_data_uri(fig))
    return images


def _title(check: RateCheck) -> str:
    head = {"slower": "SLOWER: ", "faster": "FASTER: ", None: ""}[check.kind]
    parts = check.series.split(" | ")  # model | format | placement | quantity: two lines, not one too long
    return head + " | ".join(parts[:2]) + ("\n" + " | ".join(parts[2:]) if len(parts) > 2 else "")


def _draw(ax: Axes, check: RateCheck) -> None:
    n = len(check.nights)
    values = [v for v in (*check.nights, check.tonight, *check.band) if math.isfinite(v)] or [0.0, 1.0]
    lo_y, hi_y = min(values), max(values)
    pad = (hi_y - lo_y) * 0.12 or abs(hi_y) * 0.05 or 1.0
    colour = TONIGHT_COLOUR[check.kind]
    at = n + 1  # tonight stands apart from the nights, one step to the right
    ax.set_axisbelow(True)  # the grid under the band, not across it
    ax.axhspan(max(check.band[0], lo_y - pad), min(check.band[1], hi_y + pad), color=BAND_COLOUR, alpha=0.7, lw=0,
               zorder=1)
    ax.axhline(check.baseline, color=NIGHT_COLOUR, ls="--", lw=0.9, zorder=2)
    ax.plot(range(n), check.nights, marker="o", ls="-", lw=0.6, color=NIGHT_COLOUR, ms=4, zorder=3)
    ax.plot([at], [check.tonight], marker="D", ls="none", color=colour, ms=8, zorder=4,
            markeredgecolor="black", markeredgewidth=0.6)
    ax.set_title(plain(_title(check)), fontsize=7.5, color=colour if check.kind else "#1f2328")
    ax.set_ylim(lo_y - pad, hi_y + pad)
    ax.set_xlim(-0.6, at + 0.6)
    step = max(1, n // 6)
    ticks = [t for t in range(0, n, step) if at - t >= max(2, step)]  # no night label under tonight's
    ax.set_xticks(ticks + [at], [str(t + 1) for t in ticks] + ["tonight"])
    ax.tick_params(labelsize=7)
    ax.ticklabel_format(axis="y", useOffset=False)  # an offset ("+8.985e4") hides the real values
    ax.set_ylabel("tok/s", fontsize=7)
    ax.set_xlabel(f"accepted night (of {n}, oldest left)", fontsize=7)
    ax.grid(color="#eaeef2", zorder=0)


def caption(checks: Sequence[RateCheck]) -> str:
    """What the figure shows, in words, for the page below it."""
    level = min((c.level for c in checks), default=0.0)
    return ("Each rate series the one-night test judged tonight: the accepted nights (grey, each its fastest "
            "visit, oldest left), their geometric mean (dashed), and shaded the band tonight had to leave to be "
            f"news: 1 ∓ {TOLERANCE:.0%} around the mean, widened by the test's t-quantile times its standard "
            f"error at the first Holm step (two-sided {level:.2g}). Tonight is the diamond: red slower, blue "
            "faster, green no news. A series the test cannot analyse yet has no band and is not drawn.")
