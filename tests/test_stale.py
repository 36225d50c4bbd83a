"""`lawbench history stale`: profiles whose runner stopped reporting completed runs."""
from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
from conftest import history_in_process

from lawbench.core.errors import UsageError
from lawbench.core.history.store import History
from lawbench.core.record.reports import RunRecord
from lawbench.core.history.stale import check_stale, parse_time, runner_profiles

NOW = datetime(2025, 6, 10, 12, 0, tzinfo=timezone.utc)


def run(run_id: str, profile: str, finished: str, matches: bool = True,
        interrupted: str | None = None) -> RunRecord:
    r = RunRecord(run_id=run_id * 32, started=finished, profile=profile, profile_matches=matches)
    r.finish([], interrupted=interrupted)
    r.finished = finished
    return r


@pytest.fixture
def store(tmp_path):
    with History(tmp_path / "history.sqlite") as h:
        h.append(run("a", "cpu", "2025-06-09T02:00:00+00:00"))             # 34 h before NOW
        h.append(run("b", "gtx1060", "2025-06-08T02:00:00+00:00"))         # 58 h: stale
        h.append(run("c", "gtx1060", "2025-06-10T02:00:00+00:00", matches=False))  # not its runner
        h.append(run("d", "h200", "2025-06-10T02:00:00+00:00", interrupted="SIGTERM"))  # not completed
        yield h


def test_newest_completed_run_per_profile(store):
    rows = {r.profile: r for r in check_stale(store, ["cpu", "gtx1060", "h200"], 36, NOW)}
    assert (rows["cpu"].run_id, rows["cpu"].age_hours, rows["cpu"].stale) == ("a" * 32, 34.0, False)
    assert (rows["gtx1060"].run_id, rows["gtx1060"].stale) == ("b" * 32, True)
    assert (rows["h200"].run_id, rows["h200"].stale) == (None, True)
    assert not check_stale(store, ["gtx1060"], 60, NOW)[0].stale
    assert check_stale(store, ["cpu"], 30, NOW)[0].stale
    assert all(r.stale for r in check_stale(None, ["cpu"], 36, NOW))  # no history file yet
    with pytest.raises(UsageError, match="--hours must be above 0"):
        check_stale(store, ["cpu"], 0, NOW)


def test_default_profiles_are_the_ones_with_runners():
    # deployed profiles only: a profile with no runner is never called stale (issue 19)
    assert set(runner_profiles()) == {"cpu", "cpu-ddr4", "gtx1060"}


def test_parse_time():
    assert parse_time("2025-06-10T12:00:00Z") == NOW == parse_time("2025-06-10T12:00:00")
    with pytest.raises(UsageError, match="cannot read --now 'yesterday'"):
        parse_time("yesterday")


def test_cli_exit_1_names_the_stale_profiles(store, capsys):
    db = ["--db", str(store.path), "--now", "2025-06-10T12:00:00+00:00"]
    code, out, _ = history_in_process(["history", "stale", *db, "--profile", "cpu"], capsys)
    assert code == 0 and out.startswith("ok     cpu: newest completed run aaaaaaaaaaaa finished "
                                        "2025-06-09 02:00 UTC, 34.0 h ago")
    code, out, _ = history_in_process(["history", "stale", *db, "--profile", "cpu", "--profile", "h200"], capsys)
    assert code == 1 and "STALE  h200: no completed run" in out
    assert out.splitlines()[-1] == "1 profile(s) without a completed run in the last 36 h: h200"
    code, out, _ = history_in_process(["history", "stale", *db, "--profile", "gtx1060", "--json"], capsys)
    (row,) = json.loads(out)
    assert code == 1 and row["run_id"] == "b" * 32 and row["age_hours"] == 58.0 and row["stale"]


def test_cli_without_a_history_file_every_profile_is_stale(tmp_path, capsys):
    code, out, _ = history_in_process(["history", "stale", "--db", str(tmp_path / "none.sqlite"), "--profile", "cpu"],
                           capsys)
    assert code == 1 and "STALE  cpu: no completed run" in out
    assert not (tmp_path / "none.sqlite").exists()
    code, _, err = history_in_process(["history", "stale", "--db", str(tmp_path / "x"), "--now", "soon"], capsys)
    assert code == 2 and "cannot read --now 'soon'" in err
