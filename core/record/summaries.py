"""What a person reads after a run: the Markdown step summary (a CI job's page) and the terminal
table. Both are views of the run record (lawbench.core.record.reports), never a second source.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

from lawbench.core.console import console as _console
from lawbench.core.errors import DataError
from lawbench.core.untrusted_text import markdown as md, markdown_code as code
from lawbench.core.record.reports import (VERDICT_STYLE, RunRecord, fmt_band, fmt_measured, fmt_num, fmt_quantity,
                                   headline, retired_note, is_retired)


# --------------------------------------------------------------------------- Markdown


def markdown_summary(record: RunRecord) -> str:
    """A GitHub-flavoured summary: headline, one table row per live anchor, then history. Every
    string of the record goes through lawbench.core.untrusted_text (it may be a stranger's)."""
    live = [r for r in record.results if not is_retired(r)]
    past = [r for r in record.results if is_retired(r)]
    from lawbench.core.record.gate_view import gate_markdown

    lines = [*filter(None, [gate_markdown(record)]), f"### {md(headline(record))}", "",
             f"run {code(record.run_id)} · lawbench {md(record.lawbench_version)}"
             f"{f' @ {code(record.git_commit[:12])}' if record.git_commit else ''}"
             f" · started {record.started}" + (" · strict" if record.strict else ""), ""]
    header = ["verdict", "anchor", "quantity", "published", "predicted", "measured [CI]", "band",
              "reason"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in live:
        row = [md(r.verdict.value), code(r.anchor_id), *map(md, (fmt_quantity(r), fmt_num(r.published),
               fmt_num(r.predicted), fmt_measured(r), fmt_band(r), r.reason or ""))]
        lines.append("| " + " | ".join(row) + " |")
    if not live:
        lines.append("| - | (no anchors ran) | | | | | | |")
    if past:
        lines += ["", "#### History (superseded / refuted anchors, not scored)", ""]
        for r in past:
            lines.append(f"- {code(r.anchor_id)} ({md(retired_note(r))}): published "
                         f"{fmt_num(r.published)} {md(r.unit)}".rstrip()
                         + (f", measured {md(fmt_measured(r))}" if r.measured is not None else ""))
    return "\n".join(lines) + "\n"


def append_step_summary(record: RunRecord) -> Optional[Path]:
    """Append the run's Markdown to `$GITHUB_STEP_SUMMARY` when set; returns the file, or None."""
    return append_step_summary_text(markdown_summary(record))


def append_step_summary_text(markdown: str) -> Optional[Path]:
    """Append Markdown to `$GITHUB_STEP_SUMMARY` when set (the job page shows it); else None."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    path = Path(target)
    try:
        with path.open("a", encoding="utf-8") as fh:
            fh.write(markdown.rstrip("\n") + "\n\n")
    except OSError as exc:
        raise DataError(str(path), f"cannot append the step summary: {exc.strerror or exc}") \
            from None
    return path


# --------------------------------------------------------------------------- terminal


def print_table(record: RunRecord, console: Any = None) -> None:
    """A rich table for the terminal, verdicts coloured; retired anchors listed after it.

    Below 120 columns the quantity and reason columns give way, and reasons follow the table.
    """
    from rich.table import Table
    from rich.text import Text

    from lawbench.core.console import text

    console = console or _console()
    wide = console.width >= 120
    live = [r for r in record.results if not is_retired(r)]
    cells = {"verdict": [Text(r.verdict.value, style=VERDICT_STYLE[r.verdict.value]) for r in live],
             "anchor": [r.anchor_id for r in live],
             "quantity": [fmt_quantity(r) for r in live],
             "published": [fmt_num(r.published) for r in live],
             "predicted": [fmt_num(r.predicted) for r in live],
             "measured [CI]": [fmt_measured(r) for r in live],
             "band": [fmt_band(r) for r in live],
             "reason": [Text(r.reason or "") for r in live]}
    if not wide:
        del cells["quantity"], cells["reason"]
    table = Table(title=text(headline(record)), title_justify="left")
    for name, column in cells.items():
        if name in ("anchor", "reason"):
            table.add_column(name, overflow="fold")
        elif name == "quantity":
            table.add_column(name, max_width=28)
        elif name == "verdict":
            table.add_column(name, no_wrap=True)
        else:
            # A number may wrap at a space ("48.03 [47.5, 48.6]") but is never cut.
            words = [w for c in column for w in str(c).split()] + name.split()
            table.add_column(name, justify="right", min_width=max(map(len, words)))
    for row in zip(*cells.values()):
        table.add_row(*map(text, row))  # a record's strings: never markup, never escapes
    console.print(table)
    if not wide:
        for r in live:
            if r.reason:
                line = Text(f"  {r.verdict.value} ", style=VERDICT_STYLE[r.verdict.value])
                console.print(line + text(f"{r.anchor_id}: {r.reason}"))
    for r in record.results:
        if is_retired(r):
            console.print(text(f"  history: {r.anchor_id} ({retired_note(r)}), published "
                               f"{fmt_num(r.published)} {r.unit}".rstrip(), style="dim"))
