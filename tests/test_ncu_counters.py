"""Nsight Compute's warp-state counters (core/engines/counters.py): the CSV parser on real ncu output,
and ncu run around a real command.

The parser reads the lead's real ncu 2025.3.1 pages of llama.cpp's mul_mat_q on an H100
(results/h200/ncu-2026-12-07: `--metrics` with both metrics, and the WarpStateStats section, which
lacks the long_scoreboard metric). No GPU or ncu here: read_counters runs tests/standin/ncu_standin.py,
which runs the profiled command for real and prints that real page. On a GPU machine with ncu the
last test runs the reader for real on llama-bench's mul_mat_q."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from _engine_fixtures import cuda_bench_and_model

from lawbench.core.engines import counters
from lawbench.core.errors import EngineError, NotApplicable

REAL = Path(__file__).resolve().parents[1] / "results" / "h200" / "ncu-2026-12-07"
METRICS_CSV = REAL / "ncu-metrics.csv"
SECTION_CSV = REAL / "ncu-warpstate.csv"
NCU_STANDIN = Path(__file__).resolve().parent / "standin" / "ncu_standin.py"
STALL, LATENCY = counters.STALL_METRIC, counters.LATENCY_METRIC


def real(path: Path = METRICS_CSV) -> str:
    return path.read_text(encoding="utf-8")


# ------------------------------------------------------------------ the parser, on real ncu output

def test_every_launch_of_the_real_page_with_both_metrics():
    launches = counters.parse_ncu_csv(real(), "ncu-metrics.csv")
    assert [x.launch for x in launches] == [0, 1, 2, 3, 4, 5]
    assert [x.kernel.split("<")[0] for x in launches] == ["void mul_mat_q", "void mul_mat_q_stream_k_fixup"] * 3
    assert [x.grid for x in launches] == [(132, 1, 1), (132, 4, 1)] * 3
    assert launches[0].block == (32, 8, 1) and launches[1].block == (32, 4, 1)
    # the figures of the CSV rows, by hand: launch 1 (stream_k_fixup<12>) 50.82 of 58.81 cycles
    assert launches[1].metrics == {LATENCY: 58.81, STALL: 50.82}
    assert launches[1].units == {LATENCY: "cycle", STALL: "inst"}
    assert launches[1].share("t") == pytest.approx(50.82 / 58.81)  # 0.8641
    assert launches[0].share("t") == pytest.approx(0.30 / 4.05)    # 0.0741


def test_the_share_of_a_kernel_is_the_median_over_its_launches_at_a_grid():
    launches = counters.parse_ncu_csv(real(), "ncu-metrics.csv")
    pct, detail = counters.long_scoreboard_share(launches, "mul_mat_q", (None, None, None), "t")
    # launches 0, 2, 4: 0.30/4.05, 0.28/6.54, 0.35/6.54 -> median 0.35/6.54 = 5.35 %
    assert pct == pytest.approx(100 * 0.35 / 6.54) and detail["launches"] == 3
    assert detail["grids"] == ["132x1x1"]
    pct, detail = counters.long_scoreboard_share(launches, "mul_mat_q_stream_k_fixup", (None, 4, None), "t")
    assert pct == pytest.approx(100 * 27.24 / 37.10) and detail["launches"] == 3  # median of 86.4, 73.4, 72.6
    with pytest.raises(EngineError, match=r"no launch of mul_mat_q at grid \*x28x\*.*mul_mat_q at 132x1x1"):
        counters.long_scoreboard_share(launches, "mul_mat_q", (None, 28, None), "t")


def test_the_programs_own_output_before_the_header_is_passed_over():
    text = real()
    assert "| llama 7B Q4_K - Medium" in text.split('"ID","Process ID"')[0]  # the real file carries it
    trailing = text + "build: unknown (11434)\n==PROF== Report: none\n"
    assert len(counters.parse_ncu_csv(trailing, "t")) == 6


def test_thousands_separators_and_scaled_units_are_read_as_numbers():
    # the real page, one value spelled as ncu spells it without --print-units base
    text = real().replace('"cycle","58.81"', '"Kcycle","1,058.81"', 1)
    launch = counters.parse_ncu_csv(text, "t")[1]
    assert launch.metrics[LATENCY] == pytest.approx(1_058_810.0)


def test_the_section_page_lacks_the_stall_metric_and_says_which_flag_reads_it():
    launches = counters.parse_ncu_csv(real(SECTION_CSV), "ncu-warpstate.csv")
    assert len(launches) == 6 and launches[0].metrics == {}
    with pytest.raises(EngineError, match=r"ncu-warpstate.csv: launch 0 .* has no .*long_scoreboard.*--metrics"):
        counters.long_scoreboard_share(launches, "mul_mat_q", (None, None, None), "ncu-warpstate.csv")


@pytest.mark.parametrize("text, match", [
    ("", r"bad.csv: no Nsight Compute CSV header .* in 0 lines"),
    ((REAL / "ncu-query.txt").read_text(encoding="utf-8"), r"bad.csv: no Nsight Compute CSV header"),
    (real().split('"0",')[0], r"bad.csv: ncu's CSV header \(line 9\) is followed by no launch row"),
    (real().replace('"0.30"', '"n/a"', 1), r"bad.csv line 11: metric value 'n/a' is not a number"),
    (real().replace('"Metric Value"', '"Value"', 1), r"bad.csv: ncu's CSV header lacks Metric Value"),
    (real().replace('"(132, 1, 1)"', '"(132, 1"', 1), r"bad.csv line 10: '\(132, 1' is not a launch dimension"),
])
def test_bad_or_empty_output_is_an_error_naming_the_file(text, match):
    with pytest.raises(EngineError, match=match):
        counters.parse_ncu_csv(text, "bad.csv")


def test_a_zero_cycle_latency_is_refused_not_divided():
    text = real().replace('"4.05"', '"0"', 1)
    with pytest.raises(EngineError, match="no cycles to divide by"):
        counters.parse_ncu_csv(text, "t")[0].share("t")


# ------------------------------------------------------------------ ncu around a real command

def echo_env(tmp_path: Path) -> list[str]:
    """A real program: writes what it sees of LB_SEEN to a file, prints like an engine."""
    out = tmp_path / "seen.json"
    return [sys.executable, "-c", "import json, os, sys; print('engine pass'); "
            f"json.dump(os.environ.get('LB_SEEN'), open({str(out)!r}, 'w'))"]


def test_read_counters_runs_the_command_under_ncu_and_reads_its_page(tmp_path, monkeypatch):
    args = tmp_path / "args.json"
    env = {"PATH": os.environ["PATH"], "LB_SEEN": "yes", "NCU_STANDIN_ARGS": str(args)}
    monkeypatch.setenv("LB_NOT_PASSED", "1")
    launches = counters.read_counters(echo_env(tmp_path), env, counters.kernel_regex("mul_mat_q"), 60, "t",
                                      ncu=str(NCU_STANDIN))
    assert len(launches) == 6 and launches[1].metrics[STALL] == 50.82
    assert json.loads((tmp_path / "seen.json").read_text()) == "yes"  # the engine ran, with the env given
    argv = json.loads(args.read_text())
    assert argv[1:8] == ["--csv", "--print-units", "base", "-k", "regex:mul_mat_q", "--metrics", f"{STALL},{LATENCY}"]
    assert argv[-3:] == echo_env(tmp_path)


def test_the_env_given_is_the_whole_environment(tmp_path, monkeypatch):
    """minfer's unset_env must stay unset under ncu: nothing of lawbench's own environment leaks in."""
    monkeypatch.setenv("LB_SEEN", "leaked")
    counters.read_counters(echo_env(tmp_path), {"PATH": os.environ["PATH"]}, "x", 60, "t", ncu=str(NCU_STANDIN))
    assert json.loads((tmp_path / "seen.json").read_text()) is None


def test_counters_the_driver_refuses_are_an_error_naming_ncu(tmp_path):
    env = {"PATH": os.environ["PATH"], "NCU_STANDIN_FAULT": "perm"}
    with pytest.raises(EngineError, match=r"ncu \(Nsight Compute\) could not read .* for llama-bench: .*ERR_NVGPUCTRPERM"):
        counters.read_counters(echo_env(tmp_path), env, "x", 60, "llama-bench", ncu=str(NCU_STANDIN))


@pytest.mark.parametrize("fault, match", [("empty", "no Nsight Compute CSV header"),
                                          ("no-launch", "did any launch match the kernel filter")])
def test_no_page_is_an_error_naming_the_kernel_filter(tmp_path, fault, match):
    env = {"PATH": os.environ["PATH"], "NCU_STANDIN_FAULT": fault}
    with pytest.raises(EngineError, match=rf"ncu's output for engine \(kernels matching 'q6k'\): .*{match}"):
        counters.read_counters(echo_env(tmp_path), env, "q6k", 60, "engine", ncu=str(NCU_STANDIN))


def test_a_hung_command_is_ended_at_the_timeout(tmp_path):
    hang = [sys.executable, "-c", "import time; time.sleep(60)"]
    with pytest.raises(EngineError, match="did not finish within 2 s"):
        counters.read_counters(hang, {"PATH": os.environ["PATH"]}, "x", 2, "t", ncu=str(NCU_STANDIN))


def test_no_ncu_is_a_skip_naming_nsight_compute(tmp_path, monkeypatch):
    with pytest.raises(NotApplicable, match=r"Nsight Compute \(ncu\) cannot be started"):
        counters.read_counters(["true"], {}, "x", 5, "t", ncu=str(tmp_path / "ncu"))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    monkeypatch.delenv(counters.NCU_ENV, raising=False)
    with pytest.raises(NotApplicable, match=r"Nsight Compute \(ncu\) not found .* set LAWBENCH_NCU"):
        counters.find_ncu()
    monkeypatch.setenv(counters.NCU_ENV, str(tmp_path / "nothing"))
    with pytest.raises(NotApplicable, match="LAWBENCH_NCU='.*nothing' names no file"):
        counters.find_ncu()


# ------------------------------------------------------------------ for real, where a GPU and ncu exist

@pytest.mark.gpu
def test_the_reader_reads_llama_cpps_mul_mat_q_for_real():
    try:
        ncu = counters.find_ncu()
    except NotApplicable as exc:
        pytest.skip(str(exc))
    bin_dir, model = cuda_bench_and_model("syn-25m-q4_0")
    argv = [str(bin_dir / "llama-bench"), "-m", str(model), "-p", "512", "-n", "0", "-r", "1", "-ngl", "99"]
    launches = counters.read_counters(argv, dict(os.environ), counters.kernel_regex("mul_mat_q"), 300,
                                      "llama-bench", launch_count=4, ncu=ncu)
    assert 1 <= len(launches) <= 4
    pct, detail = counters.long_scoreboard_share(launches, "mul_mat_q", (None, None, None), "llama-bench")
    assert 0.0 <= pct < 100.0 and detail["launches"] >= 1
    assert all(x.metrics[LATENCY] > 0 for x in launches)
