"""Records never lie and never vanish: `lawbench run` end to end, as a real subprocess.

An interrupted run (SIGINT, SIGTERM) ends the engine's process group, keeps the samples taken and
is recorded as interrupted; a selection of nothing records nothing; an output that cannot be
written costs no record; `started` is the start of the run.

The engine here is a stand-in: a shell script in a `--llama-dir` folder that prints llama-bench's
JSON record shape with made-up numbers, then hangs, so a signal can be sent while it runs. It
says it is a stand-in in its `--version` line. The law that drives it (written below) is installed
with an entry point, as a third-party law is, and runs it through core's own runner (run_bench).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from _engine_fixtures import alive, fake_llama, wait_for
from _mounts import in_private_mounts
from conftest import run_cli
from lawbench.core.history.store import History
from lawbench.core.lock import BoxBusy, box_lock
from lawbench.core.record.reports import read_json

LAW = '''
"""A stand-in law for lawbench's own tests: each draw is one run of the `--llama-dir` llama-bench
through core's runner; `sleep_s` sleeps in Python instead, to be stopped outside any engine."""
import os
import time
from pathlib import Path

from lawbench.core.engines.bench import run_bench
from lawbench.core.laws.hookspecs import hookimpl
from lawbench.core.laws.law import Law, Prediction


class Draws:
    def __init__(self, anchor, resources):
        self.case, self.resources = anchor.case, resources

    def draw(self, n):
        folder = Path(os.environ["STANDIN_DIR"])
        if "sleep_s" in self.case:
            (folder / "sleeping").write_text(str(os.getpid()))
            time.sleep(self.case["sleep_s"])
        model = folder / "m.gguf"
        return run_bench(self.resources.llama(), model, repetitions=n, timeout_s=120).samples()

    def statistic(self, samples):
        return [s.value for s in samples]

    def environment(self):
        return {}

    def protocol(self):
        return {"engine": "stand-in llama-bench script"}


class StandIn(Law):
    name = "standin"
    title = "Stand-in law (tests only)"
    anchors_package = "lawbench_standin.anchors"

    def predict(self, anchor, profile, resources=None):
        return Prediction(float(sum(anchor.case["terms"])))

    def sampler(self, anchor, profile, resources):
        return Draws(anchor, resources)


@hookimpl
def lawbench_laws():
    yield StandIn
'''

ANCHORS = '''
[[anchor]]
id = "standin.sum"
law = "standin"
claim = "Two and two make four."
quantity = "sum"
unit = "1"
kind = "prediction"
value = 4.0
band = { abs = 0.01 }
case = { terms = [2, 2] }
provenance = { seed = "tests", notes = "arithmetic, runs before the engine anchor" }

[[anchor]]
id = "standin.engine"
law = "standin"
claim = "A reading the stand-in engine cannot resolve in one batch."
quantity = "reading"
unit = "tok/s"
kind = "measurement"
value = 10.0
band = { rel = 0.05 }
case = {}
profiles = ["cpu"]
budget = { min_samples = 3, max_samples = 12, batch = 3 }
provenance = { seed = "tests", notes = "stand-in engine numbers" }

[[anchor]]
id = "standin.sleep"
law = "standin"
claim = "A sampler that is stopped in Python, outside any engine."
quantity = "reading"
unit = "tok/s"
kind = "measurement"
value = 10.0
band = { rel = 0.05 }
case = { sleep_s = 300 }
profiles = ["cpu"]
budget = { min_samples = 3, max_samples = 12, batch = 3 }
provenance = { seed = "tests", notes = "never samples" }
'''

# Prints one finished test (llama-bench's record shape, made-up numbers) per run; from the second
# run on it then hangs with a child of its own, as a long llama-bench test would.
BENCH = '''
if [ "$1" = "--version" ]; then
  echo "version: stand-in (build 0, commit lawbench-test-stand-in)"; exit 0
fi
n=$(cat "$STANDIN_DIR/calls" 2>/dev/null || echo 0); n=$((n + 1)); echo "$n" > "$STANDIN_DIR/calls"
echo '{"model_filename": "m.gguf", "n_prompt": 0, "n_gen": 16, "n_depth": 0, "samples_ts": [9.0, 11.0, 10.4]}'
if [ "$n" -ge 2 ]; then
  sleep 300 &
  echo "$$ $!" > "$STANDIN_DIR/hanging.tmp"; mv "$STANDIN_DIR/hanging.tmp" "$STANDIN_DIR/hanging"
  wait
fi
'''


@pytest.fixture(scope="session")
def standin_site(tmp_path_factory) -> Path:
    """The stand-in law as an installed distribution: package plus dist-info with its entry point."""
    site = tmp_path_factory.mktemp("standin-site")
    pkg = site / "lawbench_standin"
    (pkg / "anchors").mkdir(parents=True)
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "law.py").write_text(LAW, encoding="utf-8")
    (pkg / "anchors" / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "anchors" / "standin.toml").write_text(ANCHORS, encoding="utf-8")
    info = site / "lawbench_standin-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: lawbench-standin\nVersion: 0.1.0\n", encoding="utf-8")
    (info / "entry_points.txt").write_text("[lawbench]\nstandin = lawbench_standin.law\n", encoding="utf-8")
    return site


@pytest.fixture
def standin(standin_site, cli_env, tmp_path):
    """(environment, --llama-dir, state folder) for one run with the stand-in engine."""
    state = tmp_path / "standin"
    state.mkdir()
    (state / "m.gguf").write_bytes(b"GGUF")  # never read: the stand-in only needs a file
    llama = fake_llama(tmp_path, BENCH)
    env = dict(cli_env, STANDIN_DIR=str(state),
               PYTHONPATH=os.pathsep.join([str(standin_site), cli_env["PYTHONPATH"]]))
    return env, llama.bin_dir, state


def start_run(args: list[str], env: dict, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "lawbench.core.commands.main", "run", *args], env=env,
                            cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8")


def utc(stamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(stamp).timestamp()


# --------------------------------------------------------------------------- signals


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["SIGTERM", "SIGINT"])
def test_signal_mid_engine_ends_its_group_and_records_the_interrupt(standin, tmp_path, sig, code):
    env, llama_dir, state = standin
    launched = time.time()
    proc = start_run(["--profile", "cpu", "--law", "standin", "-k", "standin.sum or standin.engine",
                      "--llama-dir", str(llama_dir), "--out", "out"], env, tmp_path)
    shell, child = map(int, wait_for(state / "hanging", proc).split())
    engine_began = time.time()
    # the box lock is held while the engine runs
    with pytest.raises(BoxBusy, match=f"PID {proc.pid}"):
        with box_lock(cache_dir=Path(env["LAWBENCH_CACHE"])):
            pass
    time.sleep(1.1)  # so that `started` and `finished` fall in different seconds
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, out + err
    assert "Traceback" not in err
    assert not alive(shell) and not alive(child), "the stand-in engine outlived lawbench"

    record = read_json(tmp_path / "out" / "run.json")
    assert record.interrupted == sig.name and record.exit_code == code
    results = {r.anchor_id: r for r in record.results}
    assert results["standin.sum"].verdict.value == "PASS"  # finished before the signal: kept
    engine = results["standin.engine"]
    assert engine.verdict.value == "ERROR" and f"interrupted by {sig.name}" in engine.reason
    # batch 1 (3 repetitions) and the finished test of the interrupted batch 2 (3 more)
    assert [s.value for s in engine.measurement.samples] == [9.0, 11.0, 10.4] * 2
    assert utc(record.started) <= engine_began and utc(record.started) >= int(launched)
    assert utc(record.started) < utc(record.finished)

    with History(tmp_path / "out" / "history.sqlite", create=False) as history:
        row = history.runs()[0]
        assert (row.run_id, row.exit_code) == (record.run_id, code)
        assert history.record(row.run_id).interrupted == sig.name
        assert len(history.samples(row.run_id, "standin.engine")) == 6


def test_signal_outside_the_engine_still_records_the_running_anchor(standin, tmp_path):
    env, llama_dir, state = standin
    proc = start_run(["--profile", "cpu", "--law", "standin", "-k", "standin.sum or standin.sleep",
                      "--out", "out"], env, tmp_path)
    wait_for(state / "sleeping", proc)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, out + err
    record = read_json(tmp_path / "out" / "run.json")
    verdicts = {r.anchor_id: (r.verdict.value, r.reason) for r in record.results}
    assert verdicts["standin.sum"][0] == "PASS"
    assert verdicts["standin.sleep"] == ("ERROR", "interrupted by SIGTERM before the anchor finished")
    assert record.interrupted == "SIGTERM" and record.engine is None  # no engine was needed


def test_pytest_driven_directly_is_stopped_the_same_way(standin, standin_site, tmp_path):
    env, llama_dir, state = standin
    anchors = standin_site / "lawbench_standin" / "anchors" / "standin.toml"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", str(anchors), "-c", os.devnull, "--rootdir", str(anchors.parent),
         "-p", "no:cacheprovider", "--lawbench-profile", "cpu", "--lawbench-law", "standin",
         "--lawbench-llama-dir", str(llama_dir), "--lawbench-out", "out", "-k", "standin.engine"],
        env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8")
    shell, child = map(int, wait_for(state / "hanging", proc).split())
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, out + err
    assert not alive(shell) and not alive(child)
    record = read_json(tmp_path / "out" / "run.json")
    assert record.interrupted == "SIGTERM" and len(record.results[0].measurement.samples) == 6


# --------------------------------------------------------------------------- selection


def test_a_selection_of_nothing_is_a_usage_error_that_records_nothing(cli_env, tmp_path):
    p = run_cli(["run", "--profile", "cpu", "--law", "dummy", "-k", "no-such-anchor", "--out", "out"],
                cli_env, tmp_path)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "no anchors matched the selection" in p.stderr
    assert not (tmp_path / "out" / "run.json").exists()
    assert not (tmp_path / "out" / "history.sqlite").exists()
    assert not (tmp_path / "out" / "junit.xml").exists()  # pytest wrote one: it is taken back
    (tmp_path / "out" / "junit.xml").write_text("<testsuites><!-- the last real run --></testsuites>", encoding="utf-8")
    p = run_cli(["run", "--profile", "cpu", "--law", "dummy", "-k", "no-such-anchor", "--out", "out"],
                cli_env, tmp_path)
    assert p.returncode == 2
    assert "the last real run" in (tmp_path / "out" / "junit.xml").read_text(encoding="utf-8")  # an earlier run's, untouched


def test_a_selection_that_does_not_parse_is_one_line_before_anything_runs(cli_env, tmp_path):
    p = run_cli(["run", "--profile", "cpu", "--law", "dummy", "-k", "((", "--out", "out"], cli_env, tmp_path)
    assert p.returncode == 2, p.stdout + p.stderr
    (line,) = p.stderr.strip().splitlines()  # pytest's own usage error runs to several lines
    assert line.startswith("lawbench: error: -k '((' is not a selection expression") and "e.g. -k" in line
    assert "test session starts" not in p.stdout and not (tmp_path / "out").exists()


def test_history_anchors_follow_the_selection(cli_env, tmp_path):
    """History anchors are not pytest items, so -k is applied to them by lawbench: a selection
    that names only live anchors reports no history, one that names the old claim reports it."""
    def history_of(k: str) -> list[str]:
        out = tmp_path / k.replace(" ", "_")
        p = run_cli(["run", "--profile", "cpu", "--law", "dummy", "-k", k, "--out", str(out)], cli_env, tmp_path)
        assert p.returncode in (0, 1), p.stdout + p.stderr
        return [r.anchor_id for r in read_json(out / "run.json").results if r.retired]

    assert history_of("sum") == []
    assert history_of("sum or old") == ["dummy.old-claim"]
    p = run_cli(["run", "--profile", "cpu", "--law", "dummy", "-k", "old", "--out", "only"], cli_env, tmp_path)
    assert p.returncode == 2 and not (tmp_path / "only" / "run.json").exists()
    assert "matches only history anchors (dummy.old-claim): they are listed with a run, never run" in p.stderr


def test_a_llama_dir_that_is_not_a_build_is_refused_before_anything_runs(cli_env, tmp_path):
    """A typo in --llama-dir would otherwise be an ERROR per anchor and a run in the history."""
    (tmp_path / "empty").mkdir()
    for folder, words in (("no-such-build", "does not exist"), ("empty", "lacks llama-bench")):
        p = run_cli(["run", "--profile", "cpu", "--law", "dummy", "--llama-dir", folder, "--out", "out"],
                    cli_env, tmp_path)
        assert p.returncode == 2, p.stdout + p.stderr
        (line,) = p.stderr.strip().splitlines()
        assert line.startswith("lawbench: error: --llama-dir: llama.cpp folder") and words in line, line
        assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("k", ["", "  "])
def test_a_blank_selection_is_refused_not_taken_for_everything(cli_env, tmp_path, k):
    p = run_cli(["run", "--profile", "cpu", "--law", "dummy", "-k", k, "--out", "out"], cli_env, tmp_path)
    assert p.returncode == 2 and "test session starts" not in p.stdout, p.stdout + p.stderr
    (line,) = p.stderr.strip().splitlines()
    assert "-k is empty: give a selection expression" in line and not (tmp_path / "out").exists()


def test_a_prediction_only_run_needs_no_box_lock(cli_env, tmp_path):
    """Nothing is measured, so nothing waits for (or measures around) another job's lock; and
    the record carries no machine measurement of its own."""
    with box_lock(cache_dir=Path(cli_env["LAWBENCH_CACHE"])):
        p = run_cli(["run", "--profile", "cpu", "--law", "dummy", "-k", "sum-pass", "--out", "out"],
                    cli_env, tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    record = read_json(tmp_path / "out" / "run.json")
    assert "ram_bandwidth" not in record.environment and record.engine is None


# --------------------------------------------------------------------------- outputs


def blocked(tmp_path: Path) -> Path:
    """A path nobody can create, root included: its parent is a regular file."""
    wall = tmp_path / "wall"
    wall.write_text("a file, not a folder", encoding="utf-8")
    return wall


def test_unwritable_junit_is_a_usage_error_before_measuring(cli_env, tmp_path):
    junit = blocked(tmp_path) / "junit.xml"
    p = run_cli(["run", "--profile", "cpu", "--law", "dummy", "--out", "out", "--junit", str(junit)],
                cli_env, tmp_path)
    assert p.returncode == 2, p.stdout + p.stderr
    assert str(junit) in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "out" / "run.json").exists()


def test_unwritable_out_is_a_usage_error_before_measuring(cli_env, tmp_path):
    out = blocked(tmp_path) / "out"
    p = run_cli(["run", "--profile", "cpu", "--law", "dummy", "--out", str(out)], cli_env, tmp_path)
    assert p.returncode == 2, p.stdout + p.stderr
    assert str(out) in p.stderr and "Traceback" not in p.stderr


def test_unwritable_step_summary_costs_no_record(cli_env, tmp_path):
    summary = blocked(tmp_path) / "summary.md"
    env = dict(cli_env, GITHUB_STEP_SUMMARY=str(summary))
    p = run_cli(["run", "--profile", "cpu", "--law", "dummy", "-k", "sum-pass", "--out", "out"],
                env, tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr  # the verdicts passed, but an output is missing
    assert "Traceback" not in p.stdout + p.stderr
    line = next(l for l in p.stderr.splitlines() if str(summary) in l)
    assert str(tmp_path / "out" / "run.json") in line or "out/run.json" in line
    record = read_json(tmp_path / "out" / "run.json")
    assert record.exit_code == 0
    with History(tmp_path / "out" / "history.sqlite", create=False) as history:
        assert history.runs()[0].run_id == record.run_id


def test_history_that_cannot_be_opened_keeps_a_fallback_record(cli_env, tmp_path):
    (tmp_path / "out" / "history.sqlite").mkdir(parents=True)  # a folder where the file should be
    p = run_cli(["run", "--profile", "cpu", "--law", "dummy", "--out", "out"], cli_env, tmp_path)
    assert p.returncode == 1 and "Traceback" not in p.stdout + p.stderr
    record = read_json(tmp_path / "out" / "run.json")
    fallback = Path(cli_env["LAWBENCH_CACHE"]) / "records" / f"run-{record.run_id}.json"
    line = next(line for line in p.stderr.splitlines() if "history" in line)
    assert line.startswith("lawbench: error: ")  # its own line, not glued to pytest's progress
    assert "out/history.sqlite" in line and str(fallback) in line
    assert f"kept at out/run.json and {fallback}" in line  # both places it is in
    assert read_json(fallback) == record
    assert f"run record: out/run.json (a copy kept at {fallback})" in p.stdout
    assert "lawbench: exit 1: 1 output(s) could not be written" in p.stdout  # the headline judged verdicts only


@pytest.fixture
def full_disk(tmp_path, cli_env):
    """A 64 KiB tmpfs at tmp_path/full, filled up, and a runner of `lawbench ARGS` that sees it:
    every write there fails with ENOSPC. The tmpfs lives in a private mount namespace
    (tests/_mounts.py), so this runs as a normal user too, not only as root."""
    mount = tmp_path / "full"
    mount.mkdir()
    setup = f"mount -t tmpfs -o size=64k tmpfs '{mount}' && {{ cat /dev/zero > '{mount}/filler' 2>/dev/null; true; }}"

    def run(args):
        return in_private_mounts(setup, [sys.executable, "-m", "lawbench.core.commands.main", *args], timeout=600,
                                 env=cli_env, cwd=tmp_path)

    return mount, run


def test_a_full_disk_costs_no_record(cli_env, tmp_path, full_disk):
    mount, run = full_disk
    p = run(["run", "--profile", "cpu", "--law", "dummy", "--out", str(mount / "out")])
    assert p.returncode == 1, p.stdout + p.stderr
    assert "Traceback" not in p.stdout + p.stderr
    errors = [l for l in p.stderr.splitlines() if l.startswith("lawbench: error:")]
    assert any("run.json" in l and "No space left on device" in l for l in errors), p.stderr
    assert any("history.sqlite" in l and "full" in l for l in errors), p.stderr
    assert any(f"the JUnit XML {mount / 'out' / 'junit.xml'}" in l for l in errors), p.stderr
    records = Path(cli_env["LAWBENCH_CACHE"]) / "records"
    (fallback,) = records.glob("run-*.json")
    assert all(str(fallback) in l for l in errors)
    record = read_json(fallback)
    assert {r.anchor_id for r in record.results} >= {"dummy.sum-pass", "dummy.noisy-void"}
    assert oct(fallback.stat().st_mode & 0o777) == oct(0o666 & ~current_umask())


def current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
