"""The tensor arithmetic of Law 1: effective rank, group-wise round-to-nearest, and the gauges.

A weight matrix W has shape (rows, cols) = (outputs, inputs), as gguf.quants.dequantize returns a
GGUF tensor (ne1, ne0); ggml quantizes along the inputs in blocks, so groups run along each row.

A *gauge* is an orthogonal change of basis of the inputs applied before quantization and undone
after it: Q_g(W) = quant(W R) R^T. Storing W R and rotating the activations by R gives the same
outputs, so the gauge changes only where the quantization error lands. The gauges the seed names:
  native    R = I
  hadamard  R = P D H_k: a random permutation, random signs, then a block Walsh-Hadamard of the
            largest power-of-two size k dividing the width (576 = 9 x 64 takes k = 64; the
            permutation makes each block mix channels from across the whole row)
  svd       R = V, the right singular vectors of W (the basis in which W is diagonal)
  diagonal  W diag(s)^-1 quantized, then diag(s) restored: per-input-channel scaling with
            s_j = sqrt(mean_i W_ij^2) (a diagonal gauge is not orthogonal; SmoothQuant-like)
"""
from __future__ import annotations

import numpy as np

from lawbench.plugins.law1.case import GAUGES


def effective_rank(w: np.ndarray) -> float:
    """Roy & Vetterli (2007): exp of the Shannon entropy of the normalized singular values.

    p_i = sigma_i / sum(sigma); erank = exp(-sum p_i log p_i). Equal to r for a matrix with r equal
    non-zero singular values; between 1 and min(rows, cols) always.
    """
    return erank_of_singular_values(singular_values(w))


def singular_values(w: np.ndarray) -> np.ndarray:
    """Singular values from the Gram matrix of the narrow side (eigvalsh of a 640 x 640 matrix is
    ~20x faster than an SVD of the 2048 x 640 tensor; float64 keeps the small ones honest)."""
    w = np.asarray(w, dtype=np.float64)
    g = w.T @ w if w.shape[0] >= w.shape[1] else w @ w.T
    return np.sqrt(np.clip(np.linalg.eigvalsh(g), 0.0, None))[::-1]


def right_singular_vectors(w: np.ndarray) -> np.ndarray:
    """V (cols x cols, columns by falling singular value): eigenvectors of W^T W."""
    w = np.asarray(w, dtype=np.float64)
    vals, vecs = np.linalg.eigh(w.T @ w)
    return vecs[:, ::-1]


def erank_of_singular_values(s: np.ndarray) -> float:
    s = np.asarray(s, dtype=np.float64)
    s = s[s > s.max() * 1e-7] if s.size and s.max() > 0 else s[:0]  # Gram eigenvalues: ~1e-8 relative floor
    if s.size == 0:
        return 0.0
    p = s / s.sum()
    return float(np.exp(-(p * np.log(p)).sum()))


def truncate_rank(w: np.ndarray, rank: int) -> np.ndarray:
    """The best rank-`rank` approximation of W (truncated SVD): how LoRA merges and MLA latents
    manufacture low-rank structure, made from a real tensor."""
    w64 = np.asarray(w, dtype=np.float64)
    v = right_singular_vectors(w64)[:, :max(1, min(int(rank), min(w64.shape)))]
    return ((w64 @ v) @ v.T).astype(np.float32)  # W V_r V_r^T = U_r S_r V_r^T


def rtn(w: np.ndarray, bits: int, group: int) -> np.ndarray:
    """Group-wise asymmetric round-to-nearest (min/max per group of `group` inputs, 2^bits levels):
    the shape of ggml's Q4_1 / Q2_K blocks, without their scale quantization."""
    if bits < 1 or bits > 8:
        raise ValueError(f"bits must be 1..8, got {bits}")
    rows, cols = w.shape
    if cols % group:
        raise ValueError(f"width {cols} is not a multiple of the group size {group}")
    g = np.asarray(w, dtype=np.float32).reshape(rows, cols // group, group)
    lo = g.min(axis=2, keepdims=True)
    hi = g.max(axis=2, keepdims=True)
    levels = (1 << bits) - 1
    scale = (hi - lo) / levels
    safe = np.where(scale > 0, scale, 1.0)
    q = np.clip(np.rint((g - lo) / safe), 0, levels)
    return (q * scale + lo).reshape(rows, cols).astype(np.float32)


def _fwht(x: np.ndarray) -> np.ndarray:
    """Walsh-Hadamard transform over the last axis (length a power of two), orthonormal."""
    x = np.array(x, dtype=np.float64, copy=True)
    n = x.shape[-1]
    h = 1
    while h < n:
        x = x.reshape(*x.shape[:-1], n // (2 * h), 2, h)
        a, b = x[..., 0, :].copy(), x[..., 1, :].copy()
        x[..., 0, :], x[..., 1, :] = a + b, a - b
        x = x.reshape(*x.shape[:-3], n)
        h *= 2
    return x / np.sqrt(n)


def hadamard_block(n: int) -> int:
    """The largest power of two dividing n: the block the randomized Hadamard works in."""
    return n & -n


def hadamard_matrix(n: int, seed: int) -> np.ndarray:
    """R = P D blockdiag(H_k) (orthogonal, n x n) for the randomized Hadamard gauge."""
    rng = np.random.default_rng(seed)
    k = hadamard_block(n)
    perm = rng.permutation(n)
    signs = rng.choice([-1.0, 1.0], size=n)
    eye = np.eye(n)[perm] * signs[:, None]  # rows permuted and signed: P D
    return _fwht(eye.reshape(n, n // k, k)).reshape(n, n)


def quantize_in_gauge(w: np.ndarray, bits: int, group: int, gauge: str, seed: int = 0) -> np.ndarray:
    """Quantize W in a gauge and return it in the native basis (the fake-quantized tensor)."""
    w = np.asarray(w, dtype=np.float32)
    if gauge == "native":
        return rtn(w, bits, group)
    if gauge == "hadamard":
        r = hadamard_matrix(w.shape[1], seed)
        return (rtn((w @ r).astype(np.float32), bits, group) @ r.T).astype(np.float32)
    if gauge == "svd":
        v = right_singular_vectors(w)
        return (rtn((w @ v).astype(np.float32), bits, group) @ v.T).astype(np.float32)
    if gauge == "diagonal":
        s = np.sqrt((w.astype(np.float64) ** 2).mean(axis=0))
        s = np.where(s > 0, s, 1.0)
        return (rtn((w / s).astype(np.float32), bits, group) * s).astype(np.float32)
    raise ValueError(f"unknown gauge {gauge!r} (one of {', '.join(GAUGES)})")


def rel_mse(w: np.ndarray, wq: np.ndarray) -> float:
    """||Wq - W||^2 / ||W||^2."""
    w64 = np.asarray(w, dtype=np.float64)
    return float(((np.asarray(wq, dtype=np.float64) - w64) ** 2).sum() / (w64 ** 2).sum())


def rel_output_error(w: np.ndarray, wq: np.ndarray, cov: np.ndarray) -> float:
    """E||(Wq - W) x||^2 / E||W x||^2 for inputs x with second moment `cov` (cols x cols, or its
    diagonal as a vector): tr(E C E^T) / tr(W C W^T)."""
    w64 = np.asarray(w, dtype=np.float64)
    e = np.asarray(wq, dtype=np.float64) - w64
    c = np.asarray(cov, dtype=np.float64)
    if c.ndim == 1:
        return float(((e ** 2) @ c).sum() / ((w64 ** 2) @ c).sum())
    return float(np.einsum("ij,jk,ik->", e, c, e) / np.einsum("ij,jk,ik->", w64, c, w64))
