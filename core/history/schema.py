"""The history's schema and the rows it hands out (lawbench.core.history.store reads and writes them).

Six tables, all append-only: runs, results, samples, imports (where each run came from),
bindings (a runner's run bound to the workflow run that made it) and rates (every measured arm's
absolute speed, the runner's tracked series of issue 31). `PRAGMA user_version` carries
the schema version; an older file is upgraded in place by adding tables only.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from lawbench.core.models import Result

HISTORY_SCHEMA = 4  # 2 added `imports` (provenance), 3 `bindings`, 4 `rates`; older files are upgraded when opened
TABLES = ("runs", "results", "samples", "imports", "bindings", "rates")

_SCHEMA_V1 = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, started TEXT NOT NULL, finished TEXT, profile TEXT NOT NULL,
    detected_profile TEXT, "commit" TEXT, version TEXT, exit_code INTEGER,
    record_json TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS results (
    run_id TEXT NOT NULL REFERENCES runs(run_id), anchor_id TEXT NOT NULL, law TEXT, kind TEXT,
    verdict TEXT NOT NULL, quantity TEXT, unit TEXT, published REAL, predicted REAL, measured REAL,
    ci_lo REAL, ci_hi REAL, band_lo REAL, band_hi REAL, spread REAL, reason TEXT,
    PRIMARY KEY (run_id, anchor_id)
);
CREATE TABLE IF NOT EXISTS samples (
    run_id TEXT NOT NULL REFERENCES runs(run_id), anchor_id TEXT NOT NULL, idx INTEGER NOT NULL,
    arm TEXT, value REAL, predecessor TEXT,
    PRIMARY KEY (run_id, anchor_id, idx)
);
CREATE INDEX IF NOT EXISTS results_by_anchor ON results (anchor_id);
CREATE INDEX IF NOT EXISTS runs_by_profile ON runs (profile, started);
"""
# Where each run came from: `lawbench run` itself, an imported run.json, or a contribution bundle
# (with who sent it). One row per run, written in the run's own transaction.
_SCHEMA_V2 = """
CREATE TABLE IF NOT EXISTS imports (
    run_id TEXT PRIMARY KEY REFERENCES runs(run_id), kind TEXT NOT NULL, source TEXT NOT NULL,
    sha256 TEXT, imported_at TEXT NOT NULL, contributor TEXT, bundle_created TEXT,
    bundle_lawbench_version TEXT
);
"""
# A runner's run bound to the nightly workflow run that made it, as the collect step verified it
# (lawbench.core.history.binding): the workflow run and attempt, the job and its box, the artifact
# and the digest GitHub recorded for it, the commit the job ran. At most one row per run.
_SCHEMA_V3 = """
CREATE TABLE IF NOT EXISTS bindings (
    run_id TEXT PRIMARY KEY REFERENCES runs(run_id), workflow_run_id TEXT NOT NULL,
    run_attempt INTEGER NOT NULL, job TEXT NOT NULL, box TEXT NOT NULL, artifact_name TEXT NOT NULL,
    artifact_id TEXT NOT NULL, artifact_digest TEXT NOT NULL, head_sha TEXT NOT NULL,
    verified_at TEXT NOT NULL
);
"""
# A runner's rate series (issue 31): one row per measured arm of a result, keyed by what the arm is
# (model, format, placement, quantity) so the gate follows a series across anchors and nights.
_SCHEMA_V4 = """
CREATE TABLE IF NOT EXISTS rates (
    run_id TEXT NOT NULL REFERENCES runs(run_id), anchor_id TEXT NOT NULL, idx INTEGER NOT NULL,
    series TEXT NOT NULL, model TEXT NOT NULL, format TEXT, placement TEXT, quantity TEXT NOT NULL,
    engine TEXT, measured REAL, ci_lo REAL, ci_hi REAL, n INTEGER NOT NULL,
    PRIMARY KEY (run_id, anchor_id, idx)
);
CREATE INDEX IF NOT EXISTS rates_by_series ON rates (series);
"""
_TRIGGERS = "".join(
    f"""CREATE TRIGGER IF NOT EXISTS {t}_no_{op.lower()} BEFORE {op} ON {t}
BEGIN SELECT RAISE(ABORT, 'lawbench history is append-only: {op} on {t} is refused'); END;
""" for t in TABLES for op in ("UPDATE", "DELETE"))
_SCHEMA = _SCHEMA_V1 + _SCHEMA_V2 + _SCHEMA_V3 + _SCHEMA_V4 + _TRIGGERS


def default_path() -> Path:
    """`$LAWBENCH_OUT/history.sqlite`, else `./lawbench-out/history.sqlite`."""
    home = os.environ.get("LAWBENCH_OUT")
    return (Path(home) if home else Path("lawbench-out")) / "history.sqlite"


@dataclass(frozen=True)
class RunRow:
    run_id: str
    started: str
    finished: Optional[str]
    profile: str
    detected_profile: Optional[str]
    commit: Optional[str]
    version: Optional[str]
    exit_code: Optional[int]
    counts: dict[str, int] = field(default_factory=dict)
    source: str = "run"  # "contribution" when imported as one (imports.kind), else "run"
    binding: Optional["Binding"] = None  # a runner's run bound to its workflow run (the bindings table)


@dataclass(frozen=True)
class ResultRow:
    """One anchor in one run, with the run's time, profile and commit for time series."""

    run_id: str
    started: str
    profile: str
    commit: Optional[str]
    anchor_id: str
    law: Optional[str]
    kind: Optional[str]
    verdict: str
    quantity: Optional[str]
    unit: Optional[str]
    published: Optional[float]
    predicted: Optional[float]
    measured: Optional[float]
    ci_lo: Optional[float]
    ci_hi: Optional[float]
    band_lo: Optional[float]
    band_hi: Optional[float]
    spread: Optional[float]
    reason: Optional[str]
    engine: str = ""  # the run's engine build key (engine_key): part of what makes rows comparable


@dataclass(frozen=True)
class Binding:
    """A runner's record bound to the nightly workflow run that made it, as the collect step
    verified it (lawbench.core.history.binding says what is checked)."""

    workflow_run_id: str  # GitHub's id of the nightly's workflow run
    run_attempt: int
    job: str  # the workflow's job id (nightly.yml: anchors)
    box: str  # the matrix entry: the box whose profiles the job ran
    artifact_name: str
    artifact_id: str
    artifact_digest: str  # "sha256:<hex>", as GitHub recorded it and the downloaded zip verified
    head_sha: str  # the commit the workflow run ran
    verified_at: str

    def short(self) -> str:
        """How a table names it: the workflow run and the box."""
        return f"nightly {self.workflow_run_id} ({self.box})"


@dataclass(frozen=True)
class Provenance:
    """Where a run in the history came from (the `imports` table)."""

    kind: str  # "run" (`lawbench run`, or an imported run.json) or "contribution" (a bundle)
    source: str  # "lawbench run", or the path given to `lawbench history import`
    sha256: Optional[str] = None  # of the imported file
    imported_at: str = ""
    contributor: Optional[str] = None
    bundle_created: Optional[str] = None
    bundle_lawbench_version: Optional[str] = None
    binding: Optional[Binding] = None  # a runner's run whose binding the collect step verified


FROM_RUN = Provenance(kind="run", source="lawbench run")


_RESULT_COLS = ("r.run_id, u.started, u.profile, u.\"commit\", r.anchor_id, r.law, r.kind, "
                "r.verdict, r.quantity, r.unit, r.published, r.predicted, r.measured, r.ci_lo, "
                "r.ci_hi, r.band_lo, r.band_hi, r.spread, r.reason")




def _result_row(run_id: str, r: Result) -> tuple:
    ci = r.interval or (None, None)
    band = r.band or (None, None)
    return (run_id, r.anchor_id, r.law, r.kind, r.verdict.value, r.quantity, r.unit, r.published,
            r.predicted, r.measured, ci[0], ci[1], band[0], band[1], r.spread, r.reason)


def _rate_rows(run_id: str, r: Result) -> list[tuple]:
    rows = []
    for i, rate in enumerate(r.rates):
        ci = rate.interval or (None, None)
        s = rate.series
        rows.append((run_id, r.anchor_id, i, s.key, s.model, s.format, s.placement, s.quantity,
                     rate.engine, rate.measured, ci[0], ci[1], len(rate.values)))
    return rows


@dataclass(frozen=True)
class RateRow:
    """One series' reading in one run, with the run's time and engine key (the rates table)."""

    run_id: str
    started: str
    series: str
    engine: str
    measured: float
    ci_lo: Optional[float]
    ci_hi: Optional[float]
    n: int


def _sample_rows(run_id: str, r: Result) -> list[tuple]:
    if r.measurement is None:
        return []
    return [(run_id, r.anchor_id, i, s.arm, s.value, s.predecessor)
            for i, s in enumerate(r.measurement.samples)]
