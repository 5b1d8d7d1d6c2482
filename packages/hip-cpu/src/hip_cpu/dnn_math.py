"""The host arithmetic of the cpu platform's DNN calls (numpy; imported only when one runs).

Tensors are read from host memory through their descriptor's dims and strides (any layout:
NCHW, NHWC or other strides), computed in float64 and written back rounded once to the
element type (bf16: round to nearest even, NaN kept). Convolutions are cross-correlations:
windows of the padded input by strides (no copy) contracted with the filters by one einsum
(a BLAS matrix product) per group.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from hip_ffi import dnn_constants as dc
from hip_ffi._ffi import ffi

#: miopenDataType_t -> the numpy type its bytes are read as (bf16 as its uint16 bits).
_STORAGE = {
    dc.MIOPEN_HALF: np.float16,
    dc.MIOPEN_FLOAT: np.float32,
    dc.MIOPEN_DOUBLE: np.float64,
    dc.MIOPEN_BFLOAT16: np.uint16,
}
SUPPORTED = frozenset(_STORAGE)


def _memory(data_type: int, dims: tuple[int, ...], strides: tuple[int, ...], address: int) -> Any:
    """A writable numpy view of the elements (logical dims, any strides) at `address`."""
    storage = np.dtype(_STORAGE[data_type])
    extent = 1 + sum((d - 1) * s for d, s in zip(dims, strides, strict=True))
    raw = np.frombuffer(ffi.buffer(ffi.cast("char*", address), extent * storage.itemsize), storage)
    return as_strided(raw, dims, tuple(s * storage.itemsize for s in strides))


def load(data_type: int, dims: tuple[int, ...], strides: tuple[int, ...], address: int) -> Any:
    """The tensor as float64."""
    view = _memory(data_type, dims, strides, address)
    if data_type == dc.MIOPEN_BFLOAT16:
        return (view.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return view.astype(np.float64)


def store(
    data_type: int, dims: tuple[int, ...], strides: tuple[int, ...], address: int, value: Any
) -> None:
    """Write float64 `value` (logical dims) into the tensor, rounded once."""
    view = _memory(data_type, dims, strides, address)
    if data_type == dc.MIOPEN_BFLOAT16:
        bits = value.astype(np.float32).view(np.uint32)
        rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
        view[...] = np.where(np.isnan(value), np.uint16(0x7FC0), rounded)
    else:
        view[...] = value


def blend(result: Any, alpha: float, beta: float, old: Any) -> Any:
    """alpha * result + beta * old (old is read only when beta is not 0, as the libraries)."""
    out = result if alpha == 1.0 else alpha * result
    return out if beta == 0.0 else out + beta * old()


def conv_forward(
    x: Any, w: Any, pads: tuple[int, ...], strides: tuple[int, ...], dils: tuple[int, ...],
    groups: int,
) -> Any:  # fmt: skip
    """y [N, K, P, Q] = x [N, C, H, W] ⋆ w [K, C / groups, R, S] (cross-correlation)."""
    n, c, h, wd = x.shape
    k, cg, r, s = w.shape
    (ph, pw), (sh, sw), (dh, dw) = pads, strides, dils
    p = (h + 2 * ph - dh * (r - 1) - 1) // sh + 1
    q = (wd + 2 * pw - dw * (s - 1) - 1) // sw + 1
    padded = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    bn, bc, bh, bw = padded.strides
    windows = as_strided(padded, (n, c, r, s, p, q), (bn, bc, bh * dh, bw * dw, bh * sh, bw * sw))
    windows = windows.reshape(n, groups, cg, r, s, p, q)
    filters = w.reshape(groups, k // groups, cg, r, s)
    y = np.einsum("ngcrspq,gkcrs->ngkpq", windows, filters, optimize=True)
    return y.reshape(n, k, p, q)


def conv_backward_data(
    dy: Any, w: Any, pads: tuple[int, ...], strides: tuple[int, ...], dils: tuple[int, ...],
    groups: int, size: tuple[int, int],
) -> Any:  # fmt: skip
    """dx [N, C, H, W] (H, W = size) of the forward convolution by w whose output is dy: each
    dy element scattered through the filter taps onto the input positions it read."""
    n, k, p, q = dy.shape
    _, cg, r, s = w.shape
    (ph, pw), (sh, sw), (dh, dw) = pads, strides, dils
    h, wd = size
    taps = np.einsum(
        "ngkpq,gkcrs->ngcrspq",
        dy.reshape(n, groups, k // groups, p, q),
        w.reshape(groups, k // groups, cg, r, s),
        optimize=True,
    )
    rows = max(h + 2 * ph, (p - 1) * sh + (r - 1) * dh + 1)
    cols = max(wd + 2 * pw, (q - 1) * sw + (s - 1) * dw + 1)
    grid = np.zeros((n, groups, cg, rows, cols))
    for i in range(r):
        for j in range(s):
            rows_hit = slice(i * dh, i * dh + (p - 1) * sh + 1, sh)
            cols_hit = slice(j * dw, j * dw + (q - 1) * sw + 1, sw)
            grid[..., rows_hit, cols_hit] += taps[:, :, :, i, j]
    return grid[..., ph : ph + h, pw : pw + wd].reshape(n, groups * cg, h, wd)


def _counts(size: int, pad: int, window: int, stride: int, out: int, inclusive: bool) -> Any:
    """Per output position along one axis: how many window positions average pooling
    divides by (inside the padded input, or inside the input itself)."""
    start = np.arange(out) * stride
    low, high = (0, size + 2 * pad) if inclusive else (pad, pad + size)
    return np.maximum(0, np.minimum(start + window, high) - np.maximum(start, low))


def pool_forward(
    x: Any, mode: int, window: tuple[int, ...], pads: tuple[int, ...], strides: tuple[int, ...],
    out: tuple[int, int],
) -> Any:  # fmt: skip
    """y [N, C, P, Q] pooled from x [N, C, H, W]: max (NaN propagates), or the average over
    the window's positions inside the padded input (inclusive) or the input (exclusive)."""
    n, c, h, wd = x.shape
    (kh, kw), (ph, pw), (sh, sw), (p, q) = window, pads, strides, out
    rows = max(h + 2 * ph, (p - 1) * sh + kh)
    cols = max(wd + 2 * pw, (q - 1) * sw + kw)
    fill = -np.inf if mode == dc.MIOPEN_POOLING_MAX else 0.0
    padded = np.full((n, c, rows, cols), fill)
    padded[:, :, ph : ph + h, pw : pw + wd] = x
    bn, bc, bh, bw = padded.strides
    windows = as_strided(padded, (n, c, p, q, kh, kw), (bn, bc, bh * sh, bw * sw, bh, bw))
    if mode == dc.MIOPEN_POOLING_MAX:
        return windows.max(axis=(4, 5))
    inclusive = mode == dc.MIOPEN_POOLING_AVERAGE_INCLUSIVE
    count = np.outer(
        _counts(h, ph, kh, sh, p, inclusive), _counts(wd, pw, kw, sw, q, inclusive)
    ).astype(np.float64)
    total = windows.sum(axis=(4, 5))
    return np.divide(total, count, out=np.zeros_like(total), where=count > 0)
