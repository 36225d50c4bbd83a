"""Kernel time on minfer's kernels (measure kernel_time_ms, docs/minfer-contract.md §9): lawbench's
CUPTI kernel tracer, format 2, read per kernel and launch grid.

No GPU here, and no minfer. The engine is the stand-in (tests/standin/minfer_standin.py); its
traced passes hand their launches to tests/standin/tracer_harness.cpp, a tiny real program built
with the real tracer (core/engines/kernel_tracer.cpp) compiled in against the toolkit's real CUPTI:
it feeds the launches to the tracer as CUPTI kernel activity records and the tracer's own writer
writes the trace. So the parser reads what the tracer writes; only the records are made up (the
stand-in's ffn_down times are the seed's 12.76 / 16.06 ms, attn_v's its own). The GPU test at the
end traces a real CUDA program (tests/standin/q6k_kernel_standin.cu) where a GPU exists."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import standin
from test_minfer import anchors, engine, run, with_case  # noqa: F401  (fixtures)

from lawbench.core.engines import kernels
from lawbench.core.errors import DataError, EngineError, NotApplicable
from lawbench.core.models import Verdict
from lawbench.plugins.minfer.law import Minfer

Q6K = "mmq_raw_nb_bt_q6k_kernel"
FFN_DOWN, ATTN_V = (None, 28, None), (None, 4, None)


@pytest.fixture(scope="session")
def harness(tmp_path_factory):
    try:
        return standin.build_harness(tmp_path_factory.mktemp("harness"))
    except NotApplicable as exc:
        pytest.skip(f"the tracer harness needs a CUDA toolkit with CUPTI (no GPU): {exc}")


def harness_trace(harness, tmp_path, lines: str) -> kernels.KernelTrace:
    out = tmp_path / "trace.tsv"
    subprocess.run([str(harness)], input=lines, text=True, check=True, env={kernels.TRACE_OUT_ENV: str(out)})
    return kernels.read_trace(out, "the tracer harness")


@pytest.fixture
def traced(engine, harness, monkeypatch, tmp_path):  # noqa: F811
    """The stand-in engine, its traced passes written by the real tracer through the harness."""
    lib = tmp_path / "liblawbench_kernel_tracer.so"
    lib.write_bytes(b"")  # what CUDA_INJECTION64_PATH names; never loaded: the stand-in runs no CUDA
    monkeypatch.setenv(kernels.TRACER_ENV, str(lib))
    monkeypatch.setenv(standin.HARNESS_ENV, str(harness))
    monkeypatch.delenv(standin.KERNEL_MS_ENV, raising=False)

    def use(*faults: str, **env: str) -> None:
        engine(*faults, **env)
    return use


# ------------------------------------------------------------------ the format-2 trace, as the tracer writes it

def test_the_tracer_sums_time_per_kernel_and_grid_and_keeps_format_1s_view(harness, tmp_path):
    trace = harness_trace(harness, tmp_path, "".join([
        f"{standin_name(True)} 52 28 1 12760000\n" * 3, f"{standin_name(True)} 52 28 1 12760000 graph\n",
        f"{standin_name(True)} 52 4 1 841000\n", f"{standin_name(False)} 52 28 1 16060000\n"]))
    assert trace.version == 2 and trace.dropped == 0
    got = {(kernels.base_name(x.kernel)[0], "true" in x.kernel, x.grid): (x.count, x.in_graph, x.total_ns)
           for x in trace.launches}
    assert got == {(Q6K, True, (52, 28, 1)): (4, 1, 4 * 12760000), (Q6K, True, (52, 4, 1)): (1, 0, 841000),
                   (Q6K, False, (52, 28, 1)): (1, 0, 16060000)}
    # demangled by the tracer, as from a real record
    assert "void mmq_raw_nb_bt_q6k_kernel<2, true>(unsigned char const*, float*, int, int, int)" in trace.kernels
    assert kernels.kernel_labels(trace)[f"kernel:{Q6K}"] == 6  # the llama.cpp census's view, summed over grids
    ms, detail = kernels.kernel_time(trace, Q6K, FFN_DOWN, "harness")
    assert ms == pytest.approx((4 * 12.76 + 16.06) / 5) and detail["launches"] == 5
    assert detail["grids"] == ["52x28x1"]


def standin_name(fast: bool) -> str:
    return "_Z24mmq_raw_nb_bt_q6k_kernelILi2ELb1EEvPKhPfiii" if fast else "_Z24mmq_raw_nb_bt_q6k_kernelILi2ELb0EEvPKhPfiii"


def test_no_launch_at_that_grid_and_a_format_1_trace_are_errors_not_zero(harness, tmp_path):
    trace = harness_trace(harness, tmp_path, f"{standin_name(True)} 52 28 1 100\n{standin_name(True)} 52 4 1 100\n")
    with pytest.raises(EngineError, match=r"no launch of mmq_raw_nb_bt_q6k_kernel at grid \*x1188x\* ran "
                                          r"\(grids it ran at: 52x28x1, 52x4x1\)"):
        kernels.kernel_time(trace, Q6K, (None, 1188, None), "harness")
    old = kernels.parse_trace((Path(__file__).parent / "data" / "kernels" / "trace-Q4_0ngl99.tsv")
                              .read_text(encoding="utf-8"))  # a real format-1 recording (H200, 2026-12-01)
    with pytest.raises(EngineError, match="format 1, which records no durations"):
        kernels.kernel_time(old, "mul_mat_q", (None, None, None), "an old trace")


@pytest.mark.parametrize("line", ["14\t0\t123\t52x28\tvoid k()", "14\t0\tabc\t52x28x1\tvoid k()",
                                  "14\t0\t123\tvoid k()"])
def test_a_malformed_format_2_line_is_named(line):
    with pytest.raises(EngineError, match="line 2 is not"):
        kernels.parse_trace(f"# lawbench-kernel-trace 2 dropped=0\n{line}\n")


# ------------------------------------------------------------------ the shipped anchors, judged

@pytest.mark.parametrize("anchor_id, value", [("minfer.r53.kernel.ffn-down.default", 12.76),
                                              ("minfer.r53.kernel.ffn-down.exp-off", 16.06),
                                              ("minfer.r53.kernel.ffn-down.gain", 12.76 / 16.06),
                                              ("minfer.r53.kernel.attn-v.gain", 0.841)])
def test_each_kernel_time_anchor_passes_on_the_seeds_figures(traced, anchors, anchor_id, value):  # noqa: F811
    traced()
    r = run(anchors[anchor_id])
    assert r.verdict is Verdict.PASS, r.reason
    assert r.measured == pytest.approx(value, rel=1e-6)


@pytest.mark.parametrize("fast, slow, verdict", [
    (12.76, 16.06, Verdict.PASS),  # 0.7945, inside [0.7791, 0.8109] (0.795 ± 2 %, docs/bands.md)
    (13.10, 16.06, Verdict.FAIL),  # 0.8157: a smaller gain than published
    (12.20, 16.06, Verdict.FAIL),  # 0.7597: a larger one
])
def test_the_gain_ratio_turns_red_on_a_wrong_value(traced, anchors, fast, slow, verdict):  # noqa: F811
    traced(**{standin.KERNEL_MS_ENV: f"{fast},{slow}"})
    r = run(anchors["minfer.r53.kernel.ffn-down.gain"])
    assert r.verdict is verdict, r.reason
    assert r.measured == pytest.approx(fast / slow, rel=1e-6)


@pytest.mark.parametrize("fast, verdict", [(12.76, Verdict.PASS), (17.80, Verdict.PASS), (18.00, Verdict.FAIL),
                                           (7.60, Verdict.FAIL)])
def test_an_absolute_kernel_time_is_judged_by_its_band(traced, anchors, fast, verdict):  # noqa: F811
    traced(**{standin.KERNEL_MS_ENV: f"{fast},16.06"})  # 12.76 ± 40 % (the GB10's drift between windows)
    r = run(anchors["minfer.r53.kernel.ffn-down.default"])
    assert r.verdict is verdict and r.measured == pytest.approx(fast, rel=1e-6), r.reason


def test_the_gain_ratio_sees_r53s_map_key_bug_that_parity_cannot(traced, anchors):  # noqa: F811
    traced("wrong-map-key")  # every lookup misses: both arms run the EXP=false kernel
    for anchor_id in ("minfer.r53.kernel.ffn-down.gain", "minfer.r53.kernel.attn-v.gain"):
        r = run(anchors[anchor_id])
        assert r.verdict is Verdict.FAIL and r.measured == pytest.approx(1.0), r.reason
    # the absolute default band cannot see it: 16.06 lies inside 12.76 ± 40 %; the ratio is the test
    assert run(anchors["minfer.r53.kernel.ffn-down.default"]).verdict is Verdict.PASS


def test_an_engine_command_that_scrubs_the_tracer_is_an_error(traced, anchors):  # noqa: F811
    traced("no-trace")
    r = run(anchors["minfer.r53.kernel.ffn-down.default"])
    assert r.verdict is Verdict.ERROR and "wrote no" in r.reason


def test_a_kernel_that_never_ran_at_its_grid_is_an_error(traced, anchors):  # noqa: F811
    traced()
    r = run(with_case(anchors["minfer.r53.kernel.ffn-down.default"], kernel={"name": Q6K, "grid_y": 1188}))
    assert r.verdict is Verdict.ERROR and "grids it ran at: 52x28x1, 52x4x1" in r.reason


def test_without_a_toolkit_it_skips_elsewhere_and_fails_on_its_runner(engine, anchors, monkeypatch,  # noqa: F811
                                                                              tmp_path):
    engine()
    monkeypatch.delenv(kernels.TRACER_ENV, raising=False)
    monkeypatch.setenv("PATH", f"{standin.SMI_DIR}:{os.path.dirname(shutil.which('python3') or '/usr/bin/python3')}")
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(kernels, "DEFAULT_NVCC", tmp_path / "no-cuda" / "nvcc")
    anchor = anchors["minfer.r53.kernel.ffn-down.default"]
    assert run(anchor, on_own_runner=False).verdict is Verdict.SKIP  # not a gb10: not this machine's anchor
    r = run(anchor, strict=True)  # the gb10 runner: a skip is a failure, naming the missing toolkit
    assert r.verdict is Verdict.FAIL and "CUDA toolkit with CUPTI" in r.reason, r.reason


def test_a_kernel_time_case_names_its_kernel(anchors):  # noqa: F811
    anchor = anchors["minfer.r53.kernel.ffn-down.default"]
    no_kernel = anchor.model_copy(update={"case": {k: v for k, v in anchor.case.items() if k != "kernel"}})
    with pytest.raises(DataError, match="case.kernel"):
        Minfer().check_anchor(no_kernel)
    with pytest.raises(DataError, match="case.kernel"):
        Minfer().check_anchor(with_case(anchor, measure="prefill_tok_s"))


# ------------------------------------------------------------------ the tracer, for real

@pytest.mark.gpu
def test_the_tracer_times_a_real_cuda_program_per_grid(tmp_path):
    """On a CUDA machine: build the tracer, compile the q6_K stand-in program, trace both arms
    (scripts/record_kernel_time_traces.sh does the same by hand)."""
    try:
        lib = kernels.build_tracer(tmp_path)
    except NotApplicable as exc:
        pytest.skip(str(exc))
    nvcc = shutil.which("nvcc") or str(kernels.DEFAULT_NVCC)
    cc = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True,
                        text=True, encoding="utf-8")
    if cc.returncode != 0 or not cc.stdout.strip():
        pytest.skip("no GPU: nvidia-smi reports no compute capability")
    exe = tmp_path / "q6k"
    subprocess.run([nvcc, "-O2", f"-arch=sm_{cc.stdout.split()[0].replace('.', '')}", "-o", str(exe),
                    str(standin.HERE / "q6k_kernel_standin.cu")], check=True, timeout=300)
    means = {}
    for exp in ("1", "0"):
        out = tmp_path / f"trace-{exp}.tsv"
        env = {**os.environ, **kernels.traced_env(lib, out), "MINFER_MMQ_Q6K_EXP": exp}
        subprocess.run([str(exe)], env=env, check=True, timeout=120, capture_output=True)
        trace = kernels.read_trace(out, "the q6_K stand-in")
        assert trace.version == 2
        means[exp] = kernels.kernel_time(trace, Q6K, FFN_DOWN, "the q6_K stand-in")[0]
    assert means["0"] > means["1"] > 0


# ------------------------------------------------------------------ recorded on a GPU (README there)

def recorded(arm: str) -> kernels.KernelTrace:
    return kernels.parse_trace((Path(__file__).parent / "data" / "kernels" / f"trace2-q6k-{arm}.tsv")
                               .read_text(encoding="utf-8"), where=f"recording {arm}")


def test_a_real_gpu_trace_tells_the_tensors_apart_by_grid_and_times_each():
    for arm, template in (("exp1", "<2, true>"), ("exp0", "<2, false>"), ("nb1", "<2, true>")):
        trace = recorded(arm)
        assert trace.version == 2 and trace.dropped == 0
        assert {x.grid: x.count for x in trace.launches} == {(52, 28, 1): 14, (52, 4, 1): 14}
        assert all(template in x.kernel and x.total_ns > 0 for x in trace.launches)
    ms = {arm: kernels.kernel_time(recorded(arm), Q6K, FFN_DOWN, arm)[0] for arm in ("exp1", "exp0")}
    assert ms["exp0"] > ms["exp1"]  # the EXP=false instantiation runs the recombination loop
    assert kernels.kernel_time(recorded("exp1"), Q6K, FFN_DOWN, "exp1")[0] > \
        kernels.kernel_time(recorded("exp1"), Q6K, ATTN_V, "exp1")[0]  # a row of 18944 against 3584


def test_a_real_gpu_program_runs_the_same_kernels_unset_and_on_and_others_at_0():
    """The gate census's reading (plugins/minfer/gates.py) of the recordings."""
    from lawbench.plugins.minfer.gates import differing

    def census(arm: str) -> dict[str, int]:
        return {k: v for k, v in kernels.kernel_labels(recorded(arm)).items() if k.startswith("kernel:")}

    assert differing(census("exp1"), census("nb1")) == []
    assert differing(census("exp1"), census("nb0")) == ["kernel:gemm_f16_nt_kernel_t", f"kernel:{Q6K}"]
