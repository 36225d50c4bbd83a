"""Law 1's effective-rank reading (lawbench.plugins.law1.rank): the stand-in, on things real and
small here, for the gtx1060 anchors that read DeepSeek-V2-Lite (anchors/law1/gtx1060.toml), whose
BF16 GGUF only that runner holds. SmolLM2-135M's real tensors against an independent SVD with the
register's own formula, and MLA-shaped GGUFs in both of llama.cpp's layouts (attn_kv_b whole; the
converter's per-head attn_k_b + attn_v_b), each turning red on a wrong value."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from _engine_fixtures import smollm2  # noqa: F401
from gguf import GGMLQuantizationType, GGUFWriter
from gguf.quants import quantize

from lawbench.core.errors import DataError, NotApplicable

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def register_erank(w) -> float:
    """weights/m1_dichotomy.py's computation, verbatim in substance: an SVD, not lawbench's Gram."""
    s = np.linalg.svd(np.asarray(w, dtype=np.float64), compute_uv=False)
    p = s ** 2 / (s ** 2).sum()
    return float(np.exp(-(p * np.log(p + 1e-30)).sum()))


def _anchor(case, value=100.0, band=None):
    from lawbench.core.models import Anchor

    return Anchor.model_validate({
        "id": "test.law1.erank", "law": "law1", "claim": "a stand-in", "quantity": "effective rank", "unit": "1",
        "kind": "measurement", "noise": "deterministic", "value": value, "band": band or {"abs": 0.5},
        "case": case, "budget": {"min_samples": 3, "max_samples": 3, "batch": 3},
        "provenance": {"seed": "000_4a91008eeaefec79.txt"}})


def _decide(sampler, band):
    from lawbench.core.models import Budget
    from lawbench.core.stats.verdicts import decide_sequential

    return decide_sequential(sampler.draw, sampler.statistic, band, Budget(min_samples=3, max_samples=3, batch=3),
                             log=sampler.log_scale)


class _Res:
    def __init__(self, path):
        self.path = path

    def model(self, model_id):
        return self.path


def test_a_real_tensors_rank_is_the_registers_formula_and_turns_red_on_a_wrong_value(smollm2):  # noqa: F811
    from lawbench.plugins.law1.gauges import effective_rank
    from lawbench.plugins.law1.law import Law1
    from lawbench.plugins.law1.tensors import TensorFile

    case = {"model": "gguf:smollm2-135m-q4_1", "tensor": "blk.3.ffn_down.weight"}
    w = TensorFile(smollm2).read("blk.3.ffn_down.weight").weights
    want = register_erank(w)
    s = Law1().sampler(_anchor(case), None, _Res(smollm2))
    d = _decide(s, (want - 0.5, want + 0.5))
    print(f"measured: SmolLM2-135M blk.3.ffn_down {w.shape} energy erank {d.statistic:.6f} "
          f"(register's SVD formula {want:.6f}); interval {d.interval}")
    assert d.verdict.value == "PASS" and d.statistic == pytest.approx(want, rel=1e-9)
    assert d.interval[1] - d.interval[0] < 1e-6  # every reading the same number: deterministic
    assert 1 < d.statistic < min(w.shape)
    s = Law1().sampler(_anchor(case), None, _Res(smollm2))
    assert _decide(s, (want + 1.0, want + 2.0)).verdict.value == "FAIL"  # a published figure 1 above
    # Roy & Vetterli's spectrum is another number: the case must say which the source used
    other = Law1().sampler(_anchor({**case, "spectrum": "singular"}), None, _Res(smollm2)).draw(1)[0].value
    assert other == pytest.approx(effective_rank(w), rel=1e-9) and abs(other - want) > 5


def _mla_gguf(path: Path, split: bool, dtype: str, heads=2, nope=8, v=8, latent=16, rope=4, hidden=48, seed=0):
    """A deepseek2-shaped block 0 whose composed K/V map is known: kv_b (heads*(nope+v), latent),
    kv_a (latent+rope, hidden), written as llama.cpp's converter writes one or the other layout."""
    rng = np.random.default_rng(seed)
    kb = rng.standard_normal((heads * (nope + v), latent)).astype(np.float32)
    ka = (rng.standard_normal((latent + rope, 6)) @ rng.standard_normal((6, hidden))
          + 0.1 * rng.standard_normal((latent + rope, hidden))).astype(np.float32)  # a low-rank latent
    w = GGUFWriter(str(path), "deepseek2")
    w.add_block_count(1)
    w.add_uint32("deepseek2.attention.kv_lora_rank", latent)

    def put(name, x):
        if dtype == "bf16":
            w.add_tensor(name, quantize(x, GGMLQuantizationType.BF16), raw_dtype=GGMLQuantizationType.BF16)
        else:
            w.add_tensor(name, x.astype(np.float16) if dtype == "f16" else x)

    put("blk.0.attn_kv_a_mqa.weight", ka)
    if split:  # conversion/deepseek.py: kv_b viewed per head, split, k_b transposed
        per = kb.reshape(heads, nope + v, latent)
        put("blk.0.attn_k_b.weight", np.ascontiguousarray(per[:, :nope, :].transpose(0, 2, 1)))
        put("blk.0.attn_v_b.weight", np.ascontiguousarray(per[:, nope:, :]))
    else:
        put("blk.0.attn_kv_b.weight", kb)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return kb, ka


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_the_mla_kv_map_is_the_same_in_both_layouts_and_is_the_composed_maps_rank(tmp_path, dtype):
    from lawbench.plugins.law1.erank import RankReading
    from lawbench.plugins.law1.rank import parse_case

    a = _anchor({"model": "gguf:smollm2-135m-q4_1", "mla_kv": 0})
    got = {}
    for split in (False, True):
        f = tmp_path / f"mla-{split}.gguf"
        kb, ka = _mla_gguf(f, split, dtype)
        got[split] = RankReading(a, parse_case(a), f).draw(1)[0].value
    tol = {"f32": 1e-9, "f16": 2e-3, "bf16": 2e-2}[dtype]
    want = register_erank(kb.astype(np.float64) @ ka[:16].astype(np.float64))  # rank_fragility.py: kb @ ka[:512]
    print(f"measured ({dtype}): composed erank whole {got[False]:.6f} split {got[True]:.6f}, numpy {want:.6f}")
    assert got[False] == pytest.approx(got[True], rel=1e-9)  # the split's row order leaves every singular value
    assert got[False] == pytest.approx(want, rel=tol)
    assert abs(got[False] - register_erank(kb)) > 1.0  # the composed map, not kv_b alone
    assert abs(got[False] - register_erank(ka)) > 0.1  # nor kv_a with its rope rows


def test_a_wrong_map_is_a_clear_error_naming_anchor_and_field(tmp_path, smollm2):  # noqa: F811
    from lawbench.plugins.law1.law import Law1

    for case, field, words in (
            ({"model": "gguf:smollm2-135m-q4_1", "mla_kv": 0}, "case.mla_kv", "no MLA down-projection"),
            ({"model": "gguf:smollm2-135m-q4_1", "mla_kv": 99}, "case.mla_kv", "has blocks 0 to 29"),
            ({"model": "gguf:smollm2-135m-q4_1", "tensor": "blk.0.ffn_dwn.weight"}, "case.tensor", "not in")):
        s = Law1().sampler(_anchor(case), None, _Res(smollm2))
        with pytest.raises(DataError) as e:
            s.draw(1)
        assert e.value.anchor == "test.law1.erank" and e.value.field == field and words in str(e.value), str(e.value)
    for case in ({"model": "gguf:smollm2-135m-q4_1"},
                 {"model": "gguf:smollm2-135m-q4_1", "tensor": "blk.0.ffn_down.weight", "mla_kv": 0}):
        with pytest.raises(DataError, match="exactly one map"):
            Law1().check_anchor(_anchor(case))


def test_the_shipped_deepseek_anchors_skip_here_naming_the_file(monkeypatch):
    """Runner-bound: DeepSeek-V2-Lite's BF16 GGUF is a runner's file (a SKIP here)."""
    import lawbench.plugins.law1.law as law
    from lawbench.core.models import Anchor

    doc = tomllib.loads((Path(law.__file__).parents[2] / "anchors" / "law1" / "gtx1060.toml").read_text())
    monkeypatch.delenv("LAWBENCH_MODEL_DIR", raising=False)
    assert [t["value"] for t in doc["anchor"]] == [1168, 394]
    for table in doc["anchor"]:
        a = Anchor.model_validate(table)
        law.Law1().check_anchor(a)
        with pytest.raises(NotApplicable, match="LAWBENCH_MODEL_DIR|does not exist"):
            law.Law1().sampler(a, None, None)
