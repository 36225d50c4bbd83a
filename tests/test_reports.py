"""The run record and its views: JSON round trip, Markdown, step summary, terminal table, docs."""
from __future__ import annotations

import io
import json
import math
import re
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import pytest
from rich.console import Console

import lawbench
from lawbench.core.errors import DataError
from lawbench.core.models import Measurement, Result, Sample, Verdict
from lawbench.core.record.reports import RunRecord, fmt_band, fmt_num, git_commit, headline, read_json, write_json
from lawbench.core.record.summaries import append_step_summary, markdown_summary, print_table

DOC = Path(__file__).resolve().parents[1] / "docs" / "run-record.md"


def make_results() -> list[Result]:
    """One result per verdict, plus a superseded anchor carried as history."""
    return [
        Result(anchor_id="law4.decode.gtx1060", law="law4", kind="measurement", profile="gtx1060",
               verdict=Verdict.PASS, quantity="decode speed", unit="tok/s", published=48.2,
               predicted=47.91, measured=48.03, interval=(47.5, 48.6), band=(45.79, 50.61),
               spread=0.012, measurement=Measurement(
                   samples=[Sample(value=48.0, predecessor="warmup"), Sample(value=48.1)],
                   protocol={"reps": 2})),
        Result(anchor_id="law1.rotation.lowrank", law="law1", kind="prediction", profile="gtx1060",
               verdict=Verdict.FAIL, quantity="error ratio", published=0.5, predicted=0.71,
               band=(-math.inf, 0.6), reason="predicted 0.71 | above the band"),
        Result(anchor_id="minfer.q6k.ratio", law="minfer", kind="ratio", profile="gtx1060",
               verdict=Verdict.VOID, quantity="speed-up", unit="x", published=1.3, measured=1.29,
               interval=(1.1, 1.45), band=(1.2, 1.4), spread=0.2, reason="interval straddles 1.2",
               measurement=Measurement(samples=[Sample(value=1.2, arm="a"),
                                                Sample(value=1.4, arm="b")])),
        Result(anchor_id="law4.prefill.cpu", law="law4", kind="measurement", profile="gtx1060",
               verdict=Verdict.SKIP, reason="model file missing"),
        Result(anchor_id="minfer.census.fast", law="minfer", kind="census", profile="gtx1060",
               verdict=Verdict.ERROR, reason="engine crashed\nsecond line"),
        Result(anchor_id="law4.decode.old", law="law4", kind="measurement", profile="gtx1060",
               verdict=Verdict.SKIP, published=44.0, unit="tok/s",
               retired="superseded", retired_by="law4.decode.gtx1060"),
    ]


def make_record(**kw) -> RunRecord:
    return RunRecord.new("gtx1060", detected_profile="gtx1060", profile_matches=True,
                         argv=["lawbench", "run"], machine={"gpu": "GTX 1060"},
                         environment={"driver": "550"}, engine={"version": "b11434"},
                         **kw).finish(make_results())


# --------------------------------------------------------------------------- the record


def test_finish_counts_every_verdict_and_fails_the_run():
    record = make_record()
    assert record.counts == {"PASS": 1, "FAIL": 1, "VOID": 1, "SKIP": 1, "ERROR": 1, "history": 1}
    assert record.exit_code == 1 and not record.ok
    assert record.finished is not None


@pytest.mark.parametrize("bad", [Verdict.FAIL, Verdict.VOID, Verdict.ERROR])
def test_any_bad_verdict_gives_exit_code_1(bad):
    good = [r for r in make_results() if r.verdict in (Verdict.PASS, Verdict.SKIP)]
    assert RunRecord.new("cpu").finish(good).exit_code == 0  # SKIP is not bad here
    one_bad = good + [r for r in make_results() if r.verdict is bad]
    assert RunRecord.new("cpu").finish(one_bad).exit_code == 1


def test_new_fills_identity():
    record = RunRecord.new("cpu")
    assert re.fullmatch(r"[0-9a-f]{32}", record.run_id)
    assert RunRecord.new("cpu").run_id != record.run_id
    assert datetime.fromisoformat(record.started).utcoffset() == timezone.utc.utcoffset(None)
    assert record.lawbench_version == lawbench.__version__
    assert record.git_commit is None or re.fullmatch(r"[0-9a-f]{40}", record.git_commit)
    assert record.finished is None and record.exit_code is None


def test_git_commit_of_a_checkout(tmp_path):
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    try:
        subprocess.run(git[:3] + ["init", "-q"], check=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("git is not available")
    (tmp_path / "pyproject.toml").write_text("[project]\nname='x'\n", encoding="utf-8")
    (tmp_path / "core").mkdir()
    assert git_commit(tmp_path / "core" / "reports.py") is None  # no commit yet
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "x"], check=True)
    head = subprocess.run(git[:3] + ["rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True, encoding="utf-8").stdout.strip()
    assert git_commit(tmp_path / "core" / "reports.py") == head


def test_extra_fields_are_refused():
    with pytest.raises(ValueError, match="surprise"):
        RunRecord(profile="cpu", surprise=1)


# --------------------------------------------------------------------------- JSON


def test_json_round_trip_keeps_everything(tmp_path):
    record = make_record()
    path = write_json(record, tmp_path / "out" / "run.json")
    back = read_json(path)
    assert back == record
    assert back.results[1].band == (-math.inf, 0.6)  # the open side survives
    assert back.results[0].measurement.samples[0].predecessor == "warmup"


def test_json_is_standard_and_indented(tmp_path):
    path = write_json(make_record(), tmp_path / "run.json")
    text = path.read_text(encoding="utf-8")
    assert text.splitlines()[1].startswith('  "schema_version": 4')

    def refuse(name):
        raise AssertionError(f"non-standard JSON constant {name}")

    data = json.loads(text, parse_constant=refuse)
    assert data["results"][1]["band"] == ["-Infinity", 0.6]
    assert data["counts"]["SKIP"] == 1 and data["counts"]["history"] == 1


def test_write_json_is_atomic_and_replaces(tmp_path):
    path = tmp_path / "run.json"
    path.write_text("old", encoding="utf-8")
    write_json(make_record(), path)
    assert json.loads(path.read_text(encoding="utf-8"))["profile"] == "gtx1060"
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]  # no temp file left behind


@pytest.mark.parametrize("text, needle", [
    ("{not json", "not a valid run record"),
    ('{"profile": "cpu", "surprise": 1}', "surprise"),
    ('{"profile": "cpu", "schema_version": 5}', "schema_version"),
])
def test_read_json_names_the_file(tmp_path, text, needle):
    path = tmp_path / "bad.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DataError) as info:
        read_json(path)
    message = str(info.value)
    assert str(path) in message and needle in message and "\n" not in message


def test_report_on_a_binary_file_or_a_folder_is_one_line(tmp_path):
    """The easy mistakes: `lawbench report lawbench-out/history.sqlite`, `lawbench report lawbench-out`."""
    import subprocess
    import sys

    (tmp_path / "history.sqlite").write_bytes(b"SQLite format 3\x00\xf8\xff" * 8)
    (tmp_path / "run.json").write_text("{}", encoding="utf-8")
    for arg, words in (("history.sqlite", "not UTF-8 text (a history is read with `lawbench report --history"),
                       (".", "is a folder, not a run record; give the run.json inside it")):
        p = subprocess.run([sys.executable, "-m", "lawbench.core.commands.main", "report", arg], cwd=tmp_path,
                           capture_output=True, text=True, timeout=120, encoding="utf-8")
        assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
        (line,) = p.stderr.strip().splitlines()
        assert words in line, line


# --------------------------------------------------------------------------- docs


def _doc_fields(section: str) -> set[str]:
    text = DOC.read_text(encoding="utf-8")
    body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([a-z_]+)` \|", body, flags=re.M))


@pytest.mark.parametrize("section, model", [
    ("RunRecord", RunRecord), ("Result", Result), ("Measurement", Measurement), ("Sample", Sample),
])
def test_every_field_is_documented(section, model):
    documented = _doc_fields(section)
    assert set(model.model_fields) - documented == set(), f"undocumented in {DOC.name}"
    assert documented - set(model.model_fields) == set(), f"stale rows in {DOC.name}"


# --------------------------------------------------------------------------- Markdown


def test_markdown_has_every_anchor_and_verdict():
    record = make_record()
    md = markdown_summary(record)
    assert "1 PASS, 1 FAIL, 1 VOID, 1 SKIP, 1 ERROR (+1 history)" in md.splitlines()[0]
    rows = [line for line in md.splitlines() if line.startswith("| ") and "`" in line]
    live = [r for r in record.results if r.retired is None]
    assert len(rows) == len(live)
    for r, row in zip(live, rows):
        assert f"`{r.anchor_id}`" in row and row.startswith(f"| {r.verdict.value} |")
        # a pipe inside a reason is escaped: the row keeps exactly 8 cells
        assert len(re.findall(r"(?<!\\)\|", row)) == 9
    assert "48.03 [47.5, 48.6]" in md and "[45.79, 50.61]" in md and "≤ 0.6" in md
    assert "engine crashed<br>second line" in md


def test_markdown_lists_superseded_anchors_as_history():
    md = markdown_summary(make_record())
    table, history = md.split("#### History", 1)
    assert "law4.decode.old" not in table
    assert "`law4.decode.old` (superseded by law4.decode.gtx1060)" in history


def test_history_as_the_runner_marks_it():
    # as lawbench.core.run.evaluate.retired_result writes it: the reason says by what
    marked = Result(anchor_id="law1.refuted", law="law1", kind="prediction", profile="cpu",
                    verdict=Verdict.SKIP, reason="history: refuted by law1.new",
                    retired="refuted")
    record = RunRecord.new("cpu").finish([marked])
    assert record.counts["history"] == 1 and record.counts["SKIP"] == 0
    history = markdown_summary(record).split("#### History")[1]
    assert "`law1.refuted` (refuted by law1.new)" in history


def test_step_summary_appends_to_the_named_file(tmp_path, monkeypatch):
    target = tmp_path / "summary.md"
    target.write_text("earlier step\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    record = make_record()
    assert append_step_summary(record) == target
    append_step_summary(record)
    text = target.read_text(encoding="utf-8")
    assert text.startswith("earlier step\n")
    assert text.count(markdown_summary(record)) == 2


def test_step_summary_is_a_no_op_without_the_variable(tmp_path, monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.chdir(tmp_path)
    assert append_step_summary(make_record()) is None
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- terminal


def test_table_renders_every_anchor_with_coloured_verdicts():
    console = Console(record=True, width=220, file=io.StringIO())
    record = make_record()
    print_table(record, console=console)
    plain = console.export_text(clear=False)
    for r in record.results:
        assert r.anchor_id in plain
    assert "history: law4.decode.old (superseded by law4.decode.gtx1060)" in plain
    styled = console.export_text(styles=True)
    assert "\x1b[1;32mPASS" in styled and "\x1b[1;31mFAIL" in styled
    assert "\x1b[1;33mVOID" in styled


def test_narrow_terminal_never_cuts_a_number():
    console = Console(record=True, width=80, file=io.StringIO())
    big = make_results()[0].model_copy(update={"published": 15206400.0, "predicted": 15206400.0,
                                               "anchor_id": "minfer.r54.plane-bytes.very-long-id"})
    print_table(RunRecord.new("cpu").finish([big, *make_results()[1:]]), console=console)
    text = console.export_text()
    assert text.count("1.521e+07") == 2 and "0.71" in text and "…" not in text
    assert "[45.79," in text and "≤ 0.6" in text
    assert "  FAIL law1.rotation.lowrank: predicted 0.71 | above the band" in text  # reasons follow
    assert max(len(line) for line in text.splitlines()) <= 80


def test_a_log_gets_a_wide_table_and_a_terminal_its_own_width(monkeypatch):
    """In a CI or nox log (not a terminal) rich would print 80 columns, cutting the band column and
    the headline; the console lawbench prints on gives a log 160, and COLUMNS still wins."""
    from lawbench.core.console import LOG_WIDTH, console

    monkeypatch.delenv("COLUMNS", raising=False)
    log = io.StringIO()
    assert console(log).width == LOG_WIDTH == 160
    record = make_record()
    print_table(record, console=console(log))
    text = log.getvalue()
    assert max(len(line) for line in text.splitlines()) > 80  # the table was not squeezed to 80
    assert headline(record) in text  # one line, not split
    monkeypatch.setenv("COLUMNS", "100")
    assert console(io.StringIO()).width == 100


@pytest.mark.parametrize("x, text", [
    (48.2, "48.2"), (-47.91, "-47.91"), (12345.6, "12346"), (100.0, "100"), (0.0123456, "0.01235"),
    (3e-7, "3.000e-07"), (2.5e7, "2.500e+07"), (0.0, "0"), (None, "-"), (math.inf, "inf"),
])
def test_fmt_num_significant_figures(x, text):
    assert fmt_num(x) == text


def test_fmt_band_open_sides():
    base = make_results()[1]
    assert fmt_band(base) == "≤ 0.6"
    assert fmt_band(base.model_copy(update={"band": (1.2, math.inf)})) == "≥ 1.2"
    assert fmt_band(base.model_copy(update={"band": (1.0, 2.0)})) == "[1, 2]"
    # just enough figures that the two ends differ
    assert fmt_band(base.model_copy(update={"band": (89855.5, 89856.5)})) == "[89855.5, 89856.5]"
