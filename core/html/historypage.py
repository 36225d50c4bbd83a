"""The page of a whole history: drift first, verdict counts over time, then every series."""
from __future__ import annotations

from typing import Any, Optional

from lawbench.core.history.store import History
from lawbench.core.html.figures import plotting
from lawbench.core.html.gatepage import morning_section
from lawbench.core.html.history_plots import MARKER, counts_over_time, series_figures
from lawbench.core.html.page import (Markup, counts_line, definition_list, document, esc, image, join, table, tag,
                                     verdict_badge)
from lawbench.core.html.series import HistoryView, Series, gather
from lawbench.core.record.reports import fmt_measured, fmt_num

DRIFT_ALPHA = 0.01


def find_drifts(history: History, profile: Optional[str]) -> Optional[list[Any]]:
    """core/history/drift.py's findings, or None when this lawbench has no drift check."""
    try:
        from lawbench.core.history.drift import find_drifts as drift_check
    except ImportError:
        return None
    return drift_check(history, profile=profile, alpha=DRIFT_ALPHA)


def history_page(history: History, profile: Optional[str] = None, limit: Optional[int] = None) -> str:
    """The whole self-contained HTML page for the history (its newest ``limit`` runs)."""
    view = gather(history, profile=profile, limit=limit)
    drifts = find_drifts(history, profile)
    scope = f" on profile {profile}" if profile else ""
    with plotting():
        body = [tag("h1", f"lawbench history{scope}: {len(view.runs)} runs"),
                morning_section(history), _summary(history, view, limit), _drift_section(drifts, view)]
        if view.runs:
            body += [tag("h2", "Verdicts over time"),
                     image(counts_over_time(view.runs), "stacked bars of verdict counts per run"),
                     _runs_table(view), _series_section(view, drifts or [])]
    return document(f"lawbench history{scope}", join(body))


def _summary(history: History, view: HistoryView, limit: Optional[int]) -> Markup:
    if not view.runs:
        return tag("p", f"No runs in {history.path} yet.")
    first, last = view.runs[0], view.runs[-1]
    return join([definition_list([
        ("history file", str(history.path)),
        ("runs shown", f"{len(view.runs)}" + (f" (the newest {limit})" if limit else "")),
        ("from / to", f"{first.started} / {last.started}"),
        ("series", f"{len(view.series)} (anchor × profile × engine build)"),
        ("latest run", join([esc(f"{last.run_id[:12]}: "), counts_line(last.counts)], "")),
    ])])


def _drift_section(drifts: Optional[list[Any]], view: HistoryView) -> Markup:
    head = tag("h2", "Drift")
    if drifts is None:
        return join([head, tag("p", "drift check unavailable: this lawbench has no "
                                    "lawbench.core.history.drift module.", class_="warn")])
    if not drifts:
        return join([head, tag("p", f"No series moved (drift check at α = {DRIFT_ALPHA}).")])
    runs = {r.run_id: r for r in view.runs}
    rows = []
    for d in drifts:
        first = runs.get(d.first_run_id)
        where = f"#{first.index} " if first else ""
        rows.append([Markup(f'<span class="id">{esc(d.anchor_id)}</span>'), d.profile, d.engine,
                     f"{where}{d.first_run_id[:12]} ({d.first_started})",
                     f"{fmt_num(d.before)} → {fmt_num(d.after)}", fmt_num(d.p_value, 2),
                     str(d.runs), d.method])
    return join([head, tag("p", f"{len(drifts)} series moved (α = {DRIFT_ALPHA}); each is marked in "
                                "its plot below by a red dashed line before the first run that "
                                "moved.", class_="warn"),
                 table(["anchor", "profile", "engine build", "first run that moved", "before → after",
                        "p-value", "runs", "method"], rows)])


def _runs_table(view: HistoryView) -> Markup:
    rows = [[f"#{r.index}", Markup(f'<span class="id">{esc(r.run_id[:12])}</span>'), r.started,
             r.profile, r.mode, "contribution" if r.contribution else "runner", (r.commit or "-")[:10], r.engine,
             "-" if r.exit_code is None else str(r.exit_code), counts_line(r.counts)] for r in reversed(view.runs)]
    return table(["#", "run", "started (UTC)", "profile", "mode", "from", "commit", "engine build", "exit",
                  "verdicts"], rows, class_="runs")


def _drift_index(drifts: list[Any], view: HistoryView) -> dict[tuple[str, str, str], int]:
    """Series key → the page's index of the first run that moved."""
    index = {r.run_id: r.index for r in view.runs}
    keys = {s.key for s in view.series}
    marks: dict[tuple[str, str, str], int] = {}
    for d in drifts:
        if d.first_run_id not in index:
            continue  # moved before the runs this page shows
        key = (d.anchor_id, d.profile, d.engine)
        if key not in keys:  # an engine key spelt differently: the anchor's only series on its profile
            same = [k for k in keys if k[:2] == key[:2]]
            key = same[0] if len(same) == 1 else key
        marks[key] = index[d.first_run_id]
    return marks


def _series_section(view: HistoryView, drifts: list[Any]) -> Markup:
    legend = ", ".join(f"{shape_name(m)} {v}" for v, m in MARKER.items())
    parts = [tag("h2", "Every anchor over time"),
             tag("p", "One panel per anchor, profile and engine build; x is the run (#0 the oldest "
                      "on this page). The blue bar is the band in that run, the line the measured "
                      f"interval, the marker the statistic and its verdict ({legend}, coloured as "
                      "above); a marker on the floor is a run without a number (ERROR, SKIP).",
                 class_="note")]
    labelled = len({(s.profile, s.engine) for s in view.series}) > 1
    marks = _drift_index(drifts, view)
    laws: dict[str, list[Series]] = {}
    censuses = [s for s in view.series if _is_census(s)]
    for s in view.series:
        if not _is_census(s):
            laws.setdefault(s.law, []).append(s)
    for law, series in laws.items():
        parts.append(tag("h3", f"{law}: {len(series)} series"))
        for n, uri in enumerate(series_figures(law, series, len(view.runs), marks, labelled)):
            parts.append(image(uri, f"time series of the {law} anchors, image {n + 1}"))
    if censuses:
        parts.append(_census_section(censuses))
    return join(parts)


def _is_census(s: Series) -> bool:
    return any(r.kind == "census" for _, r in s.points)


def _census_section(censuses: list[Series]) -> Markup:
    """Census anchors have label counts, not a number to plot: one row per anchor and run."""
    rows = [[s.anchor_id, s.profile, s.engine, f"#{info.index}", verdict_badge(r.verdict.value),
             fmt_measured(r), r.reason or ""]
            for s in censuses for info, r in s.points]
    return join([tag("h3", f"censuses: {len(censuses)} series"),
                 tag("p", "Label counts from one engine run each (the labels the verdict rests on); "
                          "no number to plot.", class_="note"),
                 table(["anchor", "profile", "engine", "run", "verdict", "counted", "reason"], rows,
                       class_="results")])


def shape_name(marker: str) -> str:
    return {"o": "●", "X": "✖", "D": "◆", "*": "★", "s": "■"}.get(marker, marker)
