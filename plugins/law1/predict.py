"""Law 1's prediction: what an orthogonal rotation does to a tensor's quantization error.

The model, in two parts.

1. The rotated side is exact. A randomized Hadamard makes every quantization group a signed sum of
   many entries of its row, so whatever the tensor, each group is Gaussian with the row's RMS; the
   rotated relative MSE is therefore D_G(b, g), the distortion of b-bit min/max round-to-nearest on
   groups of g Gaussian values, computed here once by Monte Carlo on a fixed seed (deterministic).
   Effective rank cannot enter it: rotation erases the basis the tensor's structure lived in.

2. The native side carries the law. The seed's claim (000, Law 1; register L-04: "Effective rank,
   not bit-count, is the state variable of quantization; incoherence is rank-conditional") is that
   a full-rank tensor's native groups are worse than Gaussian (the rotation helps) and a low-rank
   bottleneck's are better (the rotation hurts). The effective rank is Roy & Vetterli's (2007):
   exp of the Shannon entropy of the normalized singular values (gauges.effective_rank). The seed
   prints absolute ranks (1168 helps, 394 hurts) for tensors whose widths it does not publish, so
   the threshold cannot be calibrated from it; lawbench states its own reading, in the fraction of
   the rotated width the tensor occupies, rho = erank / inputs: rho >= RHO_FULL predicts that the
   rotation helps, rho < RHO_FULL that it hurts. RHO_FULL = 1/2 is lawbench's choice, not a
   published number.

   Rough size: the ratio R = rotated / native error moves away from 1 as the bits fall (the seed:
   "at low bits"); the model gives the sign and the rotated side exactly, and no magnitude for
   the native side, which is the tensor's own (measure.py measures it).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from lawbench.plugins.law1.gauges import rel_mse, rtn

RHO_FULL = 0.5
_MC_ROWS = 4096  # Monte Carlo rows of Gaussian groups: D_G to ~0.5 %, in a few milliseconds


@functools.lru_cache(maxsize=64)
def gaussian_distortion(bits: int, group: int) -> float:
    """D_G(b, g): relative MSE of group-wise min/max RTN on i.i.d. Gaussian values (fixed seed)."""
    rng = np.random.default_rng(20070)  # fixed: the prediction must not move between runs
    x = rng.standard_normal((_MC_ROWS, group)).astype(np.float32)
    return rel_mse(x, rtn(x, bits, group))


@dataclass(frozen=True)
class RotationForecast:
    erank: float
    inputs: int
    bits: int
    group: int
    rho: float  # erank / inputs
    sign: int  # -1: the rotation lowers the error (helps); +1: raises it (hurts)
    rotated_rel_mse: float  # D_G(bits, group)

    @property
    def helps(self) -> bool:
        return self.sign < 0

    def as_dict(self) -> dict:
        return {"erank": round(self.erank, 2), "inputs": self.inputs, "bits": self.bits,
                "group": self.group, "rho": round(self.rho, 4), "rho_full": RHO_FULL,
                "sign": "helps" if self.helps else "hurts",
                "rotated_rel_mse": round(self.rotated_rel_mse, 6)}


def forecast(erank: float, inputs: int, bits: int, group: int) -> RotationForecast:
    """The law's forecast for a tensor of effective rank `erank` over `inputs` input channels."""
    if inputs <= 0 or erank <= 0:
        raise ValueError("effective rank and width must be positive")
    rho = float(erank) / float(inputs)
    return RotationForecast(float(erank), int(inputs), int(bits), int(group), rho,
                            -1 if rho >= RHO_FULL else 1, gaussian_distortion(int(bits), int(group)))
