"""The morning view of a night: the gate's verdict per runner, what turned and why, the standing
reds a person accepted (with their dates), and what waits for the weekly run. A view of the run
record (its `gate`, `not_reached`), led with in the step summary, the terminal and the report."""
from __future__ import annotations

from typing import Any

from lawbench.core.models.gate import GONE_NEWS, RateCheck
from lawbench.core.untrusted_text import markdown as md, markdown_code as code, terminal

RATE_NEWS = ("slower", "faster")  # a runner's rate series (issue 31): shown first among their kind
TEXT_NOTES = ("faster", "skipped-off-runner", "back-in-scope")  # notes the terminal says, one line each
SHOWN_IDS = 12  # anchors listed per line for "not-run" (a -k night leaves many out, all for one reason)


def gone_groups(gate: Any) -> list[tuple[str, str, list[str]]]:
    """The anchors of the accepted night gone tonight (issue 30 item 7) as (kind, why, anchor ids):
    one group per kind and why, in GONE_NEWS order, so each anchor is named with why in a few lines."""
    groups: dict[tuple[str, str], list[str]] = {}
    for n in gate.news:
        if n.kind in GONE_NEWS:
            groups.setdefault((n.kind, n.why), []).append(n.anchor_id)
    return [(k, w, sorted(ids)) for (k, w), ids in sorted(groups.items(), key=lambda kv: (GONE_NEWS.index(kv[0][0]),
                                                                                           kv[0][1]))]


def _ids(kind: str, ids: list[str], show: Any) -> str:
    """The ids of one group, each through ``show``; a not-run group beyond SHOWN_IDS is cut, saying how many."""
    cut = ids[:SHOWN_IDS] if kind == "not-run" else ids
    return ", ".join(map(show, cut)) + (f" … and {len(ids) - len(cut)} more" if len(cut) < len(ids) else "")


def band_line(check: RateCheck) -> str:
    """A judged rate series in one line (RateCheck): its accepted band, the nights it rests on, tonight."""
    lo, hi = check.band
    return f"band {lo:.4g} … {hi:.4g} tok/s over {len(check.nights)} nights, tonight {check.tonight:.4g}"


def gate_headline(record: Any) -> str:
    g = record.gate
    if g is None:
        return ""
    red = g.red_news
    if g.baseline_state == "cannot-judge":
        blind = next((n.why for n in red if n.kind == "cannot-judge"), "cannot judge")
        return f"gate {g.verdict.upper()} on {g.profile}: {blind}"
    against = (f"{g.baseline_runs} accepted night(s), newest {g.baseline_run_id[:12]}" if g.baseline_run_id
               else "no accepted night")
    what = f"{len(red)} red" if red else "nothing turned"
    ack = f", {len(g.acknowledged)} acknowledged red(s)" if g.acknowledged else ""
    return f"gate {g.verdict.upper()} on {g.profile}: {what}{ack} (against {against})"


# Every field below may be a stranger's (a record from elsewhere, a baseline off the data branch):
# each goes through lawbench.core.untrusted_text — md() for prose, code() in code spans, terminal().


def gate_markdown(record: Any) -> str:
    """The morning view in Markdown; "" for an absolute run with every anchor reached."""
    g = record.gate
    lines: list[str] = []
    if g is not None:
        lines += [f"### {'🔴' if g.verdict == 'red' else '🟢'} {md(gate_headline(record))}", "",
                  f"machine {code(g.fingerprint)} · engine {code(g.engine)} · "
                  f"drift α = {g.alpha:g} per runner-night, shared among its series", ""]
        if g.baseline_state == "cannot-judge":
            lines += ["**Cannot judge:** nothing tonight measured was compared with an accepted night. Every "
                      "absolute verdict is in the record (below, as new); this night is never accepted as a "
                      "baseline. Make the baseline readable (the data branch's fetch, the runs/<profile>/ folder) "
                      "and the next night is judged again.", ""]
        if g.new_baseline:
            head = "First night" if g.baseline_state == "first-night" else "New baseline"
            lines += [f"**{head}:** {md(g.new_baseline)}", ""]
        shown = [n for n in g.news if n.kind not in GONE_NEWS]
        if shown:
            lines += ["| gate | anchor | news | before | tonight | why |", "|---|---|---|---|---|---|"]
            for n in sorted(shown, key=lambda n: (not n.red, n.acknowledged_until is None, n.kind not in RATE_NEWS, n.anchor_id)):
                state = "red" if n.red else (f"acknowledged until {n.acknowledged_until} ({n.acknowledged_by})"
                                             if n.acknowledged_until else "note")
                lines.append("| " + " | ".join([md(state), code(n.anchor_id), *map(md, (n.kind, n.before or "-",
                                                                                          n.after or "-", n.why))]) + " |")
            lines.append("")
        lines += [f"- {md(c.kind)} {code(c.series)}: {band_line(c)}" for c in g.rate_checks if c.kind in RATE_NEWS]
        if g.rates_unanalysed:
            lines.append(f"- rate series the one-night test cannot analyse yet ({len(g.rates_unanalysed)}): "
                         + "; ".join(map(md, g.rates_unanalysed[:6])) + (" …" if len(g.rates_unanalysed) > 6 else ""))
        for e in g.expired:
            lines.append(f"- acknowledgement expired: {md(e)} (no longer applied: that anchor is red until the entry "
                         "is renewed after review or removed; `lawbench check` warns, never stops a run)")
        if g.weekly:
            lines.append(f"- queued for the weekly run: {len(g.weekly)} anchor(s): "
                         + ", ".join(map(code, g.weekly[:12])) + (" …" if len(g.weekly) > 12 else ""))
        groups = gone_groups(g)
        if groups:  # issue 30 item 7: each anchor gone since the accepted night, with why
            gone = sum(len(ids) for _, _, ids in groups)
            lines.append(f"- in the last accepted night of this cadence, not run tonight ({gone}):")
            lines += [f"  - {md(kind)} ({md(why)}): {_ids(kind, ids, code)}" for kind, why, ids in groups]
    if record.not_reached:
        lines.append(f"- **not reached before the deadline ({len(record.not_reached)}):** "
                     + ", ".join(map(code, record.not_reached)))
    return "\n".join(lines).rstrip() + "\n" if lines else ""


def gate_text(record: Any) -> list[str]:
    """The same for a terminal: one line per red or acknowledged news."""
    g = record.gate
    out = []
    if g is not None:
        out.append(gate_headline(record) + (f"; {g.new_baseline}" if g.new_baseline else ""))
        for n in g.news:
            if n.red:
                out.append(f"  RED  {n.anchor_id}: {n.kind}: {n.why}")
            elif n.acknowledged_until:
                out.append(f"  ACK  {n.anchor_id}: {n.kind} (acknowledged by {n.acknowledged_by} until "
                           f"{n.acknowledged_until}): {n.why}")
        out += [f"  note {n.anchor_id}: {n.kind}: {n.why}" for n in g.news if n.kind in TEXT_NOTES]
        out += [f"  gone ({kind}: {why}): {_ids(kind, ids, str)}" for kind, why, ids in gone_groups(g)]
        if g.rates_unanalysed:
            out.append(f"  rate series not analysed yet: {len(g.rates_unanalysed)} ({g.rates_unanalysed[0]})")
        out += [f"  acknowledgement expired: {e}" for e in g.expired]
        if g.weekly:
            out.append(f"  queued for the weekly run: {len(g.weekly)} anchor(s)")
    if record.not_reached:
        out.append(f"not reached before the deadline: {', '.join(record.not_reached)}")
    return [terminal(line) for line in out]
