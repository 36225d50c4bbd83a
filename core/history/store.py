"""The history store: every finished run, appended to one SQLite file, never changed afterwards.

Six tables (lawbench.core.history.schema) — runs, results, samples, imports (where each run came
from), bindings (a runner's run bound to its workflow run) and rates (each measured arm's speed) — so that a time series of one
anchor or a comparison of two runs is a query, not a re-run. Triggers make the tables append-only
(UPDATE and DELETE abort), and `PRAGMA user_version` carries the schema version so an old lawbench
never misreads a newer file; an older file is upgraded in place (tables added only).
"""
from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any, Iterator, Optional, Union

from lawbench.core.errors import DataError
from lawbench.core.models.result import Result
from lawbench.core.history.schema import (
    _RESULT_COLS,
    _SCHEMA,
    _SCHEMA_V2,
    _SCHEMA_V3,
    _SCHEMA_V4,
    _TRIGGERS,
    FROM_RUN,
    HISTORY_SCHEMA,
    TABLES,
    Binding,
    Provenance,
    RateRow,
    ResultRow,
    RunRow,
    _rate_rows,
    _result_row,
    _sample_rows,
    default_path,
)
from lawbench.core.record.reports import RunRecord, to_json, utc_now
from lawbench.core.record.run_keys import RunKeys, engine_key

__all__ = ["History", "RunRow", "ResultRow", "RunKeys", "Provenance", "Binding", "engine_key", "default_path"]


class History:
    """An append-only store of run records in one SQLite file (WAL mode: readers never block)."""

    def __init__(self, path: Union[str, Path, None] = None, create: bool = True):
        """Open (and with `create`, make) the history; read-only views pass create=False."""
        self.path = Path(path) if path is not None else default_path()
        self._create = create
        self._con: Optional[sqlite3.Connection] = None
        self._keys: Optional[dict[str, RunKeys]] = None
        if self.path.is_dir():
            raise self._error("is a folder, not a history file; pass the history.sqlite inside it with --db")
        if not create and not self.path.is_file():
            raise self._error("no history here yet; `lawbench run` creates it (or pass --db)")
        # A read-only view of a history we cannot write (a copy on a read-only mount, another
        # user's file). See _open_read_only.
        self.read_only = not create and not (os.access(self.path, os.W_OK) and os.access(self.path.parent, os.W_OK))
        try:
            if self.read_only:
                self._con = self._open_read_only()
            else:
                self._check_writable()
                # isolation_level=None: we issue BEGIN/COMMIT ourselves, so one run is one transaction.
                self._con = sqlite3.connect(str(self.path), timeout=30, isolation_level=None)
            self._con.row_factory = sqlite3.Row
            self._prepare()
        except sqlite3.OperationalError as exc:  # a full disk, a folder in the way: not the file's fault
            self.close()
            raise self._error(f"cannot open the history ({exc})") from None
        except sqlite3.DatabaseError as exc:
            self.close()
            raise self._error(f"cannot open the history ({exc}); move the file aside to start a "
                              "new history") from None
        except OSError as exc:
            self.close()
            raise self._error(f"cannot open the history: {exc.strerror or exc}") from None

    # ------------------------------------------------------------------ setup

    def _open_read_only(self) -> sqlite3.Connection:
        """SQLite reads a WAL history read-only when its -shm is there too; without it, only as
        an immutable snapshot of the main file, which would miss every run still in the -wal
        file. So: read-only with the WAL, else immutable when there is no WAL to miss, else no."""
        uri = self.path.resolve().as_uri()
        try:
            con = sqlite3.connect(f"{uri}?mode=ro", uri=True, isolation_level=None)
            con.execute("PRAGMA user_version").fetchone()
            return con
        except sqlite3.OperationalError:
            pass
        wal = self.path.with_name(self.path.name + "-wal")
        if wal.is_file() and wal.stat().st_size > 0:
            raise self._error(f"cannot be read here: {wal.name} holds runs not yet merged into it, which a "
                              "read-only open cannot see without its -shm file; copy the history with its "
                              "-wal and -shm files to a writable folder and pass the copy with --db")
        return sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True, isolation_level=None)

    def _check_writable(self) -> None:
        """A history about to be written needs its file and its folder (SQLite's journal files)
        writable: else SQLite says only "unable to open database file", or fails at the first write."""
        import tempfile

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=self.path.parent):
                pass
            if self.path.exists() and not os.access(self.path, os.W_OK):
                raise PermissionError(13, "the file is not writable")
        except OSError as exc:
            raise self._error(f"cannot write the history here: {exc.strerror or exc}; pass --db with a path "
                              "that can be written (for `lawbench run`: --out)") from None

    def _error(self, message: str) -> DataError:
        return DataError(str(self.path), message)

    def _prepare(self) -> None:
        con = self._connection
        version = con.execute("PRAGMA user_version").fetchone()[0]  # "not a database" shows here
        if version:
            self._check_integrity()
        if version == 0:
            foreign = [r[0] for r in con.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
            if foreign and not set(foreign) <= set(TABLES):
                raise self._error(f"is an SQLite file with other tables ({', '.join(foreign)}), "
                                  "not a lawbench history; use another history file")
            if not self._create and not foreign:
                # a read view never writes a schema into a file: an empty one is not a history yet
                raise self._error("is empty, not a lawbench history: no run was ever appended to it")
        if self.read_only:
            if version != HISTORY_SCHEMA:
                raise self._error(f"history schema version {version} in a file this user cannot write (this "
                                  f"lawbench reads version {HISTORY_SCHEMA} and would upgrade it); copy it to "
                                  "a writable folder and pass the copy with --db")
            return
        if version == 0:
            con.execute("PRAGMA journal_mode = WAL")
            con.executescript(f"BEGIN IMMEDIATE;\n{_SCHEMA}\nPRAGMA user_version = "
                              f"{HISTORY_SCHEMA};\nCOMMIT;")
        elif version in (1, 2, 3):  # adds tables and triggers only: every older row stays as it was
            con.execute("PRAGMA journal_mode = WAL")
            added = ((_SCHEMA_V2 if version == 1 else "") + (_SCHEMA_V3 if version < 3 else "")
                     + _SCHEMA_V4)
            con.executescript(f"BEGIN IMMEDIATE;\n{added}{_TRIGGERS}\nPRAGMA user_version = "
                              f"{HISTORY_SCHEMA};\nCOMMIT;")
        elif version != HISTORY_SCHEMA:
            raise self._error(f"history schema version {version}, but this lawbench reads version "
                              f"{HISTORY_SCHEMA}; use a matching lawbench or start a new "
                              "history file")
        else:
            con.execute("PRAGMA journal_mode = WAL")
        con.execute("PRAGMA foreign_keys = ON")

    def _check_integrity(self) -> None:
        """A damaged file answers some queries and fails others, and SQLite appends to it happily:
        refuse it on open, before anything is read from or written to it (quick_check reads every
        page, about 0.1 s per 10 MB)."""
        problems = [r[0] for r in self._connection.execute("PRAGMA quick_check(3)")]
        if problems != ["ok"]:
            raise self._error(f"is damaged (SQLite's integrity check: {problems[0]}); nothing is read from "
                              "or appended to a damaged history: move it aside and rebuild it from the run "
                              "records with `lawbench history import`")

    @property
    def _connection(self) -> sqlite3.Connection:
        if self._con is None:
            raise self._error("the history is closed")
        return self._con

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None

    def __enter__(self) -> "History":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _query(self, sql: str, params: tuple = ()) -> list[sqlite3.Row]:
        try:
            return self._connection.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as exc:  # a file damaged after it was opened
            raise self._error(f"cannot read the history ({exc})") from None

    # ------------------------------------------------------------------ writing

    def append(self, record: RunRecord, provenance: Provenance = FROM_RUN) -> None:
        """Add one finished run — its row, every result and sample, and where it came from — in
        one transaction."""
        if record.finished is None or record.exit_code is None:
            raise self._error(f"run {record.run_id} is not finished; call record.finish(results) "
                              "before appending it")
        con = self._connection
        try:
            con.execute("BEGIN IMMEDIATE")
            con.execute('INSERT INTO runs (run_id, started, finished, profile, detected_profile, '
                        '"commit", version, exit_code, record_json) VALUES (?,?,?,?,?,?,?,?,?)',
                        (record.run_id, record.started, record.finished, record.profile,
                         record.detected_profile, record.git_commit, record.lawbench_version,
                         record.exit_code, to_json(record, indent=None)))
            con.executemany("INSERT INTO results VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                            [_result_row(record.run_id, r) for r in record.results])
            con.executemany("INSERT INTO samples VALUES (?,?,?,?,?,?)",
                            [row for r in record.results for row in _sample_rows(record.run_id, r)])
            con.executemany("INSERT INTO rates VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                            [row for r in record.results for row in _rate_rows(record.run_id, r)])
            p = provenance
            con.execute("INSERT INTO imports VALUES (?,?,?,?,?,?,?,?)",
                        (record.run_id, p.kind, p.source, p.sha256, p.imported_at or utc_now(),
                         p.contributor, p.bundle_created, p.bundle_lawbench_version))
            if p.binding is not None:
                b = p.binding
                con.execute("INSERT INTO bindings VALUES (?,?,?,?,?,?,?,?,?,?)",
                            (record.run_id, b.workflow_run_id, b.run_attempt, b.job, b.box, b.artifact_name,
                             b.artifact_id, b.artifact_digest, b.head_sha, b.verified_at))
            con.execute("COMMIT")
            self._keys = None
        except sqlite3.IntegrityError as exc:
            con.execute("ROLLBACK")
            if "runs.run_id" in str(exc):
                raise self._error(f"run {record.run_id} is already in the history; a run is "
                                  "recorded once") from None
            raise self._error(f"run {record.run_id} cannot be appended ({exc}); does it hold the "
                              "same anchor twice?") from None
        except sqlite3.DatabaseError as exc:
            if con.in_transaction:
                con.execute("ROLLBACK")
            raise self._error(f"cannot append run {record.run_id} ({exc})") from None

    # ------------------------------------------------------------------ reading

    def runs(self, profile: Optional[str] = None, limit: Optional[int] = 20,
             contributions: bool = True) -> list[RunRow]:
        """The newest runs first, each with the record's counts per verdict and where it came from;
        ``contributions=False`` keeps only runners' runs."""
        sql = ('SELECT u.run_id, started, finished, profile, detected_profile, "commit", version, '
               "exit_code, json_extract(record_json, '$.counts') AS counts, "
               "COALESCE(i.kind, 'run') AS source, b.* FROM runs u LEFT JOIN imports i USING (run_id) "
               "LEFT JOIN bindings b USING (run_id)")
        where, params = [], ()  # type: list[str], tuple
        if profile is not None:
            where, params = ["profile = ?"], (profile,)
        if not contributions:
            where.append("COALESCE(i.kind, 'run') != 'contribution'")
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY started DESC, u.rowid DESC"
        if limit is not None:
            sql, params = sql + " LIMIT ?", params + (int(limit),)
        rows = self._query(sql, params)
        return [RunRow(*tuple(r)[:8], counts=json.loads(r["counts"] or "{}"), source=r["source"],
                       binding=_binding(tuple(r)[11:])) for r in rows]

    def results(self, run_id: str) -> list[ResultRow]:
        """Every anchor's result in one run, by anchor id."""
        rows = self._query(f"SELECT {_RESULT_COLS} FROM results r JOIN runs u USING (run_id) "
                           "WHERE r.run_id = ? ORDER BY r.anchor_id", (self.resolve(run_id),))
        return self._result_rows(rows)

    def _result_rows(self, rows: list[sqlite3.Row]) -> list[ResultRow]:
        keys = self.run_keys()
        return [ResultRow(*tuple(r), engine=keys[r["run_id"]].engine) for r in rows]

    def run_keys(self) -> dict[str, RunKeys]:
        """Per run: profile, engine build key, whether the machine matched, interrupted, finished.

        Read once per open history (one pass over the runs) and kept until the next append.
        """
        if self._keys is None:
            rows = self._query("SELECT u.run_id, profile, json_extract(record_json, '$.engine'), "
                               "json_extract(record_json, '$.profile_matches'), "
                               "json_extract(record_json, '$.interrupted'), finished, "
                               "i.kind = 'contribution', COALESCE(json_extract(record_json, '$.mode'), 'run') "
                               "FROM runs u LEFT JOIN imports i USING (run_id)")
            self._keys = {r[0]: RunKeys(profile=r[1], engine=engine_key(json.loads(r[2]) if r[2]
                                                                         else None),
                                        profile_matches=bool(r[3]), interrupted=r[4],
                                        finished=r[5], contribution=bool(r[6]), mode=r[7]) for r in rows}
        return self._keys

    def stored_json(self, run_id: str) -> Optional[str]:
        """The record of exactly this run id as appended (compact JSON), or None when absent."""
        rows = self._query("SELECT record_json FROM runs WHERE run_id = ?", (run_id,))
        return rows[0][0] if rows else None

    def provenance(self, run_id: str) -> Optional[Provenance]:
        """Where the run came from; None for a run appended before provenance was kept (schema 1)."""
        rows = self._query("SELECT kind, source, sha256, imported_at, contributor, bundle_created, "
                           "bundle_lawbench_version, b.* FROM imports LEFT JOIN bindings b USING (run_id) "
                           "WHERE run_id = ?", (self.resolve(run_id),))
        return Provenance(*tuple(rows[0])[:7], binding=_binding(tuple(rows[0])[8:])) if rows else None

    def anchor_history(self, anchor_id: str, profile: Optional[str] = None) -> list[ResultRow]:
        """The time series of one anchor, oldest first (optionally on one profile)."""
        sql = (f"SELECT {_RESULT_COLS} FROM results r JOIN runs u USING (run_id) "
               "WHERE r.anchor_id = ?")
        params: tuple = (anchor_id,)
        if profile is not None:
            sql, params = sql + " AND u.profile = ?", params + (profile,)
        rows = self._query(sql + " ORDER BY u.started, u.rowid", params)
        return self._result_rows(rows)

    def measured_results(self, profile: Optional[str] = None) -> list[ResultRow]:
        """Every result that measured something (not SKIP / ERROR), oldest run first: the input of
        drift detection."""
        sql = (f"SELECT {_RESULT_COLS} FROM results r JOIN runs u USING (run_id) WHERE r.measured "
               "IS NOT NULL AND r.verdict NOT IN ('SKIP', 'ERROR')")
        params: tuple = ()
        if profile is not None:
            sql, params = sql + " AND u.profile = ?", (profile,)
        return self._result_rows(self._query(sql + " ORDER BY u.started, u.rowid", params))

    def interval_levels(self) -> dict[tuple[str, str], tuple[Optional[float], Optional[int]]]:
        """Per (run, anchor): the confidence and sample count its interval was made at, as the
        result's typed `sampling` records them (what turns an interval back into an error). A row
        an older lawbench appended without that field is read through the Result model, whose
        validator lifts what it kept in `detail` (core.models.result): one migration, not two."""
        rows = self._query(
            "SELECT u.run_id, json_extract(j.value, '$.anchor_id'), "
            "json_extract(j.value, '$.sampling.confidence_per_look'), json_extract(j.value, '$.sampling.n'), "
            "CASE WHEN json_type(j.value, '$.sampling') = 'object' THEN NULL ELSE j.value END "
            "FROM runs u, json_each(u.record_json, '$.results') j")
        out: dict[tuple[str, str], tuple[Optional[float], Optional[int]]] = {}
        for run_id, anchor_id, confidence, n, old in rows:
            if old is not None:
                sampling = Result.model_validate_json(old).sampling
                if sampling is None:
                    continue
                confidence, n = sampling.confidence_per_look, sampling.n
            out[(run_id, anchor_id)] = (confidence, n)
        return out

    def rates(self, profile: str) -> list[RateRow]:
        """Every rate reading of a profile's runs, oldest first (the runner's tracked series)."""
        rows = self._query("SELECT r.run_id, u.started, r.series, COALESCE(r.engine, ''), r.measured, "
                           "r.ci_lo, r.ci_hi, r.n FROM rates r JOIN runs u USING (run_id) "
                           "WHERE u.profile = ? AND r.measured IS NOT NULL ORDER BY u.started, r.run_id",
                           (profile,))
        return [RateRow(*tuple(row)) for row in rows]

    def samples(self, run_id: str, anchor_id: str) -> list[sqlite3.Row]:
        return self._query("SELECT idx, arm, value, predecessor FROM samples WHERE run_id = ? "
                           "AND anchor_id = ? ORDER BY idx", (self.resolve(run_id), anchor_id))

    def record(self, run_id: str) -> RunRecord:
        """The full run record as it was appended."""
        full = self.resolve(run_id)
        row = self._query("SELECT record_json FROM runs WHERE run_id = ?", (full,))[0]
        return RunRecord.model_validate_json(row[0])

    def resolve(self, ref: str, profile: Optional[str] = None) -> str:
        """A run id from a unique prefix, `latest`, or `latest~N` (N runs before the latest;
        `latest~` alone is `latest~1`, as git reads `HEAD~`). `latest` counts runners' runs only:
        a contribution is named by its id, never becomes the runner's latest."""
        if ref == "latest" or ref.startswith("latest~"):
            back = ref.partition("~")[2] or ("1" if ref.endswith("~") else "0")
            if not back.isdigit():
                raise self._error(f"cannot read run reference {ref!r}: use latest or latest~N")
            runs = self.runs(profile=profile, limit=int(back) + 1, contributions=False)
            if len(runs) <= int(back):
                raise self._error(f"no run {ref!r} in the history ({len(runs)} runners' runs"
                                  f"{' on profile ' + profile if profile else ''}; contributions "
                                  "are named by their run id)")
            return runs[int(back)].run_id
        if self._query("SELECT 1 FROM runs WHERE run_id = ?", (ref,)):
            return ref  # a whole run id is never ambiguous, whatever else starts with it
        # a prefix, exactly as written: SQLite's LIKE ignores case, and a run id does not
        hits = [r[0] for r in self._query("SELECT run_id FROM runs WHERE substr(run_id, 1, length(?)) = ?"
                                          " LIMIT 2", (ref, ref))]
        if not hits:
            raise self._error(f"no run {ref!r} in the history; `lawbench history` lists the runs")
        if len(hits) > 1:
            raise self._error(f"run reference {ref!r} is ambiguous; give more of the run id")
        return hits[0]

    def run_ids_like(self, run_id: str) -> list[str]:
        """Run ids a person could take for this one: equal but for case, or a prefix of it or it of
        them (what `lawbench history import` refuses, so no run's reference becomes ambiguous)."""
        return [r[0] for r in self._query(
            "SELECT run_id FROM runs WHERE lower(substr(run_id, 1, length(?))) = lower(?) "
            "OR lower(substr(?, 1, length(run_id))) = lower(run_id)", (run_id, run_id, run_id))]

    def __iter__(self) -> Iterator[RunRow]:
        return iter(self.runs(limit=None))


def _binding(cols: tuple) -> Optional[Binding]:
    """A bindings row's columns after its run_id (all NULL when the run has none)."""
    return Binding(*cols) if cols and cols[0] is not None else None
