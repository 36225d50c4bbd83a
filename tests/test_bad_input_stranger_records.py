"""Issue 32, items 3 and 4: a stranger's record whose stated verdicts do not follow from what it
holds is refused through the real `lawbench history import`, naming the field."""
from __future__ import annotations

import json
import os

import pytest
from conftest import run_cli


@pytest.fixture(scope="module")
def night(tmp_path_factory, dummy_site):
    """One real run of the dummy law (a FAIL and a VOID): its run.json as parsed JSON."""
    base = tmp_path_factory.mktemp("night")
    env = dict(os.environ, PYTHONPATH=str(dummy_site), LAWBENCH_CACHE=str(base / "cache"))
    env.pop("LAWBENCH_DISABLE_PLUGIN_AUTOLOAD", None)
    env.pop("GITHUB_STEP_SUMMARY", None)
    p = run_cli(["run", "--profile", "cpu", "--law", "dummy", "--out", "n1"], env, base)
    assert p.returncode == 1, p.stdout + p.stderr
    return json.loads((base / "n1" / "run.json").read_text(encoding="utf-8"))


def _gate(record: dict, verdict: str, news: list, baseline_runs: int = 0) -> dict:
    return {"verdict": verdict, "profile": record["profile"], "fingerprint": "x", "engine": "e",
            "alpha": 0.001, "baseline_runs": baseline_runs, "news": news}


def _import(record: dict, tmp_path, cli_env, name: str = "run.json"):
    f = tmp_path / name
    f.write_text(json.dumps(record), encoding="utf-8")
    return run_cli(["history", "import", "--db", str(tmp_path / "h.sqlite"), str(f)], cli_env, tmp_path)


def _red_news(record: dict) -> list:
    bad = [r for r in record["results"] if r["verdict"] in ("FAIL", "VOID", "ERROR")]
    return [{"anchor_id": r["anchor_id"], "kind": "new-not-green", "after": r["verdict"], "why": "w"} for r in bad]


def test_a_green_gate_over_red_news_is_refused(night, tmp_path, cli_env):
    forged = dict(night, gate=_gate(night, "green", _red_news(night)))
    p = _import(forged, tmp_path, cli_env)
    assert p.returncode != 0, p.stdout
    assert "gate.verdict" in p.stdout + p.stderr, p.stdout + p.stderr
    assert "Traceback" not in p.stderr


def test_a_green_gate_with_its_news_dropped_is_refused(night, tmp_path, cli_env):
    """Green over FAIL results with no baseline and no news: the news were taken out."""
    forged = dict(night, gate=_gate(night, "green", []))
    p = _import(forged, tmp_path, cli_env)
    assert p.returncode != 0, p.stdout
    assert "gate.news" in p.stdout + p.stderr, p.stdout + p.stderr


def test_an_honest_red_gate_imports(night, tmp_path, cli_env):
    honest = dict(night, gate=_gate(night, "red", _red_news(night)))
    p = _import(honest, tmp_path, cli_env)
    assert p.returncode == 0, p.stdout + p.stderr


def test_a_record_in_a_folder_must_be_named_by_its_run_id(night, tmp_path, cli_env):
    """A planted `<id>-dup.json` beside the genuine `<id>.json` would make the genuine one refused
    as a rival claim; now the misnamed copy alone is refused, naming run_id."""
    folder = tmp_path / "runs" / night["profile"]
    folder.mkdir(parents=True)
    (folder / f"{night['run_id']}.json").write_text(json.dumps(night), encoding="utf-8")
    dup = dict(night, finished=night["finished"].replace(":", ":", 1))  # the same run, other bytes below
    dup["results"] = [dict(r, reason=r["reason"] + " (planted)") for r in night["results"]]
    (folder / f"{night['run_id']}-dup.json").write_text(json.dumps(dup), encoding="utf-8")
    p = run_cli(["history", "import", "--db", str(tmp_path / "h.sqlite"), str(tmp_path / "runs")], cli_env, tmp_path)
    out = p.stdout + p.stderr
    assert "imported" in out and f"{night['run_id']}-dup.json" in out, out
    lines = [x for x in out.splitlines() if "-dup.json" in x]
    assert lines and all("refused" in x and "run_id" in x for x in lines), out
    assert not any("refused" in x for x in out.splitlines() if x.rstrip().endswith(f"{night['run_id']}.json")), out


def test_folder_import_never_follows_a_link_out_and_quarantine_never_copies_its_target(night, tmp_path, cli_env):
    secret = tmp_path / "secret.json"
    secret.write_text('{"token": "do-not-copy"}', encoding="utf-8")
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "link.json").symlink_to(secret)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / f"{night['run_id']}.json").write_text(json.dumps(night), encoding="utf-8")
    (folder / "sub").symlink_to(outside, target_is_directory=True)
    q = tmp_path / "quarantine"
    p = run_cli(["history", "import", "--db", str(tmp_path / "h.sqlite"), "--quarantine", str(q), str(folder)],
                cli_env, tmp_path)
    out = p.stdout + p.stderr
    assert "Traceback" not in out
    assert "link.json" in out and "never followed" in out, out
    assert out.startswith("0 imported"), out  # the record behind the linked folder stays out
    assert not any("do-not-copy" in f.read_text(errors="replace", encoding="utf-8") for f in q.rglob("*") if f.is_file()), out


def test_export_never_writes_a_contribution_among_runners_runs(night, tmp_path, cli_env):
    f = tmp_path / "theirs.json"
    f.write_text(json.dumps(night), encoding="utf-8")
    db = str(tmp_path / "h.sqlite")
    p = run_cli(["history", "import", "--db", db, "--contribution", str(f)], cli_env, tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    p = run_cli(["history", "export", "--db", db, str(tmp_path / "runs")], cli_env, tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert not list((tmp_path / "runs").rglob("*.json")), p.stdout
    assert "1 contribution(s) left out" in p.stdout, p.stdout


def test_an_unbound_accepted_night_in_a_baseline_folder_does_not_count(night, tmp_path, cli_env):
    """Issue 32 item 3: a green night planted on the data branch without the binding the collect
    step files beside a record would make tonight's FAIL and VOID no news (green); it is left out,
    named on stderr, and tonight starts its baseline: red, its results news."""
    base = tmp_path / "runs" / night["profile"]
    base.mkdir(parents=True)
    planted = dict(night, gate=_gate(night, "green", [], baseline_runs=1), exit_code=1)
    (base / f"{night['run_id']}.json").write_text(json.dumps(planted), encoding="utf-8")
    p = run_cli(["run", "--profile", "cpu", "--law", "dummy", "--out", "tonight", "--gate", "baseline",
                 "--baseline", str(base)], cli_env, tmp_path)
    assert "Traceback" not in p.stderr, p.stderr
    assert "no binding that verifies" in p.stderr and night["run_id"] in p.stderr, p.stderr
    tonight = json.loads((tmp_path / "tonight" / "run.json").read_text(encoding="utf-8"))
    assert tonight["gate"]["baseline_runs"] == 0 and tonight["gate"]["verdict"] == "red", tonight["gate"]


def test_a_bundle_where_a_runner_s_record_lies_is_refused_under_require_binding(night, tmp_path, cli_env):
    """A contribution bundle saved as <artifact>/<profile>/run.json was filed under contributions/
    with its non-matching binding never read; now it is refused, naming the binding."""
    bundle_out = tmp_path / "b"
    p = run_cli(["run", "--profile", "cpu", "--law", "dummy", "--out", str(bundle_out), "--no-history",
                 "--contribute", str(tmp_path / "bundle.json")], cli_env, tmp_path)
    assert (tmp_path / "bundle.json").is_file(), p.stdout + p.stderr
    placed = tmp_path / "tonight" / "lawbench-cpu-701" / "cpu"
    placed.mkdir(parents=True)
    (placed / "run.json").write_bytes((tmp_path / "bundle.json").read_bytes())
    (placed / "binding.json").write_text('{"run_id": "not-this-one"}', encoding="utf-8")
    p = run_cli(["history", "import", "--db", str(tmp_path / "h.sqlite"), "--require-binding",
                 "--file-into", str(tmp_path / "data"), str(tmp_path / "tonight")], cli_env, tmp_path)
    out = p.stdout + p.stderr
    assert "Traceback" not in out
    assert "contribution bundle where a runner's record lies" in out, out
    assert not (tmp_path / "data").exists() or not list((tmp_path / "data").rglob("*.json")), out
