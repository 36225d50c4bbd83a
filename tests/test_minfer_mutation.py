"""Mutation proofs: every minfer census anchor can turn red (issue 11, item 3).

Each census anchor of anchors/minfer/gb10.toml is run through core's verdicts twice: against the
stand-in as seed 002 describes the engine (PASS), and with a planted fault (FAIL, naming the label,
what was counted and what was expected). For the label censuses the stand-in's greedy digest,
recorded with the census, stays the same on the planted run — seed 002's landing-day bug: parity
green, fast path gone, and only the census says so. For the q6_K tensor-set census the planted fault
is a model file with another q6_K tensor set, a small real GGUF written with the gguf library.
"""
from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest
from test_minfer import anchors, engine, run  # noqa: F401 (fixtures)

from lawbench.core.models import Verdict

Q = gguf.GGMLQuantizationType
ROW = {Q.Q6_K: 210, Q.Q4_K: 144}  # bytes of one 256-element block

# anchor id -> (planted fault, what the FAIL must say). Every census anchor must have one.
LABEL_PROOFS = {
    "minfer.r54.census.default": ("wrong-map-key", [
        "W_exp-cp.async: counted 0, expected exactly 27",
        "in-kernel-expand(fallback!): counted 27, must never appear"]),
    "minfer.r54.census.exp-off": ("exp-ignored", [
        "in-kernel-expand(exp=off): counted 0, expected exactly 27",
        "W_exp-cp.async: counted 27, expected exactly 0"]),
}
TENSOR_PROOFS = {
    "minfer.r54.q6k-tensor-set": {
        # a 32-layer file: llama-quantize's rule gives 16 attn_v and 16 ffn_down q6_K, not 14
        "32-layers": (dict(n_layer=32), ["attn_v: counted 16, expected exactly 14",
                                         "ffn_down: counted 16, expected exactly 14",
                                         "q6_K tensors: counted 33, expected exactly 29"]),
        # the seed's 28 layers, plus two attn_k tensors in q6_K: "and no other" is broken
        "extra-role": (dict(n_layer=28, extra=("blk.0.attn_k.weight", "blk.27.attn_k.weight")),
                       ["q6_K tensors: counted 31, expected exactly 29"]),
        # the output head left in q4_K: the 29th tensor is gone
        "no-q6k-head": (dict(n_layer=28, head=Q.Q4_K), ["output.weight: counted 0, expected exactly 1",
                                                       "q6_K tensors: counted 28, expected exactly 29"]),
    },
}


# Census anchors whose planted fault is proven in a test file of their own kind: anchor -> (file, test).
_GATE_PROOF = ("test_minfer_gates.py", "test_a_0_that_nothing_reads_turns_red")
ELSEWHERE = {
    "minfer.r54.suite": ("test_minfer_suite.py",
                         "test_a_suite_of_the_expected_counts_passes_and_a_planted_failure_turns_it_red"),
    "minfer.r60.gate.mmq-q6k-nb": ("test_minfer_gates.py", "test_a_gate_read_the_pre_r60_way_turns_red"),
    "minfer.r54.parity.greedy-across-modes": ("test_minfer_parity.py",
                                              "test_a_math_error_on_the_fast_path_makes_a_second_stream"),
    **{f"minfer.r60.gate.{g}": _GATE_PROOF for g in ("mmq", "mmq-raw", "mmq-raw-nb", "mmq-a-transpose", "mmq-a-fuse")},
}


def test_every_minfer_census_anchor_has_a_mutation_proof(anchors):
    census = {a.id for a in anchors.values() if a.kind == "census" and a.runs}
    assert census == set(LABEL_PROOFS) | set(TENSOR_PROOFS) | set(ELSEWHERE)
    here = Path(__file__).parent
    for file, test in ELSEWHERE.values():
        assert f"def {test}(" in (here / file).read_text(encoding="utf-8"), (file, test)


# ------------------------------------------------------------------ the label censuses

@pytest.mark.parametrize("anchor_id", sorted(LABEL_PROOFS))
def test_a_label_census_fails_on_its_planted_fault_while_the_output_stays_the_same(engine, anchors, anchor_id):
    fault, says = LABEL_PROOFS[anchor_id]
    a = anchors[anchor_id]
    engine()
    clean = run(a)
    assert clean.verdict is Verdict.PASS, clean.reason
    engine(fault)
    planted = run(a)
    assert planted.verdict is Verdict.FAIL
    for sentence in says:
        assert sentence in planted.reason, planted.reason
    # parity on the same run: the greedy digest the census recorded did not move
    env_clean, env_planted = clean.measurement.environment, planted.measurement.environment
    assert env_planted["greedy_sha256"] == env_clean["greedy_sha256"]
    assert env_planted["greedy_tokens"] == 27


@pytest.mark.parametrize("anchor_id", sorted(LABEL_PROOFS))
def test_the_parity_check_can_fail_where_the_census_cannot_see(engine, anchors, anchor_id):
    """The reverse fault: wrong arithmetic on the right path. The census stays green (the path is
    right), the digest moves — so the digest comparison above is a check that can fail."""
    a = anchors[anchor_id]
    engine()
    clean = run(a)
    engine("bad-math")
    wrong = run(a)
    assert wrong.verdict is Verdict.PASS, wrong.reason
    if a.case.get("env", {}).get("MINFER_MMQ_Q6K_EXP") == "0":
        # EXP=0 never takes the cp.async path, where bad-math lives: nothing may move
        assert wrong.measurement.environment["greedy_sha256"] == clean.measurement.environment["greedy_sha256"]
    else:
        assert wrong.measurement.environment["greedy_sha256"] != clean.measurement.environment["greedy_sha256"]


def test_one_failed_allocation_is_one_fallback(engine, anchors):
    engine("alloc-fail")
    r = run(anchors["minfer.r54.census.default"])
    assert r.verdict is Verdict.FAIL
    assert r.reason == ("W_exp-cp.async: counted 26, expected exactly 27; "
                        "in-kernel-expand(fallback!): counted 1, must never appear")


def test_never_eligible_weights_are_not_a_fallback_but_still_break_the_census(engine, anchors):
    """Raw 210-B weights are labelled in-kernel-expand, not fallback!: the exact 0 on the
    unqualified label is what catches them."""
    engine("unpadded")
    r = run(anchors["minfer.r54.census.default"])
    assert r.verdict is Verdict.FAIL
    assert "in-kernel-expand: counted 27, expected exactly 0" in r.reason and "fallback!" not in r.reason


def test_the_map_key_bug_is_invisible_with_the_plane_off(engine, anchors):
    """With EXP=0 no plane is built, so a wrong map key changes nothing: the exp-off census stays
    green, as it should — that anchor's own fault is a plane built despite EXP=0."""
    engine("wrong-map-key")
    r = run(anchors["minfer.r54.census.exp-off"])
    assert r.verdict is Verdict.PASS, r.reason


# ------------------------------------------------------------------ the q6_K tensor set

def more_bits(i: int, n: int) -> bool:
    """llama.cpp's use_more_bits: the layers Q4_K_M gives q6_K attn_v and ffn_down."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def write_q4_k_m_like(path: Path, n_layer: int, extra: tuple[str, ...] = (), head=Q.Q6_K) -> Path:
    """A small real GGUF with Q4_K_M's tensor-type layout: one 256-element block per tensor."""
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(n_layer)

    def add(name: str, qtype) -> None:
        w.add_tensor(name, np.zeros((1, ROW[qtype]), np.uint8), raw_dtype=qtype)

    add("token_embd.weight", Q.Q4_K)
    for i in range(n_layer):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(256, np.float32))
        for role in ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"):
            name = f"blk.{i}.{role}.weight"
            q6 = (role in ("attn_v", "ffn_down") and more_bits(i, n_layer)) or name in extra
            add(name, Q.Q6_K if q6 else Q.Q4_K)
    add("output.weight", head)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_the_seeds_tensor_set_passes(anchors, monkeypatch, tmp_path):
    monkeypatch.setenv("LAWBENCH_MINFER_MODEL", str(write_q4_k_m_like(tmp_path / "m28.gguf", 28)))
    r = run(anchors["minfer.r54.q6k-tensor-set"])
    assert r.verdict is Verdict.PASS, r.reason
    assert r.census_counts == {"q6_K tensors": 29, "attn_v": 14, "ffn_down": 14, "output.weight": 1}


@pytest.mark.parametrize("fault", sorted(TENSOR_PROOFS["minfer.r54.q6k-tensor-set"]))
def test_another_tensor_set_fails_naming_the_label(anchors, monkeypatch, tmp_path, fault):
    kwargs, says = TENSOR_PROOFS["minfer.r54.q6k-tensor-set"][fault]
    monkeypatch.setenv("LAWBENCH_MINFER_MODEL", str(write_q4_k_m_like(tmp_path / f"{fault}.gguf", **kwargs)))
    r = run(anchors["minfer.r54.q6k-tensor-set"])
    assert r.verdict is Verdict.FAIL
    for sentence in says:
        assert sentence in r.reason, r.reason
