"""cat, stack, split, chunk and pad against numpy, under hypothesis: every dtype, random shapes
of rank 0-5 (size-0 and size-1 axes), inputs in random layouts (the `layouts` fixture:
permuted, stepped, reversed, broadcast); split and chunk return views (no copy).

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
SETTINGS = settings(
    max_examples=40, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)  # fmt: skip
shapes = st.lists(st.sampled_from([1, 2, 3, 4, 0, 1, 2, 3, 5]), max_size=5).map(tuple)


@pytest.fixture(scope="module")
def backend(device: Device) -> Any:
    with HipBackend(device) as backend:
        yield backend


def random_array(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    return rng.integers(0, 100, shape).astype(dtype)


@SETTINGS
@given(data=st.data(), shape=shapes.filter(len), dtype=st.sampled_from(DTYPES))
def test_cat(backend: HipBackend, layouts: Any, data: Any, shape: tuple[int, ...],
             dtype: np.dtype) -> None:  # fmt: skip
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    tensors, arrays = [], []
    for _ in range(data.draw(st.integers(1, 4))):
        part = list(shape)
        part[axis] = data.draw(st.integers(0, 3))
        tensor, array = layouts.make(data, backend, random_array(rng, tuple(part), dtype))
        tensors.append(tensor)
        arrays.append(array)
    got = backend.cat(tensors, axis)
    assert got.is_contiguous
    np.testing.assert_array_equal(got.to_numpy(), np.concatenate(arrays, axis))


@SETTINGS
@given(data=st.data(), shape=shapes, dtype=st.sampled_from(DTYPES))
def test_stack(backend: HipBackend, layouts: Any, data: Any, shape: tuple[int, ...],
               dtype: np.dtype) -> None:  # fmt: skip
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    axis = data.draw(st.integers(-len(shape) - 1, len(shape)))
    pairs = [layouts.make(data, backend, random_array(rng, shape, dtype))
             for _ in range(data.draw(st.integers(1, 3)))]  # fmt: skip
    got = backend.stack([t for t, _ in pairs], axis)
    np.testing.assert_array_equal(got.to_numpy(), np.stack([a for _, a in pairs], axis))


@SETTINGS
@given(data=st.data(), shape=shapes.filter(len), dtype=st.sampled_from(DTYPES))
def test_split_and_chunk_are_views(backend: HipBackend, layouts: Any, data: Any,
                                   shape: tuple[int, ...], dtype: np.dtype) -> None:  # fmt: skip
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    axis = data.draw(st.integers(0, len(shape) - 1))
    x, array = layouts.make(data, backend, random_array(rng, shape, dtype))
    length = shape[axis]
    cuts = sorted(data.draw(st.lists(st.integers(0, length), max_size=3)))
    sizes = [b - a for a, b in zip([0, *cuts], [*cuts, length], strict=True)]
    parts = backend.split(x, sizes, axis)
    expected = np.split(array, cuts, axis)
    n = data.draw(st.integers(1, 5))
    if length % n == 0:
        parts += backend.split(x, n, axis)
        expected += np.split(array, n, axis)
    chunks = backend.chunk(x, n, axis)
    step = max(-(-length // n), 1)
    assert len(chunks) == max(-(-length // step), 1) <= n
    parts += chunks
    expected += np.split(array, list(range(step, length, step)), axis)
    for got, want in zip(parts, expected, strict=True):
        assert got.buffer is x.buffer  # a view: nothing copied
        np.testing.assert_array_equal(got.to_numpy(), want)


@SETTINGS
@given(data=st.data(), shape=shapes, dtype=st.sampled_from(DTYPES))
def test_pad(backend: HipBackend, layouts: Any, data: Any, shape: tuple[int, ...],
             dtype: np.dtype) -> None:  # fmt: skip
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    x, array = layouts.make(data, backend, random_array(rng, shape, dtype))
    form = data.draw(st.sampled_from(["pairs", "pair", "int"]))
    if form == "pairs":
        pads: Any = [(data.draw(st.integers(0, 3)), data.draw(st.integers(0, 3))) for _ in shape]
    elif form == "pair":
        pads = (data.draw(st.integers(0, 3)), data.draw(st.integers(0, 3)))
    else:
        pads = data.draw(st.integers(0, 2))
    value = data.draw(st.booleans()) if dtype == np.bool_ else data.draw(st.integers(0, 100))
    got = backend.pad(x, pads, value)
    if pads == []:  # a 0-d x: nothing to pad (numpy refuses an empty list)
        expected = array
    else:
        expected = np.pad(array, pads, constant_values=np.asarray(value, dtype))
    np.testing.assert_array_equal(got.to_numpy(), expected)


def test_bad_arguments(backend: HipBackend) -> None:
    x = backend.zeros((2, 3))
    cases = {
        "at least one tensor": lambda: backend.cat([]),
        "sequence of tensors": lambda: backend.cat(x),
        "dtype int32": lambda: backend.cat([x, backend.zeros((2, 3), np.int32)]),
        "only axis 1 may differ": lambda: backend.cat([x, backend.zeros((3, 3))], 1),
        "cat: axis 2": lambda: backend.cat([x, x], 2),
        "zero-dimensional": lambda: backend.cat([backend.zeros(())]),
        "stack: tensors.1. is": lambda: backend.stack([x, x[:, :2]]),
        "do not sum": lambda: backend.split(x, [1, 1], 1),
        "equal parts": lambda: backend.split(x, 2, 1),
        "at least 1": lambda: backend.chunk(x, 0),
        "not be negative": lambda: backend.pad(x, -1),
        "for 2 axes": lambda: backend.pad(x, [(1, 1)] * 3),
        "not a int8 value": lambda: backend.pad(backend.zeros((2,), np.int8), 1, 1000),
    }
    for message, call in cases.items():
        with pytest.raises(ValueError, match=message):
            call()


@pytest.mark.gpu
def test_large_cat_and_pad(backend: HipBackend) -> None:
    """8192-wide bf16 blocks: cat along both axes of a transposed view, and a padded copy."""
    rng = np.random.default_rng(2)
    a = rng.standard_normal((4096, 8192), np.float32).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((8192, 4096), np.float32).astype(ml_dtypes.bfloat16)
    da, db = backend.from_numpy(a), backend.from_numpy(b)
    np.testing.assert_array_equal(backend.cat([da, db.T], 0).to_numpy(), np.concatenate([a, b.T]))
    np.testing.assert_array_equal(backend.cat([da.T, db], 1).to_numpy(),
                                  np.concatenate([a.T, b], 1))  # fmt: skip
    np.testing.assert_array_equal(backend.pad(da, ((1, 2), (3, 4)), 7).to_numpy(),
                                  np.pad(a, ((1, 2), (3, 4)), constant_values=7))  # fmt: skip
