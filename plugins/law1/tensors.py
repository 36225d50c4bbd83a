"""Real tensors out of real GGUF files, dequantized with gguf.quants.

The header comes from lawbench's fast scanner (GGUFReader spends seconds decoding a 262k-entry
tokenizer that Law 1 never reads); the data is memory-mapped at the scanner's offsets and handed to
gguf.quants.dequantize. A tensor comes back as float32 (rows, cols) = (ne1, ne0).

What an already-quantized source does to the measurement: the dequantized tensor lies exactly on
its source's grid (Q4_1: 16 levels per block of 32 inputs with their own scale and minimum). A
re-quantization in the native basis that shares those blocks reproduces that grid and loses
nothing, which no rotation can match; so the native basis is favoured wherever the new grid
nests the old one (4 bits, groups of 32 on a Q4_1 source). The measurement therefore groups by 64
or more inputs (two source blocks, two scales: not nested), reports the source type of every
tensor, and measures the bias directly (native 4-bit error on the source's own blocks).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
from gguf import GGMLQuantizationType
from gguf.quants import dequantize

from lawbench import DataError, GGUFHeader, read_gguf_header as read_header


@dataclass(frozen=True)
class RealTensor:
    name: str
    source_type: str  # the GGUF type it was stored in ("Q4_1", "Q6_K", …)
    weights: np.ndarray  # float32 (rows, cols)


class TensorFile:
    """One GGUF file's tensors, read on demand."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.header: GGUFHeader = read_header(self.path)
        self._by_name = {t.name: t for t in self.header.tensors}
        self._map: Optional[np.memmap] = None

    def names(self) -> list[str]:
        return [t.name for t in self.header.tensors]

    def layers(self) -> int:
        return int(self.header.arch("block_count"))

    def read(self, name: str) -> RealTensor:
        info = self._by_name.get(name)
        if info is None:
            raise DataError(f"{self.path}: no tensor {name!r} in this GGUF")
        if self._map is None:
            self._map = np.memmap(self.path, dtype=np.uint8, mode="r")
        start = self.header.data_offset + info.offset
        raw = np.asarray(self._map[start:start + info.n_bytes])
        qtype = GGMLQuantizationType(info.ggml_type)
        shape = tuple(reversed(info.shape))  # numpy order: (ne1, ne0)
        if qtype == GGMLQuantizationType.F32:
            data = raw.view(np.float32).reshape(shape)
        elif qtype == GGMLQuantizationType.F16:
            data = raw.view(np.float16).reshape(shape)
        else:
            # dequantize wants rows of blocks; a 3-D tensor (MLA's per-head attn_k_b) comes back whole
            data = dequantize(raw.reshape(shape[0], -1), qtype).reshape(shape)
        return RealTensor(name, info.type_name, np.ascontiguousarray(data, dtype=np.float32))

    def input_scale(self, name: str) -> Optional[np.ndarray]:
        """The diagonal second moment of a tensor's inputs, where the architecture fixes it.

        attn_q/k/v read the attention norm's output and ffn_gate/up the FFN norm's: RMSNorm makes
        every token's input x_hat unit-RMS, then multiplies by the stored gain g, so
        E[x_j^2] = g_j^2 E[x_hat_j^2]. Taking the normalized stream as isotropic leaves g^2: the
        layer's own input statistics, read from the file. Other tensors (attn_output, ffn_down)
        read un-normalized activations the file does not describe: None.
        (Gemma's GGUF stores the gain with its +1 already added by the converter.)
        """
        parts = name.split(".")
        if len(parts) < 4 or parts[0] != "blk":
            return None
        role = parts[2]
        norm = {"attn_q": "attn_norm", "attn_k": "attn_norm", "attn_v": "attn_norm",
                "ffn_gate": "ffn_norm", "ffn_up": "ffn_norm"}.get(role)
        if norm is None:
            return None
        g = self.read(f"blk.{parts[1]}.{norm}.weight").weights.astype(np.float64).ravel()
        return g ** 2
