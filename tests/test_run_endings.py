"""A run always ends with an honest record (issue 20): a closed stdout, an engine that floods its
output, SIGHUP, `kill -9` of lawbench, an impossible engine figure and a damaged history each end
with the exit code and record the README promises, and no engine process left behind.

The engine is the stand-in llama-bench of tests/test_records_truthful.py (a shell script in a
`--llama-dir` folder, driven by the stand-in law through core's own runner); STANDIN_MODE picks
what it does. The process handling is what is tested, so a script stands in for llama.cpp.
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
from lawbench.core.history.store import History
from lawbench.core.lock import BoxBusy, box_lock
from lawbench.core.record.reports import read_json
from test_records_truthful import standin_site  # noqa: F401  (the stand-in law, installed)

BENCH = '''
if [ "$1" = "--version" ]; then
  echo "version: stand-in (build 0, commit lawbench-test-stand-in)"; exit 0
fi
case "$STANDIN_MODE" in
  flood) exec yes '{"flood": 1}' ;;
  huge) echo '{"model_filename": "m.gguf", "n_prompt": 0, "n_gen": 16, "n_depth": 0, "samples_ts": [1e30, 1e30, 1e30]}' ;;
  tiny) echo '{"model_filename": "m.gguf", "n_prompt": 0, "n_gen": 16, "n_depth": 0, "samples_ts": [1e-300, 1e-300, 1e-300]}' ;;
  hang)
    sleep 300 &
    echo "$$ $!" > "$STANDIN_DIR/hanging.tmp"; mv "$STANDIN_DIR/hanging.tmp" "$STANDIN_DIR/hanging"
    wait ;;
  *) echo '{"model_filename": "m.gguf", "n_prompt": 0, "n_gen": 16, "n_depth": 0, "samples_ts": [10.0, 10.02, 9.98]}' ;;
esac
'''


@pytest.fixture
def standin(standin_site, cli_env, tmp_path):  # noqa: F811
    state = tmp_path / "standin"
    state.mkdir()
    (state / "m.gguf").write_bytes(b"GGUF")
    llama = fake_llama(tmp_path, BENCH)
    env = dict(cli_env, STANDIN_DIR=str(state),
               PYTHONPATH=os.pathsep.join([str(standin_site), cli_env["PYTHONPATH"]]))
    return env, llama.bin_dir, state


def hup_as_given() -> None:
    """In the child: SIGHUP at its default. An ignored SIGHUP is inherited through exec, and lawbench
    rightly keeps ignoring one it started with (nohup): a suite started under `nohup` saw every
    SIGHUP test hang until its timeout (2026-12-07), which read as a flake."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def start(args: list[str], env: dict, cwd: Path, **kw) -> subprocess.Popen:
    kw.setdefault("stdout", subprocess.PIPE)
    kw.setdefault("stderr", subprocess.PIPE)
    kw.setdefault("preexec_fn", hup_as_given)
    return subprocess.Popen([sys.executable, "-m", "lawbench.core.commands.main", "run", *args], env=env, cwd=cwd,
                            text=True, **kw)


def engine_run(standin, tmp_path: Path, mode: str, **kw) -> subprocess.Popen:
    env, llama_dir, _ = standin
    return start(["--profile", "cpu", "--law", "standin", "-k", "standin.sum or standin.engine",
                  "--llama-dir", str(llama_dir), "--out", "out"], dict(env, STANDIN_MODE=mode), tmp_path, **kw)


def finished(tmp_path: Path, code: int):
    """The run's record: in run.json and in the history, with the exit code it ended with."""
    record = read_json(tmp_path / "out" / "run.json")
    assert record.exit_code == code
    with History(tmp_path / "out" / "history.sqlite", create=False) as h:
        assert [r.run_id for r in h.runs()] == [record.run_id]
    return {r.anchor_id: r for r in record.results}


def no_group_left(state: Path) -> None:
    """Neither the stand-in shell nor its child outlived the run."""
    if (state / "hanging").exists():
        shell, child = map(int, (state / "hanging").read_text(encoding="utf-8").split())
        deadline = time.monotonic() + 10
        while (alive(shell) or alive(child)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(shell) and not alive(child), "the stand-in engine outlived lawbench"


# --------------------------------------------------------------------------- closed stdout


def test_stdout_closed_by_its_reader_never_ends_the_run(standin, tmp_path):
    """`lawbench run … | head -1`: the reader goes after one line; the run goes on, records, and
    exits with its own code (0 here: everything passed), never 0 for a run that failed."""
    proc = engine_run(standin, tmp_path, "ok")
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=300) == 0, err
    assert first.startswith("lawbench ")
    assert "stdout was closed by its reader" in err and "Traceback" not in err
    results = finished(tmp_path, 0)
    assert results["standin.engine"].verdict.value == "PASS"


def test_a_failing_run_with_stdout_closed_from_the_start_exits_1_with_its_record(standin, tmp_path):
    """`>&-`: fd 1 closed before lawbench starts (pytest used to stop with INTERNALERROR, exit 0)."""
    env, llama_dir, _ = standin
    p = subprocess.run(f"{sys.executable} -m lawbench.core.commands.main run --profile cpu --law standin -k "
                       f"'standin.sum or standin.engine' --llama-dir {llama_dir} --out out >&-",
                       shell=True, env=dict(env, STANDIN_MODE="huge"), cwd=tmp_path, capture_output=True,
                       text=True, timeout=300, encoding="utf-8")
    assert p.returncode == 1, p.stderr
    assert "Traceback" not in p.stderr and "INTERNALERROR" not in p.stderr
    assert finished(tmp_path, 1)["standin.engine"].verdict.value == "ERROR"


# --------------------------------------------------------------------------- the engine


def test_an_engine_that_floods_its_output_is_an_engine_fault(standin, tmp_path):
    proc = engine_run(standin, tmp_path, "flood")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, out + err
    engine = finished(tmp_path, 1)["standin.engine"]
    assert engine.verdict.value == "ERROR"
    assert "printed more than 64 MiB on stdout and was killed" in engine.reason


@pytest.mark.parametrize("mode", ["huge", "tiny"])
def test_an_impossible_engine_figure_is_an_error_not_a_fail(standin, tmp_path, mode):
    proc = engine_run(standin, tmp_path, mode)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, out + err
    engine = finished(tmp_path, 1)["standin.engine"]
    assert engine.verdict.value == "ERROR", engine.reason
    assert "no machine runs" in engine.reason and "an engine fault, not a sample" in engine.reason


# --------------------------------------------------------------------------- signals and kill -9


def test_sighup_stops_the_run_as_sigterm_does(standin, tmp_path):
    proc = engine_run(standin, tmp_path, "hang")
    wait_for(standin[2] / "hanging", proc)
    proc.send_signal(signal.SIGHUP)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 129, out + err
    assert "Traceback" not in err
    no_group_left(standin[2])
    record = read_json(tmp_path / "out" / "run.json")
    assert record.interrupted == "SIGHUP" and record.exit_code == 129
    assert "interrupted by SIGHUP" in {r.anchor_id: r for r in record.results}["standin.engine"].reason


def test_kill_9_of_lawbench_ends_the_engine_and_the_lock_is_never_free_while_it_runs(standin, tmp_path):
    env = standin[0]
    proc = engine_run(standin, tmp_path, "hang")
    shell, child = map(int, wait_for(standin[2] / "hanging", proc).split())
    proc.kill()  # SIGKILL: no handler of lawbench's runs
    proc.wait(timeout=30)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            with box_lock(cache_dir=Path(env["LAWBENCH_CACHE"])):
                engine_alive = alive(shell) or alive(child)
            break
        except BoxBusy:
            time.sleep(0.01)
    else:
        pytest.fail("the box lock stayed taken after the engine should have ended")
    assert not engine_alive, "the box lock was free while the engine still ran"
    no_group_left(standin[2])


# --------------------------------------------------------------------------- a damaged history


def test_a_run_onto_a_damaged_history_keeps_its_record_and_never_appends(standin, tmp_path):
    proc = engine_run(standin, tmp_path, "ok")
    assert proc.wait(timeout=300) == 0
    db = tmp_path / "out" / "history.sqlite"
    with open(db, "r+b") as fh:  # a damaged page: what a full disk or a bad copy leaves
        fh.seek(4096 * 2 + 8)
        fh.write(b"\xff" * 64)
    damaged = db.read_bytes()
    proc = engine_run(standin, tmp_path, "ok")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, out + err  # the verdicts passed; an output failed
    assert "is damaged (SQLite's integrity check" in err and "Traceback" not in err
    assert db.read_bytes() == damaged
    record = read_json(tmp_path / "out" / "run.json")
    assert record.exit_code == 0 and record.results  # the record itself is whole
    # the import refuses it too, in one line
    from conftest import run_cli

    p = run_cli(["history", "import", "--db", str(db), str(tmp_path / "out" / "run.json")], standin[0], tmp_path)
    assert p.returncode == 2 and "is damaged" in p.stderr and db.read_bytes() == damaged
