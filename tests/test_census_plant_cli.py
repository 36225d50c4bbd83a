"""`lawbench census plant` refuses bad input in one line before any engine runs, and never throws a
finished proof away."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "lawbench.core.commands.main", "census", "plant"]


def plant(args: list[str], cwd: Path, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    import os

    env = {**os.environ, "LAWBENCH_CACHE": str(cwd / "cache"), **(env_extra or {})}
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120, cwd=cwd, env=env, encoding="utf-8")


def one_line(p: subprocess.CompletedProcess, code: int = 2) -> str:
    assert p.returncode == code, p.stdout + p.stderr
    assert "Traceback" not in p.stderr
    lines = [line for line in p.stderr.strip().splitlines() if line.startswith("lawbench: error: ")]
    assert len(lines) == 1, p.stderr
    return lines[0]


@pytest.mark.parametrize("args,words", [
    (["--profile", "cpu", "--anchor", "nope"], "--anchor 'nope': no runnable census anchor of profile 'cpu' (no such anchor); "
                                               "this profile's: law4.cpu.census.q4_0-repack"),
    (["--profile", "cpu", "--anchor", "law4.cpu.l15.smollm2-135m-q4_1"], "(an agreement anchor, not a census)"),
    (["--profile", "cpu", "--anchor", "law4.h200.census.all-in-vram"], "(it binds to h200: give --profile h200)"),
    (["--profile", "nope"], "unknown hardware profile 'nope'"),
    (["--profile", "cpu", "--llama-dir", "no-such-build"], "--llama-dir: llama.cpp folder "),
    (["--profile", "cpu", "--anchor", "minfer.r54.census.default"], "(it declares no planted fault: there is nothing to plant)"),
    (["--profile", "cpu", "--anchor", "law4.cpu.census.pure-cpu-placement"],
     "--anchor 'law4.cpu.census.pure-cpu-placement' declares no planted fault: there is nothing to plant into it"),
    (["--profile", "gb10"], "no census anchor of profile 'gb10' declares a planted fault: nothing to prove here "
                            "(profiles whose census anchors do: cpu, gtx1060, h200)"),
])
def test_a_bad_anchor_or_profile_is_one_line_exit_2(tmp_path, args, words):
    assert words in one_line(plant(args, tmp_path))


def test_an_out_that_cannot_be_written_is_refused_before_anything_runs(tmp_path):
    """A file where the folder should be: refused at once (the engine would take minutes to build,
    and the proof would be lost at the end)."""
    afile = tmp_path / "afile"
    afile.write_text("x", encoding="utf-8")
    p = plant(["--profile", "cpu", "--out", str(afile)], tmp_path)
    assert f"cannot write the --out folder {afile}" in one_line(p)
    assert not (tmp_path / "cache" / "llama.cpp").exists()  # nothing was built


def test_strict_off_its_runner_refuses_before_building(tmp_path):
    p = plant(["--profile", "h200", "--strict"], tmp_path)
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert "--strict: this machine does not match profile 'h200'" in p.stderr
    assert not (tmp_path / "cache" / "llama.cpp").exists()


def test_faults_that_cannot_run_here_are_not_a_success(tmp_path):
    """Off its runner every h200 census SKIPs: nothing is proved, so the command fails (exit 1) and
    says why, and the record lists each fault as not run (nothing is built for it)."""
    import json

    p = plant(["--profile", "h200", "--out", "out"], tmp_path)
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stdout + p.stderr
    assert "0/12 planted faults proved, 12 not run here" in p.stdout
    assert "a fault not run here is not proved" in p.stderr
    record = json.loads((tmp_path / "out" / "planted.json").read_text(encoding="utf-8"))
    assert record["interrupted"] is None and all(r["skipped"] for r in record["anchors"])
    assert not (tmp_path / "cache" / "llama.cpp").exists()


@pytest.mark.integration
def test_sigterm_ends_the_engine_and_keeps_the_record(tmp_path):
    """A cancelled job (SIGTERM) while the census's llama-bench runs: its whole process group is
    ended, planted.json says interrupted and keeps the anchor's ERROR, and the exit is 143."""
    import json
    import os
    import signal
    import time

    from _engine_fixtures import alive, wait_for

    from lawbench.core.engines.build import build_llamacpp

    real = Path(build_llamacpp(progress=None).llama_bench).parent
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for f in real.iterdir():
        if f.name != "llama-bench":
            (bin_dir / f.name).symlink_to(f)
    bench = bin_dir / "llama-bench"  # the real one for its probes, a hang (with a child) for the run
    bench.write_text(f'#!/bin/sh\ncase "$1" in --help|--version) exec "{real / "llama-bench"}" "$@";; esac\n'
                     f'sleep 600 &\necho "$$ $!" > "{tmp_path / "hanging"}"\nwait\n', encoding="utf-8")
    bench.chmod(0o755)
    env = {**os.environ, "LAWBENCH_CACHE": str(tmp_path / "cache")}
    proc = subprocess.Popen([*CLI, "--profile", "cpu", "--anchor", "law4.cpu.census.q4_0-repack", "--llama-dir",
                             str(bin_dir), "--out", "out"], cwd=tmp_path, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, encoding="utf-8")
    # the synthetic model is written and quantized first
    shell, child = map(int, wait_for(tmp_path / "hanging", proc, timeout_s=300).split())
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, out + err
    assert "interrupted by SIGTERM; the record keeps what ran" in err and "Traceback" not in err
    for pid in (shell, child):
        assert not alive(pid), f"process {pid} of the engine's group outlived the run"
    record = json.loads((tmp_path / "out" / "planted.json").read_text(encoding="utf-8"))
    assert record["interrupted"] == "SIGTERM"
    [anchor] = record["anchors"]
    assert anchor["unplanted"]["verdict"] == "ERROR" and "interrupted by SIGTERM" in anchor["unplanted"]["reason"]

