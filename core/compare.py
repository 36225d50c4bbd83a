"""Compare two runs from the history: a join of their results by anchor id, never a re-run.

In the spirit of llama.cpp's compare-llama-bench.py: run A is the baseline, run B the candidate,
and `ratio` is measured B / measured A (above 1: B measured more).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from lawbench.core.history import History, ResultRow
from lawbench.core.models import Verdict
from lawbench.core.reports import VERDICT_STYLE, fmt_num


@dataclass(frozen=True)
class ComparisonRow:
    anchor_id: str
    quantity: Optional[str]
    unit: Optional[str]
    verdict_a: Optional[str]  # None: the anchor did not run in A
    verdict_b: Optional[str]
    measured_a: Optional[float]
    measured_b: Optional[float]
    predicted_a: Optional[float]
    predicted_b: Optional[float]
    # B / A of the measured values; for anchors that measure nothing (predictions), of the
    # predicted ones, so a commit that moves a prediction shows up too.
    ratio: Optional[float]

    @property
    def change(self) -> str:
        """"" when the verdict held; "PASS -> FAIL", "new" or "gone" otherwise."""
        if self.verdict_a is None:
            return "new"
        if self.verdict_b is None:
            return "gone"
        return "" if self.verdict_a == self.verdict_b else f"{self.verdict_a} -> {self.verdict_b}"

    @property
    def worse(self) -> bool:
        """B turned bad (FAIL/VOID/ERROR) where A was not."""
        def bad(v: Optional[str]) -> bool:
            return v is not None and Verdict(v).bad
        return bad(self.verdict_b) and not bad(self.verdict_a)


def _ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    if a is None or b is None or a == 0:
        return None
    return b / a


def compare_runs(history: History, run_a: str, run_b: str) -> list[ComparisonRow]:
    """Join two runs' results by anchor id (an anchor in only one run still gets a row)."""
    a = {r.anchor_id: r for r in history.results(run_a)}
    b = {r.anchor_id: r for r in history.results(run_b)}
    rows = []
    for anchor_id in sorted(a.keys() | b.keys()):
        ra: Optional[ResultRow] = a.get(anchor_id)
        rb: Optional[ResultRow] = b.get(anchor_id)
        either = ra or rb
        assert either is not None
        ma, mb = (ra.measured if ra else None), (rb.measured if rb else None)
        pa, pb = (ra.predicted if ra else None), (rb.predicted if rb else None)
        ratio = _ratio(ma, mb) if ma is not None or mb is not None else _ratio(pa, pb)
        rows.append(ComparisonRow(anchor_id=anchor_id, quantity=either.quantity, unit=either.unit,
                                  verdict_a=ra.verdict if ra else None,
                                  verdict_b=rb.verdict if rb else None,
                                  measured_a=ma, measured_b=mb, predicted_a=pa, predicted_b=pb,
                                  ratio=ratio))
    return rows


def print_comparison(rows: list[ComparisonRow], run_a: str = "A", run_b: str = "B",
                     console: Any = None) -> None:
    """A rich table of a comparison; verdicts coloured, verdict changes in bold.

    The value columns show what was measured, or (marked "p") what was predicted when an anchor
    measures nothing. Below 120 columns the quantity column gives way.
    """
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    def verdict(v: Optional[str]) -> Text:
        return Text(v or "-", style=VERDICT_STYLE.get(v or "", "dim"))

    def value(measured: Optional[float], predicted: Optional[float]) -> str:
        return fmt_num(measured) if measured is not None or predicted is None \
            else f"{fmt_num(predicted)} p"

    console = console or Console()
    wide = console.width >= 120
    worse = sum(r.worse for r in rows)
    table = Table(title=f"compare {run_a[:12]} (A) -> {run_b[:12]} (B): {len(rows)} anchors, "
                        f"{worse} turned bad", title_justify="left")
    table.add_column("anchor", overflow="fold")
    if wide:
        table.add_column("quantity", max_width=28)
    for name in ("A", "B", "value A", "value B", "B/A", "change"):
        table.add_column(name, no_wrap=True, justify="right" if "/" in name or "value" in name
                         else "left")
    for r in rows:
        cells: list[Any] = [r.anchor_id]
        if wide:
            cells.append(f"{r.quantity} ({r.unit})" if r.quantity and r.unit
                         else (r.quantity or "-"))
        cells += [verdict(r.verdict_a), verdict(r.verdict_b), value(r.measured_a, r.predicted_a),
                  value(r.measured_b, r.predicted_b), "-" if r.ratio is None else f"{r.ratio:.3f}",
                  Text(r.change, style="bold red" if r.worse else "bold")]
        table.add_row(*cells)
    console.print(table)
