"""`lawbench ab` and `lawbench census plant` are modes of the one Run: each writes an ordinary run
record (run.json, the RunRecord schema) that reaches the history, `lawbench history`, `history
compare` and the HTML report, next to its own view (ab.json, planted.json). Real llama.cpp builds,
real models, real subprocesses."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from _engine_fixtures import llama  # noqa: F401  (the real cached build)
from test_ab import SMALL, env, lawbench  # noqa: F401  (env: a fixture)

from lawbench.core.record.reports import read_json

ROOT = Path(__file__).resolve().parents[1]


def history(db: Path, env: dict, *args: str) -> object:  # noqa: F811
    p = lawbench(["history", *args, "--db", str(db), "--json"], env, db.parent, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout)


def report(out: Path, env: dict, *args: str) -> str:  # noqa: F811
    page = out / "page.html"
    p = lawbench(["report", *args, "--out", str(page)], env, out)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-2000:]
    return page.read_text(encoding="utf-8")


@pytest.mark.integration
def test_ab_runs_are_run_records_in_history_compare_and_report(tmp_path, env, llama):  # noqa: F811
    out = tmp_path / "out"
    runs = []
    for _ in range(2):  # two A/Bs of the same two builds: a history to compare
        p = lawbench(["ab", "--b", "llama.cpp@11434.0.0", "-k", SMALL, "--pairs", "3", "--out", str(out)], env, tmp_path)
        assert p.returncode == 0, p.stderr[-3000:]
        assert "B/A per anchor" in p.stdout and "record: " in p.stdout  # the A/B's own table, as before
        record = read_json(out / "run.json")  # the RunRecord schema, validated
        view = json.loads((out / "ab.json").read_text(encoding="utf-8"))
        assert record.mode == "ab" and record.run_id.startswith("ab-") and record.run_id == view["run_id"]
        (r,) = record.results
        assert r.anchor_id == "law4.cpu.l15.syn-100m-q4_0~ab" and r.verdict.value == "PASS"
        assert (r.measured, list(r.interval)) == (view["results"][0]["ratio"], view["results"][0]["interval"])
        assert len(r.measurement.samples) == 3 and r.ab.status == "measured"
        assert record.engine["a"]["build_number"] == 11434 and record.exit_code == 0
        assert (out / "report.html").is_file()
        runs.append(record.run_id)
    listed = history(out / "history.sqlite", env)
    assert [row["run_id"] for row in listed] == runs[::-1]  # newest first
    rows = history(out / "history.sqlite", env, "compare", "latest~1", "latest")
    assert [row["anchor_id"] for row in rows["rows"]] == ["law4.cpu.l15.syn-100m-q4_0~ab"], rows
    assert rows["comparable"] is True, rows  # the same two builds: an A/B joins A/Bs
    page = report(out, env, "--history", "--db", str(out / "history.sqlite"))
    assert all(run[:12] in page for run in runs) and "A/B llama.cpp b11434" in page  # both, with their builds
    assert page.count("<td>ab</td>") == 2 and "<th>mode</th>" in page  # the runs table says what each was
    assert "law4.cpu.l15.syn-100m-q4_0~ab" in report(out, env, str(out / "run.json"))


@pytest.mark.integration
def test_census_plant_runs_are_run_records_in_history_compare_and_report(tmp_path, env, llama):  # noqa: F811
    """A real proof of the CPU repack census (its fault: llama-bench --repack 0), then a `lawbench
    run` of the same census into the same history: compare joins the census across the two modes."""
    out = tmp_path / "out"
    p = lawbench(["census", "plant", "--profile", "cpu", "--anchor", "law4.cpu.census.q4_0-repack",
                  "--out", str(out)], env, tmp_path)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert "1/1 planted faults proved" in p.stdout
    record = read_json(out / "run.json")
    assert record.mode == "plant" and record.run_id.startswith("plant-") and record.exit_code == 0
    got = {r.anchor_id: r for r in record.results}
    assert set(got) == {"law4.cpu.census.q4_0-repack", "law4.cpu.census.q4_0-repack~no-repack"}, set(got)
    fault = got["law4.cpu.census.q4_0-repack~no-repack"]
    assert fault.verdict.value == "PASS" and fault.plant.fault["result"]["verdict"] == "FAIL"
    view = json.loads((out / "planted.json").read_text(encoding="utf-8"))
    assert view["run_id"] == record.run_id and view["anchors"][0]["faults"] == [fault.plant.fault]

    p = lawbench(["run", "--profile", "cpu", "-k", "census.q4_0-repack", "--out", str(out)], env, tmp_path)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    plant_id, run_id = record.run_id, read_json(out / "run.json").run_id
    assert [row["run_id"] for row in history(out / "history.sqlite", env)] == [run_id, plant_id]
    rows = {row["anchor_id"]: row for row in history(out / "history.sqlite", env, "compare", plant_id, run_id)["rows"]}
    assert rows["law4.cpu.census.q4_0-repack"]["verdict_a"] == rows["law4.cpu.census.q4_0-repack"]["verdict_b"] \
        == "PASS", rows
    assert rows["law4.cpu.census.q4_0-repack~no-repack"]["verdict_b"] is None  # the fault ran in the proof only
    assert "law4.cpu.census.q4_0-repack~no-repack" in report(out, env, "--run", plant_id, "--db",
                                                              str(out / "history.sqlite"))
    page = report(out, env, "--history", "--db", str(out / "history.sqlite"))
    assert page.count("<td>plant</td>") == 1 and page.count("<td>run</td>") == 1


def test_an_ab_json_from_before_ab_runs_were_run_records_is_read_as_one(tmp_path, env):  # noqa: F811
    """results/cpu-nights/ab-*.json (format lawbench-ab/1) reads as the run record it would be now:
    checked as any imported record, it goes into a history, and its view gives the file back."""
    from lawbench.core.record.ab_json import ABRecord, ab_view
    from lawbench.core.record.checks import check_record

    old = ROOT / "results" / "cpu-nights" / "ab-b11434-vs-llama-cpp-python-0.3.36.json"
    record = read_json(old)
    check_record(record, str(old))
    assert record.mode == "ab" and record.exit_code == 0 and record.counts["PASS"] == 3
    assert [r.anchor_id for r in record.results] == [
        "law4.cpu.agree.syn-25m-q4_0~ab", "law4.cpu.agree.syn-25m-q4_k_m~ab", "law4.cpu.agree.syn-100m-q8_0~ab"]
    raw = json.loads(old.read_text(encoding="utf-8"))
    assert json.loads(ab_view(record).model_dump_json()) == {**raw, "format": "lawbench-ab/2"}
    assert ABRecord.model_validate(raw).results[2].ratio == record.results[2].measured
    p = lawbench(["history", "import", "--db", str(tmp_path / "h.sqlite"), str(old)], env, tmp_path, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert [row["run_id"] for row in history(tmp_path / "h.sqlite", env)] == [record.run_id]
