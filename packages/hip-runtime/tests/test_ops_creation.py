"""arange, full, fill_, tril, triu and causal_mask against numpy, under hypothesis: every dtype,
random shapes of rank 0-5 (size-0 and size-1 axes), fills into random writable layouts
(stepped, permuted, reversed views), triangles of any-rank inputs in random layouts.

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
shapes = st.lists(st.sampled_from([1, 2, 3, 4, 5, 0, 1, 2, 3, 9]), max_size=5).map(tuple)


@pytest.fixture(scope="module")
def backend(device: Device) -> Any:
    with HipBackend(device) as backend:
        yield backend


def bits(array: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8)


@SETTINGS
@given(
    start=st.integers(-50, 50), stop=st.integers(-50, 50) | st.none(),
    step=st.integers(-7, 7).filter(bool), dtype=st.sampled_from(DTYPES[:-1]),
)  # fmt: skip
def test_arange_of_ints(backend: HipBackend, start: int, stop: int | None, step: int,
                        dtype: np.dtype) -> None:  # fmt: skip
    if stop is None:
        got, expected = backend.arange(abs(start), dtype=dtype), np.arange(abs(start))
    else:
        got, expected = backend.arange(start, stop, step, dtype=dtype), np.arange(start, stop, step)
    np.testing.assert_array_equal(got.to_numpy(), expected.astype(dtype))


@SETTINGS
@given(
    start=st.floats(-100, 100), length=st.floats(-10, 300),
    step=st.floats(0.01, 10) | st.floats(-10, -0.01), dtype=st.sampled_from(DTYPES[:4]),
)  # fmt: skip
def test_arange_of_floats(backend: HipBackend, start: float, length: float, step: float,
                          dtype: np.dtype) -> None:  # fmt: skip
    stop = start + length
    got = backend.arange(start, stop, step, dtype=dtype).to_numpy()
    expected = np.arange(start, stop, step, dtype=np.float64)
    assert got.dtype == dtype and got.shape == expected.shape
    # numpy steps by (start + step) - start, not step: f64 agrees to its rounding of that
    rtol = {4: 1e-6, 8: 1e-9}.get(dtype.itemsize, 1e-2)
    np.testing.assert_allclose(got.astype(np.float64), expected, rtol=rtol, atol=rtol * 100)


def test_arange_of_a_span_below_the_step_s_resolution(backend: HipBackend) -> None:
    """(stop - start) / step underflows to ±0: one element when the span runs the step's way
    (hypothesis found arange(0.0, -5e-324, -2.0) empty; numpy gives [0.0])."""
    for start, stop, step in [(0.0, -5e-324, -2.0), (0.0, 5e-324, 2.0), (0.0, 5e-324, -2.0),
                              (1.0, 1.0, 2.0)]:  # fmt: skip
        expected = np.arange(start, stop, step, dtype=np.float64)
        got = backend.arange(start, stop, step, dtype=np.float32).to_numpy()
        np.testing.assert_array_equal(got, expected.astype(np.float32))


def test_arange_defaults_and_errors(backend: HipBackend) -> None:
    assert backend.arange(3).dtype == np.int64 and backend.arange(0.5, 2).dtype == np.float32
    np.testing.assert_array_equal(backend.arange(2**40, 2**40 + 3).to_numpy(),
                                  np.arange(2**40, 2**40 + 3))  # fmt: skip
    for call, message in [
        (lambda: backend.arange(0, 5, 0), "step must not be 0"),
        (lambda: backend.arange(0, np.inf), "finite"),
        (lambda: backend.arange(5, dtype=bool), "bool"),
        (lambda: backend.arange(0.5, 3, dtype=np.int32), "int start"),
        (lambda: backend.arange("3"), "ints or floats"),
        (lambda: backend.arange(3, dtype=np.uint16), "the kernels take"),
    ]:
        with pytest.raises(ValueError, match=message):
            call()


def fill_value(data: Any, dtype: np.dtype) -> Any:
    if dtype == np.bool_:
        return data.draw(st.booleans())
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return data.draw(st.integers(int(info.min), int(info.max)))
    return data.draw(st.floats(allow_nan=True, allow_infinity=True, width=16))


@SETTINGS
@given(data=st.data(), shape=shapes, dtype=st.sampled_from(DTYPES))
def test_full(backend: HipBackend, data: Any, shape: tuple[int, ...], dtype: np.dtype) -> None:
    value = fill_value(data, dtype)
    got = backend.full(shape, value, dtype)
    assert got.is_contiguous
    np.testing.assert_array_equal(bits(got.to_numpy()), bits(np.full(shape, value, dtype)))


@SETTINGS
@given(data=st.data(), shape=shapes, dtype=st.sampled_from(DTYPES))
def test_fill_into_strided_views(backend: HipBackend, data: Any,
                                 shape: tuple[int, ...], dtype: np.dtype) -> None:  # fmt: skip
    """fill_ of a view writes exactly the view's elements: the rest of its parent is kept."""
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    parent_shape = tuple(d * 2 + 1 for d in shape)
    parent_array = rng.integers(0, 100, parent_shape).astype(dtype)
    parent = backend.from_numpy(parent_array)
    key = tuple(slice(data.draw(st.integers(0, 1)), None, 2) for _ in shape)
    key = tuple(slice(k.start, k.start + 2 * d, 2) for k, d in zip(key, shape, strict=True))
    view, expected = parent[key], parent_array.copy()
    expected_view = expected[(*key, Ellipsis)]
    if shape and data.draw(st.booleans()):  # reversed and permuted too
        view, expected_view = view[::-1].T, expected_view[::-1].T
    value = fill_value(data, dtype)
    assert backend.fill_(view, value) is view
    expected_view[...] = np.asarray(value, dtype)
    np.testing.assert_array_equal(bits(parent.to_numpy()), bits(expected))


def test_fill_values_are_checked(backend: HipBackend) -> None:
    with pytest.raises(ValueError, match="not a int8 value"):
        backend.full((2,), 300, np.int8)
    with pytest.raises(ValueError, match="not a int32 value"):
        backend.full((2,), float("nan"), np.int32)
    with pytest.raises(ValueError, match="one value"):
        backend.full((2,), [1, 2], np.float32)
    with pytest.raises(ValueError, match="overlap"):
        backend.fill_(backend.zeros((1, 3)).expand(4, 3), 1.0)


@SETTINGS
@given(data=st.data(), shape=shapes.filter(lambda s: len(s) >= 2), dtype=st.sampled_from(DTYPES),
       k=st.integers(-6, 6), upper=st.booleans())  # fmt: skip
def test_tril_triu(backend: HipBackend, layouts: Any, data: Any, shape: tuple[int, ...],
                   dtype: np.dtype, k: int, upper: bool) -> None:  # fmt: skip
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    x, array = layouts.make(data, backend, rng.integers(1, 100, shape).astype(dtype))
    op, reference = (backend.triu, np.triu) if upper else (backend.tril, np.tril)
    np.testing.assert_array_equal(op(x, k).to_numpy(), reference(array, k))
    if x.is_contiguous and not x.closed:  # in place
        copy = backend.from_numpy(array)
        assert op(copy, k, out=copy) is copy
        np.testing.assert_array_equal(copy.to_numpy(), reference(array, k))


@pytest.mark.parametrize("shape", [(1, 1), (5, 5), (3, 7), (7, 3), (0, 4)], ids=str)
@pytest.mark.parametrize("offset", [-2, 0, 3])
def test_causal_mask(backend: HipBackend, shape: tuple[int, int], offset: int) -> None:
    rows, cols = shape
    allowed = np.tril(np.ones(shape, bool), offset)
    np.testing.assert_array_equal(
        backend.causal_mask(rows, cols, offset=offset).to_numpy(), allowed
    )
    for dtype in (np.float32, np.float16, ml_dtypes.bfloat16):
        got = backend.causal_mask(rows, cols, offset=offset, dtype=dtype).to_numpy()
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, np.where(allowed, 0.0, -np.inf).astype(dtype))
    assert backend.causal_mask(4).shape == (4, 4)
    with pytest.raises(ValueError, match="bool or float"):
        backend.causal_mask(4, dtype=np.int32)


def test_triangle_errors(backend: HipBackend) -> None:
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        backend.tril(backend.zeros((4,)))
    with pytest.raises(ValueError, match="k must be an int"):
        backend.triu(backend.zeros((4, 4)), 0.5)  # type: ignore[arg-type]
