"""The history as series: one per anchor, profile and engine build, oldest run first.

Two runs are one series only when they are comparable — the same anchor judged on the same
profile with the same engine build (compare-llama-bench's rule: join on what makes runs alike).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from lawbench.core.history.store import History, engine_key
from lawbench.core.models import Result
from lawbench.core.record.reports import is_retired


@dataclass(frozen=True)
class RunInfo:
    index: int  # 0 = the oldest run on the page
    run_id: str
    started: str
    profile: str
    commit: Optional[str]
    exit_code: Optional[int]
    engine: str
    counts: dict[str, int]
    contribution: bool = False  # someone else's machine: shown, and kept out of the runners' series
    mode: str = "run"  # "ab" or "plant": an engine A/B or a mutation proof, in the same history


@dataclass
class Series:
    anchor_id: str
    law: str
    profile: str
    engine: str
    points: list[tuple[RunInfo, Result]] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.anchor_id, self.profile, self.engine)


@dataclass(frozen=True)
class HistoryView:
    runs: list[RunInfo]
    series: list[Series]


def gather(history: History, profile: Optional[str] = None, limit: Optional[int] = None) -> HistoryView:
    """The newest ``limit`` runs (all when None), oldest first, and their live results as series.

    Retired anchors (superseded / refuted) are left out: they are not scored, so have no series.
    """
    rows = list(reversed(history.runs(profile=profile, limit=limit)))
    runs: list[RunInfo] = []
    series: dict[tuple[str, str, str], Series] = {}
    for index, row in enumerate(rows):
        record = history.record(row.run_id)
        contribution = row.source == "contribution"
        # a contribution's points form series of their own: never a runner's line
        engine = engine_key(record.engine) + (" · contribution" if contribution else "")
        info = RunInfo(index, row.run_id, row.started, row.profile, row.commit, row.exit_code,
                       engine, dict(record.counts), contribution, record.mode)
        runs.append(info)
        for r in record.results:
            if is_retired(r):
                continue
            key = (r.anchor_id, r.profile, info.engine)
            series.setdefault(key, Series(r.anchor_id, r.law, r.profile, info.engine)).points.append((info, r))
    return HistoryView(runs, sorted(series.values(), key=lambda s: (s.law, s.profile, s.engine)))
