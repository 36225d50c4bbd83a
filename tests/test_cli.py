"""The real console entry point, end to end, with a third-party plugin really installed."""
import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

from conftest import run_cli


def test_third_party_plugin_is_discovered(cli_env, tmp_path):
    p = run_cli(["laws"], cli_env, tmp_path)
    assert p.returncode == 0, p.stderr
    line = next(l for l in p.stdout.splitlines() if l.startswith("dummy"))
    assert "distribution lawbench-dummy 0.1.0" in line and "prediction" in line


def test_autoload_can_be_disabled(cli_env, tmp_path):
    env = dict(cli_env, LAWBENCH_DISABLE_PLUGIN_AUTOLOAD="1")
    p = run_cli(["laws"], env, tmp_path)
    assert p.returncode == 0 and "dummy" not in p.stdout and "law4" in p.stdout


def test_laws_lists_a_laws_anchor_ids_and_refuses_an_unknown_law(cli_env, tmp_path):
    p = run_cli(["laws", "dummy"], cli_env, tmp_path)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith("dummy") and not any(line.startswith("law4") for line in lines)
    assert any(line.split()[:2] == ["dummy.sum-pass", "prediction"] for line in lines[1:]), p.stdout
    everything = run_cli(["laws", "--anchors"], cli_env, tmp_path).stdout
    assert "  law4.cpu.census.q4_0-repack  census  [cpu]" in everything.splitlines()
    p = run_cli(["laws", "law9"], cli_env, tmp_path)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.strip().splitlines() == [p.stderr.strip()] and "no law named 'law9'" in p.stderr


def test_run_pass_exit_0_with_record_and_junit(cli_env, tmp_path):
    summary = tmp_path / "summary.md"
    env = dict(cli_env, GITHUB_STEP_SUMMARY=str(summary))
    p = run_cli(["run", "--profile", "cpu", "--law", "dummy", "-k", "sum-pass", "--out", "out"], env, tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    record = json.loads((tmp_path / "out" / "run.json").read_text(encoding="utf-8"))
    ran = [r for r in record["results"] if not r["retired"]]
    assert [(r["anchor_id"], r["verdict"]) for r in ran] == [("dummy.sum-pass", "PASS")]
    assert record["exit_code"] == 0 and record["profile"] == "cpu"
    case = ET.parse(tmp_path / "out" / "junit.xml").getroot().find(".//testcase")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["verdict"] == "PASS" and float(props["predicted"]) == 4.0
    assert "dummy.sum-pass" in summary.read_text(encoding="utf-8")
    assert (tmp_path / "out" / "history.sqlite").is_file()


def test_run_fail_and_void_exit_1(cli_env, tmp_path):
    p = run_cli(["run", "--profile", "cpu", "--law", "dummy", "--out", "out"], cli_env, tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr
    record = json.loads((tmp_path / "out" / "run.json").read_text(encoding="utf-8"))
    verdicts = {r["anchor_id"]: r["verdict"] for r in record["results"]}
    assert verdicts == {"dummy.sum-pass": "PASS", "dummy.sum-fail": "FAIL", "dummy.noisy-void": "VOID",
                        "dummy.old-claim": "SKIP"}
    void = next(r for r in record["results"] if r["anchor_id"] == "dummy.noisy-void")
    assert len(void["measurement"]["samples"]) == 6
    assert "1 void" in p.stdout and "Traceback" not in p.stdout + p.stderr


def test_broken_anchor_file_is_one_line_exit_2(cli_env, dummy_site, tmp_path):
    site = tmp_path / "site"
    shutil.copytree(dummy_site, site)
    toml = site / "lawbench_dummy" / "anchors" / "dummy.toml"
    toml.write_text(toml.read_text(encoding="utf-8").replace('quantity = "reading"', 'quantity = "reading"\nqty = 1'), encoding="utf-8")
    env = dict(cli_env, PYTHONPATH=str(site))
    for cmd in (["check"], ["run", "--profile", "cpu"]):
        p = run_cli(cmd, env, tmp_path)
        assert p.returncode == 2, p.stdout + p.stderr
        assert "Traceback" not in p.stderr
        err = p.stderr.strip().splitlines()
        assert len(err) == 1
        assert str(toml) in err[0] and "anchor dummy.noisy-void" in err[0] and "field qty" in err[0]


def test_malformed_toml_exit_2(cli_env, dummy_site, tmp_path):
    site = tmp_path / "site"
    shutil.copytree(dummy_site, site)
    toml = site / "lawbench_dummy" / "anchors" / "dummy.toml"
    toml.write_text(toml.read_text(encoding="utf-8") + "\n[[anchor\n", encoding="utf-8")
    p = run_cli(["run"], dict(cli_env, PYTHONPATH=str(site)), tmp_path)
    assert p.returncode == 2 and "malformed TOML" in p.stderr and str(toml) in p.stderr


def test_unknown_profile_exit_2(cli_env, tmp_path):
    p = run_cli(["run", "--profile", "gtx9999"], cli_env, tmp_path)
    assert p.returncode == 2 and "gtx9999" in p.stderr and "Traceback" not in p.stderr


def test_no_selection_exit_2(cli_env, tmp_path):
    p = run_cli(["run", "--profile", "cpu", "--law", "dummy", "-k", "no-such-anchor"], cli_env, tmp_path)
    assert p.returncode == 2


def test_schema_export(cli_env, tmp_path):
    p = run_cli(["schema", "--out", "s"], cli_env, tmp_path)
    assert p.returncode == 0
    schema = json.loads((tmp_path / "s" / "anchors.schema.json").read_text(encoding="utf-8"))
    assert schema["$defs"]["Anchor"]["additionalProperties"] is False
    assert (tmp_path / "s" / "profile.schema.json").is_file()
    law4 = json.loads((tmp_path / "s" / "profile-law4.schema.json").read_text(encoding="utf-8"))  # [laws.law4] of a profile
    assert law4["additionalProperties"] is False and {"eta", "eta_format", "constants"} <= set(law4["properties"])


def test_check_passes_on_shipped_data(cli_env, tmp_path):
    p = run_cli(["check"], cli_env, tmp_path)
    assert p.returncode == 0 and p.stdout.startswith("ok:"), p.stderr


def test_engine_show_bad_dir_is_one_line(cli_env, tmp_path):
    p = run_cli(["engine", "show", "--llama-dir", str(tmp_path / "nope")], cli_env, tmp_path)
    assert p.returncode in (1, 2) and "Traceback" not in p.stderr
    assert str(tmp_path / "nope") in p.stderr


def test_committed_schemas_are_current(cli_env, tmp_path):
    """docs/schema is what editors load: it must match what `lawbench schema` exports now."""
    from pathlib import Path

    env = dict(cli_env, LAWBENCH_DISABLE_PLUGIN_AUTOLOAD="1")  # lawbench's own laws only
    p = run_cli(["schema", "--out", "s"], env, tmp_path)
    assert p.returncode == 0
    docs = Path(__file__).parent.parent / "docs" / "schema"
    assert sorted(f.name for f in docs.iterdir()) == sorted(f.name for f in (tmp_path / "s").iterdir())
    for f in (tmp_path / "s").iterdir():
        assert (docs / f.name).read_text(encoding="utf-8") == f.read_text(encoding="utf-8"), f"regenerate: lawbench schema --out docs/schema ({f.name})"


def test_a_command_that_reads_no_tensor_loads_no_numpy_gguf_rich_or_psutil(cli_env, tmp_path):
    """Every `lawbench` command loads every law (their commands join the parser), so what a law imports
    at its top every command pays: ~0.2 s of numpy, gguf, rich and psutil on each of the ~1,100
    processes a test run starts (benchmarks/cli_startup.py). They load with the code that uses them."""
    probe = ("import runpy, sys\nsys.argv = ['lawbench'] + sys.argv[1:]\n"
             "try:\n    runpy.run_module('lawbench.core.commands.main', run_name='__main__')\n"
             "except SystemExit:\n    pass\n"
             "print(' '.join(sorted(sys.modules)), file=sys.stderr)\n")
    heavy = {"numpy", "gguf", "rich", "psutil", "filelock", "scipy", "yaml"}
    for argv in (["--help"], ["laws"], ["history", "--help"], ["run", "--help"]):
        p = subprocess.run([sys.executable, "-c", probe, *argv], env=cli_env, cwd=tmp_path,
                           capture_output=True, text=True, timeout=120, encoding="utf-8")
        loaded = set(p.stderr.strip().splitlines()[-1].split())
        # the laws were loaded (built-in and third party): what is absent was not needed, not skipped
        assert {"lawbench.plugins.law4.law", "lawbench.plugins.law1.law", "lawbench_dummy"} <= loaded, p.stderr[-2000:]
        tops = {m.split(".")[0] for m in loaded}
        assert not tops & heavy, f"`lawbench {' '.join(argv)}` imported {sorted(tops & heavy)}"
