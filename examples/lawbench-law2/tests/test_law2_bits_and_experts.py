"""Two of seed 000's Law 2 figures that need more than one tensor: a ratio of two files' bits per
weight ("2.2× fewer bits per weight"), and a census of every routed expert ("identical across all 64").

Both anchors that read the register's files are runner-bound (gtx1060); these tests run the same
code here on real small files: the catalogue's two GGUFs, and a synthetic 64-expert GGUF written
with gguf (Gaussian experts, the floor's own source, with one planted expert that must turn it red).
"""
from pathlib import Path

import numpy as np
import pytest
from lawbench_law2.law import RateDistortion

import lawbench
from lawbench.testing import evaluate_anchor, law_anchors, make_anchor, make_profile

N_EXPERT = 64


# --- 2.2× fewer bits per weight ---------------------------------------------------------------

def test_the_published_ratio_is_2_5_over_1_13_and_turns_red_on_another_figure():
    law = RateDistortion()
    anchor = law_anchors(law)["law2.seed.bonsai-27b.fewer-bits-than-q30-depth"]
    result = evaluate_anchor(anchor, law)
    assert result.verdict.name == "PASS" and result.predicted == pytest.approx(2.5 / 1.13)
    # the file-level figure the record's own bytes x 8 / params gives is another number: red
    wrong = anchor.model_copy(update={"value": 3.0})
    assert evaluate_anchor(wrong, law).verdict.name == "FAIL"


@pytest.mark.parametrize("kind, case, field", [
    ("prediction", {"measure": "bits-per-weight-ratio", "rate_bits": 2.5}, "case.over_rate_bits"),
    ("measurement", {"measure": "bits-per-weight-ratio", "model": "gguf:smollm2-135m-q4_1"}, "case.over_model"),
    ("measurement", {"measure": "bits-per-weight-ratio", "model": "gguf:smollm2-135m-q4_1",
                     "over_model": "manifest:qwen3-30b-a3b"}, "case.over_model"),
    ("measurement", {"measure": "expert-rel-mse-vs-gaussian", "model": "gguf:smollm2-135m-q4_1",
                     "codec": "IQ2_XXS"}, "case.tensors"),
    ("measurement", {"measure": "expert-rel-mse-vs-gaussian", "model": "gguf:smollm2-135m-q4_1",
                     "tensors": r"blk\.\d+\.ffn_up_exps\.weight"}, "case.codec"),
])
def test_an_incomplete_case_names_the_anchor_and_the_field(kind, case, field):
    bad = make_anchor(id="law2.bad", law="law2", kind=kind, value=2.2, band={"abs": 0.05}, case=case)
    with pytest.raises(lawbench.DataError, match=rf"anchor law2.bad.*{field}"):
        RateDistortion().check_anchor(bad)


def _bits_per_weight_by_gguf_reader(path: Path) -> float:
    """The same figure read by gguf's own GGUFReader: an independent reading of the header."""
    from gguf import GGUFReader

    tensors = GGUFReader(str(path)).tensors
    return sum(int(t.n_bytes) for t in tensors) * 8 / sum(int(t.n_elements) for t in tensors)


def test_stand_in_the_ratio_of_two_real_files_is_their_headers_and_turns_red_on_a_wrong_value(lawbench_resources):
    """The runner's anchor reads two register files; here the same reading on the catalogue's two
    real GGUFs (SmolLM2-135M Q4_1 over Gemma-3-270M Q4_K_M)."""
    law = RateDistortion()
    want = (_bits_per_weight_by_gguf_reader(lawbench_resources.model("smollm2-135m-q4_1"))
            / _bits_per_weight_by_gguf_reader(lawbench_resources.model("gemma3-270m-q4_k_m")))
    case = {"measure": "bits-per-weight-ratio", "model": "gguf:smollm2-135m-q4_1",
            "over_model": "gguf:gemma3-270m-q4_k_m"}
    for value, verdict in ((want, "PASS"), (want * 1.1, "FAIL")):
        anchor = make_anchor(id="law2.stand-in.ratio", law="law2", kind="measurement", unit="x",
                             noise="deterministic", value=value, band={"rel": 0.01}, case=case)
        law.check_anchor(anchor)
        result = evaluate_anchor(anchor, law, profile=make_profile("cpu"), resources=lawbench_resources)
        assert result.verdict.name == verdict, result.reason
        assert result.measured == pytest.approx(want, rel=1e-12)


def test_the_runner_anchors_skip_off_their_runner():
    law = RateDistortion()
    anchors = law_anchors(law)
    for anchor_id in ("law2.gtx1060.q30-depth-over-bonsai-27b.bits-per-weight-ratio",
                      "law2.gtx1060.deepseek-v2-lite.every-expert-at-floor.iq2_xxs"):
        result = evaluate_anchor(anchors[anchor_id], law, profile=make_profile("gtx1060"), on_own_runner=False)
        assert result.verdict.name == "SKIP", (anchor_id, result.reason)


# --- identical across all 64 ------------------------------------------------------------------

def write_moe(path: Path, planted: dict, n_layer: int = 3, rows: int = 16, width: int = 256) -> Path:
    """A deepseek2-shaped GGUF holding only routed-expert tensors: per layer ffn_gate_exps and
    ffn_up_exps of 64 experts (gguf order ne = [width, rows, 64]), i.i.d. Gaussian weights, F32.
    `planted` maps a layer to an expert given the heavy tail of weights that are not Gaussian (1 % of
    its weights at 30x): that expert is not at the floor, and the census must name it."""
    import gguf

    w = gguf.GGUFWriter(str(path), "deepseek2")
    w.add_block_count(n_layer)
    w.add_expert_count(N_EXPERT)
    w.add_expert_used_count(6)
    rng = np.random.default_rng(0)
    for layer in range(n_layer):
        for kind in ("gate", "up"):
            data = rng.standard_normal((N_EXPERT, rows, width)).astype(np.float32) * 0.02
            if layer in planted:
                e = planted[layer]
                data[e][rng.random(data[e].shape) < 0.01] *= 30
            w.add_tensor(f"blk.{layer}.ffn_{kind}_exps.weight", data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _census_anchor(path: Path) -> lawbench.Anchor:
    """The runner's census anchor, pointed at a file here: same case, same band, same measure."""
    runner = law_anchors(RateDistortion())["law2.gtx1060.deepseek-v2-lite.every-expert-at-floor.iq2_xxs"]
    case = dict(runner.case, model=f"path:{path}")
    return runner.model_copy(update={"id": "law2.stand-in.every-expert", "profiles": [], "case": case,
                                     "budget": runner.budget.model_copy(update={"min_samples": 6, "max_samples": 6,
                                                                               "batch": 6})})


def test_the_expert_reader_returns_every_expert_with_its_own_weights(tmp_path):
    from lawbench_law2.tensors import read_expert_rows, select

    path = write_moe(tmp_path / "moe.gguf", planted={})
    info = select(path, r"blk\.1\.ffn_up_exps\.weight")[0]
    experts = read_expert_rows(path, info, 4)
    assert len(experts) == N_EXPERT and experts[0].shape == (4, 256)
    # every expert is its own slice of the tensor (gguf's reader agrees, expert by expert)
    from gguf import GGUFReader

    whole = next(t for t in GGUFReader(str(path)).tensors if t.name == info.name).data  # (64, 16, 256)
    rows = np.linspace(0, 15, 4).round().astype(int)
    for e in (0, 31, 63):
        np.testing.assert_array_equal(experts[e], whole[e][rows])


def test_stand_in_a_census_of_64_gaussian_experts_passes_and_one_planted_expert_per_layer_turns_it_red(
        tmp_path, lawbench_resources):
    law = RateDistortion()
    clean = _census_anchor(write_moe(tmp_path / "clean.gguf", planted={}))
    law.check_anchor(clean)
    result = evaluate_anchor(clean, law, profile=make_profile("cpu"), resources=lawbench_resources)
    assert result.verdict.name == "PASS", result.reason
    readings = result.measurement.protocol["readings"]
    assert len(readings) == 6 and all(r["n_experts"] == N_EXPERT for r in readings)
    assert all(len(r["over_gaussian"]) == N_EXPERT for r in readings)
    worst = [r["worst_over_gaussian"] for r in readings]
    assert all(clean.band.lo < w < clean.band.hi for w in worst), worst

    planted = _census_anchor(write_moe(tmp_path / "planted.gguf", planted={0: 5, 1: 37, 2: 63}))
    result = evaluate_anchor(planted, law, profile=make_profile("cpu"), resources=lawbench_resources)
    assert result.verdict.name == "FAIL", result.reason
    readings = result.measurement.protocol["readings"]
    # the census names the one expert out of 64 that is not at the floor, in every layer
    assert sorted({(r["tensor"].split(".")[1], r["worst_expert"]) for r in readings}) == \
        [("0", 5), ("1", 37), ("2", 63)]
