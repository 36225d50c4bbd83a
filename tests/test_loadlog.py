"""The load-log parser, on logs the real llama-bench b11434 printed (see each file's .cmd)."""
from __future__ import annotations

from pathlib import Path

import gguf
import pytest

from _engine_fixtures import DATA, TINY, llama, synth_dir, tiny_f16  # noqa: F401  (fixtures)
from lawbench.core.engines.bench import capture_load_log, quantize
from lawbench.core.engines.loadlog import MIB, census_counts, parse_load_log
from lawbench.core.store.synthetic import build_synthetic


def _read(name: str) -> str:
    assert (DATA / f"{name}.cmd").is_file(), f"{name} has no .cmd naming the command that made it"
    return (DATA / name).read_text(encoding="utf-8")


def test_f16_on_cpu_is_mapped_and_refused_by_repack():
    c = census_counts(_read("loadlog_cpu_f16.log"))
    assert c["buffer:CPU_Mapped"] == round(2.75 * MIB)
    assert "buffer:CPU_REPACK" not in c and "repacked_tensors" not in c
    assert c["buffer_fallback:CPU_REPACK"] == 21  # every tensor of the 2-layer model: 3 + 2*9
    assert c["model_loads"] == 1 and c["contexts"] == 1 and c["graphs_reused"] == 1
    assert c["kv_buffer:CPU"] == round(0.25 * MIB)
    assert "offloaded_layers" not in c  # a CPU build never prints the offload line


def test_q4_0_on_cpu_runs_the_repack_path():
    c = census_counts(_read("loadlog_cpu_q4_0.log"))
    assert c["buffer:CPU_REPACK"] == round(0.63 * MIB)
    assert c["buffer:CPU_Mapped"] == round(0.74 * MIB)
    assert c["repacked_tensors"] == 14 == c["repack:q4_0_8x8"]  # 7 matrices x 2 layers
    assert c["buffer_fallback:CPU_REPACK"] == 7  # token_embd + 6 others stay plain CPU


def test_two_tests_two_contexts_graph_reuse_summed():
    log = parse_load_log(_read("loadlog_cpu_q4_0_two_tests.log"))
    assert log.model_loads == 1
    assert log.graphs_reused == [2, 16]
    assert log.census()["graphs_reused"] == 18 and log.census()["contexts"] == 2
    assert log.other_buffers["compute_buffer:CPU"] == round(0.09 * MIB)  # the last context's


@pytest.mark.parametrize("name", ["loadlog_cuda_ngl99.log", "loadlog_cuda_ngl1.log"])
def test_gpu_offload_line(name):
    if not (DATA / name).exists():
        pytest.skip(f"{name} not recorded (needs a CUDA build on a GPU box)")
    c = census_counts(_read(name))
    assert c["total_layers"] == TINY.n_layer + 1
    assert c["offloaded_layers"] == (TINY.n_layer + 1 if "ngl99" in name else 1)
    # -ngl 99: all layers on the GPU, token_embd (0.25 MiB) stays in mapped host memory;
    # -ngl 1: only the output layer (0.25 MiB) goes to the GPU
    gpu, host = (2.50, 0.25) if "ngl99" in name else (0.25, 2.50)
    assert c["buffer:CUDA0"] == round(gpu * MIB) and c["buffer:CPU_Mapped"] == round(host * MIB)


def test_unknown_text_counts_nothing():
    c = census_counts("hello\nload_tensors: something else\n")
    assert c == {"model_loads": 0, "contexts": 0, "graphs_reused": 0}


@pytest.mark.integration
def test_live_load_log_matches_the_file(llama, synth_dir, tmp_path):
    q4 = build_synthetic(TINY.model_copy(update={"weight_type": "Q4_0"}), cache_dir=synth_dir,
                         quantize=lambda s, d, t: quantize(llama, s, d, t, timeout_s=120))
    log = parse_load_log(capture_load_log(llama, q4, threads=1).log)
    size = q4.stat().st_size
    # the mapped buffer is a window on the file; repacked matrices get a copy in CPU_REPACK
    assert 0 < log.model_buffers.get("CPU_Mapped", 0) <= size
    blk = [int(t.n_bytes) for t in gguf.GGUFReader(str(q4)).tensors
           if t.name.startswith("blk.") and len(t.shape) == 2]
    if "CPU_REPACK" in log.model_buffers:  # CPUs without a repack kernel keep plain buffers
        assert 0 < sum(log.repacked.values()) <= len(blk)
        if sum(log.repacked.values()) == len(blk):  # every layer matrix repacked: same bytes
            assert abs(log.model_buffers["CPU_REPACK"] - sum(blk)) <= 0.005 * MIB
