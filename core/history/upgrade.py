"""Gate news of an engine upgrade night (issue 31): the record's `engine_upgrade` — tonight's build
paired against the build the last accepted night ran, per rate series (core/run/upgrade.py) — as
`slower` (red: the new build's whole interval lies below 1 − tolerance), `faster` (said: wholly
above 1 + tolerance) and `upgrade-unmeasured` (red: the replaced build could not be paired, so the
upgrade's effect is unknown). A series whose interval still straddles the tolerance is said in the
verdict's "cannot analyse" lines, never red and never silently green. Pure: reads the record only.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import re

from lawbench.core.models.gate import GateNews

if TYPE_CHECKING:
    from lawbench.core.models.run_record import RunRecord

UPGRADE_PREFIX = "upgrade."  # a news item's anchor_id: "upgrade.<series key as an id>"


# What an acknowledgement of an upgrade's news quotes as its claim: the news is about a rate series,
# not an anchor, so there is no anchor claim to quote (`lawbench baseline propose` writes this).
UPGRADE_CLAIM = "An engine upgrade measured against the build it replaces (docs/gate.md): its effect on this rate series."


def is_upgrade_news(anchor_id: str) -> bool:
    return anchor_id.startswith(UPGRADE_PREFIX)


def news_id(key: str) -> str:
    """An id an acknowledgement can name (lower-case letters, digits, '.', '_', '-'), read from a
    series key: "syn-25m-q4_0 | Q4_0 | tg16 threads=2 | decode tok/s" ->
    "upgrade.syn-25m-q4_0.q4_0.tg16_threads_2.decode_tok_s"."""
    parts = [re.sub(r"[^a-z0-9._-]+", "_", p.strip().lower()).strip("_") for p in key.split("|")]
    return UPGRADE_PREFIX + ".".join(p or "-" for p in parts)


def upgrade_news(record: RunRecord) -> tuple[list[Any], list[str]]:
    """Tonight's upgrade news (GateNews, slower first) and the lines for series it cannot decide."""
    up = getattr(record, "engine_upgrade", None)
    if up is None:
        return [], []
    head = f"engine {up.tonight} replaces {up.replaced} (last accepted night {up.accepted_run_id[:12]})"
    if up.error:
        return [GateNews(anchor_id=news_id(up.replaced), kind="upgrade-unmeasured",
                         why=f"{head}: the replaced build could not be paired: {up.error}")], []
    news, unresolved = [], []
    for s in up.series:
        if s.status != "measured" or s.ratio is None or s.interval is None:
            news.append(GateNews(anchor_id=news_id(s.series), kind="upgrade-unmeasured",
                                 why=f"{head}: {s.series} ({s.anchor_id} arm {s.arm}) not paired: {s.status}: {s.reason}"))
            continue
        lo, hi = s.interval
        line = (f"{s.ratio - 1:+.1%} (interval {lo - 1:+.1%} … {hi - 1:+.1%}, {s.pairs} pairs, "
                f"new {s.median_new:.4g} / old {s.median_old:.4g}) — {head}")
        if s.verdict in ("slower", "faster"):
            news.append(GateNews(anchor_id=news_id(s.series), kind=s.verdict,
                                 before=f"{s.median_old:.4g}", after=f"{s.median_new:.4g}",
                                 why=f"{s.verdict}: {s.series} under the new engine: {line}",
                                 size=s.ratio - 1, size_interval=(lo - 1, hi - 1)))
        elif s.verdict == "unresolved":
            unresolved.append(f"cannot analyse upgrade of {s.series}: within ±{up.tolerance:.0%} "
                              f"not decided: {line}")
    order = {"slower": 0, "upgrade-unmeasured": 1, "faster": 2}
    return sorted(news, key=lambda n: (order[n.kind], n.size or 0.0)), unresolved
