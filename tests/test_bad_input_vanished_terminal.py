"""Issue 32 item 4: a vanished terminal. A real `lawbench run` on a pseudo-terminal whose other end
is closed (what a dropped ssh session does): every later write to it fails with EIO. With SIGHUP
delivered the run stops as SIGTERM stops it, records, and exits 129 — never a traceback; with
SIGHUP ignored (`nohup`, `trap '' HUP`) the run goes on and its record holds every selected anchor.

The engine is the stand-in llama-bench of tests/test_run_endings.py (a shell script)."""
from __future__ import annotations

import os
import pty
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from _engine_fixtures import wait_for
from lawbench.core.record.reports import read_json
from test_records_truthful import standin_site  # noqa: F401  (the stand-in law, installed)
from test_run_endings import finished, no_group_left, standin  # noqa: F401


def _on_a_terminal(standin, tmp_path: Path, mode: str, stderr_too: bool, ignore_hup: bool = False):  # noqa: F811
    """`lawbench run` with stdout (and stderr) on a pty; returns the process and the pty's master."""
    env, llama_dir, _ = standin
    master, slave = pty.openpty()
    # SIGHUP's disposition is set either way: an ignored one is inherited, and a suite started under
    # nohup would otherwise hand every run a SIGHUP it must ignore (test_run_endings.hup_as_given)
    hup = signal.SIG_IGN if ignore_hup else signal.SIG_DFL
    preexec = lambda: signal.signal(signal.SIGHUP, hup)  # noqa: E731
    proc = subprocess.Popen([sys.executable, "-m", "lawbench.core.commands.main", "run", "--profile", "cpu",
                             "--law", "standin", "-k", "standin.sum or standin.engine", "--llama-dir",
                             str(llama_dir), "--out", "out"], env=dict(env, STANDIN_MODE=mode), cwd=tmp_path,
                            stdin=subprocess.DEVNULL, stdout=slave,
                            stderr=slave if stderr_too else subprocess.PIPE, text=True,
                            preexec_fn=preexec, start_new_session=True, encoding="utf-8")
    os.close(slave)
    return proc, master


@pytest.mark.parametrize("stderr_too", [False, True], ids=["stdout", "stdout-and-stderr"])
def test_a_vanished_terminal_and_sighup_end_in_a_record_not_a_traceback(standin, tmp_path, stderr_too):  # noqa: F811
    proc, master = _on_a_terminal(standin, tmp_path, "hang", stderr_too)
    wait_for(standin[2] / "hanging", proc)
    os.close(master)  # the terminal is gone: writes to it fail with EIO from now on
    proc.send_signal(signal.SIGHUP)
    err = proc.communicate(timeout=120)[1] or ""
    assert "Traceback" not in err, err
    assert proc.returncode == 129, err  # an uncaught EIO would end it with 1
    no_group_left(standin[2])
    record = read_json(tmp_path / "out" / "run.json")
    assert record.interrupted == "SIGHUP" and record.exit_code == 129
    assert "interrupted by SIGHUP" in {r.anchor_id: r for r in record.results}["standin.engine"].reason


def test_a_run_that_ignores_sighup_keeps_every_selected_anchor(standin, tmp_path):  # noqa: F811
    """`nohup lawbench run …` and the terminal closes before the anchors run: the run goes on
    with every write to the terminal failing (EIO) and records both anchors, exit 0."""
    proc, master = _on_a_terminal(standin, tmp_path, "ok", stderr_too=False, ignore_hup=True)
    os.read(master, 1)  # lawbench has started writing
    os.close(master)
    proc.send_signal(signal.SIGHUP)  # the hangup it asked to ignore
    err = proc.communicate(timeout=300)[1] or ""
    assert "Traceback" not in err, err
    assert proc.returncode == 0, err
    results = finished(tmp_path, 0)
    assert set(results) == {"standin.sum", "standin.engine"}, results
    assert all(r.verdict.value == "PASS" for r in results.values())
    assert "terminal" in err  # said once, on the stream that is still there
