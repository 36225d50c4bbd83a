"""The expert union of verify batches: lawbench's reader (core/engines/expert_union.cpp) built
against the real cached llama.cpp and run on synthetic MoE GGUFs; Law 4's expert_union quantity
end to end through core's verdict logic; the checks that refuse a bad case; the synthetic factory's
experts."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from _engine_fixtures import llama, synth_dir, tiny_f16  # noqa: F401

from lawbench.core.engines.expert_union import (NotMixture, build_reader, parse_reader, read_union,
                                                reader_command)
from lawbench.core.errors import DataError, EngineError
from lawbench.core.models import Verdict
from lawbench.core.store.synthetic import SyntheticSpec, build_synthetic
from lawbench.plugins.law4.law import Law4
from lawbench.testing import evaluate_anchor, make_anchor, make_profile

TEXT = ("Speculative decoding drafts several tokens and the target model verifies them in one batch; "
        "a mixture of experts routes each of those tokens to its own experts, and the batch reads their "
        "union. 0123456789 The quick brown fox jumps over the lazy dog. ") * 4
FLAGSHIP = SyntheticSpec(id="moe-128x8", n_layer=2, n_embd=256, n_ff=64, n_head=4, n_head_kv=4,
                         n_vocab=512, n_expert=128, n_expert_used=8)
ALL_USED = SyntheticSpec(id="moe-4x4", n_layer=2, n_embd=256, n_ff=64, n_head=4, n_head_kv=4,
                         n_vocab=512, n_expert=4, n_expert_used=4)
PROV = {"seed": "000_4a91008eeaefec79.txt", "quote": "test", "band_rationale": "test"}


@pytest.fixture(scope="module")
def flagship(synth_dir) -> Path:  # noqa: F811
    return build_synthetic(FLAGSHIP, cache_dir=synth_dir)


@pytest.fixture(scope="module")
def all_used(synth_dir) -> Path:  # noqa: F811
    return build_synthetic(ALL_USED, cache_dir=synth_dir)


# --------------------------------------------------------------------------- the synthetic factory


def test_a_dense_spec_keeps_its_digest_and_an_moe_spec_is_checked():
    dense = SyntheticSpec(id="d", n_layer=2, n_embd=256, n_ff=512, n_head=4, n_head_kv=2, n_vocab=512)
    assert "n_expert" not in dense.content()  # the cached dense files stay the ones they were
    assert dense.digest() == SyntheticSpec(**{**dense.model_dump(), "n_expert": 0}).digest()
    assert FLAGSHIP.content()["n_expert"] == 128 and FLAGSHIP.digest() != dense.digest()
    # 2 layers of 128 experts x 3 matrices of 256 x 64, plus a 128 x 256 router each
    assert FLAGSHIP.n_params() - FLAGSHIP.model_copy(update={"n_expert": 0, "n_expert_used": 0}).n_params() \
        == 2 * (128 * 3 * 256 * 64 + 128 * 256 - 3 * 256 * 64)
    for bad in ({"n_expert": 8, "n_expert_used": 9}, {"n_expert": 8, "n_expert_used": 0},
                {"n_expert": 0, "n_expert_used": 2}):
        with pytest.raises(ValueError, match="n_expert_used"):
            SyntheticSpec(**{**dense.model_dump(), **bad})


def test_the_moe_file_carries_the_expert_tensors_and_metadata(flagship):
    from gguf import GGUFReader

    r = GGUFReader(str(flagship))
    names = {t.name: t for t in r.tensors}
    assert "blk.0.ffn_gate.weight" not in names
    assert list(names["blk.1.ffn_gate_exps.weight"].shape) == [256, 64, 128]
    assert names["blk.0.ffn_gate_inp.weight"].tensor_type.name == "F32"
    fields = {f.name: f for f in r.fields.values()}
    assert int(fields["llama.expert_count"].parts[-1][0]) == 128
    assert int(fields["llama.expert_used_count"].parts[-1][0]) == 8


# --------------------------------------------------------------------------- the reader, for real


@pytest.mark.integration
def test_one_token_batches_read_exactly_the_top_k(llama, flagship):  # noqa: F811
    run = read_union(llama, flagship, TEXT, 1, max_batches=20)
    print(f"measured: K+1 = 1 unions {sorted({u for b in run.unions for u in b})} over {len(run.unions)} batches")
    assert (run.n_expert, run.n_expert_used) == (128, 8) and run.layers == [0, 1]
    assert len(run.unions) == 20 and all(u == [8, 8] for u in run.unions)


@pytest.mark.integration
def test_verify_batches_union_more_than_one_token_and_never_more_than_all_tokens(llama, flagship):  # noqa: F811
    for b in (4, 17):
        run = read_union(llama, flagship, TEXT, b, max_batches=8)
        flat = [u for batch in run.unions for u in batch]
        print(f"measured: K+1 = {b} mean union {sum(flat) / len(flat):.2f} (min {min(flat)}, max {max(flat)})")
        assert all(8 <= u <= min(128, 8 * b) for u in flat)
        assert max(flat) > 8  # tokens that all routed alike in every batch would mean the ids were not read
        assert run.raw["topk_tensors"] == 2 * len(run.unions)  # one per MoE layer per batch


@pytest.mark.integration
def test_with_every_expert_used_the_union_is_the_expert_count(llama, all_used):  # noqa: F811
    for b in (1, 3):
        run = read_union(llama, all_used, TEXT, b, max_batches=5)
        assert run.unions and all(u == [4, 4] for u in run.unions)


@pytest.mark.integration
def test_a_dense_model_is_named_as_not_a_mixture(llama, tiny_f16):  # noqa: F811
    with pytest.raises(NotMixture, match=rf"{tiny_f16.name} selects no experts"):
        read_union(llama, tiny_f16, TEXT, 4)


@pytest.mark.integration
def test_the_reader_runs_in_a_process_group_with_a_timeout(llama, flagship, tmp_path):  # noqa: F811
    with pytest.raises(EngineError, match=r"lawbench-expert-union on model .* did not finish within"):
        read_union(llama, flagship, TEXT * 200, 1, timeout_s=0.2)
    # built once: a second call takes the cached reader, whose key is source and build
    assert build_reader(llama, tmp_path) == build_reader(llama, tmp_path)


def test_the_reader_command_and_a_bad_result_are_worded():
    cmd = reader_command(Path("/r"), Path("/m.gguf"), Path("/t.txt"), 4, 2, max_batches=9)
    assert cmd == ["/r", "-m", "/m.gguf", "-f", "/t.txt", "-b", "4", "-t", "2", "-ngl", "0", "--max-batches", "9"]
    good = {"format": 1, "model": "m", "n_expert": "8", "n_expert_used": "2", "batch_tokens": 4,
            "text_tokens": 9, "batches": [{"layers": [0, 1], "union": [3, 4]}, {"layers": [0, 1], "union": [2, 5]}]}
    assert parse_reader(json.dumps(good), "x").batch_means() == [3.5, 3.5]
    for bad in ("not json", json.dumps({**good, "format": 2}),
                json.dumps({**good, "batches": [{"layers": [0], "union": [3, 4]}]})):
        with pytest.raises(EngineError, match="x: the expert-union reader printed no readable result"):
            parse_reader(bad, "x")


# --------------------------------------------------------------------------- Law 4's expert_union


def _anchor(model: Path, value: float = 8, draft_tokens: int = 0, **fields):
    data = dict(id="law4.test.union", law="law4", claim="test", quantity="expert_union", unit="experts",
                kind="measurement", value=value, band={"lo": value, "hi": value}, noise="deterministic",
                profiles=["test-box"], provenance=PROV,
                case={"quantity": "expert_union", "model": f"path:{model}",
                      "union": {"draft_tokens": draft_tokens, "chars": 600, "timeout_s": 120}},
                budget={"min_samples": 3, "max_samples": 9, "batch": 3, "timeout_s": 120})
    data.update(fields)
    return make_anchor(**data)


class _Res:
    def __init__(self, llama):
        self._llama = llama

    def llama(self):
        return self._llama


@pytest.mark.integration
def test_the_anchor_passes_at_the_true_count_and_turns_red_on_a_wrong_one(llama, flagship):  # noqa: F811
    profile = make_profile("test-box", threads=1)
    r = evaluate_anchor(_anchor(flagship), Law4(), profile=profile, resources=_Res(llama))
    print(f"measured: K+1 = 1 on the 128x8 stand-in {r.measured} {r.interval}")
    assert r.verdict is Verdict.PASS, r.reason
    assert r.measured == 8 and r.interval == (8, 8) and len(r.measurement.samples) == 3
    assert r.measurement.protocol["batch_tokens"] == 1 and r.measurement.protocol["n_expert"] == 128
    wrong = evaluate_anchor(_anchor(flagship, value=9), Law4(), profile=profile, resources=_Res(llama))
    assert wrong.verdict is Verdict.FAIL and "outside the band" in wrong.reason
    # a K = 3 verify batch reads more than one token's 8: the same anchor at K = 3 is red
    k3 = evaluate_anchor(_anchor(flagship, draft_tokens=3), Law4(), profile=profile, resources=_Res(llama))
    print(f"measured: K+1 = 4 on the 128x8 stand-in {k3.measured} {k3.interval}")
    assert k3.verdict is Verdict.FAIL and k3.interval[0] > 8


@pytest.mark.integration
def test_a_dense_model_is_an_error_naming_file_anchor_and_field(llama, tiny_f16):  # noqa: F811
    from lawbench.core.run.evaluate import RunPolicy, evaluate

    profile = make_profile("test-box", threads=1)
    policy = RunPolicy(profile=profile, profiles={profile.id: profile}, on_own_runner=True, strict=False)
    r = evaluate(_anchor(tiny_f16), Law4(), policy, _Res(llama), file="anchors/law4/expert-union.toml")
    assert r.verdict is Verdict.ERROR
    assert r.reason.startswith("anchors/law4/expert-union.toml: anchor law4.test.union: field case.model: ")
    assert "selects no experts" in r.reason and "Traceback" not in r.reason


@pytest.mark.parametrize("change, field", [
    ({"kind": "ratio", "arms": {"a": {}, "b": {}}}, "arms"),
    ({"case": {"quantity": "expert_union", "model": "path:/m.gguf", "union": {"draft_tokens": 0},
               "experts_used": 4}}, "case.experts_used"),
    ({"case": {"quantity": "expert_union", "model": "path:/m.gguf", "union": {"draft_tokens": 0, "text": "nope.txt"}}},
     "case.union.text"),
    ({"case": {"quantity": "expert_union", "model": "path:/m.gguf"}}, "case"),
    ({"case": {"quantity": "expert_union", "model": "path:/m.gguf", "union": {"draft_tokens": -1}}},
     "case.union.draft_tokens"),
])
def test_check_refuses_a_bad_case_naming_the_field(change, field):
    with pytest.raises(DataError) as exc:
        Law4().check_anchor(_anchor(Path("/m.gguf"), **change))
    assert exc.value.anchor == "law4.test.union"
    assert (exc.value.field or "").startswith(field), (exc.value.field, str(exc.value))


def test_a_union_table_on_another_quantity_is_refused():
    with pytest.raises(DataError, match="union: only an expert_union case"):
        Law4().check_anchor(make_anchor(id="law4.test.u2", law="law4", quantity="decode_tok_s", unit="tok/s",
                                        kind="prediction", value=1.0, band={"rel": 0.1}, provenance=PROV,
                                        case={"quantity": "decode_tok_s", "model": "path:/m.gguf",
                                              "union": {"draft_tokens": 1}}))


def test_the_shipped_anchors_check():
    from lawbench.testing import law_anchors

    anchors = law_anchors(Law4())
    for aid in ("law4.gtx1060.union.30b-q2_k.one-token-reads-8", "law4.cpu.union.syn-moe-128x8.one-token-reads-8"):
        a = anchors[aid]
        assert a.case["union"]["draft_tokens"] == 0 and a.value == 8 and a.band_interval() == (8, 8)


@pytest.mark.integration
def test_the_shipped_cpu_anchor_measures_here():
    """The stand-in of the runner-bound gtx1060 anchor, as `lawbench run --profile cpu` runs it:
    the catalogue's synthetic MoE built into the cache, the reader built against the pinned build."""
    from lawbench.core.hardware.profiles import load_profiles
    from lawbench.core.laws.resources import Resources
    from lawbench.testing import law_anchors

    anchor = law_anchors(Law4())["law4.cpu.union.syn-moe-128x8.one-token-reads-8"]
    profile = load_profiles()["cpu"].model_copy(update={"threads": 1})
    res = Resources(profile=profile)
    try:
        r = evaluate_anchor(anchor, Law4(), profile=profile, resources=res)
    finally:
        res.close()
    print(f"measured: {anchor.id} {r.measured} {r.interval} ({r.verdict.value})")
    assert r.verdict is Verdict.PASS, r.reason
    assert r.measurement.protocol["n_expert"] == 128 and r.measurement.protocol["n_expert_used"] == 8
