"""Two-load censuses (plugins/law4/census.py, two_load_census): a claim about how a load-log count
changes between two loads of one model — register L-08's compute buffer per ubatch token.

Unit tests: the labels a two-load census yields, on recorded load logs (a parser's test). The
integration test measures the kind here, on the cpu profile, through the real llama.cpp build on a
real synthetic GGUF, and turns it red two ways: a bound the measured slope cannot meet, and a load
log whose compute-buffer line a planted llama-bench drops (tests/standin/planted_llama_bench.py).
The gtx1060 anchor itself (anchors/law4/gtx1060-two-load.toml) SKIPs here and FAILs under --strict.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from lawbench.core.hardware.profiles import load_profiles
from lawbench.core.laws.law import Census
from lawbench.core.models import Verdict
from lawbench.plugins.law4 import census as census_mod
from lawbench.plugins.law4.law import Law4
from lawbench.testing import evaluate_anchor, law_anchors, make_anchor

PROFILES = load_profiles()
MIB = 1024 * 1024
SLOPE_ID = "law4.gtx1060.census.l08-compute-buffer-slope"
LABEL = "per_ubatch_token:compute_buffer:CPU"
# Every ubatch token's logits row is n_vocab f32 in the compute buffer: syn-25m has n_vocab 32000
# (anchors/models_synthetic.toml), so the slope is at least 128000 B a token.
LOGITS_ROW = 32000 * 4


def two_load_anchor(**fields):
    data = dict(id="law4.test.two-load", law="law4", claim="test", quantity="census", unit="count",
                kind="census", value=None, band=None, profiles=["cpu"],
                case={"quantity": "decode_tok_s", "model": "gguf:syn-25m-q4_0",
                      "bench": {"n_gen": 0, "n_prompt": 256, "reps": 1, "timeout_s": 60}},
                arms={"a": {"bench": {"ubatch": 256}}, "b": {"bench": {"ubatch": 128}}},
                census={"minimum": {LABEL: LOGITS_ROW}},
                provenance={"seed": "000_4a91008eeaefec79.txt", "register_id": "L-08", "quote": "test",
                            "band_rationale": "test"})
    data.update(fields)
    return make_anchor(**data)


def test_a_two_load_census_counts_each_arm_their_difference_and_the_slope(monkeypatch):
    loads = iter([{"compute_buffer:CUDA0": round(1203.00 * MIB), "model_loads": 1, "only_a": 3},
                  {"compute_buffer:CUDA0": round(601.50 * MIB), "model_loads": 1}])
    monkeypatch.setattr(census_mod, "_one_load", lambda case, profile, resources: Census(
        counts=next(loads), log="load log\n", environment={"command": ["llama-bench"], "llama_cpp": "b0"}))
    anchor = law_anchors(Law4())[SLOPE_ID]
    got = census_mod.census(anchor, PROFILES["gtx1060"], None)
    assert got.counts["a:compute_buffer:CUDA0"] - got.counts["b:compute_buffer:CUDA0"] \
        == got.counts["a-b:compute_buffer:CUDA0"] == round(601.50 * MIB)
    # the published pair, as the load log prints it: 601.50 MiB over 1024 tokens, 0.5874 MiB a token
    assert got.counts["per_ubatch_token:compute_buffer:CUDA0"] == 615936
    assert "a-b:only_a" not in got.counts and got.counts["a:only_a"] == 3  # a difference needs both loads
    assert got.environment["ubatch"] == {"a": 2048, "b": 1024}
    assert anchor.census.minimum["per_ubatch_token:compute_buffer:CUDA0"] <= 615936 \
        <= anchor.census.maximum["per_ubatch_token:compute_buffer:CUDA0"]


def test_the_gtx1060_slope_census_skips_off_its_box_and_fails_strict():
    anchor = law_anchors(Law4())[SLOPE_ID]
    r = evaluate_anchor(anchor, Law4(), profile=PROFILES["gtx1060"], on_own_runner=False)
    assert r.verdict is Verdict.SKIP and "gtx1060" in r.reason
    strict = evaluate_anchor(anchor, Law4(), profile=PROFILES["gtx1060"], on_own_runner=False, strict=True)
    assert strict.verdict is Verdict.FAIL and strict.strict_skip


@pytest.fixture(scope="module")
def wrapped(tmp_path_factory):
    """A --llama-dir: the real cached build behind the planting llama-bench stand-in."""
    from lawbench.core.engines.build import build_llamacpp
    from standin.planted_llama_bench import make_wrapper

    real = build_llamacpp(progress=None)
    return make_wrapper(tmp_path_factory.mktemp("wrapped-llama"), Path(real.bin_dir))


@pytest.mark.integration
def test_the_compute_buffer_slope_measures_here_and_turns_red(wrapped):
    from lawbench.core.laws.resources import Resources

    (wrapped / "planted.json").unlink(missing_ok=True)
    res = Resources(llama_dir=str(wrapped), profile=PROFILES["cpu"])
    try:
        law = Law4()
        here = evaluate_anchor(two_load_anchor(), law, profile=PROFILES["cpu"], resources=res)
        slope = here.census_counts[LABEL]
        print(f"per_ubatch_token:compute_buffer:CPU here: {slope} B ({slope / MIB:.4f} MiB) a token; "
              f"a {here.census_counts['a:compute_buffer:CPU']} B, b {here.census_counts['b:compute_buffer:CPU']} B")
        assert here.verdict is Verdict.PASS, here.reason
        assert here.census_counts["a:model_loads"] == here.census_counts["b:model_loads"] == 1
        assert slope == round(here.census_counts[f"a-b:compute_buffer:CPU"] / 128)
        again = evaluate_anchor(two_load_anchor(), law, profile=PROFILES["cpu"], resources=res)
        assert again.census_counts[LABEL] == slope  # a buffer size repeats exactly on one build

        # a bound the measured slope cannot meet: red, naming the label and both figures
        wrong = evaluate_anchor(two_load_anchor(census={"maximum": {LABEL: slope // 2}}), law,
                                profile=PROFILES["cpu"], resources=res)
        assert wrong.verdict is Verdict.FAIL and LABEL in wrong.reason

        # a planted engine whose load log loses its compute-buffer lines: the slope is gone, red
        (wrapped / "planted.json").write_text('{"drop": ["compute buffer size"]}', encoding="utf-8")
        dropped = evaluate_anchor(two_load_anchor(), law, profile=PROFILES["cpu"], resources=res)
        assert dropped.verdict is Verdict.FAIL and LABEL in dropped.reason
        assert LABEL not in dropped.census_counts
    finally:
        (wrapped / "planted.json").unlink(missing_ok=True)
        res.close()
