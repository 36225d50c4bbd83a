"""`lawbench census plant` refuses bad input in one line before any engine runs, and never throws a
finished proof away."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "lawbench.core.cli", "census", "plant"]


def plant(args: list[str], cwd: Path, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    import os

    env = {**os.environ, "LAWBENCH_CACHE": str(cwd / "cache"), **(env_extra or {})}
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120, cwd=cwd, env=env)


def one_line(p: subprocess.CompletedProcess, code: int = 2) -> str:
    assert p.returncode == code, p.stdout + p.stderr
    assert "Traceback" not in p.stderr
    lines = [line for line in p.stderr.strip().splitlines() if line.startswith("lawbench: error: ")]
    assert len(lines) == 1, p.stderr
    return lines[0]


@pytest.mark.parametrize("args,words", [
    (["--profile", "cpu", "--anchor", "nope"], "--anchor 'nope': no runnable census anchor of profile 'cpu' (no such anchor); "
                                               "this profile's: law4.cpu.census.q4_0-repack"),
    (["--profile", "cpu", "--anchor", "law4.cpu.agree.smollm2-135m-q4_1"], "(an agreement anchor, not a census)"),
    (["--profile", "cpu", "--anchor", "law4.h200.census.all-in-vram"], "(it binds to h200: give --profile h200)"),
    (["--profile", "nope"], "unknown hardware profile 'nope'"),
    (["--profile", "cpu", "--anchor", "minfer.r54.census.default"], "(it declares no planted fault: there is nothing to plant)"),
    (["--profile", "gb10"], "no census anchor of profile 'gb10' declares a planted fault: nothing to prove here "
                            "(profiles whose census anchors do: cpu, h200)"),
])
def test_a_bad_anchor_or_profile_is_one_line_exit_2(tmp_path, args, words):
    assert words in one_line(plant(args, tmp_path))


def test_an_out_that_cannot_be_written_is_refused_before_anything_runs(tmp_path):
    """A file where the folder should be: refused at once (the engine would take minutes to build,
    and the proof would be lost at the end)."""
    afile = tmp_path / "afile"
    afile.write_text("x")
    p = plant(["--profile", "cpu", "--out", str(afile)], tmp_path)
    assert f"cannot write the --out folder {afile}" in one_line(p)
    assert not (tmp_path / "cache" / "llama.cpp").exists()  # nothing was built


def test_strict_off_its_runner_refuses_before_building(tmp_path):
    p = plant(["--profile", "h200", "--strict"], tmp_path)
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert "--strict: this machine does not match profile 'h200'" in p.stderr
    assert not (tmp_path / "cache" / "llama.cpp").exists()
