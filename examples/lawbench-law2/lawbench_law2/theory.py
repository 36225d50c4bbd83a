"""What rate-distortion theory predicts for a quantized tensor.

Assumptions, stated once (they are the law's, and each can fail on real weights):
- the tensor's elements are an i.i.d. Gaussian source of variance sigma^2 (register L-10: "the
  element stream is white"), with a mean small against its spread;
- distortion is squared error, reported relative to the tensor's energy:
  rel-MSE = sum((w - w_hat)^2) / sum(w^2), which is D / sigma^2 when the mean is ~0;
- the rate R is everything the codec stores per weight, block scales included (a ggml type's
  bytes per block * 8 / weights per block): the honest cost of a file, not the index bits alone;
- the bound is Shannon's, reached only by codes of unbounded dimension: any real codec sits on or
  above it. For a Gaussian source D(R) = sigma^2 * 2^(-2R), so rel-MSE = 2^(-2R): 0.0625 at R = 2.
A non-Gaussian source of the same variance has a lower D(R) (the Gaussian is the hardest source),
so a measured rel-MSE below 2^(-2R) means the weights are not white Gaussian.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # gguf is imported where a type is looked up: `lawbench` starts without numpy
    from gguf.constants import GGMLQuantizationType


def gaussian_floor(rate_bits: float) -> float:
    """D(R) / sigma^2 = 2^(-2R) for a memoryless Gaussian source under squared error."""
    if not math.isfinite(rate_bits) or rate_bits < 0:
        raise ValueError(f"a rate must be a finite number of bits >= 0, not {rate_bits!r}")
    return 2.0 ** (-2.0 * rate_bits)


def codec_type(name: str) -> GGMLQuantizationType:
    """The ggml type called `name` ("IQ2_XXS", "q4_k"); ValueError naming the known types."""
    from gguf.constants import GGMLQuantizationType

    try:
        return GGMLQuantizationType[name.upper()]
    except KeyError:
        known = ", ".join(t.name for t in GGMLQuantizationType)
        raise ValueError(f"unknown ggml type {name!r} (known: {known})") from None


def bits_per_weight(codec: str) -> float:
    """What a ggml type stores per weight, scales included: 2.0625 for IQ2_XXS, 4.5 for Q4_K."""
    from gguf.constants import GGML_QUANT_SIZES

    block, size = GGML_QUANT_SIZES[codec_type(codec)]
    return size * 8 / block


def coding_gain_db(rel_mse_reference: float, rel_mse: float) -> float:
    """How much lower `rel_mse` is than the reference's, in dB (0 dB: no gain)."""
    return 10.0 * math.log10(rel_mse_reference / rel_mse)
