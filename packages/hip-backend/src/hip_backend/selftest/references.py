"""float64 numpy references for the ops, and the comparison the self-test applies.

Inputs are drawn in the op's storage type, so the reference sees exactly what the device sees;
the reference computes in float64 and the result may differ from it by a few units of the
output type's rounding (TOLERANCE), measured against the size of the terms that make up each
result where they exceed it (a sum that cancels rounds at the scale of its terms).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hip_runtime import bfloat16, float16, float32

Array = Any  # numpy arrays of any dtype (bfloat16 comes from ml_dtypes)

DTYPES: dict[str, np.dtype[Any]] = {
    "f32": float32,
    "f16": float16,
    "bf16": bfloat16,
}

#: (rtol, atol) per output type: about twice the unit roundoff of f16 (2^-11) and bf16 (2^-8);
#: for f32, the few ulps of expf/erff/tanhf and of f32 accumulation.
TOLERANCE: dict[str, tuple[float, float]] = {
    "f32": (1e-5, 1e-6),
    "f16": (1e-3, 1e-5),
    "bf16": (8e-3, 1e-5),
}


class Mismatch(AssertionError):
    """A result out of tolerance; the message says where and by how much."""


def f64(x: Array) -> Array:
    return np.asarray(x).astype(np.float64)


def compare(got: Array, expected: Array, dtype: str, magnitude: Any = 0.0) -> float:
    """Check |got - expected| <= rtol * max(|expected|, magnitude) + atol elementwise.

    Returns the largest error as a fraction of the allowed error (<= 1 passes); raises Mismatch
    naming the first bad element otherwise (a NaN is always bad)."""
    if got.dtype != DTYPES[dtype]:
        raise Mismatch(f"result dtype {got.dtype}, expected {DTYPES[dtype]}")
    if got.shape != expected.shape:
        raise Mismatch(f"result shape {got.shape}, expected {expected.shape}")
    rtol, atol = TOLERANCE[dtype]
    actual = f64(got)
    bound = rtol * np.maximum(np.abs(expected), magnitude) + atol
    error = np.abs(actual - expected)
    bad = ~(error <= bound)
    if bad.any():
        where = np.unravel_index(np.argmax(bad), bad.shape)
        raise Mismatch(
            f"{np.count_nonzero(bad)}/{bad.size} out of tolerance; first at "
            f"{tuple(map(int, where))}: got {actual[where]:.6g}, expected {expected[where]:.6g}"
        )
    return float((error / bound).max()) if error.size else 0.0


def compare_bits(got: Array, expected: Array) -> float:
    """Bit-for-bit equality (any NaN matches any NaN); returns 0.0 or raises Mismatch."""
    if got.dtype != expected.dtype or got.shape != expected.shape:
        raise Mismatch(
            f"result {got.shape} {got.dtype}, expected {expected.shape} {expected.dtype}"
        )
    with np.errstate(invalid="ignore"):
        nan = np.isnan(expected.astype(np.float64))
        if not np.array_equal(np.isnan(got.astype(np.float64)), nan):
            raise Mismatch("NaNs differ")
    bits = np.dtype(f"u{got.dtype.itemsize}")
    differ = got.view(bits)[~nan] != expected.view(bits)[~nan]
    if differ.any():
        raise Mismatch(f"{int(np.count_nonzero(differ))}/{differ.size} elements differ in bits")
    return 0.0


def silu(x: Array) -> Array:
    return np.asarray(x / (1.0 + np.exp(-x)))


_ERF = np.vectorize(math.erf)


def gelu(x: Array, approximate: str) -> Array:
    if approximate == "tanh":
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    return 0.5 * x * (1.0 + _ERF(x / math.sqrt(2.0)))


def layernorm(x: Array, w: Array, b: Array, eps: float) -> tuple[Array, Array]:
    """(reference, magnitude): f32 rounds at the scale of |x| · rstd, not of the result."""
    v = f64(x)
    rstd = 1.0 / np.sqrt(v.var(-1, keepdims=True) + np.float64(np.float32(eps)))
    y = (v - v.mean(-1, keepdims=True)) * rstd * f64(w) + f64(b)
    return y, np.abs(v) * rstd * np.abs(f64(w)) + np.abs(f64(b))


def rmsnorm(x: Array, w: Array, eps: float) -> Array:
    v = f64(x)
    return v / np.sqrt((v * v).mean(-1, keepdims=True) + np.float64(np.float32(eps))) * f64(w)


def softmax(x: Array, scale: float) -> Array:
    s = f64(x) * np.float64(np.float32(scale))
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def rope(x: Array, cos: Array, sin: Array, pos: Array, rot: int, interleaved: bool) -> Array:
    out = f64(x)
    c, s = f64(cos[pos])[:, None, :], f64(sin[pos])[:, None, :]
    if interleaved:
        first, second = slice(0, rot, 2), slice(1, rot, 2)
    else:
        first, second = slice(0, rot // 2), slice(rot // 2, rot)
    a, b = out[..., first].copy(), out[..., second].copy()
    out[..., first], out[..., second] = a * c - b * s, b * c + a * s
    return out


__all__ = [
    "DTYPES",
    "TOLERANCE",
    "Mismatch",
    "compare",
    "compare_bits",
    "f64",
    "gelu",
    "layernorm",
    "rmsnorm",
    "rope",
    "silu",
    "softmax",
]
