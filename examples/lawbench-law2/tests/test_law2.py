"""lawbench-law2's own tests: public `lawbench` imports and `lawbench.testing` fixtures only.

The measurements run on the real catalogue models with the real llama.cpp build (fetched and built
once into lawbench's cache), as `lawbench run` would run them.
"""
import numpy as np
import pytest
from lawbench_law2 import plugin
from lawbench_law2.law import RateDistortion
from lawbench_law2.sampler import shuffled_within_blocks
from lawbench_law2.tensors import spread_order
from lawbench_law2.theory import bits_per_weight, gaussian_floor

import lawbench
from lawbench.testing import evaluate_anchor, law_anchors, make_anchor, make_profile


def test_the_floor_is_shannons_gaussian_bound():
    assert gaussian_floor(2) == 0.0625
    assert gaussian_floor(1) == 0.25
    assert bits_per_weight("IQ2_XXS") == 2.0625
    assert bits_per_weight("q4_k") == 4.5
    assert bits_per_weight("Q1_0") == 1.125
    with pytest.raises(ValueError, match="unknown ggml type 'Q9_9'"):
        bits_per_weight("Q9_9")


def test_the_plugin_registers_law2_and_its_command(lawbench_plugin):
    with lawbench_plugin(plugin) as registry:
        assert registry.law("law2").title.startswith("Law 2")
        assert "rd-table" in registry.commands


def test_the_shipped_anchors_load_and_cite_the_inventory():
    anchors = law_anchors(RateDistortion())
    assert {"law2.seed.rel-mse-at-2-bits", "law2.gemma3.coding-gain.iq2_xxs"} <= set(anchors)
    for anchor in anchors.values():
        assert anchor.claims, f"{anchor.id} cites no inventory line"


def test_the_prediction_at_two_bits_is_0_0625_so_the_published_0_069_is_an_open_finding():
    anchor = law_anchors(RateDistortion())["law2.seed.rel-mse-at-2-bits"]
    result = evaluate_anchor(anchor, RateDistortion())
    assert result.predicted == pytest.approx(0.0625)
    assert result.verdict.name == "FAIL" and "open finding" in result.reason


def test_a_typo_in_a_case_names_the_anchor_and_the_field():
    bad = make_anchor(id="law2.bad", law="law2", kind="prediction", value=0.0625,
                      case={"codec": "IQ2_XXX"})
    with pytest.raises(lawbench.DataError, match=r"anchor law2.bad.*case.codec.*unknown ggml type 'IQ2_XXX'"):
        RateDistortion().check_anchor(bad)
    no_model = make_anchor(id="law2.nomodel", law="law2", kind="agreement", band={"rel": 0.1},
                           case={"codec": "Q2_K"})
    with pytest.raises(lawbench.DataError, match="case.model"):
        RateDistortion().check_anchor(no_model)


@pytest.mark.parametrize("model, words", [
    ("smollm2-135m-q4_1", "use gguf:<catalogue id>, path:<file.gguf> or manifest:<id>"),  # the form
    ("gguf:smollm2-135m-q9", "no model 'smollm2-135m-q9' in the model catalogue"),
    ("manifest:qwen3-30b-a3b", "law2 reads real tensors"),
])
def test_a_bad_model_reference_names_the_anchor_and_the_field(model, words):
    """case.model is a lawbench.store.ModelReference: one form for every law, checked by lawbench."""
    bad = make_anchor(id="law2.badmodel", law="law2", kind="measurement", band={"rel": 0.1},
                      case={"codec": "Q2_K", "model": model})
    with pytest.raises(lawbench.DataError, match=r"anchor law2.badmodel.*case.model") as exc:
        RateDistortion().check_anchor(bad)
    assert words in str(exc.value)


def test_the_shuffle_keeps_every_block_s_values_and_moves_them():
    rows = np.arange(2 * 512, dtype=np.float32).reshape(2, 512)
    shuffled = shuffled_within_blocks(rows, seed=1)
    for got, want in zip(shuffled.reshape(-1, 256), rows.reshape(-1, 256)):
        assert sorted(got) == sorted(want) and not np.array_equal(got, want)


def test_samples_spread_over_depth_first():
    assert spread_order(9)[:3] == [0, 8, 4]
    assert sorted(spread_order(30)) == list(range(30))


def test_a_missing_runner_file_skips_off_its_runner():
    anchor = law_anchors(RateDistortion())["law2.gtx1060.bonsai-27b.file-gb"]
    result = evaluate_anchor(anchor, RateDistortion(), profile=make_profile("gtx1060"),
                             on_own_runner=False)
    assert result.verdict.name == "SKIP"


# --- real tensors, real codecs ----------------------------------------------------------------

def test_ggml_codecs_on_gaussian_rows_sit_above_the_floor_and_q8_0_is_near_lossless(lawbench_resources):
    from lawbench_law2.codecs import Ggml
    from lawbench_law2.sampler import rel_mse

    ggml = Ggml(lawbench_resources.llama().bin_dir)
    rows = np.random.default_rng(0).standard_normal((16, 1024)).astype(np.float32)
    for codec in ("Q1_0", "IQ2_XXS", "Q2_K", "Q4_K"):
        assert rel_mse(rows, ggml.roundtrip(rows, codec)) > gaussian_floor(bits_per_weight(codec))
    assert rel_mse(rows, ggml.roundtrip(rows, "Q8_0")) < 1e-4
    # Q1_0 keeps signs and one scale per 128 weights: the sign of every weight survives.
    assert (np.sign(ggml.roundtrip(rows, "Q1_0")) == np.sign(rows)).all()


def test_a_codec_against_its_own_gaussian_figure_turns_red_on_weights_that_are_not_gaussian(lawbench_resources):
    # The faithful test of "at the floor" (issue 34): the codec on the weights over the same codec on
    # Gaussian rows. Gaussian rows read about 1; rows with the heavy tail real weights would have if
    # they were not white (1 % outliers at 30 sigma) read far outside the record's own AT FLOOR ratio.
    from lawbench_law2.codecs import Ggml
    from lawbench_law2.sampler import gaussian_rel_mse, rel_mse

    anchor = law_anchors(RateDistortion())["law2.smollm2.codec-own-gaussian.iq2_xxs"]
    lo, hi = anchor.band.lo, anchor.band.hi
    ggml = Ggml(lawbench_resources.llama().bin_dir)
    rng = np.random.default_rng(7)
    gaussian = rng.standard_normal((32, 1024)).astype(np.float32)
    spiky = gaussian.copy()
    spiky[rng.random(spiky.shape) < 0.01] *= 30
    for rows, inside in ((gaussian, True), (spiky, False)):
        ratio = rel_mse(rows, ggml.roundtrip(rows, "IQ2_XXS")) / gaussian_rel_mse(rows, "IQ2_XXS", ggml, seed=1)
        assert (lo <= ratio <= hi) is inside, ratio


@pytest.mark.parametrize("anchor_id", ["law2.gemma3.coding-gain.iq2_xxs", "law2.smollm2.codec-own-gaussian.iq2_xxs"])
def test_the_small_model_anchors_give_real_verdicts(anchor_id, lawbench_resources):
    anchor = law_anchors(RateDistortion())[anchor_id]
    result = evaluate_anchor(anchor, RateDistortion(), profile=make_profile("cpu"),
                             resources=lawbench_resources)
    assert result.verdict.name in ("PASS", "FAIL"), result.reason
    readings = result.measurement.protocol["readings"]
    assert len(readings) >= 3 and all(r["tensor"].endswith("ffn_down.weight") for r in readings)
    if anchor.id.endswith("codec-own-gaussian.iq2_xxs"):  # ggml's 2-bit codec: as far above D(R) on both
        assert result.verdict.name == "PASS" and 0.95 < result.measured < 1.2, result.measured
        assert all(0.9 < r["over_gaussian"] < 1.3 for r in readings)
