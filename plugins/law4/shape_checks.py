"""What Law 4 reads of a model's header, checked before it is read: a corrupt or hostile GGUF (or
manifest) is a ShapeError naming the key or the tensor part at fault, never a nonsense price or a
memory blow-up expanding per-layer lists.
"""
from __future__ import annotations

import math
from typing import Any, Optional


def ggml_sizes(type_name: str) -> tuple[int, int]:
    """(weights per block, bytes per block) of the ggml type called `type_name` (any case), from
    gguf's GGML_QUANT_SIZES; KeyError if there is none. gguf is imported here, on first use, not
    with the law: every `lawbench` command loads Law 4, and gguf brings numpy with it."""
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    return GGML_QUANT_SIZES[GGMLQuantizationType[type_name.upper()]]


def ggml_type_names() -> list[str]:
    from gguf.constants import GGMLQuantizationType

    return [t.name for t in GGMLQuantizationType]


class ShapeError(ValueError):
    """The header or manifest lacks something Law 4 needs; the message names what and where.

    `key` is the metadata key at fault (without the architecture prefix), or for a tensor the
    part at fault ("shape" or "type"), where one is known.
    """

    def __init__(self, message: str, key: Optional[str] = None):
        super().__init__(message)
        self.key = key


# Sanity caps on what Law 4 reads. No published model comes near them (~10^2 layers, ~10^2 heads,
# widths ~10^4, ~10^3 experts, tensors ~10^10 elements); a value past one is a corrupt or hostile
# header, and pricing it would print nonsense or exhaust memory expanding per-layer lists.
MAX_LAYERS = 100_000
MAX_HEADS = 10 ** 7
MAX_WIDTH = 10 ** 7  # embedding width, head sizes, latent rank, rope dims
MAX_VOCAB = 2 ** 31
MAX_EXPERTS = 10 ** 6
MAX_POSITIONS = 2 ** 32  # a sliding window
MAX_TENSOR_ELEMENTS = 2 ** 48

# The metadata Law 4 reads: (what it is, low, high). "count": one integer. "per_layer": one integer
# or an array of block_count integers. "flags": one integer or an array of block_count booleans.
# A low of 0 where llama.cpp writes 0 for "none" (a Mamba's head_count, a window of 0).
METADATA_RULES: dict[str, tuple[str, int, int]] = {
    "block_count": ("count", 1, MAX_LAYERS),
    "embedding_length": ("count", 1, MAX_WIDTH),
    "vocab_size": ("count", 1, MAX_VOCAB),
    "expert_count": ("count", 0, MAX_EXPERTS),
    "expert_used_count": ("count", 0, MAX_EXPERTS),
    "attention.head_count": ("per_layer", 0, MAX_HEADS),
    "attention.head_count_kv": ("per_layer", 0, MAX_HEADS),
    "attention.key_length": ("count", 0, MAX_WIDTH),
    "attention.value_length": ("count", 0, MAX_WIDTH),
    "attention.key_length_mla": ("count", 0, MAX_WIDTH),
    "attention.value_length_mla": ("count", 0, MAX_WIDTH),
    "attention.kv_lora_rank": ("count", 0, MAX_WIDTH),
    "rope.dimension_count": ("count", 0, MAX_WIDTH),
    "attention.sliding_window": ("count", 0, MAX_POSITIONS),
    "attention.sliding_window_pattern": ("flags", 0, MAX_LAYERS),
    "attention.recurrent_layers": ("flags", 0, 1),
    "full_attention_interval": ("count", 0, MAX_LAYERS),
}


def _shown(value: Any) -> str:
    """A metadata value as an error quotes it: its type where that is the fault."""
    if isinstance(value, bool):
        return f"the boolean {value}"
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    if isinstance(value, float):
        return f"the float {value:g}"
    if isinstance(value, (list, tuple)):
        return f"an array of {len(value)}"
    if isinstance(value, int):
        return str(value)
    return f"a {type(value).__name__}"


def _integer(value: Any, lo: int, hi: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi


def check_metadata(meta: dict[str, Any]) -> None:
    """The metadata Law 4 reads has the right type, a sane range, and per-layer arrays of
    block_count entries (as llama.cpp requires); ShapeError(key=...) names the first fault."""
    n_layer = meta.get("block_count")
    for key, (kind, lo, hi) in METADATA_RULES.items():
        if key not in meta:
            continue
        value = meta[key]
        if _integer(value, lo, hi):
            continue
        need = f"an integer from {lo} to {hi:,}"
        if kind != "count" and hasattr(value, "length"):  # gguf_header.SkippedArray
            raise ShapeError(f"is an array of {value.length}, longer than the header scanner keeps; "
                             f"Law 4 cannot read it per layer", key=key)
        if kind == "count" or not isinstance(value, (list, tuple)):
            also = " or one per layer" if kind != "count" else ""
            raise ShapeError(f"must be {need}{also}, not {_shown(value)}", key=key)
        if n_layer is None:
            raise ShapeError(f"is a per-layer array of {len(value)}, but there is no block_count "
                             f"to match it", key=key)
        if len(value) != n_layer:
            raise ShapeError(f"has {len(value)} entries, but block_count is {n_layer}: a per-layer "
                             f"array has one entry per layer", key=key)
        for i, item in enumerate(value):
            ok = (isinstance(item, bool) or _integer(item, 0, 1)) if kind == "flags" \
                else _integer(item, lo, hi)
            if not ok:
                want = "a boolean" if kind == "flags" else need
                raise ShapeError(f"entry {i} must be {want}, not {_shown(item)}", key=key)
    used, count = meta.get("expert_used_count"), meta.get("expert_count")
    if used and count is not None and used > count:
        raise ShapeError(f"is {used}, more than expert_count {count}", key="expert_used_count")


def check_tensor(shape: tuple[int, ...], type_name: str) -> int:
    """A tensor's element count, once its dimensions are sane (each at least 1, fewer than
    MAX_TENSOR_ELEMENTS in all) and its rows (ne0) fill whole blocks of its ggml type."""
    if not shape:
        raise ShapeError("has no dimensions", key="shape")
    for i, d in enumerate(shape):
        if d < 1:
            raise ShapeError(f"dimension ne{i} is {d}; every dimension is at least 1", key="shape")
    n = math.prod(shape)
    if n > MAX_TENSOR_ELEMENTS:
        raise ShapeError(f"has {n:.3g} elements (shape {list(shape)}); no real tensor has "
                         f"more than 2^48 (2.8e14): the file is corrupt", key="shape")
    try:
        block = ggml_sizes(type_name)[0]
    except KeyError:
        known = ", ".join(ggml_type_names())
        raise ShapeError(f"unknown ggml type {type_name!r} (known: {known})", key="type") from None
    if shape[0] % block:
        # key "type": the shape is the model's, the type is what cannot hold it
        raise ShapeError(f"row length (ne0) {shape[0]} does not fill whole {type_name.upper()} blocks: ggml "
                         f"stores {type_name.upper()} rows in multiples of {block} elements", key="type")
    return n
