"""index_select, embedding, gather, scatter_add and index_add against numpy, under hypothesis:
random shapes of rank 1-5 (size-0 and size-1 axes), every dtype, int32 and int64 ids (some out
of range, negative ones too: zeros read, nothing added), inputs in random layouts (the
`layouts` fixture: permuted, stepped, reversed, broadcast).

On the cpu platform in CI; the same tests run on nvidia (marked gpu) through the device fixture.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hip_core import Device
from hip_runtime import HipBackend
from hip_runtime.tensors.dtypes import SUFFIXES

DTYPES = list(SUFFIXES)  # every dtype the kernels take (kernels/dtypes.h)
IDS = [np.dtype(np.int32), np.dtype(np.int64)]
SETTINGS = settings(
    max_examples=40, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)  # fmt: skip
shapes = st.lists(st.sampled_from([1, 2, 3, 4, 5, 0, 1, 2, 3, 7]), min_size=1, max_size=5).map(
    tuple
)


@pytest.fixture(scope="module")
def backend(device: Device) -> Any:
    with HipBackend(device) as backend:
        yield backend


def values(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Small integers in `dtype` (sums of a few stay exact in every type, bf16 included)."""
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    low = 0 if dtype.kind == "u" else -4
    return rng.integers(low, 5, shape).astype(dtype)


def some_ids(rng: np.random.Generator, shape: Any, size: int, dtype: np.dtype) -> np.ndarray:
    """Ids mostly in [0, size), some outside it on both sides."""
    return rng.integers(-2, size + 2, shape).astype(dtype)


def taken(x: np.ndarray, axis: int, ids: np.ndarray) -> np.ndarray:
    """np.take with out-of-range ids giving zeros instead of wrapping or raising."""
    size = x.shape[axis]
    inside = (ids >= 0) & (ids < size)
    safe = np.where(inside, ids, 0)
    if size == 0:
        shape = (*x.shape[:axis], *ids.shape, *x.shape[axis + 1 :])
        return np.zeros(shape, x.dtype)
    out = np.take(x, safe, axis=axis)
    keep = inside.reshape((1,) * axis + ids.shape + (1,) * (x.ndim - axis - 1))
    return np.where(keep, out, np.zeros((), x.dtype))


@SETTINGS
@given(data=st.data(), shape=shapes, dtype=st.sampled_from(DTYPES), id_type=st.sampled_from(IDS))
def test_index_select(backend: HipBackend, layouts: Any, data: Any, shape: Any, dtype: Any,
                      id_type: Any) -> None:  # fmt: skip
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x, array = layouts.make(data, backend, values(rng, shape, dtype))
    id_shape = data.draw(st.lists(st.integers(0, 4), max_size=2).map(tuple))
    ids, id_array = layouts.make(data, backend, some_ids(rng, id_shape, shape[axis], id_type))
    got = backend.index_select(x, axis, ids).to_numpy()
    np.testing.assert_array_equal(got, taken(array, axis % len(shape), id_array))


@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(DTYPES), id_type=st.sampled_from(IDS))
def test_embedding(backend: HipBackend, layouts: Any, data: Any, dtype: Any, id_type: Any) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    vocab, dim = data.draw(st.integers(1, 40)), data.draw(st.integers(1, 70))
    table, table_array = layouts.make(data, backend, values(rng, (vocab, dim), dtype))
    id_shape = data.draw(st.lists(st.integers(0, 5), max_size=3).map(tuple))
    ids, id_array = layouts.make(data, backend, some_ids(rng, id_shape, vocab, id_type))
    got = backend.embedding(ids, table).to_numpy()
    assert got.shape == (*id_shape, dim) and got.dtype == dtype
    np.testing.assert_array_equal(got, taken(table_array, 0, id_array))


def along(shape: tuple[int, ...], axis: int, data: Any, extra: int = 0) -> tuple[int, ...]:
    """An index shape for gather/scatter: at most `shape` on every axis but `axis`."""
    return tuple(
        data.draw(st.integers(0, d + extra if k == axis else d)) for k, d in enumerate(shape)
    )


def indexed_case(backend: HipBackend, layouts: Any, data: Any, shape: Any, dtype: Any,
                 id_type: Any) -> tuple[Any, ...]:  # fmt: skip
    """(rng, axis, x, array, index, index_array) for gather and scatter_add."""
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    axis = data.draw(st.integers(0, len(shape) - 1))
    x, array = layouts.make(data, backend, values(rng, shape, dtype))
    index_shape = along(shape, axis, data, extra=3)
    index, index_array = layouts.make(
        data, backend, some_ids(rng, index_shape, shape[axis], id_type)
    )
    return rng, axis, x, array, index, index_array


def gathered(x: np.ndarray, axis: int, index: np.ndarray) -> np.ndarray:
    out = np.zeros(index.shape, x.dtype)
    for p in np.ndindex(index.shape):
        i = index[p]
        if 0 <= i < x.shape[axis]:
            out[p] = x[(*p[:axis], i, *p[axis + 1 :])]
    return out


@SETTINGS
@given(data=st.data(), shape=shapes, dtype=st.sampled_from(DTYPES), id_type=st.sampled_from(IDS))
def test_gather(backend: HipBackend, layouts: Any, data: Any, shape: Any, dtype: Any,
                id_type: Any) -> None:  # fmt: skip
    _, axis, x, array, index, index_array = indexed_case(
        backend, layouts, data, shape, dtype, id_type
    )
    got = backend.gather(x, axis - len(shape), index).to_numpy()
    np.testing.assert_array_equal(got, gathered(array, axis, index_array))


def scattered(x: np.ndarray, axis: int, index: np.ndarray, src: np.ndarray) -> np.ndarray:
    """Sums in float64 (or int64 / bool) and one rounding to x's dtype, as exact as the small
    integer values make every order of atomic adds."""
    wide = np.bool_ if x.dtype == np.bool_ else (np.int64 if x.dtype.kind in "iu" else np.float64)
    out = x.astype(wide)
    for p in np.ndindex(index.shape):
        i = index[p]
        if 0 <= i < x.shape[axis]:
            q = (*p[:axis], i, *p[axis + 1 :])
            out[q] = out[q] | src[p] if wide is np.bool_ else out[q] + src[p].astype(wide)
    return out.astype(x.dtype)


@SETTINGS
@given(data=st.data(), shape=shapes, dtype=st.sampled_from(DTYPES), id_type=st.sampled_from(IDS))
def test_scatter_add(backend: HipBackend, layouts: Any, data: Any, shape: Any, dtype: Any,
                     id_type: Any) -> None:  # fmt: skip
    rng, axis, x, array, index, index_array = indexed_case(
        backend, layouts, data, shape, dtype, id_type
    )
    src_shape = tuple(d + data.draw(st.integers(0, 1)) for d in index_array.shape)
    src, src_array = layouts.make(data, backend, values(rng, src_shape, dtype))
    expected = scattered(array, axis, index_array, src_array)
    got = backend.scatter_add(x, axis, index, src)
    np.testing.assert_array_equal(got.to_numpy(), expected)
    np.testing.assert_array_equal(x.to_numpy(), array)  # x itself is unchanged
    if x.is_contiguous:  # in place
        assert backend.scatter_add(x, axis, index, src, out=x) is x
        np.testing.assert_array_equal(x.to_numpy(), expected)


@SETTINGS
@given(data=st.data(), shape=shapes, dtype=st.sampled_from(DTYPES), id_type=st.sampled_from(IDS))
def test_index_add(backend: HipBackend, layouts: Any, data: Any, shape: Any, dtype: Any,
                   id_type: Any) -> None:  # fmt: skip
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    axis = data.draw(st.integers(0, len(shape) - 1))
    array = values(rng, shape, dtype)
    x = backend.from_numpy(array)
    count = data.draw(st.integers(0, 6))
    ids, id_array = layouts.make(data, backend, some_ids(rng, (count,), shape[axis], id_type))
    src_shape = (*shape[:axis], count, *shape[axis + 1 :])
    src, src_array = layouts.make(data, backend, values(rng, src_shape, dtype))
    index_array = np.broadcast_to(
        id_array.reshape((1,) * axis + (count,) + (1,) * (len(shape) - axis - 1)), src_shape
    )
    expected = scattered(array, axis, index_array, src_array)
    assert backend.index_add(x, axis, ids, src, out=x) is x
    np.testing.assert_array_equal(x.to_numpy(), expected)


def test_scatter_add_into_a_strided_view_in_place(backend: HipBackend) -> None:
    """out=x where x is a transposed, stepped view: the adds land in the parent's memory."""
    base = backend.zeros((6, 8))
    view = base[::2, 1::2].T  # [4, 3]
    index = backend.from_numpy(np.array([[0, 2, 2], [1, 1, 1]], np.int64))
    src = backend.from_numpy(np.ones((2, 3), np.float32))
    backend.scatter_add(view, 0, index, src, out=view)
    expected = np.zeros((6, 8), np.float32)
    expected[::2, 1::2].T[...] = [[1, 0, 0], [1, 1, 1], [0, 1, 1], [0, 0, 0]]
    np.testing.assert_array_equal(base.to_numpy(), expected)


def test_many_adds_into_one_element(backend: HipBackend) -> None:
    """Atomic adds from every thread into one element, for each way the kernel adds."""
    n = 5000
    for dtype, step in [(np.float32, 1), (np.float64, 1), (np.float16, 1),
                        (ml_dtypes.bfloat16, 1), (np.int8, 1), (np.int16, 1), (np.int32, 3),
                        (np.int64, -3), (np.uint8, 1), (np.uint32, 7)]:  # fmt: skip
        src = backend.from_numpy(np.full(n, step, dtype))
        x = backend.zeros((4,), dtype)
        got = backend.index_add(x, 0, backend.from_numpy(np.full(n, 2, np.int32)), src)
        total = n * step
        if np.dtype(dtype) in (np.float16, ml_dtypes.bfloat16):
            total = 2048 if dtype == np.float16 else 256  # where adding 1 stops changing it
        expected = np.zeros(4, dtype)
        expected[2] = np.array(total).astype(dtype)  # integers wrap
        np.testing.assert_array_equal(got.to_numpy(), expected, err_msg=str(dtype))


def test_bad_arguments_raise_before_anything_is_queued(backend: HipBackend) -> None:
    x = backend.zeros((3, 4))
    i32 = backend.from_numpy(np.zeros((3, 4), np.int32))
    cases = {
        "must be int32 or int64": lambda: backend.index_select(x, 0, x),
        "index_select: axis 2": lambda: backend.index_select(x, 2, i32),
        "at least one dimension": lambda: backend.index_select(backend.zeros(()), 0, i32),
        "embedding: table must be": lambda: backend.embedding(i32, backend.zeros((3, 4, 5))),
        "embedding: ids must be": lambda: backend.embedding(x, x),
        "gather: index has 1 dimensions": lambda: backend.gather(x, 0, i32[0]),
        "larger than x": lambda: backend.gather(x, 0, backend.zeros((3, 5), np.int64)),
        "scatter_add: src has dtype": lambda: backend.scatter_add(x, 0, i32, i32),
        "larger than src": lambda: backend.scatter_add(x, 0, i32, x[:, :2]),
        "index_add: ids must be 1-D": lambda: backend.index_add(x, 0, i32, x),
        "index_add: src is": lambda: backend.index_add(x, 0, i32[0], x),
        "overlap": lambda: backend.index_add(x, 0, i32[0, :3], x, out=x),
        "x has dtype uint16": lambda: backend.scatter_add(
            backend.zeros((3,), np.uint16), 0, i32[0], backend.zeros((4,), np.uint16)
        ),
    }
    for message, call in cases.items():
        with pytest.raises(ValueError, match=message):
            call()


@pytest.mark.gpu
@pytest.mark.parametrize("id_type", IDS, ids=str)
def test_large_embedding(backend: HipBackend, id_type: np.dtype) -> None:
    """A 128k x 4096 bf16 table and 8192 tokens: the 16-byte path with 32-bit coordinates."""
    rng = np.random.default_rng(0)
    table = rng.standard_normal((131072, 4096), np.float32).astype(ml_dtypes.bfloat16)
    ids = rng.integers(0, 131072, 8192).astype(id_type)
    got = backend.embedding(backend.from_numpy(ids), backend.from_numpy(table)).to_numpy()
    np.testing.assert_array_equal(got, table[ids])


@pytest.mark.gpu
def test_large_gather_and_scatter_add(backend: HipBackend) -> None:
    """4096 x 4096 f32, ids along either axis (int64): 2^24 elements, 32-bit coordinates."""
    rng = np.random.default_rng(1)
    array = rng.integers(-4, 5, (4096, 4096)).astype(np.float32)
    x = backend.from_numpy(array)
    for axis in (0, 1):
        index = rng.integers(0, 4096, (4096, 4096))
        got = backend.gather(x, axis, backend.from_numpy(index)).to_numpy()
        np.testing.assert_array_equal(got, np.take_along_axis(array, index, axis))
        summed = backend.scatter_add(x, axis, backend.from_numpy(index), x).to_numpy()
        expected = array.astype(np.float64)
        rows, cols = np.indices(index.shape)
        np.add.at(expected, (index, cols) if axis == 0 else (rows, index), array)
        np.testing.assert_array_equal(summed, expected.astype(np.float32))
