"""The kernel census: recorded real traces parsed and labelled, the h200 kernel anchors judged on
them (and every planted fault shown to break exactly what it says), the tracer built and run for
real on a GPU machine, and the planted-fault command proving the CPU census for real."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from _engine_fixtures import cuda_bench_and_model

from lawbench.core.engines import kernels
from lawbench.core.errors import EngineError, NotApplicable
from lawbench.core.record.census import census_problems
from lawbench.core.claims.loading import load_all
from lawbench.core.laws.registry import get_registry

DATA = Path(__file__).parent / "data" / "kernels"


def trace(name: str) -> kernels.KernelTrace:
    return kernels.parse_trace((DATA / f"trace-{name}.tsv").read_text(encoding="utf-8"))


def labels(name: str, opt_outs=()) -> dict[str, int]:
    return kernels.kernel_labels(trace(name), opt_outs)


def test_recorded_q4_0_trace_counts_as_measured():
    """The issue's own measurement, reproduced from the recorded trace: decode through
    mul_mat_vec_q<Q4_0> 664 times, prompt through mul_mat_q<Q4_0> 302, flash_attn_ext_vec 110."""
    got = labels("Q4_0ngl99")
    assert got["mmvq:q4_0"] == 664 and got["mmq:q4_0"] == 302
    assert got["mmvq:q6_k"] == 7  # the Q6_K output head of a Q4_0 file
    assert got["flash-attn"] == 154 and got["kernel:flash_attn_ext_vec"] == 110
    assert got["graph-node"] == 2376 and got["kernels"] == 3480
    assert not any(k.startswith(("dequant", "attn-softmax", "cublas")) for k in got)


@pytest.mark.parametrize("name,main", [("Q4_K_Mngl99", "q4_k"), ("Q2_Kngl99", "q2_k"), ("Q8_0ngl99", "q8_0")])
def test_each_format_takes_its_own_quantized_kernels(name, main):
    got = labels(name)
    assert got[f"mmvq:{main}"] > 0 and got[f"mmq:{main}"] > 0
    assert "cublas-gemm" not in got and "dequant-cublas(fallback!)" not in got


def test_f16_runs_cublas_as_its_own_path():
    got = labels("F16ngl99")
    assert got["mmvf:f16"] == 671 and got["cublas-gemm"] == 344
    assert not any(k.startswith(("mmq:", "mmvq:")) for k in got)


def test_flash_attn_off_is_an_opt_out_only_when_asked():
    """Seed 002's distinction: the same soft_max kernels are a deliberate opt-out under -fa 0 and
    an accidental fallback on a run that did not ask for them."""
    assert labels("Q4_0ngl99fa0", {"flash-attn"})["attn-softmax(opt-out)"] == 154
    assert labels("Q4_0ngl99fa0")["attn-softmax(fallback!)"] == 154
    assert "flash-attn" not in labels("Q4_0ngl99fa0", {"flash-attn"})


def test_no_graphs_and_no_gpu():
    assert labels("nographs")["graph-node"] == 0 and labels("nographs")["mmvq:q4_0"] == 664
    assert labels("Q4_0ngl0nopo1") == {}


def test_ncu_and_tracer_template_spellings_map_alike():
    """Nsight Compute prints template arguments as numbers, the tracer's demangler as casts."""
    assert kernels.base_name("void mul_mat_vec_q<2, 1, 0, 1, 0>(const void *, int)") == ("mul_mat_vec_q", "2")
    assert kernels.base_name("void mul_mat_vec_q<(ggml_type)2, 1, false>(void const*)") == ("mul_mat_vec_q", "(ggml_type)2")
    assert kernels.weight_type("2") == kernels.weight_type("(ggml_type)2") == "q4_0"
    assert kernels.weight_type("(ggml_type)12") == "q4_k" and kernels.weight_type("__half") == "f16"
    # the recorded ncu summary names the same decode kernel
    text = (DATA / "ncu-q4_0-p8-n1.csv").read_text(encoding="utf-8")
    assert "void mul_mat_vec_q<2, 1, 0, 1, 0>" in text


@pytest.mark.parametrize("bad", ["", "not a trace\n", kernels.TRACE_MAGIC + " dropped=0\nx\ty\tz\n"])
def test_a_bad_trace_is_an_engine_error(bad):
    with pytest.raises(EngineError):
        kernels.parse_trace(bad)


def test_dropped_records_refuse_the_census(tmp_path):
    f = tmp_path / "t.tsv"
    f.write_text(kernels.TRACE_MAGIC + "1 dropped=3\n5\t0\tvoid k()\n", encoding="utf-8")
    with pytest.raises(EngineError, match="dropped 3"):
        kernels.read_trace(f, "a run")
    with pytest.raises(EngineError, match="wrote no"):
        kernels.read_trace(tmp_path / "missing.tsv", "a run")


# ----------------------------------------------------------------- the h200 anchors on the recordings

FORMAT_TRACE = {"q4_0": "Q4_0", "q4_k_m": "Q4_K_M", "q2_k": "Q2_K", "q8_0": "Q8_0", "f16": "F16"}
# planted fault -> the recorded trace of exactly that run (tests/data/kernels/README.md)
FAULT_TRACE = {"decode-leaves-gpu": "{f}ngl0", "weights-leave-gpu": "{f}ngl0nopo1",
               "cuda-graphs-off": "nographs", "flash-attn-off": "{f}ngl99fa0"}


def kernel_anchors():
    anchors = load_all(get_registry()).anchors
    return [la.anchor for la in anchors if la.anchor.id.startswith("law4.h200.census.kernels.")]


def counts_of(trace_name: str, anchor, ngl: int) -> dict[str, int]:
    from lawbench.plugins.law4.case import parse_case
    from lawbench.plugins.law4.census import opt_outs

    bench = parse_case(anchor.case, anchor.id).bench
    # the load log's label, as a CUDA build prints it for syn-100m (22 blocks + output)
    return {**kernels.kernel_labels(trace(trace_name), opt_outs(bench)), "offloaded_layers": 23 if ngl else 0}


def test_every_kernel_anchor_passes_on_its_recorded_run():
    found = kernel_anchors()
    assert len(found) == 5
    for anchor in found:
        fmt = FORMAT_TRACE[anchor.id.rsplit("syn-100m-", 1)[1]]
        assert census_problems(anchor.census, counts_of(f"{fmt}ngl99", anchor, 99)) == [], anchor.id


def test_every_planted_fault_breaks_what_it_names_on_its_recorded_run():
    """Each planted fault of each kernel anchor, judged on the trace of exactly that run: the
    census fails, and names every label the fault says it breaks."""
    proved = 0
    for anchor in kernel_anchors():
        fmt = FORMAT_TRACE[anchor.id.rsplit("syn-100m-", 1)[1]]
        for fault in anchor.planted:
            name = FAULT_TRACE[fault.name].format(f=fmt)
            if not (DATA / f"trace-{name}.tsv").is_file():
                continue
            planted = anchor.with_fault(fault)
            ngl = planted.case["placement"]["ngl"]
            problems = census_problems(planted.census, counts_of(name, planted, ngl))
            assert problems, f"{anchor.id}~{fault.name} stayed green"
            for label in fault.breaks:
                assert any(p.startswith(f"{label}:") for p in problems), (fault.name, label, problems)
            proved += 1
    assert proved >= 9


# ----------------------------------------------------------------- the tracer, for real

def test_tracer_is_not_applicable_without_a_toolkit(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(kernels, "DEFAULT_NVCC", tmp_path / "no-cuda" / "bin" / "nvcc")
    with pytest.raises(NotApplicable, match="CUDA toolkit"):
        kernels.build_tracer(tmp_path)
    # a toolkit without CUPTI is refused by name too
    (tmp_path / "cuda" / "bin").mkdir(parents=True)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    with pytest.raises(NotApplicable, match="has no CUPTI"):
        kernels.build_tracer(tmp_path)


@pytest.mark.gpu
def test_tracer_counts_a_real_engine_run(tmp_path):
    """On a CUDA machine: build the tracer, run llama-bench under it, count its kernels."""
    try:
        lib = kernels.build_tracer(tmp_path)
    except NotApplicable as exc:
        pytest.skip(str(exc))
    bin_dir, model = cuda_bench_and_model("syn-25m-q4_0")
    out = tmp_path / "trace.tsv"
    p = subprocess.run([str(bin_dir / "llama-bench"), "-m", str(model), "-p", "64", "-n", "4", "-r", "1",
                        "-ngl", "99", "-o", "json"], env={**os.environ, **kernels.traced_env(lib, out)},
                       capture_output=True, text=True, timeout=120, encoding="utf-8")
    assert p.returncode == 0, p.stderr[-500:]
    got = kernels.kernel_labels(kernels.read_trace(out, "llama-bench"))
    assert got["mmvq:q4_0"] >= 10 * 5 and got["mmq:q4_0"] >= 10 * 2


# ----------------------------------------------------------------- planted faults on this machine

@pytest.mark.integration
def test_planted_fault_proves_the_cpu_repack_census(tmp_path):
    """`lawbench census plant` for real: --repack 0 turns the repack census red, naming both labels,
    while llama-perplexity with --no-repack stays within 1 % of the repacked run. The one case
    where the census does not apply is decided before the run, from the build; a SKIP from the
    code under test is a failure (the anchor's notes: on a CPU build it passes or fails)."""
    own = os.environ.get("LAWBENCH_LLAMA_DIR")
    if own:
        from lawbench.core.engines.llamacpp import locate_llamacpp

        if locate_llamacpp(own).backend == "cuda":
            pytest.skip("a CUDA build: with -ngl 0 its weights go to a CUDA host buffer, not CPU_REPACK "
                        "(seen on the H200 machine, results/h200/census/README.md)")
    p = subprocess.run([sys.executable, "-m", "lawbench.core.commands.main", "census", "plant", "--profile", "cpu",
                        "--anchor", "law4.cpu.census.q4_0-repack", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path, encoding="utf-8")
    record = json.loads((tmp_path / "planted.json").read_text(encoding="utf-8"))
    [anchor] = record["anchors"]
    assert anchor["unplanted"]["verdict"] == "PASS", anchor["unplanted"].get("reason")  # a SKIP fails here
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert anchor["proved"]
    [fault] = anchor["faults"]
    assert fault["result"]["verdict"] == "FAIL"
    assert "repacked_tensors: counted 0, expected at least 70" in fault["result"]["reason"]
    assert abs(fault["parity_ratio"] - 1) <= 0.01
    assert "1/1 planted faults proved" in p.stdout


# ----------------------------------------------------------------- a stand-in that mislabels

@pytest.mark.integration
def test_pure_cpu_placement_census_turns_red_when_the_engine_reports_an_offload(tmp_path):
    """The pure-CPU placement census cannot be broken by a switch of a CPU build (there is no GPU
    to leave for), so its mutation proof is a stand-in: the real llama-bench runs, and a wrapper
    adds to its stderr the load log a real CUDA build printed for an all-in-VRAM run
    (tests/data/loadlog_cuda_ngl99.log). The census must go red naming the offload and the CUDA
    buffers, while llama-perplexity through the same stand-in folder scores exactly as the real one."""
    from lawbench.core.engines.build import build_llamacpp
    from lawbench.core.run.evaluate import RunPolicy, evaluate
    from lawbench.core.hardware.profiles import load_profiles
    from lawbench.core.models import Verdict
    from lawbench.core.laws.resources import Resources
    from lawbench.plugins.law4.law import Law4

    real = build_llamacpp(progress=None)
    bin_dir = Path(real.llama_bench).parent
    standin = tmp_path / "bin"
    standin.mkdir()
    for f in bin_dir.iterdir():
        if f.name != "llama-bench":
            (standin / f.name).symlink_to(f)
    recorded = Path(__file__).parent / "data" / "loadlog_cuda_ngl99.log"
    bench = standin / "llama-bench"
    bench.write_text(f'#!/bin/sh\n"{bin_dir / "llama-bench"}" "$@"\nrc=$?\ncat "{recorded}" >&2\nexit $rc\n', encoding="utf-8")
    bench.chmod(0o755)

    anchors = {la.anchor.id: la.anchor for la in load_all(get_registry()).anchors}
    anchor = anchors["law4.cpu.census.pure-cpu-placement"]
    profiles = load_profiles()
    policy = RunPolicy(profile=profiles["cpu"], profiles=profiles, on_own_runner=True)
    law = Law4()
    results, ppl = {}, {}
    for name, folder in (("real", str(bin_dir)), ("stand-in", str(standin))):
        r = Resources(llama_dir=folder, profile=profiles["cpu"])
        try:
            results[name] = evaluate(anchor, law, policy, r)
            ppl[name] = law.parity(anchor, profiles["cpu"], r)["ppl"]
        finally:
            r.close()
    assert results["real"].verdict is Verdict.PASS, results["real"].reason
    red = results["stand-in"]
    assert red.verdict is Verdict.FAIL
    assert "offloaded_layers: counted 3, must never appear" in red.reason  # the tiny model: 2 blocks + output
    assert "buffer:CUDA0: counted" in red.reason and "model_loads: counted 2, expected exactly 1" in red.reason
    assert ppl["stand-in"] == ppl["real"]  # parity cannot see it


def test_every_llama_cpp_census_anchor_has_a_mutation_proof():
    """Planted faults on every law4 census anchor, but the one a CPU build cannot break (its proof
    is the stand-in test above); minfer's are proved against the contract's stand-in
    (tests/test_minfer_mutation.py)."""
    proved_by_standin = {"law4.cpu.census.pure-cpu-placement"}
    for la in load_all(get_registry()).anchors:
        a = la.anchor
        if a.kind == "census" and a.law == "law4" and a.runs:
            assert a.planted or a.id in proved_by_standin, f"{a.id} has no planted fault"
            for fault in a.planted:
                assert set(fault.breaks) <= set(a.census.exact) | set(a.census.minimum) | \
                    set(a.census.maximum) | set(a.census.forbidden), (a.id, fault.name)


def test_byte_labels_read_as_sizes_and_the_judged_labels_are_kept():
    """A load log's buffer labels hold bytes: a census message gives them with MiB, not as a bare
    count, and a result keeps the counts of the labels its verdict rests on (the table shows them)."""
    from types import SimpleNamespace

    from lawbench.core.record.census import judged_labels
    from lawbench.core.models import Result, Verdict
    from lawbench.core.record.reports import fmt_measured

    spec = SimpleNamespace(exact={"model_loads": 1}, minimum={"kv_buffer:CPU": 1}, maximum={},
                           forbidden=["offloaded_layers", "buffer:CUDA0"])
    counts = {"model_loads": 1, "offloaded_layers": 23, "buffer:CUDA0": 77594624, "buffer:CPU_Mapped": 5}
    assert census_problems(spec, counts) == [
        "kv_buffer:CPU: counted 0, expected at least 1 B",
        "offloaded_layers: counted 23, must never appear",
        "buffer:CUDA0: counted 77594624 B (74.00 MiB), must never appear"]
    judged = judged_labels(spec, counts)
    assert judged == {"model_loads": 1, "kv_buffer:CPU": 0, "offloaded_layers": 23, "buffer:CUDA0": 77594624}
    r = Result(anchor_id="a", law="law4", kind="census", profile="cpu", verdict=Verdict.FAIL,
               census_counts=counts, census_judged=judged)
    assert fmt_measured(r) == "model_loads 1, kv_buffer:CPU 0, offloaded_layers 23, buffer:CUDA0 74.0 MiB"
    old = Result(anchor_id="a", law="law4", kind="census", profile="cpu", verdict=Verdict.FAIL,
                 detail={"counts": counts})  # a record from before `judged` was kept: nothing judged to show
    assert old.census_counts == counts and fmt_measured(old) == "-"


def test_the_memory_census_goes_red_on_either_side_of_its_bounds():
    """The NVML half of the gpu-memory census (its planted fault on the H200 broke only the
    placement label): a process holding less than the buffers its log reports, or more than
    1024 MiB beyond them, or read too few times, turns the anchor red by name. The sampler is a
    stand-in here; the load log is the real CUDA one (tests/data/loadlog_cuda_ngl99.log)."""
    from types import SimpleNamespace

    from lawbench.core.engines.loadlog import parse_load_log
    from lawbench.plugins.law4.census import _memory_counts

    anchors = {la.anchor.id: la.anchor for la in load_all(get_registry()).anchors}
    anchor = anchors["law4.h200.census.gpu-memory.syn-100m-q4_0"]
    log = parse_load_log((Path(__file__).parent / "data" / "loadlog_cuda_ngl99.log").read_text(encoding="utf-8"))
    memory = SimpleNamespace(instrument="stand-in")

    def judge(peak_mib, readings=20):
        sampler = SimpleNamespace(peak_mib=peak_mib, readings=readings, errors=[], memory=memory)
        counts = {**log.census(), "offloaded_layers": 23, **_memory_counts(sampler, log, "m")["counts"]}
        return census_problems(anchor.census, counts)

    buffers = _memory_counts(SimpleNamespace(peak_mib=0, readings=9, errors=[], memory=memory), log, "m")["counts"]["gpu_buffers_mib"]
    assert buffers > 0
    assert judge(buffers + 589) == []  # what the H200 measured beyond the buffers
    assert any(p.startswith("gpu_peak_over_buffers_mib: counted 1025, expected at most 1024") for p in judge(buffers + 1025))
    assert any(p.startswith("gpu_peak_over_buffers_mib: counted -1, expected at least 0") for p in judge(buffers - 1))
    assert any(p.startswith("gpu_readings: counted 2, expected at least 3") for p in judge(buffers + 10, readings=2))
    with pytest.raises(EngineError, match="no per-PID GPU memory reading"):
        _memory_counts(SimpleNamespace(peak_mib=None, readings=0, errors=[], memory=memory), log, "m")


def test_a_fault_on_a_census_that_was_already_red_proves_nothing():
    """A planted fault only proves something when the census was green without it."""
    from lawbench.core.run.evaluate import RunPolicy
    from lawbench.core.hardware.profiles import load_profiles
    from lawbench.core.laws.law import Census, Law
    from lawbench.core.run.planted import plant_anchor

    anchors = {la.anchor.id: la.anchor for la in load_all(get_registry()).anchors}
    anchor = anchors["law4.cpu.census.q4_0-repack"]

    class Red(Law):  # counts nothing, ever: red with and without the fault
        name = "law4"

        def census(self, anchor, profile, resources):
            return Census(counts={})

        def parity(self, anchor, profile, resources):
            return {"ppl": 100.0}

    profiles = load_profiles()
    policy = RunPolicy(profile=profiles["cpu"], profiles=profiles, on_own_runner=True)
    record = plant_anchor(anchor, Red(), policy, None)
    [fault] = record["faults"]
    assert fault["result"]["verdict"] == "FAIL" and not fault["proved"] and not record["proved"]
    assert "already FAIL" in fault["problems"][0]
