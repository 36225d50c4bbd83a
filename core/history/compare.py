"""Compare two runs from the history: a join of their results, never a re-run.

In the spirit of llama.cpp's compare-llama-bench.py: run A is the baseline, run B the candidate,
and `ratio` is measured B / measured A (above 1: B measured more). Rows join on the anchor id, and
a row is comparable only when both runs judged it on the same profile and — for anything measured
— with the same engine build (core.history.store.engine_key); `comparability` says why not, and what
else differs (lawbench version, machine) as notes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from lawbench.core.console import console as _console, text
from lawbench.core.history.store import History, ResultRow
from lawbench.core.models import Verdict
from lawbench.core.record.reports import VERDICT_STYLE, fmt_num


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
    kind: Optional[str] = None
    comparable: bool = True  # same profile, and same engine build unless it is a prediction

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


@dataclass(frozen=True)
class Comparability:
    comparable: bool  # every row comparable: same profile and same engine build
    reasons: list[str] = field(default_factory=list)  # why not
    notes: list[str] = field(default_factory=list)  # differences that do not stop the comparison


def comparability(history: History, run_a: str, run_b: str) -> Comparability:
    """Whether two runs' measurements can be set side by side, and what differs between them."""
    keys = history.run_keys()
    ka, kb = keys[run_a], keys[run_b]
    ra, rb = history.record(run_a), history.record(run_b)
    reasons, notes = [], []
    if ka.profile != kb.profile:
        reasons.append(f"different profiles: {ka.profile} (A) and {kb.profile} (B)")
    if ka.engine != kb.engine:
        reasons.append(f"different engine builds: {ka.engine} (A) and {kb.engine} (B); "
                       "predictions still compare")
    if ra.lawbench_version != rb.lawbench_version:
        notes.append(f"different lawbench versions (anchors and laws may differ): "
                     f"{ra.lawbench_version} (A) and {rb.lawbench_version} (B)")
    machine = ("hostname", "cpu_model", "ram_total_gb", "gpus")
    if [ra.machine.get(k) for k in machine] != [rb.machine.get(k) for k in machine]:
        notes.append("different machines under the same profile: "
                     f"{ra.machine.get('hostname', '?')} (A) and {rb.machine.get('hostname', '?')} (B)")
    for name, k in (("A", ka), ("B", kb)):
        if not k.profile_matches:
            notes.append(f"run {name}'s machine did not match profile {k.profile}: its "
                         "measurements are not evidence for that profile")
    return Comparability(not reasons, reasons, notes)


def compare_runs(history: History, run_a: str, run_b: str) -> list[ComparisonRow]:
    """Join two runs' results by anchor id (an anchor in only one run still gets a row); a row is
    comparable when both runs ran on one profile and, unless it is a prediction, one engine build."""
    keys = history.run_keys()
    same_profile = keys[run_a].profile == keys[run_b].profile
    same_engine = keys[run_a].engine == keys[run_b].engine
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
                                  ratio=ratio, kind=either.kind,
                                  comparable=same_profile and (same_engine
                                                               or either.kind == "prediction")))
    return rows


def print_comparison(rows: list[ComparisonRow], run_a: str = "A", run_b: str = "B",
                     console: Any = None, verdict_of: Optional[Comparability] = None) -> None:
    """A rich table of a comparison; verdicts coloured, verdict changes in bold.

    The value columns show what was measured, or (marked "p") what was predicted when an anchor
    measures nothing; a B/A of rows that are not comparable is marked "≠". Below 120 columns the
    quantity column gives way. With `verdict_of`, its reasons and notes follow the table.
    """
    from rich.table import Table
    from rich.text import Text

    def verdict(v: Optional[str]) -> Text:
        return Text(v or "-", style=VERDICT_STYLE.get(v or "", "dim"))

    def value(measured: Optional[float], predicted: Optional[float]) -> str:
        return fmt_num(measured) if measured is not None or predicted is None \
            else f"{fmt_num(predicted)} p"

    console = console or _console()
    wide = console.width >= 120
    # an anchor new in B and bad there is a regression of the build, but it did not turn: said apart
    turned = sum(r.worse and r.verdict_a is not None for r in rows)
    new_bad = sum(r.worse and r.verdict_a is None for r in rows)
    table = Table(title=text(f"compare {run_a[:12]} (A) -> {run_b[:12]} (B): {len(rows)} anchors, "
                             f"{turned} turned bad" + (f", {new_bad} new and bad" if new_bad else "")),
                  title_justify="left")
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
                  value(r.measured_b, r.predicted_b),
                  "-" if r.ratio is None else f"{'' if r.comparable else '≠ '}{r.ratio:.3f}",
                  Text(r.change, style="bold red" if r.worse else "bold")]
        table.add_row(*map(text, cells))  # a record's strings: never markup, never escapes
    console.print(table)
    if verdict_of is not None:
        for reason in verdict_of.reasons:
            console.print(text(f"not comparable: {reason}", style="bold yellow"))
        if verdict_of.reasons:
            console.print(Text("rows marked ≠ join runs that are not comparable: read their B/A as "
                               "a difference of set-ups, not of code", style="yellow"))
        for note in verdict_of.notes:
            console.print(text(f"note: {note}", style="dim"))
