"""Issue 33: a run's outputs are plugins of `lawbench_run_finished`. lawbench's own — run.json, the
history row, the step summary, report.html — are registered on the plugin manager like any other
and called first, in that order; a third party adds its own output the same way (a real plugin
distribution on sys.path, the real console entry)."""
import json
import os

from conftest import run_cli, write_plugin

from lawbench.core.models.run_record import RunRecord
from lawbench.core.models.result import Result, Verdict

STAMP = ("import json\n\nimport lawbench\n\n\n"
         "@lawbench.hookimpl\ndef lawbench_run_finished(record, outputs):\n"
         "    if outputs.folder is None:\n        return\n"
         "    target = outputs.folder / 'stamp.json'\n"
         "    target.write_text(json.dumps({'run_id': record.run_id, 'mode': record.mode, 'counts': record.counts,\n"
         "                                  'written_before_me': sorted(outputs.written)}))\n"
         "    outputs.wrote('stamp', target)\n")
DOWN = ("import lawbench\n\n\n"
        "@lawbench.hookimpl\ndef lawbench_run_finished(record, outputs):\n"
        "    outputs.failed('cannot reach the dashboard at https://dash.invalid (lawbench-dash)')\n")


def _env(cli_env, site):
    return dict(cli_env, PYTHONPATH=os.pathsep.join([str(site), cli_env["PYTHONPATH"]]))


def test_a_third_party_output_writes_its_own_file_when_a_run_finishes(cli_env, tmp_path):
    site = write_plugin(tmp_path / "site", "lawbench-stamp", {"stamp": "lawbench_stamp"},
                        {"lawbench_stamp/__init__.py": STAMP})
    out = tmp_path / "out"
    p = run_cli(["run", "--profile", "cpu", "--law", "dummy", "-k", "sum-pass", "--out", str(out)],
                _env(cli_env, site), tmp_path)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stdout[-2000:] + p.stderr[-2000:]
    record = json.loads((out / "run.json").read_text(encoding="utf-8"))
    stamp = json.loads((out / "stamp.json").read_text(encoding="utf-8"))
    assert stamp["run_id"] == record["run_id"] and stamp["mode"] == "run" and stamp["counts"]["PASS"] == 1
    # lawbench's own outputs ran first: the record and its history row exist when a third party's runs
    assert {"run.json", "history.sqlite"} <= set(stamp["written_before_me"]), stamp


def test_without_the_plugin_no_such_file_is_written(cli_env, tmp_path):
    out = tmp_path / "out"
    p = run_cli(["run", "--profile", "cpu", "--law", "dummy", "-k", "sum-pass", "--out", str(out)], cli_env, tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    assert (out / "run.json").is_file() and not (out / "stamp.json").exists()


def test_a_third_party_output_that_could_not_be_written_is_exit_1_and_named(cli_env, tmp_path):
    site = write_plugin(tmp_path / "site", "lawbench-dash", {"dash": "lawbench_dash"},
                        {"lawbench_dash/__init__.py": DOWN})
    out = tmp_path / "out"
    p = run_cli(["run", "--profile", "cpu", "--law", "dummy", "-k", "sum-pass", "--out", str(out)],
                _env(cli_env, site), tmp_path)
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr[-2000:]
    line = next(x for x in p.stderr.splitlines() if "dash.invalid" in x)
    assert line.startswith("lawbench: error: cannot reach the dashboard") and str(out / "run.json") in line, line
    record = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert record["exit_code"] == 0  # the verdicts stand: only the command's status says an output failed


def test_lawbench_s_own_outputs_are_plugins_called_first_in_order(tmp_path, monkeypatch):
    from lawbench.core.laws.registry import get_registry
    from lawbench.core.run.outputs import BUILTIN_OUTPUTS, RunOutputs, call_run_finished, register_outputs

    registry = get_registry()
    register_outputs(registry)
    register_outputs(registry)  # once per registry
    impls = {i.plugin_name for i in registry.pm.hook.lawbench_run_finished.get_hookimpls()}
    assert set(BUILTIN_OUTPUTS) <= impls
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    record = RunRecord.new("cpu").finish([Result(anchor_id="x.one", law="x", kind="prediction", profile="cpu",
                                                 verdict=Verdict.PASS)])
    outputs = RunOutputs(folder=tmp_path / "out", notes=lambda record, history: [])
    call_run_finished(registry, record, outputs, builtin=True)
    assert outputs.problems == [] and not outputs.record_lost
    assert list(outputs.written)[:3] == ["run.json", "history.sqlite", "step summary"], outputs.written
    assert json.loads((tmp_path / "out" / "run.json").read_text(encoding="utf-8"))["run_id"] == record.run_id
    assert "x.one" in summary.read_text(encoding="utf-8")


def test_a_lost_run_json_is_said_and_marks_the_record_lost(tmp_path):
    from lawbench.core.laws.registry import get_registry
    from lawbench.core.run.outputs import RunOutputs, call_run_finished, register_outputs

    registry = get_registry()
    register_outputs(registry)
    (tmp_path / "out").write_text("a file where the --out folder should be", encoding="utf-8")
    outputs = RunOutputs(folder=tmp_path / "out", history=False)
    call_run_finished(registry, RunRecord.new("cpu").finish([]), outputs, builtin=True)
    assert outputs.record_lost and any("cannot write the run record" in p for p in outputs.problems), outputs.problems
