"""max_pool2d's kernel variants against each other and hip_runtime.testing.conv's float64
reference: pool.hip's small-window kernels (NHWC runs of channels, NCHW rows), pool_columns.hip
(NCHW, two output rows a thread), pool_nhwc.hip (NHWC, the shared column by a shuffle) and
pool_tiled_nhwc.hip at stride 2, each switched by its `pooling` flag, on shapes that cross
warps and tiles, with NaN; which kernel a case takes (stride, width, alignment).

On the cpu platform in CI; the same tests run on nvidia (marked gpu) through the device fixture.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hip_core import Device
from hip_runtime import HipBackend, testing
from hip_runtime.ops import pooling
from hip_runtime.testing import assert_close_with_nans, call_twice
from hip_runtime.testing import conv as testing_conv

TYPES = ["f32", "f16", "bf16"]
#: (window, padding, ceil_mode) of the stride-2 kernels' tests.
STRIDE_2_WINDOWS = [(3, 1, False), (3, 0, True), (2, 1, True), (2, 0, False)]


@pytest.fixture(scope="module")
def backend(device: Device, program_cache: Path) -> Iterator[HipBackend]:
    with HipBackend(device) as backend:
        yield backend


def assert_switch_keeps_the_bits(
    backend: HipBackend, monkeypatch: pytest.MonkeyPatch, switch: str, x: np.ndarray,
    window: int, padding: int, ceil_mode: bool, dtype: str, channels_last: bool = False,
) -> None:  # fmt: skip
    """max_pool2d of x at stride 2 with `pooling.<switch>` off, then on: the same bits (NaNs
    by value: the one-row kernel's max.NaN gives the canonical NaN on NVIDIA), and numpy's
    values with NaN where numpy has it."""
    tensor, results = backend.from_numpy(x), []
    for on in (False, True):
        monkeypatch.setattr(pooling, switch, on)
        results.append(call_twice(backend.max_pool2d, tensor, window, 2, padding, 1, ceil_mode,
                                  channels_last=channels_last))  # fmt: skip
    testing.assert_bits_equal(results[1], results[0])
    expected = testing_conv.max_pool2d(x, window, 2, padding, 1, ceil_mode,
                                       channels_last=channels_last)  # fmt: skip
    assert_close_with_nans(results[1], expected, dtype)


@pytest.mark.parametrize(
    ("window", "stride", "padding", "dilation", "ceil_mode"),
    [(3, 2, 1, 1, False), (3, 1, 1, 2, True), (2, 2, 0, 1, True), (2, 1, 1, 1, False)],
)
@pytest.mark.parametrize(
    ("dtype", "channels_last", "c", "pairs"),
    [("bf16", True, 16, False), ("bf16", True, 16, True), ("f32", True, 8, True),
     ("f32", False, 3, False), ("f16", True, 5, False), ("bf16", True, 24, "tiled"),
     ("f32", True, 8, "tiled")],
)  # fmt: skip
def test_small_max_windows_of_the_portable_kernel_match_numpy(
    backend: HipBackend, window: int, stride: int, padding: int, dilation: int,
    ceil_mode: bool, dtype: str, channels_last: bool, c: int, pairs: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """pool.hip's 2x2 and 3x3 max variant (every tap loaded first), 16-byte runs of channels
    (NHWC, C a multiple of 8) or one element a thread, with NaN, padding, dilation and
    ceil_mode; the library off (on the cpu platform it takes every case it can express).
    `pairs`: two output rows a thread where the rows' stride is 2 (pooling._NHWC_PAIRS; H = 9
    leaves the last pair one row); "tiled": pool_tiled_nhwc.hip where the stride is 2
    (pooling._NHWC_TILED; C = 24 in bf16: three 16-byte runs, one a block); otherwise NHWC at
    stride 2 takes pool_nhwc.hip (pooling._NHWC_SHUFFLE)."""
    monkeypatch.setattr(pooling, "_NHWC_PAIRS", pairs is True)
    monkeypatch.setattr(pooling, "_NHWC_TILED", pairs == "tiled")
    monkeypatch.setattr(pooling, "_NHWC_SHUFFLE", pairs is False)
    rng = np.random.default_rng(window * 10 + stride)
    shape = (2, 9, 11, c) if channels_last else (2, c, 9, 11)
    x = testing.random(rng, shape, dtype, scale=3.0)
    x.reshape(-1)[5] = np.nan
    backend._conv_use_library = False
    try:
        got = call_twice(backend.max_pool2d, backend.from_numpy(x), window, stride, padding,
                         dilation, ceil_mode, channels_last=channels_last)  # fmt: skip
    finally:
        backend._conv_use_library = True
    expected = testing_conv.max_pool2d(x, window, stride, padding, dilation, ceil_mode,
                                       channels_last=channels_last)  # fmt: skip
    assert_close_with_nans(got, expected, dtype)


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize(
    ("window", "stride", "padding", "dilation", "ceil_mode"),
    [(3, 2, 1, 1, False), (3, 2, 0, 1, True), (2, 2, 1, 1, True), (2, 2, 0, 1, False),
     (3, (1, 2), 1, (2, 1), True), (3, (3, 2), (0, 1), 1, False)],
)  # fmt: skip
@pytest.mark.parametrize("variant", ["rows", "pairs", "columns"])
def test_max_pool_rows_of_the_nchw_kernel_match_numpy(
    backend: HipBackend, window: int, stride: Any, padding: Any, dilation: Any,
    ceil_mode: bool, dtype: str, variant: str, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """pool.hip's max_pool2d_rows (NCHW, column stride 2, several outputs a thread from one
    16-byte vector of each row): widths a multiple of the vector (16, 24) and one that is not
    (20: the one-output-a-thread loop in 16-bit), NaN, the image's edges, ceil_mode; "pairs":
    two output rows a thread where the rows' stride is 2 (pooling._NCHW_PAIRS); "columns":
    at stride 2, pool_columns.hip's two rows a thread (pooling._NCHW_COLUMNS, the default)."""
    monkeypatch.setattr(pooling, "_NCHW_PAIRS", variant == "pairs")
    monkeypatch.setattr(pooling, "_NCHW_COLUMNS", variant == "columns")
    rng = np.random.default_rng(window * 7 + len(str(stride)))
    for width in (16, 24, 20):
        x = testing.random(rng, (2, 3, 9, width), dtype, scale=3.0)
        x[1, 2, 4, width - 1] = x[0, 1, 0, 0] = np.nan
        got = call_twice(backend.max_pool2d, backend.from_numpy(x), window, stride, padding,
                         dilation, ceil_mode)  # fmt: skip
        expected = testing_conv.max_pool2d(x, window, stride, padding, dilation, ceil_mode)
        assert_close_with_nans(got, expected, dtype)


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize(("window", "padding", "ceil_mode"), STRIDE_2_WINDOWS)
@pytest.mark.parametrize("runs", [3, 10, 64])
def test_nhwc_shuffle_kernel_spans_warps_with_the_one_row_bits(
    backend: HipBackend, window: int, padding: int, ceil_mode: bool, dtype: str, runs: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """pool_nhwc.hip at stride 2 (pooling._NHWC_SHUFFLE, the window's first column from the
    thread one pixel before): `runs` 16-byte runs of channels a pixel, 3 and 10 (a pixel's
    threads cross warps at varying lanes, whose first pixel loads the column itself) and 64
    (more than a warp: every thread loads it), rows of an odd width, launches that end inside
    a warp, NaN at the image's edges and mid-row: the one-row kernel's bits, and numpy's."""
    c = runs * (4 if dtype == "f32" else 8)  # 16 bytes of channels a run
    rng = np.random.default_rng(window * 7 + padding + runs)
    x = testing.random(rng, (2, 7, 13, c), dtype, scale=3.0)
    x.reshape(-1)[[0, 5 * 13 * c + 3, 6 * c + 1, x.size - 1]] = np.nan
    assert_switch_keeps_the_bits(backend, monkeypatch, "_NHWC_SHUFFLE", x, window, padding,
                                 ceil_mode, dtype, channels_last=True)  # fmt: skip


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize(("window", "padding", "ceil_mode"), STRIDE_2_WINDOWS)
def test_tiled_nhwc_max_pool_spans_several_tiles_with_the_same_bits(
    backend: HipBackend, window: int, padding: int, ceil_mode: bool, dtype: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """The shared-memory kernel at stride 2 (pooling._NHWC_TILED) on images of several tiles
    each way (4 output rows x 8 columns x 64 channels a block, two blocks of 32 channels in
    f32, and in f16 at most 4 runs a block, pooling._NHWC_TILE_RUNS: 8 x 8 outputs x 32
    channels), NaN in the tiles' halos: the one-row kernel's bits, and numpy's values."""
    monkeypatch.setattr(pooling, "_NHWC_TILE_RUNS", 4 if dtype == "f16" else 8)
    monkeypatch.setattr(pooling, "_NHWC_SHUFFLE", False)
    rng = np.random.default_rng(window * 3 + padding)
    x = testing.random(rng, (1, 19, 37, 64), dtype, scale=3.0)
    x.reshape(-1)[[0, 17 * 64 + 5, x.size - 1]] = np.nan
    assert_switch_keeps_the_bits(backend, monkeypatch, "_NHWC_TILED", x, window, padding,
                                 ceil_mode, dtype, channels_last=True)  # fmt: skip


@pytest.mark.parametrize("dtype", TYPES)
@pytest.mark.parametrize(("window", "padding", "ceil_mode"), STRIDE_2_WINDOWS)
def test_nchw_column_kernel_spans_warps_with_the_one_row_bits(
    backend: HipBackend, window: int, padding: int, ceil_mode: bool, dtype: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """pool_columns.hip at stride 2 (pooling._NCHW_COLUMNS, two output rows a thread) on rows
    that cross warps (272 columns: 34 threads a row in 16-bit, 68 in f32; a warp's first and
    last lanes load the column beside them where the others take it from a neighbour), rows of
    two threads, several rows and planes a warp (16 columns), an odd number of output rows (19
    at 37 rows: the last pair's second row is not stored), launches that end inside a warp
    (the rest take its shuffles and store nothing), NaN at a warp's edge and the image's: the
    one-row kernel's bits, and numpy's values."""
    rng = np.random.default_rng(window * 5 + padding)
    for shape in ((2, 2, 37, 272), (2, 3, 37, 128), (1, 3, 9, 16)):
        x = testing.random(rng, shape, dtype, scale=3.0)
        x.reshape(-1)[[i % x.size for i in (0, 255, 256, 3 * 272 + 127, -1)]] = np.nan
        assert_switch_keeps_the_bits(backend, monkeypatch, "_NCHW_COLUMNS", x, window, padding,
                                     ceil_mode, dtype)  # fmt: skip


@pytest.mark.parametrize(
    ("width", "stride", "offset", "kernel"),
    [
        (16, 2, 0, "max_pool2d_columns"),
        (96, 2, 0, "max_pool2d_columns"),
        (96, (1, 2), 0, "max_pool2d_rows"),
        (96, 2, 1, "pool2d"),
        (20, 2, 0, "pool2d"),
    ],
)
def test_nchw_max_pool_kernel_by_stride_width_and_alignment(
    backend: HipBackend, width: int, stride: Any, offset: int, kernel: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """bf16 3x3 NCHW: 16-byte aligned rows at stride 2 take pool_columns.hip (from two vectors
    a row), at column stride 2 only max_pool2d_rows; an x one element past 16-byte alignment (a
    view) or rows not a whole number of vectors the one-output-a-thread kernel; each against
    numpy."""
    requested: list[str] = []
    fetch = backend._kernel

    def spy(source: str, name: str) -> Any:
        requested.append(name)
        return fetch(source, name)

    monkeypatch.setattr(backend, "_kernel", spy)
    rng = np.random.default_rng(width + offset)
    shape = (2, 3, 9, width)
    flat = testing.random(rng, (offset + int(np.prod(shape)),), "bf16", scale=3.0)
    x = flat[offset:].reshape(shape)
    view = backend.from_numpy(flat)[offset:].reshape(shape)  # (contiguous, `offset` elements in)
    backend._conv_use_library = False
    try:
        got = call_twice(backend.max_pool2d, view, 3, stride, 1)
    finally:
        backend._conv_use_library = True
    assert requested and set(requested) == {f"{kernel}_bf16"}
    testing.assert_close(got, testing_conv.max_pool2d(x, 3, stride, 1, 1, False), "bf16", 0.0)
