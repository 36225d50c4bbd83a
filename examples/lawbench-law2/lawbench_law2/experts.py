"""The per-expert census of a routed-expert model: every expert of one layer's expert tensor, each
quantized with the case's codec and held against the same codec on i.i.d. Gaussian rows.

Seed 000 says the routed experts sit at the floor "identical across all 64": a claim about every
expert, not about their average. So one sample is one layer's 3-D expert tensor (ffn_*_exps), and
its value is that layer's worst expert: the one whose rel-MSE over the codec's Gaussian figure lies
farthest from 1 (in log, as the band is). A layer passes only if every expert in it does.
"""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import lawbench
from lawbench_law2 import tensors
from lawbench_law2.sampler import gaussian_rel_mse, rel_mse


def census(experts: list, codec: str, ggml: Any, seed: int) -> dict[str, Any]:
    """One layer's census: each expert's rel-MSE, the codec's Gaussian figure for that shape (one
    seeded reference: every expert has the same shape), and each expert's ratio over it."""
    floor = gaussian_rel_mse(experts[0], codec, ggml, seed=seed)
    values = [rel_mse(rows, ggml.roundtrip(rows, codec)) for rows in experts]
    ratios = [v / floor for v in values]
    worst = max(range(len(ratios)), key=lambda e: abs(math.log(max(ratios[e], 1e-300))))
    return {"n_experts": len(values), "rel_mse_gaussian": floor, "rel_mse": values,
            "over_gaussian": ratios, "worst_expert": worst, "worst_over_gaussian": ratios[worst],
            "spread_max_over_min": max(values) / min(values)}


class ExpertCensus:
    """Sample i: the i-th selected expert tensor (depth-spread order), `rows` rows of every expert
    in it. Deterministic: a re-run gives the same numbers."""

    log_scale = True

    def __init__(self, path: Path, case: Any, ggml: Any):
        self.path, self.case, self.ggml = Path(path), case, ggml
        self.selected = tensors.select(self.path, case.tensors, case.source_types)
        self._next = 0
        self._last = None
        self.readings: list[dict[str, Any]] = []

    def draw(self, n: int) -> list:
        out = []
        for _ in range(n):
            if self._next >= len(self.selected):
                break  # every layer has been counted once: more samples would repeat them
            info = self.selected[self._next]
            self._next += 1
            t0 = time.monotonic()
            experts = tensors.read_expert_rows(self.path, info, self.case.rows)
            raw: dict[str, Any] = {"tensor": info.name, "stored_as": info.type_name,
                                   "rows_per_expert": int(experts[0].shape[0]),
                                   "n_per_row": int(experts[0].shape[1]), "codec": self.case.codec}
            raw.update(census(experts, self.case.codec, self.ggml, seed=self._next))
            raw["seconds"] = round(time.monotonic() - t0, 3)
            out.append(lawbench.Sample(value=raw["worst_over_gaussian"], predecessor=self._last, raw=raw))
            self._last = info.name
            self.readings.append(raw)
        return out

    def statistic(self, samples: list) -> list:
        return [s.value for s in samples]

    def environment(self) -> dict:
        return {"model_file": str(self.path), "ggml": str(self.ggml.path),
                "expert_tensors_available": len(self.selected)}

    def protocol(self) -> dict:
        return {"kind": "law2 expert census", "sampling_unit": "one layer's expert tensor, every expert in it",
                "value": "the layer's worst expert: rel-MSE over the codec's Gaussian figure, farthest from 1",
                "codec": self.case.codec, "rows_per_expert": self.case.rows, "tensors": self.case.tensors,
                "source_types": self.case.source_types,
                "quantizer": "ggml_quantize_chunk (uniform importance where ggml requires one)",
                "decoder": "gguf.quants.dequantize", "readings": self.readings}
