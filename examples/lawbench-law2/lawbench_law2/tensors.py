"""Real tensors from real GGUF files: chosen by name and stored type, read without GGUFReader.

lawbench's header scanner gives each tensor's offset and type in milliseconds (GGUFReader decodes
Gemma-3's 262k tokenizer strings first: ~18 s); the tensor's bytes are then mapped from the file and
decoded with gguf. A tensor stored quantized carries its own rounding: re-quantizing it at a rate
near or above its stored one measures the two grids' overlap, not the codec, so a case may keep
only tensors stored well above the rates it measures (`source_types`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
from gguf import quants
from gguf.constants import GGMLQuantizationType

import lawbench


@dataclass(frozen=True)
class RealTensor:
    name: str
    stored_as: str  # its ggml type in the file: "Q6_K"
    rows: np.ndarray  # float32, one row per output (ggml's ne1), n_per_row = ne0


def select(path: Path, pattern: str, source_types: Sequence[str] = ()) -> list:
    """The header entries whose name matches `pattern` (whole name) and, if given, whose stored type
    is one of `source_types`, in a depth-spread order (first, last, middle, …)."""
    header = lawbench.read_gguf_header(path)
    wanted = {t.upper() for t in source_types}
    found = [t for t in header.tensors
             if re.fullmatch(pattern, t.name) and (not wanted or t.type_name in wanted)]
    if not found:
        stored = sorted({t.type_name for t in header.tensors if re.fullmatch(pattern, t.name)})
        raise lawbench.NotApplicable(
            f"{path.name} has no tensor matching {pattern!r}"
            + (f" stored as {', '.join(sorted(wanted))} (matching tensors are stored as {', '.join(stored)})"
               if wanted and stored else ""))
    found.sort(key=lambda t: _layer(t.name))
    return [found[i] for i in spread_order(len(found))]


def read_rows(path: Path, info, n_rows: int) -> RealTensor:
    """`n_rows` rows of one tensor, evenly spaced over its outputs, decoded to float32."""
    header = lawbench.read_gguf_header(path)
    if len(info.shape) != 2:
        raise lawbench.NotApplicable(f"{info.name} has shape {info.shape}: law2 measures matrices")
    n_per_row, total_rows = info.shape
    qtype = GGMLQuantizationType(info.ggml_type)
    raw = np.memmap(path, dtype=np.uint8, mode="r", offset=header.data_offset + info.offset,
                    shape=(info.n_bytes,))
    row_bytes = info.n_bytes // total_rows
    pick = np.unique(np.linspace(0, total_rows - 1, min(n_rows, total_rows)).round().astype(int))
    chosen = np.stack([raw[i * row_bytes:(i + 1) * row_bytes] for i in pick])
    rows = quants.dequantize(chosen, qtype).astype(np.float32).reshape(len(pick), n_per_row)
    return RealTensor(name=info.name, stored_as=info.type_name, rows=rows)


def read_expert_rows(path: Path, info, n_rows: int) -> list:
    """`n_rows` rows of each routed expert in one 3-D expert tensor (llama.cpp's ffn_*_exps:
    ne = [n_per_row, rows per expert, n_expert]), each decoded to float32: one array per expert,
    in expert order. The same evenly spaced row indices are read in every expert."""
    header = lawbench.read_gguf_header(path)
    if len(info.shape) != 3:
        raise lawbench.NotApplicable(f"{info.name} has shape {info.shape}: an expert census reads "
                                     "3-D expert tensors (ffn_*_exps)")
    n_per_row, rows_per_expert, n_expert = info.shape
    qtype = GGMLQuantizationType(info.ggml_type)
    raw = np.memmap(path, dtype=np.uint8, mode="r", offset=header.data_offset + info.offset,
                    shape=(info.n_bytes,))
    expert_bytes = info.n_bytes // n_expert
    row_bytes = expert_bytes // rows_per_expert
    pick = np.unique(np.linspace(0, rows_per_expert - 1, min(n_rows, rows_per_expert)).round().astype(int))
    experts = []
    for e in range(n_expert):
        base = e * expert_bytes
        chosen = np.stack([raw[base + i * row_bytes:base + (i + 1) * row_bytes] for i in pick])
        experts.append(quants.dequantize(chosen, qtype).astype(np.float32).reshape(len(pick), n_per_row))
    return experts


def spread_order(n: int) -> list:
    """0, n-1, then the midpoints of the widest gaps: a few samples already span the depth."""
    if n <= 2:
        return list(range(n))
    order, seen = [0, n - 1], {0, n - 1}
    gaps = [(0, n - 1)]
    while len(order) < n:
        gaps.sort(key=lambda g: (-(g[1] - g[0]), g[0]))
        lo, hi = gaps.pop(0)
        mid = (lo + hi) // 2
        if mid not in seen:
            order.append(mid)
            seen.add(mid)
        if mid - lo > 1:
            gaps.append((lo, mid))
        if hi - mid > 1:
            gaps.append((mid, hi))
    return order


def _layer(name: str) -> tuple:
    m = re.search(r"blk\.(\d+)\.", name)
    return (int(m.group(1)) if m else -1, name)
