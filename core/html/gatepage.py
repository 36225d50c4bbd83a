"""The morning view in HTML: each runner's newest night as the gate judged it (core/history/gate.py),
first on the history page and on a run's page. A view of the records' `gate` and `not_reached`."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lawbench.core.html.figures import plots_available
from lawbench.core.html.page import Markup, esc, image, join, table, tag
from lawbench.core.html.rate_plots import band_figures, caption, ordered
from lawbench.core.models.gate import GONE_NEWS, RateCheck
from lawbench.core.record.gate_view import RATE_NEWS, gate_headline, gone_groups

if TYPE_CHECKING:
    from lawbench.core.history.store import History
    from lawbench.core.models.run_record import RunRecord


def gate_section(record: RunRecord) -> Markup:
    """One runner's night: the gate's verdict and against what, what turned and why (reds first,
    then acknowledged reds with their dates, then notes), and what waits for the weekly run."""
    g = record.gate
    parts: list[Any] = []
    if g is not None:
        colour = "#b00020" if g.verdict == "red" else "#1b7f3b"
        parts.append(tag("p", tag("strong", esc(gate_headline(record))), style=f"color:{colour}"))
        if g.new_baseline:
            head = "First night" if g.baseline_state == "first-night" else "New baseline"
            parts.append(tag("p", f"{head}: {g.new_baseline}"))
        shown = sorted((n for n in g.news if n.kind not in GONE_NEWS),
                       key=lambda n: (not n.red, n.acknowledged_until is None, n.kind not in RATE_NEWS, n.anchor_id))
        if shown:
            parts.append(table(["gate", "anchor", "news", "before", "tonight", "why"], [
                ["red" if n.red else (f"acknowledged until {n.acknowledged_until} ({n.acknowledged_by})"
                                      if n.acknowledged_until else "note"),
                 n.anchor_id, n.kind, n.before or "-", n.after or "-", n.why] for n in shown]))
        if g.rates_unanalysed:
            parts.append(tag("p", "rate series the one-night test cannot analyse yet: "
                                  + "; ".join(g.rates_unanalysed)))
        if g.rate_checks:
            parts.append(_rate_bands(g.rate_checks))
        for e in g.expired:
            parts.append(tag("p", f"acknowledgement expired: {e}"))
        for kind, why, ids in gone_groups(g):  # issue 30 item 7: each anchor gone since the accepted night
            parts.append(tag("p", f"in the last accepted night of this cadence, not run tonight: {kind} ({why}): "
                                  f"{', '.join(ids)}"))
        if g.weekly:
            parts.append(tag("p", f"queued for the weekly run: {len(g.weekly)} anchor(s): {', '.join(g.weekly)}"))
    if record.not_reached:
        parts.append(tag("p", f"not reached before the deadline: {', '.join(record.not_reached)}"))
    return join(parts)


def _rate_bands(checks: list[RateCheck]) -> Markup:
    """Each judged rate series against its accepted band (issue 31), slower / faster first; without
    matplotlib the page says so and the news table above still carries every number."""
    news = [f"{c.kind} {c.series}" for c in ordered(checks) if c.kind]
    alt = (f"{len(checks)} rate series against their accepted bands"
           + (": " + "; ".join(news) if news else ", none outside it"))
    if not plots_available():
        return tag("p", f"{alt} (not drawn: this lawbench has no matplotlib; install lawbench[plots])")
    return join([*[image(uri, alt) for uri in band_figures(checks)], tag("p", caption(checks), class_="note")])


def morning_section(history: History) -> Markup:
    """Per profile, its newest run's gate: the first thing the history page shows."""
    newest: dict[str, Any] = {}
    for run in history.runs(limit=None):  # newest first
        newest.setdefault(run.profile, run.run_id)
    records = [history.record(rid) for _, rid in sorted(newest.items())]
    gated = [r for r in records if r.gate is not None or r.not_reached]
    if not gated:
        return join([])
    return join([tag("h2", "This morning, per runner"),
                 *[join([tag("h3", f"{r.profile}: run {r.run_id[:12]} ({r.started})"), gate_section(r)])
                   for r in gated]])
