"""float64 numpy references of the spatial ops: convolutions, pooling, upsampling and the
per-channel normalizations (hip_runtime.testing's conventions: inputs as the device sees them,
float64 results; sums of products return a `testing.Reference` with the magnitude of their
terms). Written from torch's definitions, independently of the ops' host arithmetic.

    from hip_runtime import testing
    from hip_runtime.testing import conv as testing_conv

    expected = testing_conv.conv2d(x, w, b, stride=2, padding=1)
    testing.assert_close(backend.conv2d(...).to_numpy(), expected, "bf16")
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hip_runtime.testing import Array, Reference


def conv2d(
    x: Array, weight: Array, bias: Array | None = None, stride: Any = 1, padding: Any = 0,
    dilation: Any = 1, groups: int = 1, *, channels_last: bool = False,
) -> Reference:  # fmt: skip
    """torch's conv2d (padding an int, a pair, "same" or "valid"); NHWC in and out with
    channels_last (weight [K, R, S, C / groups])."""
    xv, wv = _nchw(x, channels_last), _nchw(weight, channels_last)
    (sh, sw), (dh, dw) = _pair(stride), _pair(dilation)
    k, cg, r, s = wv.shape
    if padding == "valid":
        pads = [(0, 0), (0, 0)]
    elif padding == "same":
        pads = [(d * (n - 1) // 2, d * (n - 1) - d * (n - 1) // 2) for d, n in ((dh, r), (dw, s))]
    else:
        pads = [(p, p) for p in _pair(padding)]
    xp = np.pad(xv, [(0, 0), (0, 0), *pads])
    n, _c, hp, wp = xp.shape
    ho, wo = (hp - dh * (r - 1) - 1) // sh + 1, (wp - dw * (s - 1) - 1) // sw + 1
    xg = xp.reshape(n, groups, cg, hp, wp)
    wg = wv.reshape(groups, k // groups, cg, r, s)
    value = np.zeros((n, groups, k // groups, ho, wo))
    magnitude = np.zeros_like(value)
    for i in range(r):
        for j in range(s):
            patch = xg[..., i * dh : i * dh + sh * (ho - 1) + 1 : sh,
                       j * dw : j * dw + sw * (wo - 1) + 1 : sw]  # fmt: skip
            tap = wg[..., i, j]
            value += np.einsum("ngchw,gkc->ngkhw", patch, tap)
            magnitude += np.einsum("ngchw,gkc->ngkhw", np.abs(patch), np.abs(tap))
    value, magnitude = value.reshape(n, k, ho, wo), magnitude.reshape(n, k, ho, wo)
    if bias is not None:
        value = value + _f64(bias)[:, None, None]
        magnitude = magnitude + np.abs(_f64(bias))[:, None, None]
    return Reference(_layout(value, channels_last), _layout(magnitude, channels_last))


def conv_transpose2d(
    x: Array, weight: Array, bias: Array | None = None, stride: Any = 1, padding: Any = 0,
    output_padding: Any = 0, groups: int = 1, dilation: Any = 1, *,
    channels_last: bool = False,
) -> Reference:  # fmt: skip
    """torch's conv_transpose2d: every input pixel scatters weight · x into the output at
    ih·stride - padding + r·dilation (weight [Cin, Cout / groups, R, S]; NHWC: x [N, H, W,
    Cin], weight [Cin, R, S, Cout / groups])."""
    xv, wv = _nchw(x, channels_last), _nchw(weight, channels_last)
    (sh, sw), (ph, pw) = _pair(stride), _pair(padding)
    (oph, opw), (dh, dw) = _pair(output_padding), _pair(dilation)
    n, cin, h, w = xv.shape
    _, coutg, r, s = wv.shape
    full_h = (h - 1) * sh + dh * (r - 1) + 1 + oph
    full_w = (w - 1) * sw + dw * (s - 1) + 1 + opw
    value = np.zeros((n, groups, coutg, full_h, full_w))
    magnitude = np.zeros_like(value)
    xg = xv.reshape(n, groups, cin // groups, h, w)
    wg = wv.reshape(groups, cin // groups, coutg, r, s)
    for i in range(r):
        for j in range(s):
            rows = slice(i * dh, i * dh + sh * (h - 1) + 1, sh)
            cols = slice(j * dw, j * dw + sw * (w - 1) + 1, sw)
            tap = wg[..., i, j]
            value[..., rows, cols] += np.einsum("ngchw,gck->ngkhw", xg, tap)
            magnitude[..., rows, cols] += np.einsum("ngchw,gck->ngkhw", np.abs(xg), np.abs(tap))
    crop = (slice(None), slice(None), slice(ph, full_h - ph), slice(pw, full_w - pw))
    value = value.reshape(n, groups * coutg, full_h, full_w)[crop]
    magnitude = magnitude.reshape((*value.shape[:2], full_h, full_w))[crop]
    if bias is not None:
        value = value + _f64(bias)[:, None, None]
        magnitude = magnitude + np.abs(_f64(bias))[:, None, None]
    return Reference(_layout(value, channels_last), _layout(magnitude, channels_last))


def conv1d(x: Array, weight: Array, bias: Array | None = None, stride: Any = 1,
           padding: Any = 0, dilation: Any = 1, groups: int = 1, *,
           channels_last: bool = False) -> Reference:  # fmt: skip
    """conv2d over [N, C, 1, L] ([N, 1, L, C] channels last)."""
    axis = 1 if channels_last else 2
    pad = padding if isinstance(padding, str) else (0, _one(padding))
    found = conv2d(np.expand_dims(x, axis), np.expand_dims(weight, axis), bias,
                   (1, _one(stride)), pad, (1, _one(dilation)), groups,
                   channels_last=channels_last)  # fmt: skip
    return Reference(found.value.squeeze(axis), found.magnitude.squeeze(axis))


def conv_transpose1d(x: Array, weight: Array, bias: Array | None = None, stride: Any = 1,
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                     dilation: Any = 1, *, channels_last: bool = False) -> Reference:  # fmt: skip
    """conv_transpose2d over one row."""
    axis = 1 if channels_last else 2
    found = conv_transpose2d(np.expand_dims(x, axis), np.expand_dims(weight, axis), bias,
                             (1, _one(stride)), (0, _one(padding)), (0, _one(output_padding)),
                             groups, (1, _one(dilation)), channels_last=channels_last)  # fmt: skip
    return Reference(found.value.squeeze(axis), found.magnitude.squeeze(axis))


def max_pool2d(x: Array, kernel_size: Any, stride: Any = None, padding: Any = 0,
               dilation: Any = 1, ceil_mode: bool = False, *,
               channels_last: bool = False) -> Array:  # fmt: skip
    """torch's max_pool2d: the max over each window's taps inside the image."""
    return _pool(x, kernel_size, stride, padding, dilation, ceil_mode, "max", channels_last)


def avg_pool2d(x: Array, kernel_size: Any, stride: Any = None, padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True, *,
               channels_last: bool = False) -> Array:  # fmt: skip
    """torch's avg_pool2d (divisor: the window within the padded image, or its taps inside
    the image without count_include_pad)."""
    mode = "include" if count_include_pad else "exclude"
    return _pool(x, kernel_size, stride, padding, 1, ceil_mode, mode, channels_last)


def adaptive_avg_pool2d(x: Array, output_size: Any, *, channels_last: bool = False) -> Array:
    """torch's adaptive_avg_pool2d: output i averages rows floor(i·H/Ho) to ceil((i+1)·H/Ho)."""
    xv = _nchw(x, channels_last)
    h, w = xv.shape[2:]
    sizes = output_size if isinstance(output_size, (tuple, list)) else (output_size,) * 2
    ho, wo = (full if o is None else o for o, full in zip(sizes, (h, w), strict=True))
    out = np.zeros((*xv.shape[:2], ho, wo))
    for i in range(ho):
        for j in range(wo):
            rows = slice(i * h // ho, -(-(i + 1) * h // ho))
            cols = slice(j * w // wo, -(-(j + 1) * w // wo))
            out[:, :, i, j] = xv[:, :, rows, cols].mean(axis=(2, 3))
    return _layout(out, channels_last)


def upsample_nearest2d(x: Array, size: Any = None, scale_factor: Any = None, *,
                       channels_last: bool = False) -> Array:  # fmt: skip
    """torch's nearest interpolation: source index min(floor(o · scale), in - 1) in f32."""
    xv = _nchw(x, channels_last)
    (ho, wo), scales = _resize(xv.shape[2:], size, scale_factor)
    rows = [_nearest(o, scales[0], xv.shape[2]) for o in range(ho)]
    cols = [_nearest(o, scales[1], xv.shape[3]) for o in range(wo)]
    return _layout(xv[:, :, rows][:, :, :, cols], channels_last)


def upsample_bilinear2d(x: Array, size: Any = None, scale_factor: Any = None,
                        align_corners: bool = False, *,
                        channels_last: bool = False) -> Array:  # fmt: skip
    """torch's bilinear interpolation (source positions in f32 as torch computes them)."""
    xv = _nchw(x, channels_last)
    h, w = xv.shape[2:]
    (ho, wo), scales = _resize((h, w), size, scale_factor)
    if align_corners:
        scales = tuple(
            float(np.float32(n - 1) / np.float32(o - 1)) if o > 1 else 0.0
            for n, o in ((h, ho), (w, wo))
        )
    (h0, h1, th), (w0, w1, tw) = (
        _linear(o, scale, n, align_corners)
        for o, scale, n in ((ho, scales[0], h), (wo, scales[1], w))
    )
    top = xv[:, :, h0][..., w0] * (1 - tw) + xv[:, :, h0][..., w1] * tw
    bottom = xv[:, :, h1][..., w0] * (1 - tw) + xv[:, :, h1][..., w1] * tw
    return _layout(top * (1 - th)[:, None] + bottom * th[:, None], channels_last)


def group_norm(x: Array, num_groups: int, weight: Array | None = None,
               bias: Array | None = None, eps: float = 1e-5) -> Array:  # fmt: skip
    """torch's group_norm over x [N, C, *]."""
    xv = _f64(x)
    groups = xv.reshape(xv.shape[0], num_groups, -1)
    mean = groups.mean(axis=2, keepdims=True)
    var = groups.var(axis=2, keepdims=True)
    y = ((groups - mean) / np.sqrt(var + float(np.float32(eps)))).reshape(xv.shape)
    return _affine(y, weight, bias, xv.ndim, 1)


def batch_norm(x: Array, running_mean: Array, running_var: Array, weight: Array | None = None,
               bias: Array | None = None, eps: float = 1e-5, *,
               channels_last: bool = False) -> Array:  # fmt: skip
    """torch's batch_norm with training=False (channel axis 1, or the last)."""
    xv = _f64(x)
    axis = xv.ndim - 1 if channels_last else 1
    shape = [1] * xv.ndim
    shape[axis] = -1
    mean, var = _f64(running_mean).reshape(shape), _f64(running_var).reshape(shape)
    y = (xv - mean) / np.sqrt(var + float(np.float32(eps)))
    return _affine(y, weight, bias, xv.ndim, axis)


# --- helpers ---------------------------------------------------------------------------------


def _pool(x: Array, kernel_size: Any, stride: Any, padding: Any, dilation: Any,
          ceil_mode: bool, mode: str, channels_last: bool) -> Array:  # fmt: skip
    xv = _nchw(x, channels_last)
    h, w = xv.shape[2:]
    (kh, kw), (ph, pw), (dh, dw) = _pair(kernel_size), _pair(padding), _pair(dilation)
    sh, sw = (kh, kw) if stride is None else _pair(stride)
    ho, wo = (_pool_size(n, k, st, p, d, ceil_mode)
              for n, k, st, p, d in ((h, kh, sh, ph, dh), (w, kw, sw, pw, dw)))  # fmt: skip
    out = np.zeros((*xv.shape[:2], ho, wo))
    for i in range(ho):
        for j in range(wo):
            r0, c0 = i * sh - ph, j * sw - pw
            rows = [r for r in range(r0, r0 + dh * (kh - 1) + 1, dh) if 0 <= r < h]
            cols = [c for c in range(c0, c0 + dw * (kw - 1) + 1, dw) if 0 <= c < w]
            window = xv[:, :, rows][:, :, :, cols]
            if mode == "max":  # (a dilated window may have no tap inside: -inf, as torch)
                out[:, :, i, j] = window.max(axis=(2, 3), initial=-np.inf)
                continue
            divisor = len(rows) * len(cols)
            if mode == "include":
                divisor = (min(r0 + kh, h + ph) - r0) * (min(c0 + kw, w + pw) - c0)
            out[:, :, i, j] = window.sum(axis=(2, 3)) / divisor
    return _layout(out, channels_last)


def _pool_size(n: int, k: int, stride: int, pad: int, dilation: int, ceil_mode: bool) -> int:
    span = n + 2 * pad - dilation * (k - 1) - 1
    out = (math.ceil(span / stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (out - 1) * stride >= n + pad:
        out -= 1
    return out


def _resize(shape: Any, size: Any, scale_factor: Any) -> tuple[tuple[int, int], tuple[float, ...]]:
    """torch's output size and f32 scales (in / out, or 1 / scale_factor)."""
    if size is not None:
        out = _pair(size)
        return out, tuple(
            float(np.float32(n) / np.float32(o)) for n, o in zip(shape, out, strict=True)
        )
    factors = _pair(scale_factor)
    out = tuple(math.floor(n * f) for n, f in zip(shape, factors, strict=True))
    return (out[0], out[1]), tuple(float(np.float32(1.0 / f)) for f in factors)


def _nearest(o: int, scale: float, n: int) -> int:
    return min(math.floor(float(np.float32(o) * np.float32(scale))), n - 1)


def _linear(out: int, scale: float, n: int, align_corners: bool) -> tuple[Array, Array, Array]:
    """(first source index, second, weight of the second) per output index, in f32 as torch."""
    o = np.arange(out, dtype=np.float32)
    at = (
        o * np.float32(scale)
        if align_corners
        else (o + np.float32(0.5)) * np.float32(scale) - np.float32(0.5)
    )
    at = np.maximum(at, np.float32(0))
    first = at.astype(np.int64)
    second = np.minimum(first + 1, n - 1)
    return first, second, (at - first.astype(np.float32)).astype(np.float64)


def _affine(y: Array, weight: Array | None, bias: Array | None, ndim: int, axis: int) -> Array:
    shape = [1] * ndim
    shape[axis] = -1
    if weight is not None:
        y = y * _f64(weight).reshape(shape)
    if bias is not None:
        y = y + _f64(bias).reshape(shape)
    return y


def _pair(value: Any) -> tuple[int, int]:
    if isinstance(value, (tuple, list)):
        return (value[0], value[-1])
    return (value, value)


def _one(value: Any) -> int:
    return int(value[0]) if isinstance(value, (tuple, list)) else int(value)


def _nchw(x: Array, channels_last: bool) -> Array:
    v = _f64(x)
    return v.transpose(0, 3, 1, 2) if channels_last else v


def _layout(x: Array, channels_last: bool) -> Array:
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1) if channels_last else x)


def _f64(x: Any) -> Array:
    return np.asarray(x).astype(np.float64)


__all__ = [
    "adaptive_avg_pool2d",
    "avg_pool2d",
    "batch_norm",
    "conv1d",
    "conv2d",
    "conv_transpose1d",
    "conv_transpose2d",
    "group_norm",
    "max_pool2d",
    "upsample_bilinear2d",
    "upsample_nearest2d",
]
