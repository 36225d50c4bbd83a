"""Records from strangers are hostile until proven (issue 20): every class of forged or malformed
record is refused in one line naming the file and the field, or shown inert; the genuine history
keeps its rows and their order; and `history`, `drift`, `stale`, `compare` and `report` still work.

The genuine runs are real `lawbench run`s of the dummy law; each hostile file is one of them with
one thing changed, as an attacker (or an unlucky tool) would change it.
"""
from __future__ import annotations

import copy
import json
import os
import shutil
import time
import uuid
from pathlib import Path

import pytest
from conftest import run_cli

from lawbench.core.history.store import History
from lawbench.core.history.imports import import_paths
from lawbench.core.record.reports import RunRecord, read_json, to_json


@pytest.fixture(scope="module")
def genuine(tmp_path_factory, dummy_site):
    """Three real runs of the dummy law (a PASS, a FAIL, a VOID and a history anchor each), their
    environment, and a history holding them."""
    base = tmp_path_factory.mktemp("genuine")
    env = dict(os.environ, PYTHONPATH=str(dummy_site), LAWBENCH_CACHE=str(base / "cache"))
    env.pop("LAWBENCH_DISABLE_PLUGIN_AUTOLOAD", None)
    env.pop("GITHUB_STEP_SUMMARY", None)
    for name in ("n1", "n2", "n3"):
        p = run_cli(["run", "--profile", "cpu", "--law", "dummy", "--out", name], env, base)
        assert p.returncode == 1, p.stdout + p.stderr  # the dummy law has a FAIL and a VOID
    return base, env


@pytest.fixture
def history(genuine, tmp_path):
    """A fresh history with the first two genuine runs imported, and its path. Imported in this
    process, by the function `lawbench history import` calls: it is each test's starting state, not
    what it tests (the refusals below go through the real command line)."""
    base, _ = genuine
    db = tmp_path / "h.sqlite"
    with History(db, create=True) as h:
        done = import_paths(h, [str(base / "n1" / "run.json"), str(base / "n2" / "run.json")])
    assert [o.status for o in done] == ["imported", "imported"], [o.message for o in done]
    return db


def data(genuine, night: str = "n3") -> dict:
    return json.loads((genuine[0] / night / "run.json").read_text(encoding="utf-8"))


def write(path: Path, obj) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj), encoding="utf-8")
    return path


def rows(db: Path) -> list[tuple]:
    with History(db, create=False) as h:
        return [(r.run_id, r.started, r.exit_code, r.source) for r in h.runs(limit=None)]


def forged(genuine, change) -> dict:
    d = copy.deepcopy(data(genuine))
    change(d)
    return d


def refused_line(p, field: str, *words: str) -> str:
    """The one refusal line: names the file and the field, no traceback, exit 2."""
    assert p.returncode == 2, p.stdout + p.stderr
    assert "Traceback" not in p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("refused")]
    assert len(lines) == 1, p.stderr
    assert f"field {field}" in lines[0] if field else True, lines[0]
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


def still_works(genuine, db: Path, tmp_path: Path) -> None:
    """history, --anchor, --json, drift, stale, compare and the history page, all exit as usual."""
    env = genuine[1]
    for args, code in ((["history"], 0), (["history", "--json"], 0), (["history", "--anchor", "dummy.noisy-void"], 0),
                       (["history", "drift"], 0), (["history", "compare", "latest~1", "latest"], 0),
                       (["history", "stale", "--profile", "cpu", "--hours", "1000"], 0)):
        p = run_cli([*args, "--db", str(db)], env, tmp_path)
        assert p.returncode == code, (args, p.stdout + p.stderr)
        assert "Traceback" not in p.stderr
    p = run_cli(["report", "--history", "--db", str(db), "--out", str(tmp_path / "h.html")], env, tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr


# --------------------------------------------------------------------------- verdicts and counts


FORGERIES = {
    # class "verdicts and counts are taken as given"
    "verdict": (lambda d: d["results"][2].update(verdict="PASS"), "results.2.verdict", "makes it VOID"),
    "fail-to-pass": (lambda d: d["results"][1].update(verdict="PASS"), "results.1.verdict", "makes it FAIL"),
    "pass-no-interval": (lambda d: d["results"][2].update(verdict="PASS", interval=None), "results.2.verdict",
                         "only a census"),
    "counts": (lambda d: d["counts"].update(PASS=999), "counts.PASS", "999"),
    "exit-code": (lambda d: d.update(exit_code=0), "exit_code", "they give 1"),
    # strict types and bounds
    "infinity": (lambda d: d["results"][2].update(interval=[9.0, "Infinity"]), "results.2.interval",
                 "not a finite number"),
    "1e308": (lambda d: d["results"][2].update(measured=1e308), "results.2.measured", "physical"),
    "tok-s-1e30": (lambda d: d["results"][2]["measurement"]["samples"][0].update(value=1e30),
                   "results.2.measurement.samples.0.value", "physical"),
    "outside-own-interval": (lambda d: d["results"][2].update(measured=50.0), "results.2.measured",
                             "outside its own interval"),
    "trailing-newline-id": (lambda d: d["results"][0].update(anchor_id="dummy.sum-pass\n"),
                            "results.0.anchor_id", "an id must be"),
    "markup-anchor-id": (lambda d: d["results"][0].update(anchor_id="[bold]dummy"), "results.0.anchor_id",
                         "an id must be"),
    "markup-profile": (lambda d: d.update(profile="[bold]cpu[/]"), "profile", "letters, digits"),
    "week-date": (lambda d: d.update(started="2026-W48-3T02:00:00+00:00"), "started", "one form"),
    "other-offset": (lambda d: d.update(started=d["started"].replace("+00:00", "+02:00")), "started", "one form"),
    "no-zone": (lambda d: d.update(finished=d["finished"][:19]), "finished", "one form"),
}


@pytest.mark.parametrize("name", list(FORGERIES))
def test_a_forged_record_is_refused_in_one_line_and_the_history_is_unchanged(genuine, history, tmp_path, name):
    from lawbench.core.history.imports import import_paths

    change, field, word = FORGERIES[name]
    before = rows(history)
    path = write(tmp_path / f"{name}.json", forged(genuine, change))
    with History(history) as h:
        (o,) = import_paths(h, [str(path)])
    assert o.status == "refused" and "\n" not in o.message, o.message
    assert o.message.startswith(f"{path}: ") and f"field {field}: " in o.message and word in o.message, o.message
    assert rows(history) == before


@pytest.mark.parametrize("name", ["verdict", "infinity", "1e308", "week-date"])
def test_the_command_line_and_report_refuse_a_forgery_in_one_line(genuine, history, tmp_path, name):
    change, field, word = FORGERIES[name]
    before = rows(history)
    path = write(tmp_path / f"{name}.json", forged(genuine, change))
    p = run_cli(["history", "import", "--db", str(history), str(path)], genuine[1], tmp_path)
    refused_line(p, field, str(path), word)
    assert rows(history) == before
    # `report RUN.json` checks the same way: refused in one line, never a traceback
    p = run_cli(["report", str(path), "--out", str(tmp_path / "r.html")], genuine[1], tmp_path)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stdout + p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and str(path) in p.stderr and word in p.stderr


def test_the_genuine_records_pass_the_same_checks(genuine, tmp_path):
    """The checks are the rules that made the records: real runs always pass them (else every
    check above could be refusing everything)."""
    from lawbench.core.record.checks import check_record

    for night in ("n1", "n2", "n3"):
        check_record(read_json(genuine[0] / night / "run.json"), night)


# --------------------------------------------------------------------------- sizes and nesting


def test_deep_huge_and_numerous_records_are_refused_before_parsing_and_the_rest_are_filed(genuine, history,
                                                                                          tmp_path):
    before = rows(history)
    folder = tmp_path / "tonight"
    write(folder / "a-deep.json", "[" * 100_000 + "]" * 100_000)
    many = forged(genuine, lambda d: d.update(results=[d["results"][0]] * 20_000))
    write(folder / "b-many.json", many)
    with open(folder / "c-huge.json", "wb") as fh:  # 65 MiB of results: never read into memory
        fh.write(b'{"run_id": "x", "started": "2026-01-01T00:00:00+00:00", "results": [')
        fh.truncate(65 * 2**20)
    # a record found in a folder is filed by its run id (a copy under another name is refused)
    shutil.copy(genuine[0] / "n3" / "run.json", folder / f"{data(genuine, 'n3')['run_id']}.json")
    began = time.monotonic()
    p = run_cli(["history", "import", "--db", str(history), str(folder)], genuine[1], tmp_path)
    took = time.monotonic() - began
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stdout + p.stderr
    refusals = sorted(ln for ln in p.stderr.splitlines() if ln.startswith("refused"))
    assert len(refusals) == 3
    assert "a-deep.json" in refusals[0] and "nests JSON deeper than 32" in refusals[0]
    assert "b-many.json" in refusals[1] and "results; a run holds at most 10000" in refusals[1]
    assert "c-huge.json" in refusals[2] and "at most 64 MiB" in refusals[2]
    assert "1 imported, 0 already in the history, 3 refused" in p.stdout
    assert took < 60
    assert rows(history)[1:] == before  # the good file went in, newest first; the others as they were
    still_works(genuine, history, tmp_path)
    # `report` of the numerous one (a page of 20 000 results never finished rendering) is one line, fast
    began = time.monotonic()
    p = run_cli(["report", str(folder / "b-many.json"), "--out", str(tmp_path / "many.html")], genuine[1], tmp_path)
    assert p.returncode == 2 and "Traceback" not in p.stderr and time.monotonic() - began < 60, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "b-many.json" in p.stderr and "at most 10000" in p.stderr
    assert not (tmp_path / "many.html").exists()


# --------------------------------------------------------------------------- identity


def test_a_run_id_that_shadows_a_genuine_one_is_refused(genuine, history, tmp_path):
    genuine_id = data(genuine, "n1")["run_id"]
    before = rows(history)
    for i, fake_id in enumerate((genuine_id.upper(), genuine_id + "0", genuine_id[:20])):
        path = write(tmp_path / f"shadow{i}.json", forged(genuine, lambda d: d.update(run_id=fake_id)))
        p = run_cli(["history", "import", "--db", str(history), str(path)], genuine[1], tmp_path)
        refused_line(p, "", f"shadows run {genuine_id}")
    assert rows(history) == before
    p = run_cli(["report", "--run", genuine_id, "--db", str(history), "--out", str(tmp_path / "r.html")],
                genuine[1], tmp_path)
    assert p.returncode == 0, p.stderr
    # the genuine run is still named by its id and by a prefix, never "ambiguous"
    p = run_cli(["history", "compare", genuine_id[:12], data(genuine, "n2")["run_id"], "--db", str(history)],
                genuine[1], tmp_path)
    assert p.returncode == 0 and "ambiguous" not in p.stdout + p.stderr, p.stdout + p.stderr
    still_works(genuine, history, tmp_path)


def test_a_whole_run_id_is_never_ambiguous_and_prefixes_match_case(tmp_path, genuine):
    """Runs appended directly (not imported) may still extend one another's ids: the whole id wins."""
    record = read_json(genuine[0] / "n1" / "run.json")
    with History(tmp_path / "h.sqlite") as h:
        for run_id in ("abc123", "abc1234"):
            h.append(record.model_copy(update={"run_id": run_id}))
        assert h.resolve("abc123") == "abc123"
        assert h.resolve("abc1234") == "abc1234"
        with pytest.raises(Exception, match="no run 'ABC123'"):
            h.resolve("ABC123")
        with pytest.raises(Exception, match="ambiguous"):
            h.resolve("abc")


@pytest.mark.parametrize("order", ["forged-first", "genuine-first"])
def test_a_duplicate_run_id_is_refused_whatever_the_order(genuine, tmp_path, order):
    """Two files with one run id and different content: neither is taken, in either order; against a
    history that holds the genuine one, the forged one is refused and the genuine one stays."""
    real = genuine[0] / "n3" / "run.json"
    fake = forged(genuine, lambda d: d["results"][1].update(reason="forged"))
    names = ("a", "b") if order == "forged-first" else ("b", "a")
    write(tmp_path / "night" / names[0] / "run.json", fake)
    shutil.copy(real, write(tmp_path / "night" / names[1] / "run.json", "{}"))
    db = tmp_path / "h.sqlite"
    p = run_cli(["history", "import", "--db", str(db), str(tmp_path / "night")], genuine[1], tmp_path)
    assert p.returncode == 2, p.stdout + p.stderr
    refusals = [ln for ln in p.stderr.splitlines() if ln.startswith("refused")]
    assert len(refusals) == 2 and all("none of them is taken" in ln for ln in refusals)
    assert rows(db) == []
    # the genuine one alone goes in; the forged one after it is refused, the genuine one stays
    p = run_cli(["history", "import", "--db", str(db), str(real)], genuine[1], tmp_path)
    assert p.returncode == 0
    p = run_cli(["history", "import", "--db", str(db), str(tmp_path / "night" / names[0])], genuine[1], tmp_path)
    refused_line(p, "", "already in the history with different content")
    with History(db, create=False) as h:
        assert to_json(h.record(read_json(real).run_id)) == to_json(read_json(real))


# --------------------------------------------------------------------------- provenance


def forged_bundle(genuine, run_id: str, **record_changes) -> dict:
    """A contribution bundle that claims to be the h200 runner's, --strict, with a fingerprint that
    matches: every field a stranger controls says "trust me"."""
    from lawbench.core.record.contribute import build_bundle
    from lawbench.core.hardware.profiles import plugin_profiles
    from lawbench.core.laws.registry import get_registry

    record = read_json(genuine[0] / "n3" / "run.json")
    record = record.model_copy(update={"run_id": run_id, "profile": "h200", "detected_profile": "h200",
                                       "profile_matches": True, "strict": True, **record_changes})
    h200 = plugin_profiles(get_registry())["h200"]
    return json.loads(to_json(build_bundle(record, h200)))  # type: ignore[arg-type]


def test_a_contribution_never_speaks_for_a_runner(genuine, history, tmp_path):
    env = genuine[1]
    bundle = write(tmp_path / "bundle.json", forged_bundle(genuine, uuid.uuid4().hex))
    p = run_cli(["history", "stale", "--db", str(history), "--profile", "h200", "--json"], env, tmp_path)
    assert p.returncode == 1  # no h200 runner ever reported
    p = run_cli(["history", "import", "--db", str(history), str(bundle)], env, tmp_path)
    assert p.returncode == 0 and "(contribution, profile h200" in p.stdout, p.stdout + p.stderr
    # a plain run.json sent by a person is marked a contribution the same way
    plain = write(tmp_path / "plain.json", forged(genuine, lambda d: d.update(run_id=uuid.uuid4().hex)))
    p = run_cli(["history", "import", "--contribution", "--db", str(history), str(plain)], env, tmp_path)
    assert p.returncode == 0 and "(contribution, profile cpu" in p.stdout, p.stdout + p.stderr

    p = run_cli(["history", "stale", "--db", str(history), "--profile", "h200", "--json"], env, tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr  # still stale: the watchdog's view stays true
    assert json.loads(p.stdout)[0]["run_id"] is None
    p = run_cli(["history", "--db", str(history), "--json"], env, tmp_path)
    sources = {r["run_id"]: r["source"] for r in json.loads(p.stdout)}
    assert sorted(sources.values()) == ["contribution", "contribution", "run", "run"]
    p = run_cli(["history", "--db", str(history)], env, tmp_path)
    cells = [c.strip() for ln in p.stdout.splitlines() for c in ln.split("│")]
    assert cells.count("contribution") == 2 and cells.count("runner") == 2, p.stdout
    with History(history, create=False) as h:
        assert h.provenance(json.loads(bundle.read_text(encoding="utf-8"))["record"]["run_id"]).kind == "contribution"
        assert h.runs(limit=1, contributions=False)[0].source == "run"
        assert h.resolve("latest") == data(genuine, "n2")["run_id"]  # never a contribution
        from lawbench.core.history.drift import series
        assert all(not h.run_keys()[p[0].run_id].contribution for s in series(h).values() for p in s)
    page = tmp_path / "h.html"
    p = run_cli(["report", "--history", "--db", str(history), "--out", str(page)], env, tmp_path)
    assert p.returncode == 0 and "· contribution" in page.read_text(encoding="utf-8") and ">from<" in page.read_text(encoding="utf-8")
    still_works(genuine, history, tmp_path)


# --------------------------------------------------------------------------- nothing stops the service


MARKUP = "[bold red]x[/] [/] [link=http://e.x]y[/link]"
ESCAPES = "\x1b[2J\x1b]0;owned\x07\u202e"


def test_markup_and_escape_sequences_are_shown_as_text(genuine, history, tmp_path):
    env = genuine[1]
    d = forged(genuine, lambda d: d.update(git_commit=MARKUP + ESCAPES, detected_profile="[/]",
                                           engine={"name": "[/bold]" + ESCAPES, "build_number": 1, "backend": "cpu"}))
    for r in d["results"]:
        r.update(quantity="[/]", unit="[x", reason=MARKUP + ESCAPES)
    path = write(tmp_path / "markup.json", d)
    p = run_cli(["history", "import", "--db", str(history), str(path)], env, tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "\x1b" not in p.stdout and "\\x1b" in p.stdout  # the engine key, written out
    outputs = []
    for args in (["history"], ["history", "--anchor", "dummy.sum-fail"], ["history", "drift"],
                 ["history", "compare", "latest", "latest~1"]):  # A: the forged run, whose quantity shows
        p = run_cli([*args, "--db", str(history)], {**env, "COLUMNS": "200"}, tmp_path)
        assert p.returncode == 0 and "Traceback" not in p.stderr, (args, p.stdout + p.stderr)
        assert "\x1b" not in p.stdout + p.stderr and "\u202e" not in p.stdout, args
        outputs.append(p.stdout)
    assert "[/]" in outputs[0] and "[bold red]x[/]" in outputs[1] and "\\x1b[2J" in outputs[1]
    assert "[/] ([x)" in outputs[3]
    still_works(genuine, history, tmp_path)


def test_the_terminal_table_of_a_run_shows_a_record_s_text_literally():
    import io

    from rich.console import Console

    from lawbench.core.models import Result, Verdict
    from lawbench.core.record.summaries import print_table

    record = RunRecord(profile="cpu", detected_profile="[/]")
    record.finish([Result(anchor_id="a.b", law="x", kind="prediction", profile="cpu", verdict=Verdict.FAIL,
                          reason=MARKUP + ESCAPES, quantity="[/]")])
    buf = io.StringIO()
    print_table(record, Console(file=buf, width=200, color_system=None))
    assert "[bold red]x[/]" in buf.getvalue() and "\\x1b[2J" in buf.getvalue() and "\x1b" not in buf.getvalue()


# --------------------------------------------------------------------------- the nightly's collect step


def test_collect_step_files_the_genuine_quarantines_the_rest_and_keeps_the_watchdog_true(genuine, tmp_path):
    """What scripts/nightly_collect.sh runs, given tonight's two genuine records, one forged
    contribution (edited verdicts), one contribution that claims the h200 runner, one malformed
    record: the genuine ones are filed under runs/, the claiming one under contributions/, the
    forged and malformed ones quarantined by name with their reason; exit 0; h200 stays stale."""
    env = genuine[1]
    base = genuine[0]
    tonight, data_dir, quarantine, db = (tmp_path / "tonight", tmp_path / "data", tmp_path / "q",
                                        tmp_path / "h.sqlite")
    shutil.copy(base / "n1" / "run.json", write(tonight / "cpu-1" / "run.json", "{}"))
    shutil.copy(base / "n2" / "run.json", write(tonight / "cpu-2" / "run.json", "{}"))
    claim = forged_bundle(genuine, uuid.uuid4().hex)
    # in a folder a file is named by its run id, as the data branch files it
    write(tonight / "contrib" / f"{claim['record']['run_id']}.json", claim)
    edited = copy.deepcopy(claim)
    edited["record"]["run_id"] = uuid.uuid4().hex
    edited["record"]["results"][2]["verdict"] = "PASS"
    write(tonight / "contrib" / f"{edited['record']['run_id']}.json", edited)
    write(tonight / "broken" / "run.json", '{"run_id": "x", "started": 3, ')
    p = run_cli(["history", "import", "--db", str(db), "--quarantine", str(quarantine), "--file-into",
                 str(data_dir), str(tonight)], env, tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "3 imported, 0 already in the history, 2 refused" in p.stdout
    assert f"quarantined in {quarantine}" in p.stdout
    filed = sorted(str(f.relative_to(data_dir)) for f in data_dir.rglob("*.json"))
    assert filed == sorted([f"runs/cpu/{data(genuine, 'n1')['run_id']}.json",
                            f"runs/cpu/{data(genuine, 'n2')['run_id']}.json",
                            f"contributions/h200/{claim['record']['run_id']}.json"])
    kept = sorted(f.name for f in quarantine.iterdir())
    assert len(kept) == 4 and any(f"{edited['record']['run_id']}.json" in k for k in kept) and any("broken_run.json" in k for k in kept)
    reasons = " ".join(f.read_text(encoding="utf-8") for f in quarantine.glob("*.reason.txt"))
    assert "field record.results.2.verdict" in reasons and "not JSON" in reasons

    # the next night rebuilds the history from the data branch as the docs say
    db2 = tmp_path / "h2.sqlite"
    assert run_cli(["history", "import", "--db", str(db2), str(data_dir / "runs")], env, tmp_path).returncode == 0
    assert run_cli(["history", "import", "--db", str(db2), "--contribution", str(data_dir / "contributions")],
                   env, tmp_path).returncode == 0
    assert [r[3] for r in rows(db2)].count("contribution") == 1
    p = run_cli(["history", "stale", "--db", str(db2), "--profile", "h200", "--profile", "cpu", "--json"],
                env, tmp_path)
    view = {r["profile"]: r["stale"] for r in json.loads(p.stdout)}
    assert p.returncode == 1 and view == {"h200": True, "cpu": False}


@pytest.mark.parametrize("look_alike", ["l4.x\n", "l4.x\r", " l4.x", "l4.X", "l4.x\u200b"])
def test_an_id_matches_the_grammar_as_a_whole_string(look_alike):
    """`$` also matches before a final newline: "l4.x\\n" used to pass as a second anchor beside "l4.x"."""
    from lawbench.core.models.base import _check_id

    assert _check_id("l4.x") == "l4.x"
    with pytest.raises(ValueError, match="an id must be"):
        _check_id(look_alike)
