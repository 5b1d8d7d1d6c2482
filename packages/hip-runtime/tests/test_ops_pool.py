"""max_pool2d, avg_pool2d, adaptive_avg_pool2d, upsample_nearest2d / upsample_bilinear2d,
group_norm and batch_norm against hip_runtime.testing.conv's float64 references under
hypothesis: random shapes, windows, strides, paddings, dilations, ceil_mode and
count_include_pad, output sizes and scale factors, align_corners, NCHW and NHWC, f32 / f16 /
bf16; NaN in max pooling; plans (a repeated call) and out=; the errors. max_pool2d's kernel
variants: test_ops_pool_kernels.py.

On the cpu platform in CI; the same tests run on nvidia (marked gpu) through the device fixture.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from hip_core import Device
from hip_runtime import HipBackend, testing
from hip_runtime.ops import channel_norms
from hip_runtime.testing import call_twice
from hip_runtime.testing import conv as testing_conv

TYPES = ["f32", "f16", "bf16"]
SETTINGS = settings(
    max_examples=30, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)  # fmt: skip


@pytest.fixture(scope="module")
def backend(device: Device, program_cache: Path) -> Iterator[HipBackend]:
    with HipBackend(device) as backend:
        yield backend


def image(data: Any, max_side: int = 7) -> tuple[np.ndarray, str, bool]:
    """A random [N, C, H, W] image (NHWC when channels_last), its dtype and layout."""
    dtype = data.draw(st.sampled_from(TYPES))
    shape = (data.draw(st.integers(1, 2)), data.draw(st.integers(1, 4)),
             data.draw(st.integers(1, max_side)), data.draw(st.integers(1, max_side)))  # fmt: skip
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    x = testing.random(rng, shape, dtype, scale=2.0)
    channels_last = data.draw(st.booleans())
    if channels_last:
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    return x, dtype, channels_last


def pair(data: Any, low: int, high: int) -> Any:
    """An int or an (h, w) pair, as torch takes them."""
    first, second = data.draw(st.integers(low, high)), data.draw(st.integers(low, high))
    return data.draw(st.sampled_from([first, (first, second)]))


def both(value: Any) -> tuple[int, int]:
    return tuple(value) if isinstance(value, tuple) else (value, value)  # type: ignore[return-value]


@SETTINGS
@given(data=st.data())
def test_pooling_matches_numpy(backend: HipBackend, data: Any) -> None:
    x, dtype, cl = image(data)
    h, w = x.shape[1:3] if cl else x.shape[2:]
    kernel = pair(data, 1, 3)
    stride = data.draw(st.sampled_from([None, pair(data, 1, 3)]))
    kh, kw = both(kernel)
    padding = data.draw(st.sampled_from([0, (data.draw(st.integers(0, kh // 2)),
                                             data.draw(st.integers(0, kw // 2)))]))  # fmt: skip
    ph, pw = both(padding)
    ceil_mode = data.draw(st.booleans())
    tensor = backend.from_numpy(x)
    if data.draw(st.booleans()):
        dilation = pair(data, 1, 2)
        dh, dw = both(dilation)
        assume(h + 2 * ph >= dh * (kh - 1) + 1 and w + 2 * pw >= dw * (kw - 1) + 1)
        got = call_twice(backend.max_pool2d, tensor, kernel, stride, padding, dilation,
                         ceil_mode, channels_last=cl)  # fmt: skip
        expected = testing_conv.max_pool2d(x, kernel, stride, padding, dilation, ceil_mode,
                                           channels_last=cl)  # fmt: skip
        # A dilated window with no tap inside the image: -inf in both (torch's too).
        empty = np.isneginf(expected)
        assert np.array_equal(np.isneginf(got.astype(np.float64)), empty)
        got, expected = got.copy(), expected.copy()
        got[empty], expected[empty] = 0, 0
    else:
        assume(h + 2 * ph >= kh and w + 2 * pw >= kw)
        include = data.draw(st.booleans())
        got = call_twice(backend.avg_pool2d, tensor, kernel, stride, padding, ceil_mode,
                         include, channels_last=cl)  # fmt: skip
        expected = testing_conv.avg_pool2d(x, kernel, stride, padding, ceil_mode, include,
                                           channels_last=cl)  # fmt: skip
    testing.assert_close(got, expected, dtype)


@SETTINGS
@given(data=st.data())
def test_adaptive_pooling_and_upsampling_match_numpy(backend: HipBackend, data: Any) -> None:
    x, dtype, cl = image(data)
    tensor = backend.from_numpy(x)
    op = data.draw(st.sampled_from(["adaptive", "nearest", "bilinear"]))
    if op == "adaptive":
        size = data.draw(st.sampled_from([pair(data, 1, 8), (None, data.draw(st.integers(1, 5)))]))
        got = call_twice(backend.adaptive_avg_pool2d, tensor, size, channels_last=cl)
        expected = testing_conv.adaptive_avg_pool2d(x, size, channels_last=cl)
    else:
        if data.draw(st.booleans()):
            kwargs: dict[str, Any] = {"size": pair(data, 1, 12)}
        else:
            factor = data.draw(st.sampled_from([2, 3, 0.5, 1.5, 1.7, 2.25]))
            kwargs = {"scale_factor": data.draw(st.sampled_from([factor, (factor, 2.0)]))}
            h, w = x.shape[1:3] if cl else x.shape[2:]
            assume(h * both_float(kwargs["scale_factor"])[0] >= 1)
            assume(w * both_float(kwargs["scale_factor"])[1] >= 1)
        if op == "nearest":
            got = call_twice(backend.upsample_nearest2d, tensor, **kwargs, channels_last=cl)
            expected = testing_conv.upsample_nearest2d(x, **kwargs, channels_last=cl)
        else:
            corners = data.draw(st.booleans())
            got = call_twice(backend.upsample_bilinear2d, tensor, **kwargs,
                             align_corners=corners, channels_last=cl)  # fmt: skip
            expected = testing_conv.upsample_bilinear2d(x, **kwargs, align_corners=corners,
                                                        channels_last=cl)  # fmt: skip
    testing.assert_close(got, expected, dtype)


def both_float(value: Any) -> tuple[float, float]:
    return tuple(value) if isinstance(value, tuple) else (value, value)  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("shape", "groups", "dtype"),
    [
        ((1, 4, 128, 128), 1, "f16"),  # 8192 16-byte vectors: 8 a thread of 1024
        ((2, 8, 64, 64), 2, "bf16"),  # 2048: 2 a thread
        ((1, 6, 8, 37), 2, "bf16"),  # 111 (3 · 296 elements): a partly filled pass
        ((1, 2, 16, 300), 1, "f32"),  # 2400 4-float vectors
        ((1, 2, 256, 300), 1, "bf16"),  # 19200: 19 a thread
    ],
)
@pytest.mark.parametrize(
    ("passes", "hints", "deep"),
    [(2, 0, False), (2, 1, False), (2, 7, False), (2, 1, True), (2, 7, True), (3, 0, False)],
)
def test_group_norm_of_large_groups_matches_numpy(
    backend: HipBackend, shape: tuple[int, ...], groups: int, dtype: str, passes: int,
    hints: int, deep: bool, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """Groups the hypothesis test's shapes never reach: rows of many 16-byte vectors a thread
    (two or four at a time, then the rest), one pass partly filled; both kernels of
    kernels/channel_norms.hip (two reads, the default, and three), each on a fresh backend
    (a plan keeps the kernel's arguments); the two-read kernel with its cache hints
    (channel_norms._GROUP_HINTS: a streaming store, and every hint; NVIDIA's accesses),
    with two or four vectors a thread in flight (channel_norms._GROUP_DEEP: group_norm_deep,
    the default)."""
    monkeypatch.setattr(channel_norms, "_GROUP_PASSES", passes)
    monkeypatch.setattr(channel_norms, "_GROUP_HINTS", hints)
    monkeypatch.setattr(channel_norms, "_GROUP_DEEP", deep)
    rng = np.random.default_rng(19)
    x = testing.random(rng, shape, dtype, scale=2.0, shift=1.0)
    weight, bias = (testing.random(rng, (shape[1],), dtype) for _ in range(2))
    with HipBackend(backend.device) as fresh:
        got = call_twice(fresh.group_norm, fresh.from_numpy(x), groups,
                         fresh.from_numpy(weight), fresh.from_numpy(bias), 1e-5)  # fmt: skip
    expected = testing_conv.group_norm(x, groups, weight, bias, 1e-5)
    testing.assert_close(got, expected, dtype, 1e-3 if dtype == "f32" else 0.0)


@SETTINGS
@given(data=st.data())
def test_channel_norms_match_numpy(backend: HipBackend, data: Any) -> None:
    dtype = data.draw(st.sampled_from(TYPES))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    groups = data.draw(st.integers(1, 3))
    c = groups * data.draw(st.integers(1, 3))
    spatial = tuple(data.draw(st.lists(st.integers(1, 6), max_size=3)))
    shape = (data.draw(st.integers(1, 3)), c, *spatial)
    x = testing.random(rng, shape, dtype, scale=2.0, shift=data.draw(st.sampled_from([0, 5])))
    params = [testing.random(rng, (c,), dtype) if data.draw(st.booleans()) else None
              for _ in range(2)]  # fmt: skip
    weight, bias = (None if p is None else backend.from_numpy(p) for p in params)
    eps = data.draw(st.sampled_from([1e-5, 1e-3]))
    if data.draw(st.booleans()):
        got = call_twice(backend.group_norm, backend.from_numpy(x), groups, weight, bias, eps)
        expected = testing_conv.group_norm(x, groups, *params, eps)
        # f32 statistics of shifted values: rounding at the scale of the values, not of the
        # normalized result (the division by a small spread magnifies it).
        wide = x.astype(np.float64)
        magnitude = np.abs(wide).max() / max(float(np.std(wide)), 1e-3)
        if dtype == "f32":
            magnitude *= 4
        testing.assert_close(got, expected, dtype, magnitude * 1e-2 if dtype == "f32" else 0.0)
        return
    channels_last = data.draw(st.booleans()) and len(spatial) > 0
    if channels_last:
        x = np.ascontiguousarray(np.moveaxis(x, 1, -1))
    mean = testing.random(rng, (c,), dtype)
    var = np.abs(testing.random(rng, (c,), dtype)).astype(x.dtype)
    got = call_twice(backend.batch_norm, backend.from_numpy(x), backend.from_numpy(mean),
                     backend.from_numpy(var), weight, bias, eps,
                     channels_last=channels_last)  # fmt: skip
    expected = testing_conv.batch_norm(x, mean, var, *params, eps, channels_last=channels_last)
    testing.assert_close(got, expected, dtype, np.abs(expected).max() * 1e-3)


@pytest.mark.parametrize("dtype", TYPES)
def test_pooling_vector_path(backend: HipBackend, dtype: str) -> None:
    """NHWC with 16 channels: each thread pools a 16-byte run of channels."""
    rng = np.random.default_rng(5)
    x = testing.random(rng, (2, 7, 6, 16), dtype)
    x[0, 1, 2, 3] = np.nan
    tensor = backend.from_numpy(x)
    for got, expected in (
        (backend.max_pool2d(tensor, 3, 2, 1, channels_last=True),
         testing_conv.max_pool2d(x, 3, 2, 1, channels_last=True)),
        (backend.avg_pool2d(tensor, 3, 2, 1, True, False, channels_last=True),
         testing_conv.avg_pool2d(x, 3, 2, 1, True, False, channels_last=True)),
        (backend.adaptive_avg_pool2d(tensor, (3, 4), channels_last=True),
         testing_conv.adaptive_avg_pool2d(x, (3, 4), channels_last=True)),
    ):  # fmt: skip
        found = got.to_numpy()
        nan = np.isnan(expected)
        assert np.array_equal(np.isnan(found.astype(np.float64)), nan)
        found[nan], expected[nan] = 0, 0
        testing.assert_close(found, expected, dtype)


@pytest.mark.parametrize("dtype", TYPES)
def test_group_norm_vector_path(backend: HipBackend, dtype: str) -> None:
    """Spatial sizes that are a multiple of the 16-byte vector: the kernel's vector path
    (channels change between vectors, never inside one), against the by-element path."""
    rng = np.random.default_rng(3)
    x = testing.random(rng, (2, 6, 4, 16), dtype, scale=2.0, shift=1.0)
    w, b = testing.random(rng, (6,), dtype), testing.random(rng, (6,), dtype)
    got = backend.group_norm(backend.from_numpy(x), 3, backend.from_numpy(w),
                             backend.from_numpy(b)).to_numpy()  # fmt: skip
    testing.assert_close(got, testing_conv.group_norm(x, 3, w, b), dtype, 1e-3)
    # One element per group: exactly 0 (x - mean first; no cancellation of x·s - mean·s).
    single = testing.random(rng, (2, 1), dtype, shift=5.0)
    got = backend.group_norm(backend.from_numpy(single), 1).to_numpy()
    np.testing.assert_array_equal(got.astype(np.float32), np.zeros((2, 1), np.float32))


def test_max_pool_propagates_nan(backend: HipBackend) -> None:
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    x[0, 0, 1, 2] = np.nan
    got = backend.max_pool2d(backend.from_numpy(x), 2).to_numpy()
    expected = np.array([[[[5.0, np.nan], [13.0, 15.0]]]], np.float32)
    np.testing.assert_array_equal(got, expected)
    # A dilated window whose taps all fall in the padding: -inf, as torch.
    row = backend.from_numpy(np.ones((1, 1, 1, 3), np.float32))
    got = backend.max_pool2d(row, (2, 1), 1, (1, 0), (2, 1)).to_numpy()
    np.testing.assert_array_equal(got, np.full((1, 1, 1, 3), -np.inf, np.float32))


def test_errors_name_the_op_and_argument(backend: HipBackend) -> None:
    x = backend.zeros((1, 4, 5, 5))
    cases: list[tuple[type[Exception], str, Any]] = [
        (ValueError, r"max_pool2d: padding \(2, 2\) must be at most half the window",
         lambda: backend.max_pool2d(x, 3, 1, 2)),
        (ValueError, r"avg_pool2d: the input size 5 \(padding 0\) is smaller than the window",
         lambda: backend.avg_pool2d(x, 6)),
        (ValueError, r"max_pool2d: kernel_size must be in \[1,", lambda: backend.max_pool2d(x, 0)),
        (TypeError, r"avg_pool2d: stride must be an int or 2 ints",
         lambda: backend.avg_pool2d(x, 2, "2")),
        (ValueError, r"max_pool2d: x must be 4-D", lambda: backend.max_pool2d(x.reshape(4, 25), 2)),
        (ValueError, r"adaptive_avg_pool2d: output_size must be in \[1,",
         lambda: backend.adaptive_avg_pool2d(x, 0)),
        (ValueError, r"upsample_nearest2d: give exactly one of size and scale_factor",
         lambda: backend.upsample_nearest2d(x)),
        (ValueError, r"upsample_bilinear2d: scale_factor must be positive",
         lambda: backend.upsample_bilinear2d(x, scale_factor=-1.0)),
        (ValueError, r"upsample_nearest2d takes float32, float16 and bfloat16",
         lambda: backend.upsample_nearest2d(backend.zeros((1, 1, 2, 2), "int32"), 4)),
        (ValueError, r"group_norm: x's 4 channels are not divisible by 3 groups",
         lambda: backend.group_norm(x, 3)),
        (ValueError, r"weight has shape \(3,\); expected \(4,\)",
         lambda: backend.group_norm(x, 2, backend.zeros((3,)))),
        (ValueError, r"running_var has dtype float16",
         lambda: backend.batch_norm(x, backend.zeros((4,)), backend.zeros((4,), "float16"))),
        (ValueError, r"batch_norm: x must be \[N, C, \*\]",
         lambda: backend.batch_norm(backend.zeros((4,)), backend.zeros((4,)),
                                    backend.zeros((4,)))),
        (ValueError, r"max_pool2d takes C-contiguous tensors; x is a strided view",
         lambda: backend.max_pool2d(x.permute(0, 1, 3, 2), 2)),
    ]  # fmt: skip
    for error, message, call in cases:
        with pytest.raises(error, match=message):
            call()
