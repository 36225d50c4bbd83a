"""nox's anchors session passes lawbench's exit code on as it is (issue 30): bad data stays 2 and a
stopped run 130, where nox alone turns every failed command into its own 1. The real noxfile and the
real nox, reusing this test environment as the anchors session's (`-R`: no install)."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOX = shutil.which("nox")

pytestmark = pytest.mark.skipif(NOX is None, reason="the anchors session is nox's")


def _nox(tmp_path: Path, *args: str) -> subprocess.Popen:
    (tmp_path / "envs").mkdir(exist_ok=True)
    link = tmp_path / "envs" / "anchors"
    if not link.exists():
        link.symlink_to(Path(sys.prefix))  # this environment has lawbench installed
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAWBENCH_", "NOX"))}
    return subprocess.Popen([NOX, "-R", "--envdir", str(tmp_path / "envs"), "-f", str(ROOT / "noxfile.py"), "-s",
                             "anchors", "--", *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True, encoding="utf-8", preexec_fn=_sigint_as_given)


def _sigint_as_given() -> None:
    """In the child: SIGINT at its default. A suite started as a background job (`cmd &` in a
    script) ignores SIGINT, and an ignored disposition is inherited through exec: a SIGINT landing
    before lawbench installs its handlers was then lost and the run finished (2026-12-07)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_bad_data_through_nox_exits_2_not_1(tmp_path):
    proc = _nox(tmp_path, "--profile", "nosuch-profile")
    out, _ = proc.communicate(timeout=300)
    assert "unknown hardware profile 'nosuch-profile'" in out, out
    assert proc.returncode == 2, out


def test_a_run_stopped_by_sigint_through_nox_exits_130(tmp_path):
    proc = _nox(tmp_path, "--profile", "cpu", "-k", "prediction", "--out", str(tmp_path / "out"))
    seen = ""
    deadline = time.time() + 300
    while "lawbench run" not in seen:  # nox echoes the command before it starts it
        line = proc.stdout.readline()
        assert line and time.time() < deadline, seen
        seen += line
    time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, seen + out
