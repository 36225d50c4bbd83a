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
    ratio: Optional[float]  # measured_b / measured_a

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
        ma = ra.measured if ra else None
        mb = rb.measured if rb else None
        rows.append(ComparisonRow(anchor_id=anchor_id, quantity=either.quantity, unit=either.unit,
                                  verdict_a=ra.verdict if ra else None,
                                  verdict_b=rb.verdict if rb else None,
                                  measured_a=ma, measured_b=mb, ratio=_ratio(ma, mb)))
    return rows


def print_comparison(rows: list[ComparisonRow], run_a: str = "A", run_b: str = "B",
                     console: Any = None) -> None:
    """A rich table of a comparison; verdicts coloured, verdict changes in bold."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    def verdict(v: Optional[str]) -> Text:
        return Text(v or "-", style=VERDICT_STYLE.get(v or "", "dim"))

    console = console or Console()
    worse = sum(r.worse for r in rows)
    table = Table(title=f"compare {run_a[:12]} (A) -> {run_b[:12]} (B): {len(rows)} anchors, "
                        f"{worse} turned bad", title_justify="left")
    for name, justify in (("anchor", "left"), ("quantity", "left"), ("A", "left"),
                          ("B", "left"), ("measured A", "right"), ("measured B", "right"),
                          ("B/A", "right"), ("change", "left")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for r in rows:
        quantity = f"{r.quantity} ({r.unit})" if r.quantity and r.unit else (r.quantity or "-")
        table.add_row(r.anchor_id, quantity, verdict(r.verdict_a), verdict(r.verdict_b),
                      fmt_num(r.measured_a), fmt_num(r.measured_b),
                      "-" if r.ratio is None else f"{r.ratio:.3f}",
                      Text(r.change, style="bold red" if r.worse else "bold"))
    console.print(table)
