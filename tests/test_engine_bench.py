"""llama-bench, llama-quantize and the load log: real runs, and faults planted for real."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from _engine_fixtures import (DATA, TINY, fake_llama, llama, synth_dir, tiny_f16,  # noqa: F401
                              write_script)
from lawbench.core.engines.bench import (bench_command, capture_load_log, parse_records, quantize,
                                         run_bench, record_label)
from lawbench.core.engines.loadlog import parse_load_log
from lawbench.core.errors import EngineError
from lawbench.core.models import Sample

JSONL = DATA / "bench_tiny.jsonl"  # real llama-bench b11434 output, see bench_tiny.jsonl.cmd
JSON = DATA / "bench_tiny.json"


@pytest.fixture
def model(tmp_path) -> Path:
    """Any existing file: the fake tools never read it."""
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF")
    return path


# --------------------------------------------------------------------------- parsing real output


def test_parse_recorded_jsonl_and_json_agree():
    a, b = parse_records(JSONL.read_text(encoding="utf-8")), parse_records(JSON.read_text(encoding="utf-8"))
    assert len(a) == 2 and [record_label(r) for r in a] == ["pp16", "tg8"]
    assert [len(r["samples_ts"]) for r in a] == [3, 3]
    assert [record_label(r) for r in b] == ["pp16", "tg8"]
    assert all(r["build_number"] == 11434 for r in a + b)


def test_parse_salvages_a_json_array_cut_mid_record():
    text = JSON.read_text(encoding="utf-8")
    cut = text[: text.rindex('"samples_ns"')]  # killed while printing the second record
    records = parse_records(cut)
    assert len(records) == 1 and record_label(records[0]) == "pp16"


def test_test_names_follow_llama_bench():
    assert record_label({"n_prompt": 512, "n_gen": 0, "n_depth": 0}) == "pp512"
    assert record_label({"n_prompt": 0, "n_gen": 128, "n_depth": 4096}) == "tg128@d4096"
    assert record_label({"n_prompt": 16, "n_gen": 8, "n_depth": 0}) == "pp16+tg8"


# --------------------------------------------------------------------------- planted faults


def test_crash_exit_3_is_an_engine_error_naming_model_and_command(tmp_path, model):
    fake = fake_llama(tmp_path, "echo 'main: error: planted crash' >&2; exit 3")
    with pytest.raises(EngineError) as exc:
        run_bench(fake, model, n_gen=4)
    msg = str(exc.value)
    assert "exited with code 3" in msg and "m.gguf" in msg and "planted crash" in msg
    assert "-o jsonl" in msg and "\n" not in msg
    assert "planted crash" in exc.value.log


def test_hang_is_killed_at_the_timeout_and_finished_tests_are_kept(tmp_path, model):
    first = JSONL.read_text(encoding="utf-8").splitlines()[0]
    (tmp_path / "rec.jsonl").write_text(first + "\n", encoding="utf-8")
    # a child process that outlives the script's own kill must die too (whole process group)
    fake = fake_llama(tmp_path, f"cat {tmp_path}/rec.jsonl; sleep 300 & sleep 300\n")
    t0 = time.monotonic()
    with pytest.raises(EngineError) as exc:
        run_bench(fake, model, n_gen=4, timeout_s=2)
    assert time.monotonic() - t0 < 20
    assert "did not finish within 2 s" in str(exc.value) and "m.gguf" in str(exc.value)
    assert "1 finished tests kept" in str(exc.value)
    kept = exc.value.samples
    assert kept and all(isinstance(s, Sample) for s in kept)
    assert [s.value for s in kept] == json.loads(first)["samples_ts"]
    assert exc.value.run.records[0]["n_prompt"] == json.loads(first)["n_prompt"]


def test_killed_by_sigkill_says_so_and_keeps_samples(tmp_path, model):
    first = JSONL.read_text(encoding="utf-8").splitlines()[1]
    (tmp_path / "rec.jsonl").write_text(first + "\n", encoding="utf-8")
    fake = fake_llama(tmp_path, f"cat {tmp_path}/rec.jsonl; kill -9 $$\n")
    with pytest.raises(EngineError) as exc:
        run_bench(fake, model)
    assert "killed by SIGKILL" in str(exc.value)
    assert len(exc.value.samples) == len(json.loads(first)["samples_ts"])


def test_missing_binary_is_an_engine_error(tmp_path, model):
    fake = fake_llama(tmp_path, "exit 0")
    fake.llama_bench.unlink()
    with pytest.raises(EngineError, match="cannot be started"):
        run_bench(fake, model)


def test_missing_model_names_the_file(tmp_path):
    fake = fake_llama(tmp_path, "exit 0")
    with pytest.raises(EngineError, match="nope.gguf does not exist"):
        run_bench(fake, tmp_path / "nope.gguf")


def test_success_without_results_is_an_error(tmp_path, model):
    fake = fake_llama(tmp_path, "echo 'nothing to do' >&2; exit 0")
    with pytest.raises(EngineError, match="printed no results: nothing to do"):
        run_bench(fake, model)


def test_options_this_build_lacks_are_refused(tmp_path, model):
    fake = fake_llama(tmp_path, "exit 0")
    with pytest.raises(EngineError, match="no --n-cpu-moe option"):
        bench_command(fake, model, n_cpu_moe=4)


def test_command_line_maps_every_parameter(tmp_path, model):
    help_text = ("-o <csv|json|jsonl|md|sql> --n-depth --n-gpu-layers --cache-type-k --cache-type-v "
                 "--ubatch-size --threads --n-cpu-moe --override-tensor --no-warmup <on|off|auto>")
    fake = fake_llama(tmp_path, "exit 0", help_text=help_text)
    cmd = bench_command(fake, model, n_prompt=512, n_gen=[32, 64], depth=4096, n_gpu_layers=99,
                        flash_attn=True, cache_type_k="q8_0", cache_type_v="q8_0", ubatch=256,
                        threads=2, n_cpu_moe=3, override_tensor="exps=CPU", repetitions=5,
                        warmup=False, extra_args=["--delay", "1"])
    line = " ".join(cmd[1:])
    for part in ["-o jsonl", "-p 512", "-n 32,64", "-d 4096", "-ngl 99", "-fa on", "-ctk q8_0",
                 "-ctv q8_0", "-ub 256", "-t 2", "-ncmoe 3", "-ot exps=CPU", "-r 5", "--no-warmup",
                 "--delay 1"]:
        assert part in line, part


def test_old_build_without_jsonl_falls_back_to_json(tmp_path, model):
    fake = fake_llama(tmp_path, f"cat {JSON}\n", help_text="-o <csv|json|md|sql>")
    run = run_bench(fake, model)
    assert "-o json" in " ".join(run.cmd) and len(run.records) == 2


def test_quantize_failure_names_the_model_and_removes_half_files(tmp_path, model):
    fake = fake_llama(tmp_path, "exit 0")
    write_script(fake.llama_quantize, 'echo partial > "$2"; echo "invalid type" >&2; exit 1\n')
    dst = tmp_path / "out.gguf"
    with pytest.raises(EngineError, match=r"llama-quantize on model m.gguf -> Q4_0 exited with code 1"):
        quantize(fake, model, dst, "Q4_0")
    assert not dst.exists()


# --------------------------------------------------------------------------- the real tools


@pytest.mark.integration
def test_real_bench_records_and_build_info(llama, tiny_f16):
    run = run_bench(llama, tiny_f16, n_prompt=16, n_gen=8, repetitions=3, threads=1, timeout_s=120)
    assert [record_label(r) for r in run.records] == ["pp16", "tg8"]
    assert all(len(ts) == 3 and min(ts) > 0 for ts in run.samples_ts)
    assert run.records[0]["build_number"] == llama.build_number
    assert run.returncode == 0 and run.wall_s > 0


@pytest.mark.integration
def test_real_bench_on_a_truncated_gguf(llama, tiny_f16, tmp_path):
    cut = tmp_path / "truncated.gguf"
    cut.write_bytes(tiny_f16.read_bytes()[: tiny_f16.stat().st_size // 2])
    with pytest.raises(EngineError) as exc:
        run_bench(llama, cut, n_gen=4, repetitions=1, timeout_s=60)
    assert "truncated.gguf" in str(exc.value) and "exited with code" in str(exc.value)
    assert "failed to load model" in str(exc.value)


@pytest.mark.integration
def test_real_bench_killed_after_its_first_test_keeps_it(llama, tiny_f16, tmp_path):
    # the real llama-bench runs one test, then the wrapper hangs until the timeout kills the group
    wrapper = write_script(tmp_path / "llama-bench", f"""
        if [ "$1" = "--help" ]; then exec {llama.llama_bench} --help; fi
        {llama.llama_bench} "$@"
        sleep 300
    """)
    hung = type(llama)(**{**llama.__dict__, "llama_bench": wrapper})
    with pytest.raises(EngineError) as exc:
        run_bench(hung, tiny_f16, n_gen=4, repetitions=2, threads=1, timeout_s=20)
    assert "did not finish within 20 s" in str(exc.value)
    assert len(exc.value.samples) == 2 and all(s.value > 0 for s in exc.value.samples)
    assert exc.value.samples[0].raw["test"] == "tg4"


@pytest.mark.integration
def test_real_quantize_bad_type_is_an_engine_error(llama, tiny_f16, tmp_path):
    with pytest.raises(EngineError, match="llama-quantize on model .* -> NOT_A_TYPE exited"):
        quantize(llama, tiny_f16, tmp_path / "x.gguf", "NOT_A_TYPE", timeout_s=60)


@pytest.mark.integration
def test_real_load_log_has_the_census_lines(llama, tiny_f16):
    run = capture_load_log(llama, tiny_f16, threads=1)
    log = parse_load_log(run.log)
    assert log.model_loads == 1 and len(log.graphs_reused) == 1
    weights = sum(log.model_buffers.values())
    assert 0.8 * tiny_f16.stat().st_size < weights < 1.2 * tiny_f16.stat().st_size
