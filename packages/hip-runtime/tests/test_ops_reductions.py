"""sum, mean, max, min, argmax, argmin against float64 numpy references, under hypothesis.

Random shapes of rank 0-5 (size-0 and size-1 axes), axes drawn at random (None, an int, a
tuple, negative ones too), keepdim, every dtype, inputs in random layouts (the `layouts`
fixture: permuted, stepped, reversed, broadcast), NaNs in float inputs. Large shapes (the
split over the reduced axis on a real GPU, the 16-byte paths) run marked gpu.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from hip_core import Device
from hip_runtime import HipBackend
from hip_runtime.ops import reductions
from hip_runtime.ops.reduce_layout import Merged

DTYPES = [
    np.dtype(t)
    for t in (np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int8, np.int16,
              np.int32, np.int64, np.uint8, np.uint32, np.bool_)
]  # fmt: skip
FLOATS = [t for t in DTYPES if t.kind == "f" or t.name == "bfloat16"]
# Relative error of a float result against the sum of |terms| (f32 accumulation for 16-bit
# types, then one rounding to the storage type).
RTOL = {"float32": 1e-5, "float64": 1e-12, "float16": 2e-3, "bfloat16": 1e-2}
OPS = ("sum", "mean", "max", "min", "argmax", "argmin")
SETTINGS = settings(
    max_examples=40, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)  # fmt: skip


@pytest.fixture(scope="module")
def backend(device: Device, program_cache: Path) -> Iterator[HipBackend]:
    with HipBackend(device) as backend:
        yield backend


def is_float(dtype: np.dtype[Any]) -> bool:
    return dtype.kind == "f" or dtype.name == "bfloat16"


def host_values(data: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> np.ndarray:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if not is_float(dtype):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    values = rng.standard_normal(shape) * 4
    if data.draw(st.booleans()):  # ties: few distinct values
        values = np.round(values)
    if values.size and data.draw(st.integers(0, 3)) == 0:  # NaNs and infinities
        flat = values.reshape(-1)
        flat[rng.integers(0, flat.size, 2)] = data.draw(st.sampled_from([np.nan, np.inf, -np.inf]))
    return values.astype(dtype)


def draw_axis(data: Any, ndim: int) -> Any:
    kind = data.draw(st.sampled_from(["none", "int", "tuple"] if ndim else ["none", "tuple"]))
    if kind == "none":
        return None
    if kind == "int":
        return data.draw(st.integers(-ndim, ndim - 1))
    axes = data.draw(st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim)) if ndim else []
    return tuple(a - ndim if data.draw(st.booleans()) else a for a in axes)


def reference(op: str, x: np.ndarray, axis: Any, keepdim: bool) -> np.ndarray:
    """numpy's result in float64 (values) or int64 (sums of integers, indices)."""
    wide = x.astype(np.float64) if is_float(x.dtype) else x.astype(np.int64)
    if op == "sum":
        return np.sum(wide, axis=axis, keepdims=keepdim)
    if op == "mean":
        with np.errstate(invalid="ignore", divide="ignore"):
            count = (
                wide.size if axis is None else np.prod([x.shape[a] for a in np.atleast_1d(axis)])
            )
            return np.sum(wide, axis=axis, keepdims=keepdim) / count
    if op in ("max", "min"):
        return getattr(np, op)(wide, axis=axis, keepdims=keepdim)
    # The index runs row-major over the reduced axes in the tensor's order.
    axes = (
        tuple(range(x.ndim))
        if axis is None
        else tuple(sorted(a % x.ndim for a in np.atleast_1d(axis)))
    )
    kept = [a for a in range(x.ndim) if a not in axes]
    reduced = int(np.prod([x.shape[a] for a in axes]))
    moved = np.transpose(wide, kept + list(axes)).reshape([x.shape[a] for a in kept] + [reduced])
    found = getattr(np, op)(moved, axis=-1)
    if keepdim:
        found = found.reshape([1 if a in axes else d for a, d in enumerate(x.shape)])
    return found


def check(op: str, got: np.ndarray, x: np.ndarray, axis: Any, keepdim: bool = False) -> None:
    """got against numpy's result: exact for integers, max/min and indices; sums and means
    within RTOL of the sum (mean) of the terms' magnitudes."""
    expected = reference(op, x, axis, keepdim)
    assert got.shape == expected.shape
    if op.startswith("arg") or not is_float(x.dtype):
        wanted = np.int64 if op in ("sum", "argmax", "argmin") else x.dtype
        assert got.dtype == wanted
        np.testing.assert_array_equal(got.astype(np.int64), expected.astype(np.int64))
        return
    assert got.dtype == x.dtype
    actual = got.astype(np.float64)
    if op in ("max", "min"):
        np.testing.assert_array_equal(actual, expected)  # exact, NaN where numpy has NaN
        return
    nan = np.isnan(expected)
    np.testing.assert_array_equal(np.isnan(actual), nan)
    terms = np.abs(np.nan_to_num(x.astype(np.float64), posinf=0, neginf=0))
    with np.errstate(invalid="ignore"):  # the mean of an empty axis: NaN, compared above
        scale = reference(op, terms, axis, keepdim)  # Σ|x| (or its mean) per result
    finite = ~nan & np.isfinite(expected)
    bound = RTOL[x.dtype.name] * np.maximum(np.abs(expected), scale) + 1e-6
    with np.errstate(invalid="ignore"):  # inf - inf where both are inf: checked below
        error = np.abs(actual - expected)
    assert (error[finite] <= np.broadcast_to(bound, error.shape)[finite]).all(), (actual, expected)
    np.testing.assert_array_equal(actual[~finite & ~nan], expected[~finite & ~nan])


@SETTINGS
@given(data=st.data())
def test_reductions_match_numpy(backend: HipBackend, layouts: Any, data: Any) -> None:
    dtype = data.draw(st.sampled_from(DTYPES))
    op = data.draw(st.sampled_from(OPS if is_float(dtype) else [o for o in OPS if o != "mean"]))
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=5, min_side=0, max_side=5))
    axis = draw_axis(data, len(shape))
    keepdim = data.draw(st.booleans())
    tensor, x = layouts.make(data, backend, host_values(data, shape, dtype))
    axes = range(x.ndim) if axis is None else [a % x.ndim for a in np.atleast_1d(axis)]
    if op not in ("sum", "mean") and np.prod([x.shape[a] for a in axes]) == 0:
        with pytest.raises(ValueError, match=f"{op} of an empty axis"):
            getattr(backend, op)(tensor, axis, keepdim=keepdim)
        return
    got = getattr(backend, op)(tensor, axis, keepdim=keepdim).to_numpy()
    check(op, got, x, axis, keepdim)


@SETTINGS
@given(data=st.data())
def test_long_axes_take_the_vector_and_split_paths(backend: HipBackend, data: Any) -> None:
    """Rows and columns long enough for 16-byte loads and for a split over the reduced axis
    (two passes), contiguous and as a slice of columns."""
    dtype = data.draw(st.sampled_from(DTYPES))
    op = data.draw(st.sampled_from(OPS if is_float(dtype) else [o for o in OPS if o != "mean"]))
    rows = data.draw(st.sampled_from([1, 2, 3, 8]))
    cols = data.draw(st.sampled_from([8, 64, 1000, 4096]))
    x = host_values(data, (rows, cols), dtype)
    tensor = backend.from_numpy(x)
    if data.draw(st.booleans()):  # x.T: the first axis of a transposed view
        tensor, x = tensor.T, x.T
    axis = data.draw(st.sampled_from([None, 0, 1, -1]))
    got = getattr(backend, op)(tensor, axis).to_numpy()
    check(op, got, x, axis)


@pytest.mark.parametrize("finish", ["last block", "second launch"])
def test_splits_finish_in_one_launch_or_two(
    backend: HipBackend, monkeypatch: pytest.MonkeyPatch, finish: str
) -> None:
    """A split over the reduced axis is finished by its last block (one launch; the counters
    are back at zero for the next) or, with no counters to use, by a second launch: the same
    results either way, run after run. NaNs propagate through the partials."""
    if finish == "second launch":
        monkeypatch.setattr(reductions, "_COUNTERS", 0)
    rng = np.random.default_rng(1)
    for dtype in (np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16), np.dtype(np.int8)):
        x = (rng.standard_normal((3, 4096)) * 40).astype(dtype)
        if is_float(dtype):
            x[1, 4000] = np.nan
        tensor = backend.from_numpy(x)
        # contiguous columns of 16 elements: the 16-byte cols path, split (finished in vectors)
        wide = (rng.standard_normal((4096, 16)) * 40).astype(dtype)
        for op in ("sum", "max", "min") + (("mean",) if is_float(dtype) else ()):
            # one long row (a split even on a 2-core CPU), columns, everything
            for view, host, axis in (
                (tensor[1:2], x[1:2], 1),
                (tensor.T, x.T, 0),
                (tensor, x, None),
                (backend.from_numpy(wide), wide, 0),
            ):
                for _ in range(2):
                    check(op, getattr(backend, op)(view, axis).to_numpy(), host, axis)


def test_a_split_wider_than_the_last_blocks_walk(backend: HipBackend) -> None:
    """A split over more blocks than its last block has loads in flight for (reduce.h's cols
    loop: full batches, then the guarded last one; reduce_split.h's count and fences): 16-byte
    columns split into 4.5 times the rows of threads, more than U of them a thread on the GPU
    (U = 4) and on the CPU (U = 2); the same results, run after run, with NaN propagating."""
    rng = np.random.default_rng(2)
    for dtype in (np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16)):
        x = (rng.standard_normal((8192, 16)) * 40).astype(dtype)
        x[5000, 3] = np.nan
        t = backend.from_numpy(x)
        m = Merged(1, 8192, 16, 0, 16, 1)
        for op in ("sum", "max"):
            kernel = backend._reduce_kernel(op, t)
            _, (blocks, _, _, lanes, vec, by_cols) = backend._geometry(kernel, t, m, wide=True)
            assert (blocks, vec, by_cols) == (1, 1, 1)
            height = 256 // lanes  # rows of threads
            chunk = -(-8192 // (4 * height + height // 2 + 3))
            splits = -(-8192 // chunk)
            assert splits > 4 * height
            acc = np.float32 if op == "sum" else dtype
            part, y = backend.empty((1, splits, 16), acc), backend.empty((16,), dtype)
            counters = backend._reduce_counters(blocks, t.dtype)
            assert counters is not None
            extra = (8192, 0) if op == "sum" else (0,)
            geometry = (blocks, splits, chunk, lanes, vec, by_cols)
            results = []
            for _ in range(2):
                backend._launch(kernel, t, m, geometry, (y, part, counters), extra)
                results.append(y.to_numpy())
                check(op, results[-1], x, 0)
            assert results[0].tobytes() == results[1].tobytes()  # deterministic


@pytest.mark.parametrize("lanes", [32, 64])
def test_other_column_groups(
    backend: HipBackend, monkeypatch: pytest.MonkeyPatch, lanes: int
) -> None:
    """The cols layout at another bound on threads across the inner axis (reductions'
    _COLS_LANES, 16 by default: what bench_opset's sweep tunes), split and not."""
    monkeypatch.setattr(reductions, "_COLS_LANES", lanes)
    monkeypatch.setattr(reductions, "_plans", {})
    rng = np.random.default_rng(3)
    for dtype in (np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16)):
        for shape in ((3000, 1024), (5, 4096)):
            x = (rng.standard_normal(shape) * 40).astype(dtype)
            t = backend.from_numpy(x)
            for op in ("sum", "max", "argmin"):
                check(op, getattr(backend, op)(t, 0).to_numpy(), x, 0)


def test_geometry_splits_to_one_wave() -> None:
    """reduce_geometry from the view, dtype and resident blocks alone (H100 figures: 132
    multiprocessors, 4 or 5 resident blocks of 256 threads)."""
    first_axis = Merged(1, 8192, 8192, 0, 8192, 1)  # 8192^2 reduced over axis 0
    geometry = reductions.reduce_geometry
    _, (blocks, splits, chunk, lanes, vec, by_cols) = geometry(
        first_axis, 4, aligned=True, wide=True, wave=lambda block: 4 * 132
    )
    # f32: 16 lanes x 4 columns per block, 128 blocks; 4 splits of 2048 rows fill one wave
    assert (blocks, lanes, vec, by_cols) == (128, 16, 1, 1) and (splits, chunk) == (4, 2048)
    _, (blocks, splits, chunk, *_) = geometry(
        first_axis, 2, aligned=True, wide=True, wave=lambda block: 5 * 132, waves=2.0
    )
    assert blocks == 64 and splits == 20 and (splits - 1) * chunk < 8192 <= splits * chunk
    # unaligned: element loads, 16 columns a block; no occupancy known: no split
    _, (blocks, splits, *_, vec, _) = geometry(first_axis, 4, aligned=False, wide=True, wave=None)
    assert (blocks, splits, vec) == (512, 1, 0)
    # rows fill the device already: never split
    rows = Merged(8192, 8192, 1, 8192, 1, 0)
    _, (blocks, splits, _, lanes, _, by_cols) = geometry(
        rows, 4, aligned=True, wide=True, wave=lambda block: 8 * 132
    )
    assert (blocks, splits, lanes, by_cols) == (8192, 1, 256, 0)
    split = reductions.split_count
    assert split(64, 528, 64, 1.0) == 8 and split(64, 528, 4, 1.0) == 4  # at most `most`
    assert split(300, 528, 64, 1.0) == 1  # more than half a wave already
    assert split(1, 10**6, 10**6, 1.0) == 65535  # the grid's y limit


def test_semantics(backend: HipBackend) -> None:
    x = np.array([[1.0, np.nan, 3.0, 3.0], [2.0, 2.0, -1.0, -1.0]], np.float32)
    t = backend.from_numpy(x)
    np.testing.assert_array_equal(backend.argmax(t, 1).to_numpy(), [1, 0])  # NaN is the max
    np.testing.assert_array_equal(backend.argmin(t, 1).to_numpy(), [1, 2])  # first of ties
    assert np.isnan(backend.max(t, 1).to_numpy()[0]) and backend.min(t).to_numpy().dtype == x.dtype
    empty = backend.from_numpy(np.zeros((3, 0), np.float32))
    np.testing.assert_array_equal(backend.sum(empty, 1).to_numpy(), [0, 0, 0])
    assert np.isnan(backend.mean(empty, 1).to_numpy()).all()
    assert backend.sum(empty, 0).shape == (0,)
    ints = backend.from_numpy(np.array([250, 250], np.uint8))
    assert backend.sum(ints).to_numpy() == 500 and backend.sum(ints).dtype == np.int64
    flags = backend.from_numpy(np.array([True, True, False]))
    assert backend.sum(flags).to_numpy() == 2
    out = backend.zeros((2, 1))
    assert backend.sum(t[:, 2:], axis=(-1,), keepdim=True, out=out) is out
    np.testing.assert_array_equal(out.to_numpy(), [[6.0], [-2.0]])


def test_errors(backend: HipBackend) -> None:
    t = backend.zeros((2, 3))
    with pytest.raises(ValueError, match="sum: axis 2 is out of range"):
        backend.sum(t, 2)
    with pytest.raises(ValueError, match="names an axis twice"):
        backend.max(t, (1, -1))
    with pytest.raises(TypeError, match="mean"):
        backend.mean(t, 1.5)
    with pytest.raises(ValueError, match="mean takes float tensors"):
        backend.mean(backend.zeros((2,), np.int32))
    with pytest.raises(ValueError, match="max of an empty axis"):
        backend.max(backend.zeros((0, 3)), 0)
    with pytest.raises(ValueError, match="argmin of an empty axis"):
        backend.argmin(backend.zeros((0,)))
    with pytest.raises(ValueError, match="out is"):
        backend.sum(t, 0, out=backend.zeros((2,)))
    with pytest.raises(ValueError, match="out is"):
        backend.argmax(t, 0, out=backend.zeros((3,)))  # f32, not int64
    with pytest.raises(ValueError, match="DeviceTensor"):
        backend.sum(np.zeros(3))


NVIDIA_ONLY = pytest.mark.parametrize(
    "platform", [pytest.param("nvidia", marks=pytest.mark.gpu)], indirect=True
)


@NVIDIA_ONLY
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_large_shapes_on_the_gpu(device: Device, dtype: str) -> None:
    """The 16-byte row path, the coalesced column path and the split with its second pass at
    sizes where a GPU takes them (4096 x 4096, the first and last axes, and all of it)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4096, 4096)).astype(np.dtype(dtype))
    with HipBackend(device) as backend:
        t = backend.from_numpy(x)
        for axis in (None, 0, 1):
            for op in OPS:
                got = getattr(backend, op)(t, axis).to_numpy()
                check(op, got, x, axis)
