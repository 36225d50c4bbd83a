"""The engine's own codecs, applied to a numpy array: quantize with ggml, decode with gguf.

llama-quantize quantizes each tensor with one call of ggml's public `ggml_quantize_chunk`; we call
that same function of the same llama.cpp build (its libggml-base shared library, through ctypes),
so a rel-MSE here is what llama-quantize would store, without writing a model file per codec.
Decoding goes through gguf's independent numpy decoders (Q1_0, which gguf 0.19 cannot decode, has
a decoder here: sign bits times one scale per 128 weights, as ggml's dequantize_row_q1_0).

Types that ggml refuses to quantize without an importance matrix (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS)
get a uniform one: every column weighs the same, which is the data-free case the law is about.
"""
from __future__ import annotations

import ctypes
import sys
from pathlib import Path
from typing import Optional

import numpy as np
from gguf import quants
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

import lawbench
from lawbench_law2.theory import codec_type

_LIBRARY = {"darwin": "libggml-base.dylib", "win32": "ggml-base.dll"}.get(sys.platform, "libggml-base.so")


class Ggml:
    """ggml's quantizers from one llama.cpp build (`bin_dir`: where its tools and libraries are)."""

    def __init__(self, bin_dir: Path):
        path = Path(bin_dir) / _LIBRARY
        if not path.is_file():
            raise lawbench.EngineError(
                f"{path} is missing: this llama.cpp build has no shared ggml library to quantize with "
                f"(law2 needs a build with BUILD_SHARED_LIBS=ON, llama.cpp's default)")
        try:
            lib = ctypes.CDLL(str(path))
            lib.ggml_quantize_chunk.restype = ctypes.c_size_t
            lib.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                                ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
            lib.ggml_quantize_requires_imatrix.restype = ctypes.c_bool
            lib.ggml_quantize_requires_imatrix.argtypes = [ctypes.c_int]
            lib.ggml_row_size.restype = ctypes.c_size_t
            lib.ggml_row_size.argtypes = [ctypes.c_int, ctypes.c_int64]
        except (OSError, AttributeError) as exc:
            raise lawbench.EngineError(f"cannot use {path} as ggml: {exc}") from None
        self.path = path
        self._lib = lib

    def quantize(self, rows: np.ndarray, codec: str) -> np.ndarray:
        """Quantize a 2-D float array row by row; one row of bytes per input row."""
        t = codec_type(codec)
        x = np.ascontiguousarray(rows, dtype=np.float32)
        if x.ndim != 2:
            raise ValueError(f"quantize wants a 2-D array of rows, not shape {x.shape}")
        nrows, n_per_row = x.shape
        block = GGML_QUANT_SIZES[t][0]
        if n_per_row % block:
            raise lawbench.NotApplicable(f"{t.name} quantizes rows in blocks of {block} weights; these rows "
                                         f"hold {n_per_row}")
        row_size = self._lib.ggml_row_size(int(t), n_per_row)
        out = np.zeros((nrows, row_size), dtype=np.uint8)
        imatrix: Optional[np.ndarray] = None
        if self._lib.ggml_quantize_requires_imatrix(int(t)):
            imatrix = np.ones(n_per_row, dtype=np.float32)
        wrote = self._lib.ggml_quantize_chunk(int(t), x.ctypes.data, out.ctypes.data, 0, nrows, n_per_row,
                                              None if imatrix is None else imatrix.ctypes.data)
        if wrote != out.size:
            raise lawbench.EngineError(f"ggml_quantize_chunk({t.name}) wrote {wrote} bytes, expected {out.size}")
        return out

    def roundtrip(self, rows: np.ndarray, codec: str) -> np.ndarray:
        """What the engine would compute with: rows quantized to `codec`, then decoded to float32."""
        return dequantize(self.quantize(rows, codec), codec)


def dequantize(data: np.ndarray, codec: str) -> np.ndarray:
    t = codec_type(codec)
    if t is GGMLQuantizationType.Q1_0:
        return _dequantize_q1_0(data)
    return quants.dequantize(data, t).astype(np.float32, copy=False)


def _dequantize_q1_0(data: np.ndarray) -> np.ndarray:
    # block_q1_0: one fp16 scale d, then 128 sign bits (bit j of byte j/8, LSB first): +d or -d.
    size = GGML_QUANT_SIZES[GGMLQuantizationType.Q1_0][1]
    rows = data.reshape(data.shape[0], -1, size)
    d = rows[..., :2].copy().view(np.float16).astype(np.float32)
    bits = np.unpackbits(rows[..., 2:], axis=-1, bitorder="little").astype(np.float32)
    return (d * (2.0 * bits - 1.0)).reshape(data.shape[0], -1)
