"""The history store, the comparison of two runs, and `lawbench history`."""
from __future__ import annotations

import argparse
import io
import json
import math
import sqlite3

import pytest
from rich.console import Console

from lawbench.core.history.compare import compare_runs, print_comparison
from lawbench.core.errors import DataError
from lawbench.core.history.store import History, default_path
from lawbench.core.commands.history import add_history_parser, history_command
from lawbench.core.models import Measurement, Result, Sample, Verdict
from lawbench.core.record.reports import RunRecord, to_json


def result(anchor_id: str, verdict: Verdict = Verdict.PASS, measured: float | None = 10.0,
           **kw) -> Result:
    base = dict(anchor_id=anchor_id, law="law4", kind="measurement", profile="cpu",
                verdict=verdict, quantity="decode speed", unit="tok/s", published=10.0,
                predicted=9.8, measured=measured, interval=None if measured is None else
                (measured - 0.5, measured + 0.5), band=(9.0, 11.0), spread=0.02,
                reason="" if verdict is Verdict.PASS else f"{verdict.value.lower()} here")
    base.update(kw)
    return Result(**base)


def record(run_id: str, started: str, results: list[Result], profile: str = "cpu"):
    return RunRecord(run_id=run_id, started=started, profile=profile,
                     git_commit="c" * 40).finish(results)


RUN_A = "a" * 32
RUN_B = "b" * 32


@pytest.fixture
def store(tmp_path):
    with History(tmp_path / "h" / "history.sqlite") as h:
        yield h


@pytest.fixture
def two_runs(store):
    samples = Measurement(samples=[Sample(value=9.9, predecessor="cold"),
                                   Sample(value=10.1, arm="a"), Sample(value=10.0, arm="b")])
    a = record(RUN_A, "2025-06-01T02:00:00+00:00", [
        result("x.kept"), result("y.drops", measured=10.0, measurement=samples),
        result("z.gone", Verdict.SKIP, measured=None)])
    b = record(RUN_B, "2025-06-02T02:00:00+00:00", [
        result("x.kept", measured=10.5), result("y.drops", Verdict.FAIL, measured=5.0,
                                                band=(-math.inf, 11.0)),
        result("w.new", Verdict.VOID, measured=9.0)])
    store.append(a)
    store.append(b)
    return store, a, b


# --------------------------------------------------------------------------- store


def test_append_and_read_back(two_runs):
    store, a, b = two_runs
    assert store.record(RUN_A) == a and store.record(RUN_B) == b
    runs = store.runs()
    assert [r.run_id for r in runs] == [RUN_B, RUN_A]  # newest first
    assert runs[0].counts == {"PASS": 1, "FAIL": 1, "VOID": 1, "SKIP": 0, "ERROR": 0,
                              "history": 0}
    assert (runs[1].exit_code, runs[0].exit_code) == (0, 1)
    assert runs[0].commit == "c" * 40
    rows = {r.anchor_id: r for r in store.results(RUN_B)}
    assert set(rows) == {"x.kept", "y.drops", "w.new"}
    y = rows["y.drops"]
    assert (y.verdict, y.measured, y.ci_lo, y.ci_hi, y.band_lo, y.band_hi) == \
        ("FAIL", 5.0, 4.5, 5.5, -math.inf, 11.0)
    assert y.reason == "fail here" and y.unit == "tok/s"


def test_samples_are_stored_in_order(two_runs):
    store, _, _ = two_runs
    got = [tuple(r) for r in store.samples(RUN_A, "y.drops")]
    assert got == [(0, None, 9.9, "cold"), (1, "a", 10.1, None), (2, "b", 10.0, None)]


def test_runs_filters_and_limits(two_runs):
    store, _, _ = two_runs
    store.append(record("c" * 32, "2025-06-03T02:00:00+00:00", [result("x.kept")], "gtx1060"))
    assert [r.run_id for r in store.runs(profile="cpu")] == [RUN_B, RUN_A]
    assert [r.run_id for r in store.runs(limit=1)] == ["c" * 32]
    assert len(list(store)) == 3


def test_anchor_history_is_a_time_series(two_runs):
    store, _, _ = two_runs
    store.append(record("c" * 32, "2025-06-03T02:00:00+00:00", [result("x.kept", measured=11.0)],
                        "gtx1060"))
    series = store.anchor_history("x.kept")
    assert [(r.run_id, r.measured) for r in series] == [(RUN_A, 10.0), (RUN_B, 10.5),
                                                       ("c" * 32, 11.0)]
    assert [r.run_id for r in store.anchor_history("x.kept", profile="gtx1060")] == ["c" * 32]
    assert store.anchor_history("no.such.anchor") == []


def test_wal_and_schema_version(store):
    assert store._connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store._connection.execute("PRAGMA user_version").fetchone()[0] == 4


@pytest.mark.parametrize("table", ["runs", "results", "samples", "imports"])
@pytest.mark.parametrize("sql", ["UPDATE {t} SET run_id = 'x'", "DELETE FROM {t}"])
def test_history_is_append_only(two_runs, table, sql):
    store, _, _ = two_runs
    before = store._connection.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    assert before > 0
    raw = sqlite3.connect(str(store.path))  # any client, not just lawbench, is refused
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        raw.execute(sql.format(t=table))
    raw.close()
    assert store._connection.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] == before


def test_a_run_is_recorded_once(two_runs):
    store, a, _ = two_runs
    with pytest.raises(DataError, match="already in the history"):
        store.append(a)
    assert len(store.runs()) == 2


def test_a_failed_append_leaves_nothing_behind(store):
    twice = record("d" * 32, "2025-06-01T00:00:00+00:00", [result("x.kept"), result("x.kept")])
    with pytest.raises(DataError, match="same anchor twice"):
        store.append(twice)
    assert store.runs() == [] and store.anchor_history("x.kept") == []


def test_an_unfinished_run_is_refused(store):
    with pytest.raises(DataError, match="not finished"):
        store.append(RunRecord.new("cpu"))


def test_corrupt_file_is_a_clear_error(tmp_path):
    path = tmp_path / "history.sqlite"
    path.write_bytes(b"this is not an sqlite file " * 200)
    with pytest.raises(DataError) as info:
        History(path)
    message = str(info.value)
    assert message.startswith(str(path)) and "move the file aside" in message
    assert "\n" not in message


def test_schema_version_mismatch_is_refused(tmp_path):
    path = tmp_path / "history.sqlite"
    History(path).close()
    raw = sqlite3.connect(str(path))
    raw.execute("PRAGMA user_version = 99")
    raw.close()
    with pytest.raises(DataError, match=r"schema version 99, but this lawbench reads version 4"):
        History(path)


def test_a_foreign_sqlite_file_is_refused(tmp_path):
    path = tmp_path / "other.sqlite"
    raw = sqlite3.connect(str(path))
    raw.execute("CREATE TABLE customers (id INTEGER)")
    raw.close()
    with pytest.raises(DataError, match="customers"):
        History(path)


def test_default_path(tmp_path, monkeypatch):
    monkeypatch.setenv("LAWBENCH_OUT", str(tmp_path / "home"))
    assert default_path() == tmp_path / "home" / "history.sqlite"
    monkeypatch.delenv("LAWBENCH_OUT")
    monkeypatch.chdir(tmp_path)
    with History() as h:
        assert h.path.resolve() == (tmp_path / "lawbench-out" / "history.sqlite").resolve()
    assert (tmp_path / "lawbench-out" / "history.sqlite").is_file()


def test_resolve_run_references(two_runs):
    store, _, _ = two_runs
    assert store.resolve("latest") == RUN_B and store.resolve("latest~1") == RUN_A
    assert store.resolve("aaa") == RUN_A and store.resolve(RUN_B) == RUN_B
    store.append(record("a" * 31 + "0", "2025-06-04T00:00:00+00:00", [result("x.kept")]))
    with pytest.raises(DataError, match="ambiguous"):
        store.resolve("aaa")
    with pytest.raises(DataError, match="no run 'latest~9'"):
        store.resolve("latest~9")
    with pytest.raises(DataError, match="no run '_'"):
        store.resolve("_")  # LIKE wildcards are taken literally


# --------------------------------------------------------------------------- compare


def test_compare_joins_by_anchor_id(two_runs):
    store, _, _ = two_runs
    rows = {r.anchor_id: r for r in compare_runs(store, RUN_A, RUN_B)}
    assert list(rows) == sorted(rows) == ["w.new", "x.kept", "y.drops", "z.gone"]
    assert rows["x.kept"].ratio == pytest.approx(1.05) and rows["x.kept"].change == ""
    assert rows["y.drops"].ratio == pytest.approx(0.5)
    assert rows["y.drops"].change == "PASS -> FAIL" and rows["y.drops"].worse
    assert rows["w.new"].change == "new" and rows["w.new"].verdict_a is None
    assert rows["w.new"].worse  # appeared VOID: bad where A had nothing
    assert rows["z.gone"].change == "gone" and rows["z.gone"].ratio is None
    assert not rows["x.kept"].worse and not rows["z.gone"].worse
    reverse = {r.anchor_id: r for r in compare_runs(store, RUN_B, RUN_A)}
    assert reverse["y.drops"].change == "FAIL -> PASS" and not reverse["y.drops"].worse


def test_compare_predictions_by_their_predicted_value(store):
    def pred(v: float) -> Result:
        return result("p.only", measured=None, kind="prediction", predicted=v)
    store.append(record(RUN_A, "2025-06-01T00:00:00+00:00", [pred(2.0)]))
    store.append(record(RUN_B, "2025-06-02T00:00:00+00:00", [pred(3.0)]))
    (row,) = compare_runs(store, RUN_A, RUN_B)
    assert (row.measured_a, row.predicted_b, row.ratio) == (None, 3.0, pytest.approx(1.5))
    console = Console(record=True, width=80, file=io.StringIO())
    print_comparison([row], RUN_A, RUN_B, console=console)
    text = console.export_text()
    assert "2 p" in text and "3 p" in text and "1.500" in text


def test_print_comparison_renders(two_runs):
    store, _, _ = two_runs
    console = Console(record=True, width=200, file=io.StringIO())
    print_comparison(compare_runs(store, RUN_A, RUN_B), RUN_A, RUN_B, console=console)
    text = console.export_text()
    assert "4 anchors, 1 turned bad, 1 new and bad" in text  # w.new appeared VOID: it did not turn
    assert "PASS -> FAIL" in text and "0.500" in text and "1.050" in text


# --------------------------------------------------------------------------- CLI


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="lawbench")
    add_history_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    assert args.func is history_command
    console = Console(record=True, width=200, file=io.StringIO())
    code = args.func(args, console=console)
    out, err = capsys.readouterr()
    return code, out + console.export_text(), err


def test_cli_lists_runs_as_json(two_runs, capsys):
    store, _, _ = two_runs
    code, out, _ = run_cli(["history", "--db", str(store.path), "--json"], capsys)
    assert code == 0
    assert [r["run_id"] for r in json.loads(out)] == [RUN_B, RUN_A]


def test_census_rows_show_their_counted_labels_in_the_anchor_view_and_the_page(store, capsys):
    """A census has label counts, not a number: the anchor view shows the counts its verdict rests
    on (bytes in MiB), --json carries them, and the history page lists them in a table, not as
    empty plot panels."""
    from lawbench.core.html.historypage import history_page

    def census(n: int, verdict: Verdict) -> Result:
        judged = {"repacked_tensors": n, "buffer:CPU_REPACK": 4791992 if n else 0}
        return result("c.census", verdict, measured=None, kind="census", quantity="census", unit="count",
                      published=None, predicted=None, band=None, spread=None,
                      census_counts={**judged, "model_loads": 1}, census_judged=judged,
                      reason="" if n else "repacked_tensors: counted 0, expected at least 70")
    store.append(record(RUN_A, "2025-06-01T02:00:00+00:00", [census(70, Verdict.PASS)]))
    store.append(record(RUN_B, "2025-06-02T02:00:00+00:00", [census(0, Verdict.FAIL)]))
    code, out, _ = run_cli(["history", "--db", str(store.path), "--anchor", "c.census"], capsys)
    assert code == 0 and "repacked_tensors 70, buffer:CPU_REPACK 4.6 MiB" in out
    assert "repacked_tensors 0, buffer:CPU_REPACK 0" in out
    code, out, _ = run_cli(["history", "--db", str(store.path), "--anchor", "c.census", "--json"], capsys)
    assert [r["judged"]["repacked_tensors"] for r in json.loads(out)] == [70, 0]
    page = history_page(store)
    assert "censuses: 1 series" in page and "repacked_tensors 70, buffer:CPU_REPACK 4.6 MiB" in page
    assert "law4: " not in page  # no plot panel for an anchor without a number


def test_cli_anchor_series_and_table(two_runs, capsys):
    store, _, _ = two_runs
    code, out, _ = run_cli(["history", "--db", str(store.path), "--anchor", "y.drops", "--json"],
                           capsys)
    data = json.loads(out)
    assert code == 0 and [r["verdict"] for r in data] == ["PASS", "FAIL"]
    assert data[1]["band_lo"] == "-Infinity"
    code, out, _ = run_cli(["history", "--db", str(store.path), "--anchor", "y.drops"], capsys)
    assert code == 0 and "y.drops: decode speed (tok/s), 2 runs" in out
    code, out, _ = run_cli(["history", "--db", str(store.path)], capsys)
    assert code == 0 and RUN_A[:12] in out and "1 FAIL" in out


def test_cli_narrow_terminal_keeps_ids_and_numbers_whole(two_runs, capsys):
    store, _, _ = two_runs
    parser = argparse.ArgumentParser(prog="lawbench")
    add_history_parser(parser.add_subparsers(dest="command"))
    for argv in (["history"], ["history", "--anchor", "y.drops"]):
        console = Console(record=True, width=80, file=io.StringIO())
        assert history_command(parser.parse_args([*argv, "--db", str(store.path)]), console) == 0
        text = console.export_text()
        assert max(len(line) for line in text.splitlines()) <= 80
        assert RUN_A[:12] in text and "…" not in text
    assert "[4.5," in text and "5.5]" in text and "≤ 11" in text  # may wrap at the space
    assert f"  {RUN_B[:12]} FAIL: fail here" in text  # reasons follow the table when narrow


@pytest.mark.parametrize("where", ["before", "after"])
def test_cli_compare(two_runs, capsys, where):
    store, _, _ = two_runs
    db = ["--db", str(store.path), "--json"]
    argv = ["history", *db, "compare", "latest~1", "latest"] if where == "before" else \
        ["history", "compare", "aaaa", "bbbb", *db]
    code, out, _ = run_cli(argv, capsys)
    data = json.loads(out)
    rows = {r["anchor_id"]: r for r in data["rows"]}
    assert code == 0 and rows["y.drops"]["change"] == "PASS -> FAIL" and rows["y.drops"]["worse"]
    assert (data["run_a"], data["run_b"], data["comparable"], data["reasons"]) == (RUN_A, RUN_B, True, [])


def test_cli_errors_are_one_line(tmp_path, capsys):
    bad = tmp_path / "history.sqlite"
    bad.write_bytes(b"garbage" * 500)
    code, _, err = run_cli(["history", "--db", str(bad)], capsys)
    assert code == 2 and str(bad) in err and err.count("\n") == 1
    assert "Traceback" not in err
    with History(tmp_path / "ok.sqlite"):
        pass
    code, _, err = run_cli(["history", "--db", str(tmp_path / "ok.sqlite"), "--anchor", "nope"],
                           capsys)
    assert code == 2 and "no results for anchor 'nope'" in err
    code, _, err = run_cli(["history", "--db", str(tmp_path / "none.sqlite")], capsys)
    assert code == 2 and "none.sqlite: no history here yet" in err
    assert not (tmp_path / "none.sqlite").exists()  # a read-only view creates nothing


# --------------------------------------------------------------------------- schema 2


def test_a_version_1_history_is_upgraded_in_place(tmp_path):
    """A file written by the schema-1 lawbench (its tables, its triggers, user_version 1) keeps
    every row, gains the provenance and binding tables and their append-only triggers, and reads as
    the current version."""
    from lawbench.core.history.schema import _SCHEMA_V1

    path = tmp_path / "history.sqlite"
    old_triggers = "".join(
        f"CREATE TRIGGER {t}_no_{op.lower()} BEFORE {op} ON {t} BEGIN SELECT RAISE(ABORT, "
        f"'lawbench history is append-only: {op} on {t} is refused'); END;\n"
        for t in ("runs", "results", "samples") for op in ("UPDATE", "DELETE"))
    raw = sqlite3.connect(str(path))
    raw.executescript(_SCHEMA_V1 + old_triggers + "PRAGMA user_version = 1;")
    old = record(RUN_A, "2025-06-01T02:00:00+00:00", [result("x.kept")])
    raw.execute('INSERT INTO runs (run_id, started, finished, profile, "commit", version, exit_code, '
                "record_json) VALUES (?,?,?,?,?,?,?,?)",
                (RUN_A, old.started, old.finished, "cpu", old.git_commit, old.lawbench_version, 0,
                 old.model_dump_json()))
    raw.execute("INSERT INTO results (run_id, anchor_id, verdict, measured) VALUES (?,?,?,?)",
                (RUN_A, "x.kept", "PASS", 10.0))
    raw.commit()
    raw.close()
    with History(path) as h:
        assert h._connection.execute("PRAGMA user_version").fetchone()[0] == 4
        assert [r.run_id for r in h.runs()] == [RUN_A] and h.record(RUN_A) == old
        assert h.provenance(RUN_A) is None  # appended before provenance was kept
        h.append(record(RUN_B, "2025-06-02T02:00:00+00:00", [result("x.kept")]))
        assert h.provenance(RUN_B).source == "lawbench run"
    raw = sqlite3.connect(str(path))
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        raw.execute("DELETE FROM imports")
    raw.close()


def test_an_old_lawbench_refuses_a_newer_history(tmp_path, monkeypatch):
    """The schema-1 reader's rule, replayed: any user_version but its own is refused by name."""
    import lawbench.core.history.store as history_module

    path = tmp_path / "history.sqlite"
    History(path).close()
    monkeypatch.setattr(history_module, "HISTORY_SCHEMA", 1)
    with pytest.raises(DataError, match="history schema version 4, but this lawbench reads version 1"):
        History(path)


def test_a_version_2_history_gains_the_bindings_table_and_keeps_its_rows(tmp_path):
    """Schema 3 adds `bindings` only: a version-2 file keeps every row in order, its runs have no
    binding, a bound run appended afterwards carries its own, and the new table is append-only too."""
    from lawbench.core.history.store import Binding, Provenance
    from lawbench.core.history.schema import _SCHEMA_V1, _SCHEMA_V2

    path = tmp_path / "history.sqlite"
    raw = sqlite3.connect(str(path))
    raw.executescript(_SCHEMA_V1 + _SCHEMA_V2 + "PRAGMA user_version = 2;")
    raw.close()
    with History(path) as h:
        h.append(record(RUN_A, "2025-06-01T02:00:00+00:00", [result("x.kept")]))
    raw = sqlite3.connect(str(path))
    raw.execute("PRAGMA user_version = 2")  # as a schema-2 lawbench left it: one run, no bindings table
    raw.execute("DROP TABLE bindings")
    raw.commit()
    raw.close()
    bound = Binding("5001", 1, "anchors", "cpu", "lawbench-cpu-5001", "77", "sha256:" + "0" * 64, "0" * 40,
                    "2025-06-02T03:00:00+00:00")
    with History(path) as h:  # upgraded when opened
        assert h._connection.execute("PRAGMA user_version").fetchone()[0] == 4
        h.append(record(RUN_B, "2025-06-02T02:00:00+00:00", [result("x.kept")]),
                 Provenance(kind="run", source="tonight/lawbench-cpu-5001/cpu/run.json", binding=bound))
        assert [(r.run_id, r.binding) for r in h.runs()] == [(RUN_B, bound), (RUN_A, None)]
        assert h.provenance(RUN_B).binding == bound
    raw = sqlite3.connect(str(path))
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        raw.execute("DELETE FROM bindings")
    raw.close()


def test_runs_appended_by_lawbench_run_get_provenance(two_runs):
    store, _, _ = two_runs
    p = store.provenance(RUN_A)
    assert (p.kind, p.source, p.sha256) == ("run", "lawbench run", None) and p.imported_at


# --------------------------------------------------------------------------- join keys


LLAMA = {"name": "llama.cpp", "version": "11434.0.0", "backend": "cpu", "build_number": 11434,
         "commit": "unknown", "cuda_arch": None, "cpu_flags_hash": "aadc36d4400a"}


@pytest.mark.parametrize("engine, key", [
    (None, "no engine"),
    ({}, "no engine"),
    (LLAMA, "llama.cpp b11434 cpu"),
    ({**LLAMA, "backend": "cuda", "cuda_arch": "90", "commit": "0123456789abcdef"},
     "llama.cpp b11434 cuda sm90 @0123456789"),
    ({"name": "llama.cpp", "version": "b5000", "backend": "unknown"}, "llama.cpp b5000 unknown"),
])
def test_engine_key(engine, key):
    from lawbench.core.history.store import engine_key

    assert engine_key(engine) == key


def engine_record(run_id: str, started: str, results: list[Result], engine=LLAMA, profile="cpu",
                  **kw) -> RunRecord:
    return RunRecord(run_id=run_id, started=started, profile=profile, engine=engine,
                     profile_matches=True, machine={"hostname": "box"}, **kw).finish(results)


def test_compare_says_when_runs_are_not_comparable(store, capsys):
    from lawbench.core.history.compare import comparability

    pred = result("p.only", measured=None, kind="prediction", predicted=2.0)
    store.append(engine_record(RUN_A, "2025-06-01T00:00:00+00:00", [result("m.speed"), pred]))
    store.append(engine_record(RUN_B, "2025-06-02T00:00:00+00:00", [result("m.speed"), pred],
                               engine={**LLAMA, "build_number": 11500}, lawbench_version="0.2.0"))
    verdict = comparability(store, RUN_A, RUN_B)
    assert not verdict.comparable
    assert verdict.reasons == ["different engine builds: llama.cpp b11434 cpu (A) and "
                               "llama.cpp b11500 cpu (B); predictions still compare"]
    assert verdict.notes == ["different lawbench versions (anchors and laws may differ): 0.1.0 (A) "
                             "and 0.2.0 (B)"]
    rows = {r.anchor_id: r for r in compare_runs(store, RUN_A, RUN_B)}
    assert not rows["m.speed"].comparable and rows["p.only"].comparable  # a prediction needs no engine
    code, out, _ = run_cli(["history", "compare", "latest~1", "latest", "--db", str(store.path)], capsys)
    assert code == 0 and "not comparable: different engine builds" in out and "≠ 1.000" in out
    assert "note: different lawbench versions" in out
    code, out, _ = run_cli(["history", "compare", "latest~1", "latest", "--db", str(store.path),
                            "--json"], capsys)
    data = json.loads(out)
    assert data["comparable"] is False and len(data["reasons"]) == 1
    assert {r["anchor_id"]: r["comparable"] for r in data["rows"]} == {"m.speed": False, "p.only": True}


def test_compare_different_profiles_is_not_comparable_even_for_predictions(store):
    from lawbench.core.history.compare import comparability

    pred = result("p.only", measured=None, kind="prediction", predicted=2.0)
    store.append(engine_record(RUN_A, "2025-06-01T00:00:00+00:00", [pred]))
    store.append(engine_record(RUN_B, "2025-06-02T00:00:00+00:00", [pred], profile="gtx1060"))
    verdict = comparability(store, RUN_A, RUN_B)
    assert verdict.reasons == ["different profiles: cpu (A) and gtx1060 (B)"]
    (row,) = compare_runs(store, RUN_A, RUN_B)
    assert not row.comparable and row.ratio == 1.0  # still shown, marked


def test_anchor_view_shows_profile_and_engine_build(store, capsys):
    store.append(engine_record(RUN_A, "2025-06-01T00:00:00+00:00", [result("m.speed")]))
    store.append(engine_record(RUN_B, "2025-06-02T00:00:00+00:00", [result("m.speed")], engine=None))
    code, out, _ = run_cli(["history", "--db", str(store.path), "--anchor", "m.speed"], capsys)
    assert code == 0 and "engine build" in out and "llama.cpp b11434 cpu" in out and "no engine" in out
    code, out, _ = run_cli(["history", "--db", str(store.path), "--anchor", "m.speed", "--json"], capsys)
    assert [r["engine"] for r in json.loads(out)] == ["llama.cpp b11434 cpu", "no engine"]


# --------------------------------------------------------------------------- a history this user cannot write

def _read_only_mount(folder, argv):
    """Run ``lawbench ARGV`` with ``folder`` bind-mounted read-only in a private mount namespace
    (the file system refuses the write, whoever we are; chmod would not stop root). Root or not:
    tests/_mounts.py."""
    import sys

    from _mounts import in_private_mounts

    return in_private_mounts(f"mount --bind -o ro '{folder}' '{folder}' && "
                             f"{{ touch '{folder}/w' 2>/dev/null && echo WRITABLE; true; }}",
                             [sys.executable, "-m", "lawbench.core.commands.main", *argv])


def test_a_history_on_a_read_only_mount_is_read_as_a_snapshot(tmp_path, two_runs):
    """A copied history without its -wal/-shm files, on a file system this process cannot write:
    every read-only view works, and nothing is written next to it."""
    store, a, b = two_runs
    store.close()
    folder = tmp_path / "ro"
    folder.mkdir()
    (folder / "history.sqlite").write_bytes((tmp_path / "h" / "history.sqlite").read_bytes())
    db = str(folder / "history.sqlite")
    for argv in (["history", "--db", db], ["history", "--db", db, "compare", RUN_A, RUN_B],
                 ["history", "--db", db, "drift"],
                 ["report", "--history", "--db", db, "--out", str(tmp_path / "report.html")]):
        p = _read_only_mount(folder, argv)
        assert "WRITABLE" not in p.stdout
        assert p.returncode == 0, (argv, p.stdout + p.stderr)
        assert "Traceback" not in p.stderr and "cannot open the history" not in p.stderr
    listed = _read_only_mount(folder, ["history", "--db", db]).stdout
    assert RUN_A[:8] in listed and RUN_B[:8] in listed
    assert sorted(f.name for f in folder.iterdir()) == ["history.sqlite"]
    assert RUN_B[:8] in (tmp_path / "report.html").read_text(encoding="utf-8")


def test_an_import_into_a_read_only_folder_says_so_for_a_new_and_an_existing_history(tmp_path, two_runs):
    """SQLite alone says "unable to open database file" (a new file) or fails at the first write
    (an existing one); the history names what is wrong and what to do, and writes nothing."""
    store, a, b = two_runs
    store.close()
    run_json = tmp_path / "a.run.json"
    run_json.write_text(to_json(a), encoding="utf-8")
    folder = tmp_path / "ro"
    folder.mkdir()
    for db in (folder / "new.sqlite", folder / "history.sqlite"):
        if db.name == "history.sqlite":
            db.write_bytes((tmp_path / "h" / "history.sqlite").read_bytes())
        before = sorted(f.name for f in folder.iterdir())
        p = _read_only_mount(folder, ["history", "--db", str(db), "import", str(run_json)])
        assert "WRITABLE" not in p.stdout and p.returncode == 2, p.stdout + p.stderr
        (line,) = p.stderr.strip().splitlines()
        assert f"{db}: cannot write the history here: Read-only file system; pass --db" in line, line
        assert sorted(f.name for f in folder.iterdir()) == before


def test_a_read_only_history_with_runs_still_in_its_wal_is_read_whole_or_refused(tmp_path, store):
    """Runs appended while another reader held the file open sit in history.sqlite-wal. With its
    -shm beside it a read-only open sees them; without it, an immutable open would not, so it is
    refused instead of listing fewer runs."""
    held = sqlite3.connect(str(store.path))  # keeps the WAL from being merged at close
    held.execute("SELECT count(*) FROM runs").fetchone()  # opens the WAL index: this reader shares it
    store.append(record(RUN_A, "2025-06-01T02:00:00+00:00", [result("x.kept")]))
    store.append(record(RUN_B, "2025-06-02T02:00:00+00:00", [result("x.kept")]))
    store.close()
    wal = store.path.with_name("history.sqlite-wal")
    assert wal.stat().st_size > 0
    whole, bare = tmp_path / "whole", tmp_path / "bare"
    for folder, parts in ((whole, ("", "-wal", "-shm")), (bare, ("", "-wal"))):
        folder.mkdir()
        for part in parts:
            (folder / f"history.sqlite{part}").write_bytes(store.path.with_name(f"history.sqlite{part}").read_bytes())
    held.close()
    p = _read_only_mount(whole, ["history", "--db", str(whole / "history.sqlite")])
    assert p.returncode == 0 and RUN_A[:8] in p.stdout and RUN_B[:8] in p.stdout, p.stdout + p.stderr
    p = _read_only_mount(bare, ["history", "--db", str(bare / "history.sqlite")])
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stdout + p.stderr
    assert "history.sqlite-wal holds runs not yet merged into it" in p.stderr


@pytest.mark.parametrize("make, words", [
    (lambda p: p.mkdir(), "is a folder, not a history file"),
    (lambda p: p.write_bytes(b""), "is empty, not a lawbench history"),
])
def test_a_history_that_is_a_folder_or_empty_is_named_by_every_read_view(tmp_path, make, words):
    import subprocess
    import sys

    db = tmp_path / "history.sqlite"
    make(db)
    for argv in (["history"], ["history", "drift"], ["history", "stale"]):
        p = subprocess.run([sys.executable, "-m", "lawbench.core.commands.main", argv[0], "--db", str(db), *argv[1:]],
                           capture_output=True, text=True, timeout=120, encoding="utf-8")
        assert p.returncode == 2 and words in p.stderr and "Traceback" not in p.stderr, (argv, p.stderr)
    if db.is_file():
        assert db.stat().st_size == 0  # a read view wrote nothing into it
