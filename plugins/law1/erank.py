"""The effective-rank reading of Law 1 (the case and why: rank.py): the arithmetic on a file's
weights, MLA's composed K/V map, and core's Sampler that reads it."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Optional

import numpy as np

from lawbench import ANCHOR_FILE, Anchor, DataError, Resources, Sample
from lawbench.plugins.law1.gauges import erank_of_singular_values
from lawbench.plugins.law1.rank import Law1RankCase, parse_case
from lawbench.plugins.law1.tensors import TensorFile
from lawbench.store import model_file


def entropy_rank(w: np.ndarray, spectrum: str = "energy") -> float:
    """exp of the Shannon entropy of the normalized spectrum of W (float64 throughout)."""
    w = np.asarray(w, dtype=np.float64)
    gram = w.T @ w if w.shape[0] >= w.shape[1] else w @ w.T
    energy = np.clip(np.linalg.eigvalsh(gram), 0.0, None)  # s_i^2
    if spectrum == "singular":
        return erank_of_singular_values(np.sqrt(energy))
    energy = energy[energy > 0]
    p = energy / energy.sum()
    return float(np.exp(-(p * np.log(p)).sum()))


def mla_kv_map(tf: TensorFile, block: int) -> np.ndarray:
    """kv_b . kv_a_mqa[:kv_lora_rank] at ``block``: (heads * (nope + v), hidden)."""
    names = set(tf.names())
    pre = f"blk.{block}."
    if pre + "attn_kv_a_mqa.weight" not in names:
        raise DataError(str(tf.path), f"block {block} has no MLA down-projection (attn_kv_a_mqa): not an MLA "
                        "model, or no such block")
    latent = int(tf.header.arch("attention.kv_lora_rank"))
    ka = tf.read(pre + "attn_kv_a_mqa.weight").weights  # (kv_lora_rank + rope, hidden)
    if pre + "attn_kv_b.weight" in names:
        kb = tf.read(pre + "attn_kv_b.weight").weights  # (heads * (nope + v), kv_lora_rank)
    elif pre + "attn_k_b.weight" in names and pre + "attn_v_b.weight" in names:
        k_b = tf.read(pre + "attn_k_b.weight").weights  # (heads, kv_lora_rank, nope): stored transposed
        v_b = tf.read(pre + "attn_v_b.weight").weights  # (heads, v, kv_lora_rank)
        if k_b.ndim != 3 or v_b.ndim != 3 or k_b.shape[1] != latent or v_b.shape[2] != latent:
            raise DataError(str(tf.path), f"{pre}attn_k_b / attn_v_b have shapes {k_b.shape} / {v_b.shape}, "
                            f"not (heads, {latent}, nope) / (heads, v, {latent})")
        kb = np.concatenate([k_b.transpose(0, 2, 1).reshape(-1, latent), v_b.reshape(-1, latent)])
    else:
        raise DataError(str(tf.path), f"block {block} has no MLA up-projection (attn_kv_b, or attn_k_b and "
                        "attn_v_b): not an MLA model, or no such block")
    if kb.shape[1] != latent or ka.shape[0] < latent:
        raise DataError(str(tf.path), f"{pre}attn_kv_b {kb.shape} and attn_kv_a_mqa {ka.shape} do not meet "
                        f"through a {latent}-wide latent")
    return kb.astype(np.float64) @ ka[:latent].astype(np.float64)


class RankReading:
    """core's Sampler: each sample reads the map from the file again and takes its effective rank."""

    log_scale = True  # a rank is positive

    def __init__(self, anchor: Anchor, case: Law1RankCase, path: Path):
        self.anchor, self.case, self.path = anchor, case, Path(path)
        self.tf = TensorFile(self.path)
        self.shape: Optional[tuple[int, ...]] = None
        self._walls: list[float] = []

    def _map(self) -> np.ndarray:
        if self.case.mla_kv is not None:
            blocks = self.tf.layers()
            if self.case.mla_kv >= blocks:
                raise DataError(ANCHOR_FILE, f"mla_kv {self.case.mla_kv}: {self.path.name} has blocks 0 to "
                                f"{blocks - 1}", anchor=self.anchor.id, field="case.mla_kv")
            try:
                return mla_kv_map(self.tf, self.case.mla_kv)
            except DataError as exc:
                raise DataError(ANCHOR_FILE, f"{self.path.name}: {exc.message}", anchor=self.anchor.id,
                                field="case.mla_kv") from None
        if self.case.tensor not in set(self.tf.names()):
            raise DataError(ANCHOR_FILE, f"tensor {self.case.tensor!r} is not in {self.path.name}",
                            anchor=self.anchor.id, field="case.tensor")
        w = self.tf.read(self.case.tensor).weights
        if w.ndim != 2:
            raise DataError(ANCHOR_FILE, f"tensor {self.case.tensor!r} has shape {w.shape}: one matrix is 2-D",
                            anchor=self.anchor.id, field="case.tensor")
        return w

    def draw(self, n: int) -> list[Sample]:
        out = []
        for _ in range(n):
            t0 = time.monotonic()
            w = self._map()
            self.shape = tuple(int(x) for x in w.shape)
            value = entropy_rank(w, self.case.spectrum)
            self._walls.append(time.monotonic() - t0)
            out.append(Sample(value=value, raw={"shape": list(self.shape), "nominal": min(self.shape),
                                                "flatness": value / min(self.shape)}))
        return out

    def statistic(self, samples: list[Sample]) -> list[float]:
        return [s.value for s in samples]

    def environment(self) -> dict[str, Any]:
        return {"numpy": np.__version__, "model_file": str(self.path)}

    def protocol(self) -> dict[str, Any]:
        what = (f"MLA K/V map at block {self.case.mla_kv}: kv_b . kv_a_mqa[:kv_lora_rank]"
                if self.case.mla_kv is not None else f"tensor {self.case.tensor}")
        p = "s^2 / sum s^2" if self.case.spectrum == "energy" else "s / sum s"
        return {"sampling_unit": "one reading of the file (the map rebuilt and its spectrum taken again)",
                "map": what, "shape": list(self.shape or ()),
                "statistic": f"exp(-sum p log p), p = {p} over the singular values s (float64 Gram eigenvalues)",
                "wall_s_per_sample": [round(w, 3) for w in self._walls]}


def sampler(anchor: Anchor, resources: Optional[Resources]) -> RankReading:
    case = parse_case(anchor)
    return RankReading(anchor, case, model_file(case.model, resources))
