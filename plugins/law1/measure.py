"""Law 1 measured on real tensors: what a gauge does to group-wise RTN error, one tensor a sample.

A sample is one layer's tensor of the case's role, quantized at the case's bits in the native
basis and in the gauge (a fresh rotation seed per sample), its value the gauge/native ratio of
the relative error: < 1 the gauge helps, > 1 it hurts. Samples are distinct tensors, so the
interval (core.stats.verdicts: Student-t on the logs) is over the population of that role's tensors in
that model. A ratio anchor's sample is arm a's ratio over arm b's on the same tensor and seed.

Inputs for the output error (the case's `activations`): "imatrix", the diagonal second moment of
the tensor's real inputs, measured once per model by llama-imatrix over the start of the shipped
text (core.engines.imatrix; IMATRIX_CHUNKS chunks of IMATRIX_CTX tokens, cached); or "norm-gain",
tensors.input_scale (the layer's own RMSNorm gain, squared: a proxy that assumes the normalized
stream isotropic). Every sample records which statistic it used, the protocol how it was measured.
"""
from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Any, Optional

from lawbench import Anchor, Sample
from lawbench.engines import Imatrix
from lawbench.plugins.law1.case import Law1Case
from lawbench.plugins.law1.gauges import effective_rank, quantize_in_gauge, rel_mse, rel_output_error, truncate_rank
from lawbench.plugins.law1.predict import forecast
from lawbench.plugins.law1.tensors import TensorFile

# 16 chunks of 128 tokens: 2048 tokens per tensor; measured 16-24 s per model (one thread, 2-core box).
IMATRIX_CTX, IMATRIX_CHUNKS = 128, 16


@functools.lru_cache(maxsize=4)
def tensor_file(path: str) -> TensorFile:
    return TensorFile(Path(path))


@functools.lru_cache(maxsize=32)
def _weights(path: str, name: str, rank: Optional[int]):
    t = tensor_file(path).read(name)
    w = t.weights if rank is None else truncate_rank(t.weights, rank)
    return t.source_type, w, effective_rank(w)


def needs_imatrix(cases: dict[str, Law1Case]) -> bool:
    return any(c.quantity == "output_error_ratio" and c.activations == "imatrix" for c in cases.values())


def input_second_moment(path: str, case: Law1Case, name: str,
                        imatrix: Optional[Imatrix]) -> tuple[Any, str]:
    """diag E[x x^T] of the tensor's inputs and a line saying what it is."""
    if case.activations == "imatrix":
        if imatrix is None:
            raise ValueError("activations = 'imatrix' needs the model's imatrix (TensorSampler's)")
        s = imatrix.settings
        what = (f"imatrix: mean x^2 per input column over {s['tokens']} tokens of {s['text']} "
                f"(llama-imatrix b{s['engine_build']})")
        return imatrix.second_moment(name), what
    return tensor_file(path).input_scale(name), "norm-gain: diag(norm gain^2) of the layer's own RMSNorm"


def tensor_effect(path: str, case: Law1Case, layer: int, seed: int,
                  imatrix: Optional[Imatrix] = None) -> dict[str, Any]:
    """One tensor: native and gauge errors, their ratio, its effective rank and the forecast."""
    name = case.tensor(layer)
    source_type, w, erank = _weights(path, name, case.rank)
    nat = quantize_in_gauge(w, case.bits, case.group, "native")
    gau = quantize_in_gauge(w, case.bits, case.group, case.gauge, seed=seed)
    out: dict[str, Any] = {"tensor": name, "source_type": source_type, "shape": list(w.shape),
                           "rank": case.rank, "erank": round(erank, 2), "bits": case.bits,
                           "group": case.group, "gauge": case.gauge, "seed": seed,
                           "rel_mse_native": rel_mse(w, nat), "rel_mse_gauge": rel_mse(w, gau)}
    if case.quantity == "output_error_ratio":
        cov, out["inputs"] = input_second_moment(path, case, name, imatrix)
        out["activations"] = case.activations
        out["out_err_native"] = rel_output_error(w, nat, cov)
        out["out_err_gauge"] = rel_output_error(w, gau, cov)
        out["ratio"] = out["out_err_gauge"] / out["out_err_native"]
    else:
        out["ratio"] = out["rel_mse_gauge"] / out["rel_mse_native"]
    out["forecast"] = forecast(erank, w.shape[1], case.bits, case.group).as_dict()
    return out


class TensorSampler:
    """core's Sampler over one case (or arms a and b laid over it), one layer per sample."""

    log_scale = True  # gauge/native ratios are positive and multiplicative

    def __init__(self, anchor: Anchor, cases: dict[str, Law1Case], path: str,
                 imatrix: Optional[Imatrix] = None):
        self.anchor, self.cases, self.path, self.imatrix = anchor, cases, path, imatrix
        self.layers = next(iter(cases.values())).layers
        self._next = 0
        self._walls: list[float] = []

    def draw(self, n: int) -> list[Sample]:
        out: list[Sample] = []
        for _ in range(n):
            if self._next >= len(self.layers):
                break  # every listed tensor sampled: no repetition of a tensor counts as a sample
            k = self._next
            self._next += 1
            layer, seed = self.layers[k], next(iter(self.cases.values())).seed + k
            t0 = time.monotonic()
            arms = {arm: tensor_effect(self.path, case, layer, seed, self.imatrix) for arm, case in self.cases.items()}
            self._walls.append(time.monotonic() - t0)
            if set(arms) == {"a", "b"}:
                value = arms["a"]["ratio"] / arms["b"]["ratio"]
                out.append(Sample(value=value, arm="a/b", raw={"layer": layer, **{f"arm_{k2}": v for k2, v in arms.items()}}))
            else:
                out.append(Sample(value=arms["main"]["ratio"], raw={"layer": layer, **arms["main"]}))
        return out

    def statistic(self, samples: list[Sample]) -> list[float]:
        return [s.value for s in samples]

    def environment(self) -> dict[str, Any]:
        import numpy

        return {"numpy": numpy.__version__, "model_file": self.path}

    def protocol(self) -> dict[str, Any]:
        acts = {arm: c.activations for arm, c in self.cases.items() if c.quantity == "output_error_ratio"}
        extra: dict[str, Any] = {}
        if acts:
            extra["activations"] = acts if len(acts) > 1 else next(iter(acts.values()))
        if self.imatrix is not None:
            extra["imatrix"] = {**self.imatrix.settings, "cached": self.imatrix.cached,
                                "wall_s_this_run": round(self.imatrix.wall_s, 2),
                                "file": str(self.imatrix.path)}
        return {**extra, "sampling_unit": "one real tensor (one layer of the role), fresh rotation seed",
                "layers_in_order": self.layers, "wall_s_per_sample": [round(w, 3) for w in self._walls],
                "statistic": "gauge/native error ratio" + (" (arm a over arm b, same tensor and seed)"
                                                           if len(self.cases) == 2 else "")}
