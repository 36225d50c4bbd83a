"""Synthetic GGUF models of any shape: a llama-architecture file with random weights.

Random weights are honest for *speed* only: decode and prefill time is a function of the bytes read
and the kernels that run, which depend on shapes and formats, not on what the numbers mean. They are
never honest for perplexity or quality — never anchor a quality claim on a synthetic model.

``build_synthetic`` writes an F16 GGUF with gguf's ``GGUFWriter`` (streamed one tensor at a time, so
a 400M-parameter model never sits in memory twice), with a small SentencePiece-style vocabulary
(byte fallback, so any text tokenizes), then requantizes it with llama-quantize to the spec's
``weight_type``. Files are cached by a hash of the spec and written atomically (temp + rename).
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable, Literal, Optional

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from lawbench.core.errors import LawbenchError
from lawbench.core.models import Id
from lawbench.core.store import model_stamp, repairs

# Bump when the file this module writes changes, so cached files are rebuilt.
GENERATOR_VERSION = 1

# llama-quantize type name -> (row multiple it needs, gguf LlamaFileType name it records).
# Types that need an importance matrix (IQ1_*, IQ2_*, IQ3_XXS, Q2_K_S: llama-quant.cpp's
# tensor_requires_imatrix) are left out on purpose:
# an imatrix of random weights would be meaningless.
WEIGHT_TYPES: dict[str, tuple[int, str]] = {
    "F32": (1, "ALL_F32"), "F16": (1, "MOSTLY_F16"), "BF16": (1, "MOSTLY_BF16"),
    "Q8_0": (32, "MOSTLY_Q8_0"), "Q4_0": (32, "MOSTLY_Q4_0"), "Q4_1": (32, "MOSTLY_Q4_1"),
    "Q5_0": (32, "MOSTLY_Q5_0"), "Q5_1": (32, "MOSTLY_Q5_1"), "IQ4_NL": (32, "MOSTLY_IQ4_NL"),
    "Q2_K": (256, "MOSTLY_Q2_K"), "Q3_K_S": (256, "MOSTLY_Q3_K_S"),
    "Q3_K_M": (256, "MOSTLY_Q3_K_M"), "Q3_K_L": (256, "MOSTLY_Q3_K_L"),
    "Q4_K_S": (256, "MOSTLY_Q4_K_S"), "Q4_K_M": (256, "MOSTLY_Q4_K_M"),
    "Q5_K_S": (256, "MOSTLY_Q5_K_S"), "Q5_K_M": (256, "MOSTLY_Q5_K_M"),
    "Q6_K": (256, "MOSTLY_Q6_K"), "IQ4_XS": (256, "MOSTLY_IQ4_XS"),
    # IQ3_S: a codebook (grid) format, IQ3_XS's default tensor type (llama-quant.cpp), made without
    # an importance matrix. IQ3_XS itself puts attn_q/k and mid-depth ffn_gate/up in IQ3_XXS, which
    # needs one, so IQ3_S stands for the register's codebook IQ formats on the synthetic ladder.
    "IQ3_S": (256, "MOSTLY_IQ3_S"),
    "TQ1_0": (256, "MOSTLY_TQ1_0"), "TQ2_0": (256, "MOSTLY_TQ2_0"),
}
_N_SPECIAL, _N_BYTES = 3, 256  # <unk> <s> </s>, then <0x00>..<0xFF>

Quantize = Callable[[Path, Path, str], None]


class SyntheticSpec(BaseModel):
    """The shape of one synthetic model. ``n_embd`` and ``n_ff`` are the weight rows' lengths."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: Id
    architecture: Literal["llama"] = "llama"
    n_layer: int = Field(gt=0)
    n_embd: int = Field(gt=0)
    n_ff: int = Field(gt=0)
    n_head: int = Field(gt=0)
    n_head_kv: int = Field(gt=0)
    n_vocab: int = Field(ge=_N_SPECIAL + _N_BYTES + 64)
    context_length: int = Field(default=4096, gt=0)
    weight_type: str = "F16"
    seed: int = Field(default=0, ge=0)
    # A mixture of experts (llama architecture: llama.expert_count / expert_used_count, per layer a
    # router ffn_gate_inp and stacked ffn_{gate,up,down}_exps in place of the dense FFN): 0 is dense.
    n_expert: int = Field(default=0, ge=0)
    n_expert_used: int = Field(default=0, ge=0)

    @field_validator("weight_type")
    @classmethod
    def _known_type(cls, v: str) -> str:
        if v not in WEIGHT_TYPES:
            raise ValueError(f"weight_type {v!r} is not one of {', '.join(WEIGHT_TYPES)}")
        return v

    @model_validator(mode="after")
    def _shapes_fit(self) -> "SyntheticSpec":
        where = f"synthetic model {self.id!r}"
        if self.n_embd % self.n_head:
            raise ValueError(f"{where}: field n_embd = {self.n_embd} is not a multiple of n_head = {self.n_head}")
        if self.n_head % self.n_head_kv:
            raise ValueError(f"{where}: field n_head = {self.n_head} is not a multiple of n_head_kv = {self.n_head_kv}")
        if (self.n_embd // self.n_head) % 2:
            raise ValueError(f"{where}: field n_embd / n_head = {self.n_embd // self.n_head} must be even (RoPE)")
        if (self.n_expert == 0) != (self.n_expert_used == 0) or self.n_expert_used > self.n_expert:
            raise ValueError(f"{where}: field n_expert_used = {self.n_expert_used} must be between 1 and "
                             f"n_expert = {self.n_expert} for a mixture of experts, or both 0 for a dense model")
        block = WEIGHT_TYPES[self.weight_type][0]
        for name in ("n_embd", "n_ff"):
            value = getattr(self, name)
            if value % block:
                kind = "K-quant rows are 256 wide" if block == 256 else f"its blocks are {block} wide"
                raise ValueError(f"{where}: field {name} = {value} is not a multiple of {block}, "
                                 f"which weight_type {self.weight_type} needs ({kind})")
        return self

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    def n_params(self) -> int:
        """Parameter count (untied output, like most llama models)."""
        kv = self.n_head_kv * self.head_dim
        ffn = 3 * self.n_embd * self.n_ff * max(1, self.n_expert) + self.n_embd * self.n_expert  # + router
        layer = 2 * self.n_embd * self.n_embd + 2 * self.n_embd * kv + ffn
        return self.n_layer * (layer + 2 * self.n_embd) + 2 * self.n_vocab * self.n_embd + self.n_embd

    def content(self) -> dict[str, Any]:
        """Everything that changes the file's bytes. Not the id: two ids of one shape share a file.
        A dense spec leaves the expert fields out, so its digest (and cached file) is the one it had
        before experts existed."""
        dense = {"n_expert", "n_expert_used"} if not self.n_expert else set()
        return self.model_dump(exclude={"id", *dense})

    def digest(self) -> str:
        basis = json.dumps({"spec": self.content(), "generator": GENERATOR_VERSION}, sort_keys=True)
        return hashlib.sha256(basis.encode()).hexdigest()[:16]


# --------------------------------------------------------------------------- writing


def _vocab(n_vocab: int) -> tuple[list[str], list[float], list[int]]:
    """SentencePiece-style vocabulary: specials, 256 byte tokens, single characters, filler words."""
    from gguf import TokenType

    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [TokenType.UNKNOWN, TokenType.CONTROL, TokenType.CONTROL] + [TokenType.BYTE] * 256
    pieces = ["\u2581"] + [chr(c) for c in range(33, 127)] + ["\u2581" + chr(c) for c in range(33, 127)]
    pieces += [f"\u2581w{i}" for i in range(n_vocab)]  # unique filler, trimmed below
    tokens += pieces[: n_vocab - len(tokens)]
    types += [TokenType.NORMAL] * (n_vocab - len(types))
    scores = [0.0] * (_N_SPECIAL + _N_BYTES) + [-float(i) for i in range(n_vocab - _N_SPECIAL - _N_BYTES)]
    return tokens, scores, [int(t) for t in types]


def add_tokenizer(w: Any, n_vocab: int) -> None:
    """A llama SPM tokenizer of ``n_vocab`` pieces (specials, bytes, fillers) on a GGUFWriter:
    what llama.cpp needs to load a model with random weights, shared by every synthetic writer."""
    tokens, scores, types = _vocab(n_vocab)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)


def _tensors(spec: SyntheticSpec) -> list[tuple[str, tuple[int, ...], type]]:
    """(name, numpy shape, dtype) of every tensor, in file order. numpy shape = (rows, row length)."""
    e, ff, kv = spec.n_embd, spec.n_ff, spec.n_head_kv * spec.head_dim
    out: list[tuple[str, tuple[int, ...], type]] = [("token_embd.weight", (spec.n_vocab, e), np.float16)]
    for i in range(spec.n_layer):
        b = f"blk.{i}"
        out += [(f"{b}.attn_norm.weight", (e,), np.float32),
                (f"{b}.attn_q.weight", (e, e), np.float16),
                (f"{b}.attn_k.weight", (kv, e), np.float16),
                (f"{b}.attn_v.weight", (kv, e), np.float16),
                (f"{b}.attn_output.weight", (e, e), np.float16),
                (f"{b}.ffn_norm.weight", (e,), np.float32)]
        if spec.n_expert:  # the router stays F32 (llama-quantize never quantizes ffn_gate_inp)
            n = spec.n_expert
            out += [(f"{b}.ffn_gate_inp.weight", (n, e), np.float32),
                    (f"{b}.ffn_gate_exps.weight", (n, ff, e), np.float16),
                    (f"{b}.ffn_up_exps.weight", (n, ff, e), np.float16),
                    (f"{b}.ffn_down_exps.weight", (n, e, ff), np.float16)]
        else:
            out += [(f"{b}.ffn_gate.weight", (ff, e), np.float16),
                    (f"{b}.ffn_up.weight", (ff, e), np.float16),
                    (f"{b}.ffn_down.weight", (e, ff), np.float16)]
    out += [("output_norm.weight", (e,), np.float32), ("output.weight", (spec.n_vocab, e), np.float16)]
    return out


def write_f16(spec: SyntheticSpec, path: Path) -> None:
    """Write the F16 model to ``path`` (not atomic by itself; callers write to a temp name)."""
    import gguf

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name(f"lawbench-synthetic-{spec.digest()}")
    w.add_description("lawbench synthetic model: random weights, honest for speed only")
    w.add_string("lawbench.synthetic.spec", json.dumps(spec.content(), sort_keys=True))
    w.add_context_length(spec.context_length)
    w.add_embedding_length(spec.n_embd)
    w.add_block_count(spec.n_layer)
    w.add_feed_forward_length(spec.n_ff)
    w.add_head_count(spec.n_head)
    w.add_head_count_kv(spec.n_head_kv)
    w.add_rope_dimension_count(spec.head_dim)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    if spec.n_expert:
        w.add_expert_count(spec.n_expert)
        w.add_expert_used_count(spec.n_expert_used)
    w.add_vocab_size(spec.n_vocab)
    w.add_file_type(int(gguf.LlamaFileType.MOSTLY_F16))
    add_tokenizer(w, spec.n_vocab)
    w.add_add_bos_token(True)
    layout = _tensors(spec)
    for name, shape, dtype in layout:
        w.add_tensor_info(name, shape, np.dtype(dtype), int(np.prod(shape)) * np.dtype(dtype).itemsize)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    rng = np.random.default_rng(spec.seed)
    for name, shape, dtype in layout:
        if name.endswith("norm.weight"):  # RMS-norm gains: ones, like a freshly initialised model
            w.write_tensor_data(np.ones(shape, dtype=np.float32))
        else:  # std 0.02 keeps activations finite; a router of equal rows would tie every expert
            w.write_tensor_data((rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(dtype))
    w.close()


def file_type_of(path: Path) -> Optional[int]:
    """``general.file_type`` of a GGUF file, which llama-quantize sets to the type it produced."""
    from gguf import GGUFReader

    field = GGUFReader(str(path)).get_field("general.file_type")
    return int(field.parts[field.data[0]][0]) if field is not None else None


def _atomic(dst: Path, make: Callable[[Path], None]) -> None:
    tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
    try:
        make(tmp)
        os.replace(tmp, dst)
    finally:
        if tmp.exists():
            tmp.unlink()


def build_synthetic(spec: SyntheticSpec, *, cache_dir: Path,
                    quantize: Optional[Quantize] = None) -> Path:
    """The GGUF file for ``spec`` (built once, then taken from ``cache_dir``).

    :param quantize: ``quantize(src, dst, type_name)`` — e.g. a closure over
        :func:`lawbench.core.engines.bench.quantize`; needed for every weight_type but F16.
    :raises LawbenchError: no quantizer for a quantized type, or the quantizer produced another type.
    """
    import gguf

    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    dst = cache_dir / f"synthetic-{spec.digest()}-{spec.weight_type}.gguf"
    if dst.is_file():
        why = model_stamp.problem(dst)
        if why is None:
            return dst
        aside = model_stamp.set_aside(dst)
        print(f"lawbench: warning: the cached synthetic model {dst} is not the file lawbench made ({why}); "
              f"it is set aside in {aside.name} and made again", file=sys.stderr, flush=True)
        repairs.note("synthetic model", dst, why, aside)
    if spec.weight_type == "F16":
        _atomic(dst, lambda tmp: write_f16(spec, tmp))
        model_stamp.stamp(dst)
        return dst
    if quantize is None:
        raise LawbenchError(f"synthetic model {spec.id!r}: weight_type {spec.weight_type} needs "
                            "llama-quantize, but no quantize function was given")
    base = build_synthetic(spec.model_copy(update={"weight_type": "F16"}), cache_dir=cache_dir)
    want = int(getattr(gguf.LlamaFileType, WEIGHT_TYPES[spec.weight_type][1]))

    def requantize(tmp: Path) -> None:
        quantize(base, tmp, spec.weight_type)
        got = file_type_of(tmp) if tmp.is_file() else None
        if got != want:  # a quantizer that silently wrote something else must not be cached
            raise LawbenchError(f"synthetic model {spec.id!r}: the quantizer wrote file type {got}, "
                                f"not {spec.weight_type} ({want}) to {tmp}")

    _atomic(dst, requantize)
    model_stamp.stamp(dst)
    return dst
