"""Shared plotting machinery: a matplotlib Figure in, an embeddable PNG data URI out.

Figures are built as ``matplotlib.figure.Figure`` objects on the Agg canvas — never through pyplot —
so nothing is registered globally and a figure is gone once its last reference is. Settings are
applied in an ``rc_context`` so they never leak into a caller's matplotlib.
"""
from __future__ import annotations

import base64
import contextlib
import io
import math
from typing import Any, Iterator, Optional

from lawbench.core.errors import UsageError
from lawbench.core.record.reports import VERDICT_STYLE
from lawbench.core.untrusted_text import plot_label

INSTALL_HINT = "the HTML report needs matplotlib: install it with `pip install 'lawbench[plots]'`"

# VERDICT_STYLE names terminal colours; these are the same colours, dark enough to read on white.
_COLOUR = {"green": "#1a7f37", "red": "#cf222e", "yellow": "#b7791f", "cyan": "#0e7490",
           "magenta": "#8250df"}
BAND_COLOUR = "#9ec5fe"
DPI = 96
# The images must not change between two renders of the same record (PNG metadata carries no
# time anyway; the salt fixes SVG ids should a figure ever be written as SVG).
_RC = {"svg.hashsalt": "lawbench", "font.size": 9, "axes.titlesize": 9,
       "axes.labelsize": 9, "xtick.labelsize": 8, "ytick.labelsize": 8, "legend.fontsize": 8,
       "font.family": "DejaVu Sans"}


def verdict_colour(verdict: str) -> str:
    """The verdict's colour as in the terminal table (VERDICT_STYLE), for a white background."""
    style = VERDICT_STYLE.get(verdict, "")
    return _COLOUR.get(style.split()[-1] if style else "", "#57606a")


# Text from a data file or a record, shown literally and cut (lawbench.core.untrusted_text): a `$`
# would otherwise start matplotlib's mathtext (log-axis tick labels need mathtext, so it stays on).
plain = plot_label


def plots_available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def require_matplotlib() -> None:
    """:raises UsageError: with the install hint, when matplotlib cannot be imported."""
    if not plots_available():
        raise UsageError(INSTALL_HINT)


@contextlib.contextmanager
def plotting() -> Iterator[None]:
    import matplotlib

    with matplotlib.rc_context(_RC):
        yield


def new_figure(width_in: float, height_in: float,
               margins_in: Optional[tuple[float, float, float, float]] = None,
               hspace: float = 0.2, wspace: float = 0.2) -> Any:
    """A Figure on its own Agg canvas (no pyplot, no global figure manager).

    Without ``margins_in`` matplotlib's constrained layout places the axes. With it — (left, right,
    top, bottom) in inches — they are placed by arithmetic: constrained layout measures every tick
    label and title in an extra pass before the real draw, which was half of a page's render time
    (a history page of one run: 5.0 -> 2.6 s) and every `lawbench run` writes a page.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if margins_in is None:
        fig = Figure(figsize=(width_in, height_in), dpi=DPI, layout="constrained")
    else:
        left, right, top, bottom = margins_in
        fig = Figure(figsize=(width_in, height_in), dpi=DPI)
        fig.subplots_adjust(left=left / width_in, right=1 - right / width_in, top=1 - top / height_in,
                            bottom=bottom / height_in, hspace=hspace, wspace=wspace)
    FigureCanvasAgg(fig)
    return fig


def text_width_in(fig: Any, texts: list[str], size_pt: float) -> float:
    """The width of the widest of ``texts`` at ``size_pt``, in inches, as the figure's renderer will
    draw it (measured one string at a time, without drawing the figure)."""
    from matplotlib.font_manager import FontProperties

    renderer = fig.canvas.get_renderer()
    prop = FontProperties(size=size_pt)
    widest = 0.0
    for text in texts:
        for line in text.split("\n"):
            w, _, _ = renderer.get_text_width_height_descent(line, prop, ismath=False)
            widest = max(widest, w)
    return widest / fig.dpi


def png_data_uri(fig: Any) -> str:
    """The figure as a base64 PNG data URI; the figure is cleared afterwards to free its memory."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    fig.clear()
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def finite(x: Optional[float]) -> bool:
    return x is not None and math.isfinite(x)


def rows_height(n_rows: int, per_row_in: float = 0.24, extra_in: float = 1.2) -> float:
    """Figure height that keeps one row legible however many rows there are (100 anchors: 25 in)."""
    return extra_in + per_row_in * max(n_rows, 1)
