"""The page of one run: what ran where, what needs a look, the plots, and every result."""
from __future__ import annotations

from lawbench.core.history.store import engine_key
from lawbench.core.html.figures import plotting
from lawbench.core.html.gatepage import gate_section
from lawbench.core.html.page import (
    Markup,
    counts_line,
    definition_list,
    document,
    esc,
    image,
    join,
    table,
    tag,
    verdict_badge,
)
from lawbench.core.html.run_plots import NAMED, counts_figure, forest_figure, forest_rows, pair_of, scatter_figure
from lawbench.core.models import Result
from lawbench.core.record.reports import (
    RunRecord,
    fmt_band,
    fmt_measured,
    fmt_num,
    fmt_quantity,
    headline,
    retired_note,
    is_retired,
)

# The verdicts a maintainer must see first, worst first; PASS needs no reason.
ATTENTION = ("FAIL", "ERROR", "VOID", "SKIP")


def run_page(record: RunRecord) -> str:
    """The whole self-contained HTML page for one run record."""
    live = [r for r in record.results if not is_retired(r)]
    with plotting():
        body = [tag("h1", f"lawbench run {record.run_id[:12]} on profile {record.profile}"),
                tag("p", headline(record)),
                gate_section(record),  # the gate's verdict leads (docs/gate.md)
                _header(record),
                tag("h2", "Verdicts"), counts_line(record.counts),
                image(counts_figure(record.counts), "bar chart of the verdict counts"),
                _attention(live),
                _forests(live), _scatters(live),
                tag("h2", f"Every result ({len(record.results)})"), _results_table(record.results)]
    return document(f"lawbench run {record.run_id[:12]} ({record.profile})", join(body))


def _header(record: RunRecord) -> Markup:
    engine = record.engine or {}
    build = engine_key(record.engine)
    if engine.get("bin_dir"):
        build += f" ({engine['bin_dir']})"
    state = "interrupted by " + record.interrupted if record.interrupted else "ran to its end"
    return definition_list([
        ("run id", tag("span", record.run_id, class_="id")),
        ("profile", record.profile + (" (strict)" if record.strict else "")),
        ("detected profile", record.detected_profile or "none matched"),
        ("machine matches the profile", "yes" if record.profile_matches else
         "no: its measurements are not evidence for this profile"),
        ("engine build", build),
        ("lawbench", f"{record.lawbench_version}, commit {record.git_commit or 'unknown'}"),
        ("started / finished", f"{record.started} / {record.finished or 'not finished'}"),
        ("exit code", f"{'-' if record.exit_code is None else record.exit_code} ({state})"),
        ("command", " ".join(record.argv) or "-"),
    ])


def _attention(live: list[Result]) -> Markup:
    parts = [tag("h2", "Needs a look: FAIL, ERROR, VOID and SKIP, with their reasons")]
    for verdict in ATTENTION:
        hits = [r for r in live if r.verdict.value == verdict]
        if not hits:
            continue
        items = [tag("li", join([tag("a", r.anchor_id, href=f"#r-{r.anchor_id}", class_="id"),
                                 esc(f" — {r.reason or 'no reason recorded'}")], ""))
                 for r in hits]
        parts += [tag("h3", join([verdict_badge(verdict), esc(f" {len(hits)}")], "")),
                  tag("ul", join(items), class_="attention")]
    if len(parts) == 1:
        parts.append(tag("p", "Nothing: every live anchor passed."))
    return join(parts)


def _by_law(results: list[Result]) -> dict[str, list[Result]]:
    laws: dict[str, list[Result]] = {}
    for r in results:
        laws.setdefault(r.law, []).append(r)
    return laws


def _forests(live: list[Result]) -> Markup:
    parts = [tag("h2", "Measured intervals against their bands, per law"),
             tag("p", "One row per anchor. The blue span is the band; the bar is the confidence "
                      "interval of the measured statistic and the dot the statistic (a prediction "
                      "anchor has only the dot: the law's value). Each row is drawn against its own "
                      "band (lower edge at −1, upper at +1), so anchors in different units share "
                      "one axis; the real numbers are on the right. Colour is the verdict.",
                 class_="note")]
    for law, results in _by_law(live).items():
        rows = forest_rows(results)
        left_out = len(results) - len(rows)
        if rows:
            parts.append(image(forest_figure(law, rows), f"forest plot of the {law} anchors"))
        if left_out:
            parts.append(tag("p", f"{law}: {left_out} anchor(s) without a band or a number "
                                  "(censuses, skips, errors) are in the table below.", class_="note"))
    return join(parts)


def _scatters(live: list[Result]) -> Markup:
    parts = [tag("h2", "Predicted against measured, per law and profile"),
             tag("p", "Log-log, so y = x (dashed) is the same line for every unit. A circle is a "
                      "prediction anchor (x: the published number, y: the law's value now); a square "
                      "an agreement anchor (x: the prediction, y: what was measured, with its "
                      "interval). The blue bar at each point is its band. FAIL, VOID and ERROR "
                      f"points are named when there are at most {NAMED}.", class_="note")]
    groups: dict[tuple[str, str], list] = {}
    for r in live:
        pair = pair_of(r)
        if pair is not None:
            groups.setdefault((r.law, r.profile), []).append(pair)
    figures, notes = [], []
    for (law, profile), pairs in groups.items():
        uri, hidden = scatter_figure(f"{law} on profile {profile}: {len(pairs)} anchors", pairs)
        figures.append(image(uri, f"predicted against measured for {law} on {profile}"))
        if hidden:
            notes.append(tag("p", f"{law} on {profile}: {hidden} anchor(s) with a value ≤ 0 cannot "
                                  "sit on a log axis; they are in the table.", class_="note"))
    if not figures:
        notes.append(tag("p", "No anchor in this run has both a prediction and a measurement."))
    return join([*parts, tag("div", join(figures), class_="side"), *notes])


def _results_table(results: list[Result]) -> Markup:
    rows = []
    for r in results:
        verdict = verdict_badge(r.verdict.value)
        reason = r.reason or (f"history ({retired_note(r)}), not scored" if is_retired(r) else "")
        anchor = Markup(f'<span class="id" id="r-{esc(r.anchor_id)}">{esc(r.anchor_id)}</span>')
        # a census's measured cell is a list of label counts: it may wrap, a number may not
        measured = _num(fmt_measured(r)) if r.measured is not None else fmt_measured(r)
        rows.append([verdict, anchor, r.kind, fmt_quantity(r), measured,
                     _num(fmt_band(r)), _num(fmt_num(r.predicted)), _num(fmt_num(r.published)),
                     reason or ""])
    return table(["verdict", "anchor", "kind", "quantity (unit)", "measured [interval]", "band",
                  "predicted", "published", "reason"], rows, class_="results")


def _num(text: str) -> Markup:
    return Markup(f'<span class="num">{esc(text)}</span>')

