"""Every tool lawbench starts goes through the one process runner (lawbench.core.procgroup): so
llama-server and pip's downloads, like llama-bench and the build, never outlive `kill -9` of
lawbench — the supervisor ends their groups. Each case runs lawbench's own code in a child
process, with the tool replaced by a shell that leaves a grandchild, and kills the child by -9."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

SERVE = """
from lawbench.core.engines import server
server.server_command = lambda llama, model, port, **kw: ["bash", "-c", "sleep 300 & sleep 300"]
server.serve(None, "m.gguf", [], load_timeout_s=600)
"""
PIP = """
from pathlib import Path
import tempfile
from lawbench.core.store import pypi
work = Path(tempfile.mkdtemp())
pypi._run(["bash", "-c", "sleep 300 & sleep 300"], work / "pip.log", [work], pypi._Watch("x==1", None))
"""
SOURCES = {"llama-server (engines.server)": SERVE, "pip download (store.pypi)": PIP}


def _sleepers(parent: psutil.Process, deadline_s: float = 30.0) -> list[psutil.Process]:
    """The two sleeps the tool left, once both run."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        found = [p for p in parent.children(recursive=True) if p.name() == "sleep"]
        if len(found) == 2:
            return found
        time.sleep(0.1)
    raise AssertionError(f"the tool never started: {parent.children(recursive=True)}")


@pytest.mark.parametrize("tool", list(SOURCES))
def test_the_tool_s_group_does_not_outlive_kill_9_of_lawbench(tool):
    child = subprocess.Popen([sys.executable, "-c", SOURCES[tool]], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    sleepers: list[psutil.Process] = []
    try:
        sleepers = _sleepers(psutil.Process(child.pid))
        assert all(os.getpgid(p.pid) != os.getpgid(child.pid) for p in sleepers)  # a group of its own
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        gone, alive = psutil.wait_procs(sleepers, timeout=15)
        assert alive == [], f"{tool}: left running after kill -9 of lawbench: {alive}"
    finally:
        if child.poll() is None:
            child.kill()
        for p in sleepers:  # never left behind by the test itself, whatever it found
            try:
                p.kill()
            except psutil.Error:
                pass


def test_no_module_starts_a_process_group_of_its_own():
    """start_new_session appears only in the process runner (plugins move onto it separately)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "core"
    users = sorted(str(p.relative_to(root)) for p in root.rglob("*.py")
                   if "start_new_session" in p.read_text(encoding="utf-8") and p.name != "procgroup.py")
    assert users == []
