"""The one-job-per-box lock, with a real second process holding it."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from lawbench.core.errors import LawbenchError
from lawbench.core.paths import cache_root
from lawbench.core.lock import BoxBusy, box_lock

HOLDER = """
import sys, time
from pathlib import Path
from lawbench.core.lock import box_lock
with box_lock("lawbench", cache_dir=Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(60)
"""


@pytest.fixture
def holder(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE,
                            text=True, encoding="utf-8")
    try:
        assert proc.stdout.readline().strip() == "held"
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_second_job_fails_fast_naming_the_holder_pid(tmp_path, holder):
    t0 = time.monotonic()
    with pytest.raises(BoxBusy) as exc:
        with box_lock("lawbench", cache_dir=tmp_path):
            pytest.fail("the lock was taken twice")
    assert time.monotonic() - t0 < 5
    assert f"PID {holder.pid}" in str(exc.value)
    assert exc.value.holder["pid"] == holder.pid
    assert "\n" not in str(exc.value)


def test_lock_is_free_again_when_the_holder_dies(tmp_path, holder):
    holder.kill()
    holder.wait()
    with box_lock("lawbench", cache_dir=tmp_path) as path:
        assert path.name == "lawbench.lock"
        assert (path.parent / "lawbench.holder.json").read_text(encoding="utf-8").count(str(os.getpid())) == 1
    assert not (path.parent / "lawbench.holder.json").exists()


def test_waiting_holder_gets_the_lock_after_release(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", HOLDER.replace("time.sleep(60)", "time.sleep(1)"),
                             str(tmp_path)], stdout=subprocess.PIPE, text=True, encoding="utf-8")
    try:
        assert proc.stdout.readline().strip() == "held"
        with box_lock("lawbench", timeout=30, cache_dir=tmp_path):
            assert proc.poll() is not None or proc.wait(5) == 0
    finally:
        proc.kill()
        proc.wait()


def test_different_names_do_not_block_each_other(tmp_path, holder):
    with box_lock("other-job", cache_dir=tmp_path):
        pass


def test_bad_name_is_a_clear_error(tmp_path):
    with pytest.raises(LawbenchError, match="lock name"):
        with box_lock("../escape", cache_dir=tmp_path):
            pass


def test_cache_root_follows_env(monkeypatch, tmp_path):
    monkeypatch.setenv("LAWBENCH_CACHE", str(tmp_path / "c"))
    assert cache_root() == tmp_path / "c"
    monkeypatch.delenv("LAWBENCH_CACHE")
    assert cache_root().name == "lawbench"
