"""Law 4's arithmetic, term by term, against numbers computed by hand here.

Small GGUF files are written with gguf.GGUFWriter and read back through the real header scanner;
the real PyPI-shipped models (SmolLM2-135M Q4_1, Gemma-3-270M Q4_K_M) check the header path end to
end. Expected values are spelled out as arithmetic in each test, never copied from the code.
"""
from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest

from lawbench.core.store import gguf_header as gh
from lawbench.core.errors import DataError
from lawbench.plugins.law4 import pricing as P
from lawbench.plugins.law4.manifest import load_manifest
from lawbench.plugins.law4.profile import law4_profile
from lawbench.plugins.law4.shape import ModelShape, role_of
from lawbench.plugins.law4.shape_checks import ShapeError


# each test gets an empty header cache (in memory and on disk)
pytestmark = pytest.mark.usefixtures("private_lawbench_cache")


def write_gguf(path: Path, arch: str, meta: dict, tensors: dict) -> Path:
    """A real GGUF: `meta` keys without the arch prefix; tensors as numpy arrays (numpy order)."""
    w = gguf.GGUFWriter(str(path), arch)
    for key, value in meta.items():
        full = f"{arch}.{key}"
        if isinstance(value, list):
            w.add_array(full, value)
        elif isinstance(value, bool):
            w.add_bool(full, value)
        else:
            w.add_uint32(full, value)
    for name, arr in tensors.items():
        w.add_tensor(name, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def shape_of(path: Path) -> ModelShape:
    return ModelShape.from_header(gh.read_header(path))


N_EMBD, N_VOCAB, N_FF, N_EXP = 32, 64, 64, 4


def moe_file(tmp_path: Path, *, tied: bool = False) -> Path:
    """2 layers, 4 experts (2 used), F32 everywhere so bytes = 4 x elements."""
    f32 = np.float32
    t = {"token_embd.weight": np.zeros((N_VOCAB, N_EMBD), f32),
         "output_norm.weight": np.zeros(N_EMBD, f32)}
    if not tied:
        t["output.weight"] = np.zeros((N_VOCAB, N_EMBD), f32)
    for i in range(2):
        t[f"blk.{i}.attn_norm.weight"] = np.zeros(N_EMBD, f32)
        t[f"blk.{i}.attn_q.weight"] = np.zeros((N_EMBD, N_EMBD), f32)
        t[f"blk.{i}.attn_k.weight"] = np.zeros((16, N_EMBD), f32)
        t[f"blk.{i}.ffn_gate_inp.weight"] = np.zeros((N_EXP, N_EMBD), f32)
        t[f"blk.{i}.ffn_up_exps.weight"] = np.zeros((N_EXP, N_FF, N_EMBD), f32)
        t[f"blk.{i}.ffn_up_shexp.weight"] = np.zeros((N_FF, N_EMBD), f32)
    meta = {"block_count": 2, "embedding_length": N_EMBD, "attention.head_count": 4,
            "attention.head_count_kv": 2, "expert_count": N_EXP, "expert_used_count": 2}
    return write_gguf(tmp_path / ("tied.gguf" if tied else "moe.gguf"), "qwen3moe", meta, t)


# --------------------------------------------------------------------------- roles and bytes


def test_roles_follow_llama_cpp_names():
    assert role_of("token_embd.weight") == "embedding"
    assert role_of("output.weight") == "output"
    assert role_of("output_norm.weight") == "norm"
    assert role_of("blk.3.ffn_down_exps.weight") == "routed_expert"
    assert role_of("blk.3.ffn_gate_shexp.weight") == "shared_expert"
    assert role_of("blk.3.ffn_gate_inp.weight") == "router"
    assert role_of("blk.3.exp_probs_b.bias") == "router"
    assert role_of("blk.3.attn_kv_a_mqa.weight") == "attention"
    assert role_of("blk.3.attn_norm.weight") == "norm"
    assert role_of("blk.3.ffn_up.weight") == "dense_ffn"


def test_bytes_by_role_reads_k_of_k_experts_and_one_embedding_row(tmp_path):
    shape = shape_of(moe_file(tmp_path))
    roles = P.bytes_by_role(shape)
    assert roles["routed_expert"] == 2 * (N_EXP * N_FF * N_EMBD * 4) * 2 / 4  # 2 layers, 2 of 4
    assert roles["embedding"] == N_EMBD * 4  # one row of the table
    assert roles["output"] == N_VOCAB * N_EMBD * 4
    assert roles["shared_expert"] == 2 * N_FF * N_EMBD * 4
    assert roles["attention"] == 2 * (N_EMBD * N_EMBD + 16 * N_EMBD) * 4
    # k = 1 halves the routed read again; the rest is untouched
    assert P.bytes_by_role(shape, 1)["routed_expert"] == roles["routed_expert"] / 2
    assert P.bytes_by_role(shape, 1)["attention"] == roles["attention"]


def test_tied_embedding_is_read_whole_as_the_output_head(tmp_path):
    shape = shape_of(moe_file(tmp_path, tied=True))
    assert shape.tied_embeddings
    assert P.bytes_by_role(shape)["embedding"] == N_VOCAB * N_EMBD * 4


def test_routed_share_and_the_expert_ceiling(tmp_path):
    shape = shape_of(moe_file(tmp_path))
    roles = P.bytes_by_role(shape)
    s = roles["routed_expert"] / sum(roles.values())
    assert P.routed_share(shape) == pytest.approx(s)
    # L-30: 1 / (1 - s + s k / K); s = 0.5, k = 1 of 2 -> 1 / 0.75
    assert P.expert_ceiling(0.5, 1, 2) == pytest.approx(4 / 3)
    assert P.expert_ceiling(0.22, 8, 8) == pytest.approx(1.0)
    assert P.expert_ceiling(0.0, 1, 8) == pytest.approx(1.0)  # a dense model has no knob
    with pytest.raises(ShapeError, match="outside 0..4"):
        P.bytes_by_role(shape, 5)


def test_active_params_counts_the_embedding_only_by_card_convention(tmp_path):
    shape = shape_of(moe_file(tmp_path))
    emb = N_VOCAB * N_EMBD
    with_emb = P.active_params(shape)
    assert with_emb - P.active_params(shape, count_embedding=False) == emb
    assert P.total_params(shape) - with_emb == 2 * N_EXP * N_FF * N_EMBD / 2  # the unread half


# --------------------------------------------------------------------------- the KV term


def test_kv_bytes_per_element_from_ggml_block_sizes():
    assert P.kv_bytes_per_element("f16") == 2
    assert P.kv_bytes_per_element("q8_0") == 34 / 32
    assert P.kv_bytes_per_element("q4_0") == 18 / 32
    with pytest.raises(ShapeError, match="unknown KV cache type"):
        P.kv_bytes_per_element("q3_k")


def test_gqa_kv_bytes_default_head_size_is_embd_over_heads(tmp_path):
    shape = shape_of(moe_file(tmp_path))
    # 2 layers x 2 KV heads x (8 + 8) x 2 bytes, head size 32 / 4 = 8
    assert P.kv_bytes_per_pos(shape) == 2 * 2 * (8 + 8) * 2
    assert P.kv_bytes_per_pos(shape, "q8_0") == 2 * 2 * 16 * 34 / 32


def test_per_layer_kv_heads_and_mla(tmp_path):
    f = write_gguf(tmp_path / "arr.gguf", "llama",
                   {"block_count": 2, "embedding_length": 32, "attention.head_count": 4,
                    "attention.head_count_kv": [2, 0]}, {"x.weight": np.zeros(4, np.float32)})
    assert P.kv_bytes_per_pos(shape_of(f)) == 2 * 16 * 2  # layer 1 keeps no cache
    mla = write_gguf(tmp_path / "mla.gguf", "deepseek2",
                     {"block_count": 3, "attention.kv_lora_rank": 512, "rope.dimension_count": 64,
                      "attention.head_count": 16, "attention.head_count_kv": 1,
                      "attention.key_length": 576, "attention.value_length": 512,
                      "attention.key_length_mla": 192, "attention.value_length_mla": 128},
                     {"x.weight": np.zeros(4, np.float32)})
    assert P.kv_bytes_per_pos(shape_of(mla)) == 3 * (512 + 64) * 2  # the latent, C-01's convention
    assert P.kv_bytes_per_pos(shape_of(mla), layout="expanded") == 3 * 16 * (192 + 128) * 2


def test_sliding_window_layers_stop_growing_at_their_window(tmp_path):
    f = write_gguf(tmp_path / "swa.gguf", "gemma3",
                   {"block_count": 12, "embedding_length": 32, "attention.head_count": 2,
                    "attention.head_count_kv": 1, "attention.key_length": 16,
                    "attention.value_length": 16, "attention.sliding_window": 8},
                   {"x.weight": np.zeros(4, np.float32)})
    shape = shape_of(f)
    per_layer = 1 * (16 + 16) * 2
    # gemma3's pattern 6: layers 5 and 11 are global, the other ten slide
    assert P.kv_bytes_per_pos(shape) == 2 * per_layer
    assert sum(P.kv_layer_bytes_at(shape, 100)) == per_layer * (2 * 100 + 10 * 8)
    assert sum(P.kv_layer_bytes_at(shape, 5)) == per_layer * 12 * 5  # under the window: all grow


def test_hybrid_linear_attention_prices_full_attention_layers_only(tmp_path):
    f = write_gguf(tmp_path / "hyb.gguf", "qwen35moe",
                   {"block_count": 8, "attention.head_count": 2, "attention.head_count_kv": 2,
                    "attention.key_length": 8, "attention.value_length": 8},
                   {"x.weight": np.zeros(4, np.float32)})
    # interval 4: layers 3 and 7 are full attention (U-51's correction)
    assert P.kv_bytes_per_pos(shape_of(f)) == 2 * 2 * 16 * 2


def test_missing_kv_geometry_is_named(tmp_path):
    f = write_gguf(tmp_path / "bare.gguf", "llama", {"block_count": 2},
                   {"x.weight": np.zeros(4, np.float32)})
    with pytest.raises(ShapeError, match="head_count_kv"):
        P.kv_bytes_per_pos(shape_of(f))


# --------------------------------------------------------------------------- placement and time


def test_ngl_counts_the_output_layer_as_one():
    p = P.Placement(gpu_tier="vram", cpu_tier="ram", gpu_layers=2)
    assert p.devices(4) == (["cpu", "cpu", "cpu", "gpu"], "gpu")
    assert P.Placement("vram", "ram", gpu_layers=0).devices(4) == (["cpu"] * 4, "cpu")
    assert P.Placement("vram", "ram").devices(4) == (["gpu"] * 4, "gpu")
    assert P.Placement(None, "ram", gpu_layers=99).devices(2) == (["cpu"] * 2, "cpu")


TIERS = {"vram": P.TierRate("vram", "vram", 200.0, 0.5, capacity_gb=1.0),
         "ram": P.TierRate("ram", "ram", 40.0, 0.25, capacity_gb=100.0)}


def test_two_tier_general_form_and_the_v1_form(tmp_path):
    shape = shape_of(moe_file(tmp_path))
    roles = P.bytes_by_role(shape)
    split = P.price_decode(shape, TIERS, P.Placement("vram", "ram", experts_on_cpu=True))
    on_ram = roles["routed_expert"] + roles["embedding"]
    on_vram = sum(roles.values()) - on_ram
    assert split.weight_bytes["ram"] == pytest.approx(on_ram)
    assert split.tok_s == pytest.approx(1 / (on_vram / (0.5 * 200e9) + on_ram / (0.25 * 40e9)))
    # one tier: the general form is the v1.0 statement exactly, tok/s = η · BW / active bytes per token
    cpu = P.price_decode(shape, TIERS, P.Placement(None, "ram"))
    assert cpu.tok_s == pytest.approx(TIERS["ram"].bytes_per_s / P.active_bytes(shape))
    assert cpu.dominant() == ("weights@ram", 1.0)
    # all on GPU but for the embedding row (on the CPU): v1 holds within the minor term's share
    gpu = P.price_decode(shape, TIERS, P.Placement("vram", "ram"))
    term, share = gpu.dominant()
    assert term == "weights@vram" and share > 0.95
    v1 = TIERS["vram"].bytes_per_s / P.active_bytes(shape)
    assert 0 < v1 / gpu.tok_s - 1 <= (1 - share) / share


def test_kv_term_on_its_tier_and_cpu_attention(tmp_path):
    shape = shape_of(moe_file(tmp_path))
    kv = P.kv_bytes_per_pos(shape)
    base = P.price_decode(shape, TIERS, P.Placement("vram", "ram"))
    deep = P.price_decode(shape, TIERS, P.Placement("vram", "ram"), ctx=1000, eta_kv=0.7)
    assert deep.seconds["kv@vram"] == pytest.approx(1000 * kv / (0.7 * 200e9))
    assert deep.seconds_per_token == pytest.approx(base.seconds_per_token + deep.seconds["kv@vram"])
    nkvo = P.price_decode(shape, TIERS, P.Placement("vram", "ram", kv_on_cpu=True), ctx=1000, eta_kv=0.7)
    assert nkvo.seconds["kv@ram"] == pytest.approx(1000 * kv / (0.7 * 40e9))
    assert "cpu_attention" not in nkvo.seconds  # attention still runs on the GPU
    # L-19: one block on the CPU pays ctx x k on top of its bytes
    split = P.price_decode(shape, TIERS, P.Placement("vram", "ram", gpu_layers=2), ctx=1000,
                           eta_kv=0.7, cpu_attention_k_s=1.55e-6)
    assert split.cpu_attention_layers == 1
    assert split.seconds["cpu_attention"] == pytest.approx(1 * 1000 * 1.55e-6)
    with pytest.raises(ShapeError, match="η_kv"):
        P.price_decode(shape, TIERS, P.Placement("vram", "ram"), ctx=10)


def test_capacity_counts_kv_on_its_tier(tmp_path):
    shape = shape_of(moe_file(tmp_path))
    weights_vram = P.price_decode(shape, TIERS, P.Placement("vram", "ram")).resident_bytes["vram"]
    room = 1e9 - weights_vram  # vram holds 1 GB in TIERS
    ctx_over = int(room / P.kv_bytes_per_pos(shape)) + 1
    fits = P.price_decode(shape, TIERS, P.Placement("vram", "ram"), ctx=ctx_over - 1, eta_kv=1)
    over = P.price_decode(shape, TIERS, P.Placement("vram", "ram"), ctx=ctx_over, eta_kv=1)
    assert fits.fits["vram"] is True and over.fits["vram"] is False
    assert not fits.does_not_fit and any(w.startswith("vram:") for w in over.does_not_fit)
    # Before the general form a tier over its capacity was only a warning (law_version < general).
    from lawbench.plugins.law4.versions import BY_ID

    old = P.price_decode(shape, TIERS, P.Placement("vram", "ram"), ctx=ctx_over, eta_kv=1,
                         terms=BY_ID["L-30"].terms)
    assert not old.does_not_fit and any("vram" in w and "exceeds" in w for w in old.warnings)


def test_a_tier_without_eta_is_named():
    tiers = {"vram": P.TierRate("vram", "vram", 100.0, None)}
    shape = load_manifest("qwen2.5-7b")
    with pytest.raises(P.TierMissing, match="no η for tier 'vram'"):
        P.price_decode(shape, tiers, P.Placement("vram", None))


# --------------------------------------------------------------------------- manifests


def test_manifest_templates_expand_and_price_like_a_header():
    q = load_manifest("qwen3-30b-a3b")
    assert sum(1 for t in q.tensors if t.name.endswith("ffn_up_exps.weight")) == 48
    up = next(t for t in q.tensors if t.name == "blk.0.ffn_up_exps.weight")
    assert up.n_bytes == 2048 * 768 * 128 * 2  # BF16
    assert next(t for t in q.tensors if t.name == "blk.0.attn_norm.weight").type_name == "F32"
    q4 = q.with_weight_type("Q4_0")
    assert next(t for t in q4.tensors if t.name == up.name).n_bytes == 2048 * 768 * 128 // 32 * 18
    ds = load_manifest("deepseek-v2-lite")
    assert [t.layer for t in ds.tensors if t.role == "dense_ffn"] == [0, 0, 0]


def test_byte_group_manifest_spreads_its_total():
    m = load_manifest("qwen3.6-35b-a3b")
    routed = [t for t in m.tensors if t.role == "routed_expert"]
    assert len(routed) == 40 and sum(t.n_bytes for t in routed) == round(11.602 * 2 ** 30)
    with pytest.raises(ShapeError, match="cannot be re-typed"):
        m.with_weight_type("Q4_0")


def _manifest(tmp_path: Path, name: str, body: str) -> Path:
    p = tmp_path / f"{name}.toml"
    p.write_text(f'id = "{name}"\nname = "t"\narchitecture = "llama"\nsource = "test"\n{body}', encoding="utf-8")
    return p


@pytest.mark.parametrize("body, field, words", [
    ('colour = 1\n[metadata]\nblock_count = 1\n', "colour", "unknown field"),
    ('[metadata]\nblock_count = 2\n[[tensor]]\nname = "blk.{i}.x"\nsize_gib = 1.0\n',
     "tensor.0", "needs a role"),
    ('[metadata]\nblock_count = 2\n[[tensor]]\nname = "blk.{i}.x.weight"\nshape = [32, 4]\nlayers = "1-5"\n',
     "tensor.0.layers", "outside 0-1"),
    ('[metadata]\nblock_count = 1\n[[tensor]]\nname = "a.weight"\nshape = [100, 3]\ntype = "Q4_K"\n',
     "tensor.0.type", "multiples of 256"),
    ('[metadata]\nblock_count = 1\n[[tensor]]\nname = "a.weight"\nshape = [32]\nrole = "wings"\n',
     "tensor.0.role", "unknown role"),
])
def test_bad_manifest_names_file_and_field(tmp_path, body, field, words):
    path = _manifest(tmp_path, "bad", body)
    with pytest.raises(DataError) as exc:
        load_manifest(path)
    assert exc.value.file == str(path) and exc.value.field == field
    assert words in str(exc.value)


def test_manifest_id_must_match_its_file_name(tmp_path):
    path = _manifest(tmp_path, "one", "[metadata]\nblock_count = 1\n")
    renamed = path.with_name("two.toml")
    path.rename(renamed)
    with pytest.raises(DataError, match="does not match the file name") as exc:
        load_manifest(renamed)
    assert exc.value.field == "id"


# --------------------------------------------------------------------------- the real PyPI-shipped headers


@pytest.fixture(scope="module")
def real_models():
    from lawbench.core.store import ModelStore

    store = ModelStore()
    return {"smollm2": store.path("smollm2-135m-q4_1"), "gemma3": store.path("gemma3-270m-q4_k_m")}


@pytest.mark.parametrize("name", ["smollm2", "gemma3"])
def test_real_header_bytes_equal_tensor_bytes_by_role(real_models, name):
    header = gh.read_header(real_models[name])
    shape = ModelShape.from_header(header)
    by_role: dict[str, int] = {}
    for t in header.tensors:
        by_role[role_of(t.name)] = by_role.get(role_of(t.name), 0) + t.n_bytes
    # Both files tie the output head to the embedding table, so a token reads every tensor whole.
    assert "output" not in by_role and shape.tied_embeddings
    assert P.bytes_by_role(shape) == pytest.approx({r: float(b) for r, b in by_role.items()})
    assert P.active_bytes(shape) == header.total_tensor_bytes


@pytest.mark.parametrize("name", ["smollm2", "gemma3"])
def test_real_header_kv_bytes_follow_the_metadata(real_models, name):
    h = gh.read_header(real_models[name])
    n_layer, heads = h.arch("block_count"), h.arch("attention.head_count")
    kv_heads = h.arch("attention.head_count_kv")
    k = h.arch("attention.key_length", h.arch("embedding_length") // heads)
    v = h.arch("attention.value_length", k)
    window = h.arch("attention.sliding_window", None)
    global_layers = n_layer if window is None else sum(1 for i in range(n_layer) if i % 6 == 5)
    assert P.kv_bytes_per_pos(ModelShape.from_header(h)) == global_layers * kv_heads * (k + v) * 2


def test_real_header_prices_the_same_truncated(real_models, tmp_path):
    full = gh.read_header(real_models["gemma3"])
    cut = tmp_path / "head-only.gguf"
    with open(real_models["gemma3"], "rb") as src:
        cut.write_bytes(src.read(full.data_offset))
    a, b = ModelShape.from_header(full), ModelShape.from_header(gh.read_header(cut))
    assert P.active_bytes(a) == P.active_bytes(b) and P.kv_bytes_per_pos(a) == P.kv_bytes_per_pos(b)


# --------------------------------------------------------------------------- `lawbench predict`


def _predict_json(capsys, *argv: str) -> dict:
    import json

    from lawbench.core.commands.main import main

    assert main(["predict", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_cli_prices_the_usual_placements_by_the_law(capsys):
    from lawbench.core.hardware.profiles import load_profiles

    prof = load_profiles()["gtx1060"]
    # L-30: every term but the general form's capacity (the BF16 61 GB would stream from disk)
    out = _predict_json(capsys, "manifest:qwen3-30b-a3b", "--profile", "gtx1060", "--ctx", "16384",
                        "--law-version", "L-30")
    shape = load_manifest("qwen3-30b-a3b")
    assert out["kv_bytes_per_pos"]["f16"] == P.kv_bytes_per_pos(shape)
    rows = {r["placement"]: r for r in out["placements"]}
    assert list(rows) == ["all on GPU", "experts on CPU", "pure CPU (-ngl 0)"]
    # pure CPU by hand: weights at the MoE RAM η, KV at η_kv, and L-19's k (the seed's 1.55 µs,
    # not the register's pure-CPU arm 1.10) per layer
    c = law4_profile(prof).constants
    ram = prof.tier("ram").bandwidth_spec_gbs.value * 1e9
    t = (P.active_bytes(shape) / (c["eta_ram_moe"].value * ram)
         + 16384 * P.kv_bytes_per_pos(shape) / (c["eta_kv"].value * ram)
         + 48 * 16384 * c["cpu_attention_k_us"].value * 1e-6)
    assert c["cpu_attention_k_us"].value == 1.55
    assert rows["pure CPU (-ngl 0)"]["tok_s"] == pytest.approx(1 / t)
    assert rows["all on GPU"]["fits"]["vram"] is False  # 61 GB of BF16 in 6 GB
    # The general form: VRAM cannot stream, so "does not fit"; RAM streams the excess from disk.
    now = {r["placement"]: r for r in _predict_json(capsys, "manifest:qwen3-30b-a3b", "--profile",
                                                     "gtx1060", "--ctx", "16384")["placements"]}
    assert now["all on GPU"]["does_not_fit"] and now["all on GPU"]["tok_s"] is None
    assert now["pure CPU (-ngl 0)"]["streamed_bytes"]["ram"] > 0
    assert now["pure CPU (-ngl 0)"]["tok_s"] < rows["pure CPU (-ngl 0)"]["tok_s"]
    ceil = out["expert_ceilings"]
    assert ceil["decode"]["4"] == pytest.approx(P.expert_ceiling(P.routed_share(shape), 4, 8))


def test_cli_on_a_real_header_with_one_placement(capsys, real_models):
    out = _predict_json(capsys, str(real_models["smollm2"]), "--profile", "gtx1060", "--ngl", "10")
    assert [r["placement"] for r in out["placements"]] == ["-ngl 10"]
    row = out["placements"][0]
    assert set(row["weight_bytes"]) == {"vram", "ram"} and row["tok_s"] > 0
    assert "expert_ceilings" not in out  # dense


def test_cli_split_flags_are_exclusive(capsys):
    from lawbench.core.commands.main import main

    with pytest.raises(SystemExit):
        main(["predict", "manifest:qwen2.5-7b", "--ngl", "3", "--cpu-layers", "2"])
