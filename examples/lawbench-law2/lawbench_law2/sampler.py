"""Samplers: one real tensor per sample (codec measurements), or one header reading per sample."""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Optional

import numpy as np

import lawbench
from lawbench_law2 import tensors
from lawbench_law2.theory import bits_per_weight, coding_gain_db, gaussian_floor

BLOCK = 256  # the shuffle of coding-gain stays inside ggml's largest block (K- and I-quant super-blocks)


def rel_mse(rows: np.ndarray, decoded: np.ndarray) -> float:
    x = rows.astype(np.float64)
    return float(((x - decoded) ** 2).sum() / (x ** 2).sum())


def gaussian_like(rows: np.ndarray, seed: int) -> np.ndarray:
    """I.i.d. standard Gaussian rows of the same shape: the source the codec's own floor is measured
    on (rel-MSE is scale-free, so the variance does not matter). Seeded: a re-run is identical."""
    return np.random.default_rng(seed).standard_normal(rows.shape).astype(np.float32)


def gaussian_rel_mse(rows: np.ndarray, codec: str, ggml: Any, seed: int) -> float:
    """The codec's rel-MSE on i.i.d. Gaussian rows shaped like `rows`: its own floor."""
    reference = gaussian_like(rows, seed)
    return rel_mse(reference, ggml.roundtrip(reference, codec))


def shuffled_within_blocks(rows: np.ndarray, seed: int) -> np.ndarray:
    """The same weights in each 256-weight block, in a random order: the block's scale and its
    value distribution survive, any structure between neighbouring weights does not."""
    blocks = rows.reshape(-1, BLOCK)
    rng = np.random.default_rng(seed)
    return np.take_along_axis(blocks, rng.random(blocks.shape).argsort(axis=1), axis=1).reshape(rows.shape)


class TensorSampler:
    """Sample i: the i-th selected tensor (depth-spread order), `rows` rows of it, quantized with
    the case's codec by the engine's ggml. Deterministic: a re-run gives the same numbers."""

    def __init__(self, path: Path, case: Any, ggml: Any):
        self.path, self.case, self.ggml = Path(path), case, ggml
        self.selected = tensors.select(self.path, case.tensors, case.source_types)
        self.log_scale = case.measure != "coding-gain"  # a gain in dB may be negative
        self._next = 0
        self._last = None
        self.readings: list[dict[str, Any]] = []

    def draw(self, n: int) -> list:
        out = []
        for _ in range(n):
            if self._next >= len(self.selected):
                break  # every tensor has been measured once: more samples would repeat them
            info = self.selected[self._next]
            self._next += 1
            t0 = time.monotonic()
            tensor = tensors.read_rows(self.path, info, self.case.rows)
            codec = self.case.codec
            value_rel = rel_mse(tensor.rows, self.ggml.roundtrip(tensor.rows, codec))
            raw: dict[str, Any] = {"tensor": tensor.name, "stored_as": tensor.stored_as,
                                   "rows": int(tensor.rows.shape[0]), "n_per_row": int(tensor.rows.shape[1]),
                                   "codec": codec, "rate_bits": bits_per_weight(codec), "rel_mse": value_rel,
                                   "gaussian_floor": gaussian_floor(bits_per_weight(codec))}
            value = value_rel
            if self.case.measure == "rel-mse-vs-gaussian":
                value_gaussian = gaussian_rel_mse(tensor.rows, codec, self.ggml, seed=self._next)
                value = value_rel / value_gaussian
                raw.update(rel_mse_gaussian=value_gaussian, over_gaussian=value)
            if self.case.measure == "coding-gain":
                shuffled = shuffled_within_blocks(tensor.rows, seed=self._next)
                value_shuffled = rel_mse(shuffled, self.ggml.roundtrip(shuffled, codec))
                value = coding_gain_db(value_shuffled, value_rel)
                raw.update(rel_mse_shuffled=value_shuffled, coding_gain_db=value)
            raw["seconds"] = round(time.monotonic() - t0, 3)
            out.append(lawbench.Sample(value=value, predecessor=self._last, raw=raw))
            self._last = tensor.name
            self.readings.append(raw)
        return out

    def statistic(self, samples: list) -> list:
        return [s.value for s in samples]

    def environment(self) -> dict:
        return {"model_file": str(self.path), "ggml": str(self.ggml.path),
                "tensors_available": len(self.selected)}

    def protocol(self) -> dict:
        return {"kind": "law2 tensor codec", "sampling_unit": "one real tensor",
                "measure": self.case.measure, "codec": self.case.codec, "rows_per_tensor": self.case.rows,
                "tensors": self.case.tensors, "source_types": self.case.source_types,
                "quantizer": "ggml_quantize_chunk (uniform importance where ggml requires one)",
                "decoder": "gguf.quants.dequantize", "readings": self.readings}


def file_bits_per_weight(path: Path) -> float:
    """All tensor bytes x 8 / all weights, from the GGUF header (norms and embeddings included)."""
    header = lawbench.read_gguf_header(path)
    weights = sum(t.n_elements for t in header.tensors)
    return header.total_tensor_bytes * 8 / weights


class HeaderReading:
    """A GGUF's bits per weight, its size in GB (1e9 bytes), or the bits per weight of one file over
    another's (`over`): header reads, so a file whose tensor data is absent still prices."""

    log_scale = True

    def __init__(self, path: Path, measure: str, over: Optional[Path] = None):
        self.path, self.measure = Path(path), measure
        self.over = Path(over) if over is not None else None

    def _read(self) -> float:
        if self.measure == "file-gb":
            lawbench.read_gguf_header(self.path)  # a file that is not a GGUF is refused, not sized
            return os.path.getsize(self.path) / 1e9
        if self.measure == "bits-per-weight-ratio":
            assert self.over is not None
            return file_bits_per_weight(self.path) / file_bits_per_weight(self.over)
        return file_bits_per_weight(self.path)

    def draw(self, n: int) -> list:
        return [lawbench.Sample(value=self._read(), predecessor="header") for _ in range(n)]

    def statistic(self, samples: list) -> list:
        return [s.value for s in samples]

    def environment(self) -> dict:
        return {"model_file": str(self.path), **({"over_model_file": str(self.over)} if self.over else {})}

    def protocol(self) -> dict:
        return {"kind": "law2 header reading", "measure": self.measure}
