"""A stated quant mix prices the bytes llama-quantize writes: plugins/law4/quantmix.py against the
real llama-quantize of the pinned build, on real GGUF files (dense llama and MoE qwen3moe), and a
manifest at the same mix agrees with the quantized file byte for byte."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import gguf
import numpy as np
import pytest
from _engine_fixtures import llama  # noqa: F401  (the real cached llama.cpp build)

from lawbench.core.store import gguf_header as gh
from lawbench.core.engines.bench import quantize
from lawbench.core.errors import DataError
from lawbench.core.store.synthetic import SyntheticSpec, build_synthetic
from lawbench.plugins.law4.case import parse_case
from lawbench.plugins.law4.manifest import load_manifest
from lawbench.plugins.law4.quantmix import _use_more_bits, apply_mix, infer_ftype, weight_format
from lawbench.plugins.law4.shape import ModelShape

pytestmark = pytest.mark.usefixtures("private_lawbench_cache")

# 10 layers: enough for llama.cpp's n/8, n/16 and "use more bits" layer rules to differ per layer.
DENSE = SyntheticSpec(id="mix-dense", n_layer=10, n_embd=256, n_ff=768, n_head=4, n_head_kv=2,
                      n_vocab=512, context_length=512)
FTYPES = ("Q8_0", "Q4_0", "Q4_K_M", "Q2_K", "Q3_K_M", "Q4_K_S", "Q5_K_M", "Q6_K")


def shape_of(path: Path) -> ModelShape:
    return ModelShape.from_header(gh.read_header(path))


def types_and_bytes(shape: ModelShape) -> dict[str, tuple[str, int]]:
    return {t.name: (t.type_name, t.n_bytes) for t in shape.tensors}


def write_moe(path: Path, n_expert: int, n_layer: int = 8) -> Path:
    """A qwen3moe GGUF in F16 that llama.cpp loads: 8 layers, `n_expert` experts (2 used)."""
    emb, ff, heads, kv, hd, vocab = 256, 256, 4, 2, 64, 512
    w = gguf.GGUFWriter(str(path), "qwen3moe")
    w.add_block_count(n_layer), w.add_context_length(512), w.add_embedding_length(emb)
    w.add_feed_forward_length(ff), w.add_head_count(heads), w.add_head_count_kv(kv)
    w.add_key_length(hd), w.add_value_length(hd), w.add_expert_count(n_expert)
    w.add_expert_used_count(2), w.add_expert_feed_forward_length(ff)
    w.add_layer_norm_rms_eps(1e-6), w.add_rope_freq_base(10000.0)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_tokenizer_model("gpt2"), w.add_token_list([f"t{i}" for i in range(vocab)])
    w.add_token_types([1] * vocab), w.add_token_merges([])
    rng = np.random.default_rng(0)

    def r(*shape, dt=np.float16):
        return (rng.standard_normal(shape) * 0.02).astype(dt)

    w.add_tensor("token_embd.weight", r(vocab, emb))
    w.add_tensor("output_norm.weight", np.ones(emb, np.float32))
    w.add_tensor("output.weight", r(vocab, emb))
    for i in range(n_layer):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", np.ones(emb, np.float32))
        w.add_tensor(p + "attn_q.weight", r(heads * hd, emb))
        w.add_tensor(p + "attn_k.weight", r(kv * hd, emb))
        w.add_tensor(p + "attn_v.weight", r(kv * hd, emb))
        w.add_tensor(p + "attn_output.weight", r(emb, heads * hd))
        w.add_tensor(p + "attn_q_norm.weight", np.ones(hd, np.float32))
        w.add_tensor(p + "attn_k_norm.weight", np.ones(hd, np.float32))
        w.add_tensor(p + "ffn_norm.weight", np.ones(emb, np.float32))
        w.add_tensor(p + "ffn_gate_inp.weight", r(n_expert, emb, dt=np.float32))
        w.add_tensor(p + "ffn_gate_exps.weight", r(n_expert, ff, emb))
        w.add_tensor(p + "ffn_up_exps.weight", r(n_expert, ff, emb))
        w.add_tensor(p + "ffn_down_exps.weight", r(n_expert, emb, ff))
    w.write_header_to_file(), w.write_kv_data_to_file(), w.write_tensors_to_file()
    w.close()
    return path


def manifest_like(path: Path, n_expert: int, n_layer: int = 8) -> Path:
    """The same model as a manifest (shapes in GGUF order, F16), as anchors/manifests states one."""
    rows = [("token_embd.weight", [256, 512], None), ("output_norm.weight", [256], None),
            ("output.weight", [256, 512], None), ("blk.{i}.attn_norm.weight", [256], None),
            ("blk.{i}.attn_q.weight", [256, 256], None), ("blk.{i}.attn_k.weight", [256, 128], None),
            ("blk.{i}.attn_v.weight", [256, 128], None), ("blk.{i}.attn_output.weight", [256, 256], None),
            ("blk.{i}.attn_q_norm.weight", [64], None), ("blk.{i}.attn_k_norm.weight", [64], None),
            ("blk.{i}.ffn_norm.weight", [256], None), ("blk.{i}.ffn_gate_inp.weight", [256, n_expert], "F32"),
            ("blk.{i}.ffn_gate_exps.weight", [256, 256, n_expert], None),
            ("blk.{i}.ffn_up_exps.weight", [256, 256, n_expert], None),
            ("blk.{i}.ffn_down_exps.weight", [256, 256, n_expert], None)]
    text = [f'id = "{path.stem}"', 'name = "test"', 'architecture = "qwen3moe"', 'source = "test"',
            'weight_type = "F16"', "[metadata]", f"block_count = {n_layer}", "embedding_length = 256",
            "attention.head_count = 4", "attention.head_count_kv = 2", "attention.key_length = 64",
            "attention.value_length = 64", f"expert_count = {n_expert}", "expert_used_count = 2"]
    for name, shape, typ in rows:
        text += ["[[tensor]]", f'name = "{name}"', f"shape = {shape}"] + ([f'type = "{typ}"'] if typ else [])
    path.write_text("\n".join(text) + "\n", encoding="utf-8")
    return path


# --------------------------------------------------------------------------- against llama-quantize


@pytest.mark.parametrize("ftype", FTYPES)
def test_dense_mix_matches_llama_quantize_tensor_for_tensor(llama, tmp_path_factory, ftype):  # noqa: F811
    cache = tmp_path_factory.getbasetemp() / "mix-dense"
    base = build_synthetic(DENSE, cache_dir=cache)
    q = build_synthetic(DENSE.model_copy(update={"weight_type": ftype}), cache_dir=cache,
                        quantize=lambda s, d, t: quantize(llama, s, d, t))
    file, priced = shape_of(q), apply_mix(shape_of(base), ftype)
    assert types_and_bytes(priced) == types_and_bytes(file)
    assert priced.file_type == file.file_type == ftype
    assert infer_ftype(file) == ftype  # the format is readable from the type mix alone


@pytest.mark.parametrize("n_expert", [8, 4])  # 8: llama.cpp's "8-expert model" rules fire
@pytest.mark.parametrize("ftype", ["Q4_K_M", "Q2_K", "Q3_K_M", "Q4_0"])
def test_moe_file_and_manifest_at_one_mix_agree_with_llama_quantize(llama, tmp_path, n_expert, ftype):  # noqa: F811
    src = write_moe(tmp_path / "moe-f16.gguf", n_expert)
    dst = tmp_path / f"moe-{ftype}.gguf"
    quantize(llama, src, dst, ftype)
    file = shape_of(dst)
    from_header = apply_mix(shape_of(src), ftype)
    from_manifest = apply_mix(load_manifest(manifest_like(tmp_path / "moe-test.toml", n_expert)), ftype)
    assert types_and_bytes(from_header) == types_and_bytes(file)
    assert types_and_bytes(from_manifest) == types_and_bytes(file)
    assert sum(t.n_bytes for t in from_manifest.tensors) == gh.read_header(dst).total_tensor_bytes
    assert weight_format(file) == ftype and weight_format(from_manifest) == ftype


# --------------------------------------------------------------------------- the rules, by hand


def test_q4_k_m_on_the_registers_7b_puts_q6_k_where_llama_cpp_does():
    """Qwen2.5-7B (28 layers, GQA 7): attn_v and ffn_down of layers 0-2, 24-27 and every third
    between (use_more_bits) get Q6_K; the untied embedding stays Q4_K; the output head is Q6_K."""
    m = apply_mix(load_manifest("qwen2.5-7b"), "Q4_K_M")
    t = {x.name: x.type_name for x in m.tensors}
    more = {0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 24, 25, 26, 27}  # i < 28//8, i >= 7*28//8, (i-3)%3 == 2
    assert {i for i in range(28) if t[f"blk.{i}.ffn_down.weight"] == "Q6_K"} == more
    assert {i for i in range(28) if t[f"blk.{i}.attn_v.weight"] == "Q6_K"} == more
    assert t["output.weight"] == "Q6_K" and t["token_embd.weight"] == "Q4_K"
    assert t["blk.0.attn_q.bias"] == "F32" and t["blk.0.attn_norm.weight"] == "F32"
    assert Counter(t.values()) == {"Q4_K": 169, "Q6_K": 29, "F32": 141}
    assert all(_use_more_bits(i, 28) == (i in more) for i in range(28))


def test_a_per_role_table_states_a_recipe_and_names_no_format():
    base = load_manifest("qwen3-30b-a3b")
    m = apply_mix(base, {"routed_expert": "Q2_K", "attention": "Q4_K"})
    by_role = {(x.role, x.type_name) for x in m.tensors}
    assert ("routed_expert", "Q2_K") in by_role and ("attention", "Q4_K") in by_role
    assert ("router", "BF16") in by_role  # routers are never quantized (tensor_allows_quantization)
    assert m.file_type is None and weight_format(m) is None  # a recipe: no per-format η applies


@pytest.mark.parametrize("mix, says", [("Q4_K_X", "unsupported ftype"), ("IQ2_XS", "imatrix"),
                                       ({"experts": "Q2_K"}, "unknown role"),
                                       ({"routed_expert": "Q9_K"}, "unknown ggml type")])
def test_a_bad_mix_names_case_weight_mix(mix, says):
    with pytest.raises(DataError) as err:
        parse_case({"quantity": "active_bytes_per_token", "model": "manifest:qwen2.5-7b",
                    "weight_mix": mix}, "law4.t")
    assert err.value.field == "case.weight_mix" and says in err.value.message


def test_a_byte_group_cannot_be_re_typed():
    """The Qwen3.6 manifest states printed byte totals, not shapes: no mix can re-type them."""
    from lawbench.plugins.law4.shape_checks import ShapeError

    with pytest.raises(ShapeError, match="byte group"):
        apply_mix(load_manifest("qwen3.6-35b-a3b"), "Q4_K_M")
