"""Law 4's scope rules on a CPU tier (plugins/law4/scope.py): decided before an anchor runs, from
real GGUF headers and measured visits, and a SKIP with the figures — never a FAIL."""
from pathlib import Path
from types import SimpleNamespace

import pytest

from lawbench.core.errors import EngineError, LawbenchError, OutOfScope
from lawbench.core.store.synthetic import SyntheticSpec, build_synthetic
from lawbench.plugins.law4 import scope


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Two real F16 GGUF files written by the synthetic factory: 6.5 MiB and 34 MiB of weights."""
    cache = tmp_path_factory.mktemp("syn")
    small = SyntheticSpec(id="s", n_layer=4, n_embd=256, n_ff=512, n_head=4, n_head_kv=4, n_vocab=4096)
    big = SyntheticSpec(id="b", n_layer=6, n_embd=768, n_ff=1536, n_head=12, n_head_kv=4, n_vocab=4096)
    return {name: build_synthetic(spec, cache_dir=cache) for name, spec in (("small", small), ("big", big))}


def test_last_level_cache_is_read_from_sysfs(tmp_path):
    for i, (level, kind, size) in enumerate([(1, "Data", "32K"), (1, "Instruction", "32K"), (2, "Unified", "512K"),
                                             (3, "Unified", "32768K")]):
        d = tmp_path / f"index{i}"
        d.mkdir()
        (d / "level").write_text(f"{level}\n", encoding="utf-8")
        (d / "type").write_text(f"{kind}\n", encoding="utf-8")
        (d / "size").write_text(f"{size}\n", encoding="utf-8")
    assert scope.last_level_cache_bytes(tmp_path) == 32 * 2**20
    assert scope.last_level_cache_bytes(tmp_path / "none") is None


def test_weight_bytes_leave_out_an_untied_embedding(models):
    from lawbench.core.store.gguf_header import read_header

    h = read_header(models["small"])
    embd = next(t for t in h.tensors if t.name == "token_embd.weight")
    assert "output.weight" in {t.name for t in h.tensors}
    assert scope.weight_bytes(h) == h.total_tensor_bytes - embd.n_bytes  # a one-row lookup: negligible


def test_skeleton_keeps_layers_and_format_and_drops_the_bytes(models):
    from lawbench.core.store.gguf_header import read_header

    spec = scope.skeleton_spec(read_header(models["big"]))
    assert (spec.n_layer, spec.weight_type, spec.n_embd, spec.n_vocab) == (6, "F16", 64, 384)
    assert spec.n_params() < 0.1 * SyntheticSpec(id="b", n_layer=6, n_embd=768, n_ff=1536, n_head=12, n_head_kv=4,
                                                  n_vocab=4096).n_params()


def test_a_k_quant_skeleton_keeps_whole_256_wide_rows():
    header = SimpleNamespace(path="m.gguf", metadata={"general.file_type": 15},  # MOSTLY_Q4_K_M
                             arch=lambda key: {"block_count": 30}[key])
    spec = scope.skeleton_spec(header)
    assert (spec.n_layer, spec.weight_type, spec.n_embd, spec.n_ff) == (30, "Q4_K_M", 256, 256)


def test_a_file_type_without_a_skeleton_is_named():
    header = SimpleNamespace(path="m.gguf", metadata={"general.file_type": 9999}, arch=lambda key: 30)
    with pytest.raises(LawbenchError, match="m.gguf: its file type 9999 has no synthetic skeleton") as exc:
        scope.skeleton_spec(header)
    assert not isinstance(exc.value, OutOfScope)  # undecided is an ERROR, never a silent SKIP
    with pytest.raises(LawbenchError):
        scope.skeleton_spec(header)


def _visits(ms_per_token: dict[str, float]):
    """A visit function whose readings are tok/s of the given ms per token, by file-name part."""
    def visit_of(arm, path):
        ms = next(v for k, v in ms_per_token.items() if k in Path(path).stem)
        return lambda reps: SimpleNamespace(values=[1000.0 / ms * f for f in (0.9, 1.0, 0.95)][:reps])
    return visit_of


def _build(tmp_path):
    def build(spec):
        p = tmp_path / f"skel-{spec.n_layer}l.gguf"
        p.write_bytes(b"")
        return p
    return build


def test_a_model_that_fits_in_the_cache_is_out_of_scope(models, tmp_path):
    with pytest.raises(OutOfScope, match=r"fit in the 32 MiB last-level cache") as exc:
        scope.check_scope({"a": models["small"], "b": models["big"]}, _visits({}), _build(tmp_path), reps=3,
                          llc=32 * 2**20)
    assert "arm a" in str(exc.value) and exc.value.detail["a"]["weight_bytes"] < 32 * 2**20


def test_per_op_cost_over_a_quarter_of_a_token_is_out_of_scope(models, tmp_path):
    # skeleton 3 ms of a 10 ms token: 30 % > 25 % -> out, naming the arm and the figures
    visits = _visits({"skel": 3.0, models["small"].stem: 10.0, models["big"].stem: 40.0})
    with pytest.raises(OutOfScope, match=r"arm a .* 3\.00 ms per token, 30% of the model's 10\.00 ms") as exc:
        scope.check_scope({"a": models["small"], "b": models["big"]}, visits, _build(tmp_path), reps=3, llc=1)
    assert exc.value.detail["a"]["fixed_share"] == pytest.approx(0.3)


def test_both_arms_inside_return_the_measured_figures(models, tmp_path):
    visits = _visits({"skel": 1.0, models["small"].stem: 10.0, models["big"].stem: 40.0})
    out = scope.check_scope({"a": models["small"], "b": models["big"]}, visits, _build(tmp_path), reps=3, llc=1)
    assert out["a"]["fixed_share"] == pytest.approx(0.1) and out["b"]["fixed_share"] == pytest.approx(0.025)
    assert out["max_fixed_share"] == 0.25 and out["rule"] == "cpu-tier"


def test_a_probe_with_no_reading_is_an_engine_fault_not_a_scope_decision(models, tmp_path):
    def visit_of(arm, path):
        return lambda reps: SimpleNamespace(values=[])
    with pytest.raises(EngineError, match="no reading"):
        scope.check_scope({"a": models["big"]}, visit_of, _build(tmp_path), reps=3, llc=1)


def test_out_of_scope_is_a_skip_even_on_the_anchors_own_runner_under_strict():
    from lawbench.core.run.evaluate import RunPolicy, evaluate
    from lawbench.core.hardware.profiles import get_profile, plugin_profiles
    from lawbench.core.laws.law import Law
    from lawbench.core.models import Anchor
    from lawbench.core.laws.registry import get_registry

    profiles = plugin_profiles(get_registry())
    policy = RunPolicy(profile=get_profile("cpu", profiles), profiles=profiles, on_own_runner=True, strict=True)

    class Probe(Law):
        name = "probe"

        def sampler(self, anchor, profile, resources):
            raise OutOfScope("arm a is outside", detail={"a": {"fixed_share": 0.4}})

    anchor = Anchor(id="probe.a", law="probe", claim="c", quantity="q", unit="x", kind="agreement",
                    band={"rel": 0.25}, profiles=["cpu"], provenance={"seed": "s"})
    result = evaluate(anchor, Probe(), policy)
    assert result.verdict.value == "SKIP" and result.reason == "arm a is outside"
    assert result.detail["out_of_scope"]["a"]["fixed_share"] == 0.4
    # typed, so the nightly gate can say when the scope decision changes (issue 30 item 5)
    assert result.out_of_scope == "arm a is outside" and not result.strict_skip


# --------------------------------------------------------------------------- measured_on (issue 34)
# A figure its source scopes to its own machine (register L-19: "the constant is thread-count and CPU
# dependent"; V-11 measured at the reference box's 4 threads) is judged only on such a machine.

def _measured_on_case(**scope):
    from lawbench.plugins.law4.case import Law4Case

    return Law4Case.model_validate({"quantity": "decode_tok_s", "model": "gguf:syn-25m-q4_0", "calibrate": True,
                                    "measured_on": {"source": "register L-19", **scope},
                                    "bench": {"n_gen": 16}})


def test_a_figure_scoped_to_more_threads_than_this_runner_gives_is_out_of_scope():
    from lawbench.testing import make_profile

    case = _measured_on_case(threads=4)
    with pytest.raises(OutOfScope, match=r"scoped to 4 engine threads \(register L-19\); this runner gives the engine 1") as exc:
        scope.check_measured_on(case, make_profile("cpu", threads=1))
    assert exc.value.detail == {"rule": "measured-on", "source": "register L-19", "threads_published": 4,
                                "threads_here": 1}
    with pytest.raises(OutOfScope, match="the engine's own default"):
        scope.check_measured_on(case, make_profile("cpu"))
    scope.check_measured_on(case, make_profile("cpu", threads=4))  # the source's count: in scope
    scope.check_measured_on(case, make_profile("cpu", threads=8))  # more cores: it runs at 4 (below)


def test_a_figure_scoped_to_the_sources_cpu_is_out_of_scope_on_another():
    from lawbench.testing import make_profile

    case = _measured_on_case(threads=4, cpu_model_contains="i5-7600K")
    four = make_profile("cpu", threads=4)
    with pytest.raises(OutOfScope, match=r"scoped to the source's CPU, i5-7600K .* this CPU is 'AMD EPYC'"):
        scope.check_measured_on(case, four, cpu_model="AMD EPYC")
    scope.check_measured_on(case, four, cpu_model="Intel(R) Core(TM) i5-7600K CPU @ 3.80GHz")


def test_a_scoped_anchor_runs_at_the_sources_threads_and_refuses_a_contradicting_bench():
    from pydantic import ValidationError

    from lawbench.plugins.law4.case import Law4Case
    from lawbench.plugins.law4.measure import bench_params
    from lawbench.testing import make_profile

    case = _measured_on_case(threads=4)
    assert bench_params(case, make_profile("cpu", threads=8))["threads"] == 4
    assert bench_params(_measured_on_case(cpu_model_contains="i5"), make_profile("cpu", threads=8))["threads"] == 8
    with pytest.raises(ValidationError, match="bench.threads: 2 contradicts measured_on.threads = 4"):
        Law4Case.model_validate({"quantity": "decode_tok_s", "model": "gguf:syn-25m-q4_0", "calibrate": True,
                                 "measured_on": {"source": "s", "threads": 4}, "bench": {"n_gen": 16, "threads": 2}})
    with pytest.raises(ValidationError, match="give threads, cpu_model_contains or both"):
        _measured_on_case()


@pytest.mark.parametrize("anchor_id", ["law4.cpu.v11.q2_k-per-byte-vs-q4_k_m.syn-400m",
                                       "law4.cpu.v11.iq3_s-per-byte-vs-q2_k.syn-400m",
                                       "law4.cpu.ratio.depth-4096.l19-cpu-attention-term"])
def test_the_register_box_figures_skip_on_a_one_thread_runner_before_any_model_is_built(anchor_id):
    # The three anchors that held open findings measured off their source's machine (issue 34): on
    # this profile's one engine thread they are a SKIP by the scope rule, decided before a model
    # file is fetched or built (the resources below have none to give).
    from lawbench.core.claims.loading import load_all
    from lawbench.core.laws.registry import get_registry
    from lawbench.core.hardware.profiles import plugin_profiles
    from lawbench.plugins.law4.measure import sampler
    from lawbench.testing import make_profile

    reg = get_registry()
    anchor = load_all(reg, profiles=plugin_profiles(reg).keys()).by_id()[anchor_id].anchor
    assert anchor.finding is None
    no_resources = SimpleNamespace()  # any attribute read would raise AttributeError
    with pytest.raises(OutOfScope, match="scoped to 4 engine threads"):
        sampler(anchor, make_profile("cpu", threads=1), no_resources)
