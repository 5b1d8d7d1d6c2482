"""Unary pointwise ops and casts against numpy, under hypothesis: shapes of rank 0-5 (size-0
and size-1 axes), every dtype each op takes, inputs in random layouts (the `layouts` fixture:
permuted, stepped, reversed, broadcast). Float references are numpy in float64 (rounded once
to the dtype, then compared at its tolerance, NaN and inf included); integer references are
numpy in the dtype itself (exact: both wrap); casts are compared bit for bit with numpy's
(ml_dtypes') astype.

On the cpu platform in CI; the same tests run on nvidia (marked gpu) through the device fixture.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from hip_core import Device
from hip_runtime import HipBackend, testing

FLOATS = [np.dtype(t) for t in (np.float32, np.float64, np.float16, ml_dtypes.bfloat16)]
INTS = [np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32)]
BOOL = np.dtype(np.bool_)
TOLERANCE = {
    np.dtype(np.float64): (1e-12, 1e-12),
    np.dtype(np.float32): (1e-5, 1e-6),
    np.dtype(np.float16): (2e-3, 1e-5),
    np.dtype(ml_dtypes.bfloat16): (1.6e-2, 1e-5),
}
SETTINGS = settings(
    max_examples=40, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)  # fmt: skip
shapes = hnp.array_shapes(min_dims=0, max_dims=5, min_side=0, max_side=4)
_erf = np.vectorize(math.erf, otypes=[np.float64])

Ref = Callable[[np.ndarray], np.ndarray]
#: op -> (takes integers too, float64 / in-dtype reference, extra arguments of the op).
UNARY: dict[str, tuple[bool, Ref, tuple[Any, ...]]] = {
    "abs": (True, np.abs, ()),
    "neg": (True, np.negative, ()),
    "sign": (True, np.sign, ()),
    "sqr": (True, lambda x: x * x, ()),
    "relu": (True, lambda x: np.maximum(x, x.dtype.type(0)), ()),
    "recip": (False, lambda x: 1 / x, ()),
    "floor": (False, np.floor, ()),
    "ceil": (False, np.ceil, ()),
    "round": (False, np.rint, ()),
    "affine": (False, lambda x: x * -1.5 + 0.25, (-1.5, 0.25)),
    "exp": (False, np.exp, ()),
    "log": (False, np.log, ()),
    "sin": (False, np.sin, ()),
    "cos": (False, np.cos, ()),
    "tanh": (False, np.tanh, ()),
    "sqrt": (False, np.sqrt, ()),
    "rsqrt": (False, lambda x: 1 / np.sqrt(x), ()),
    "sigmoid": (False, lambda x: 1 / (1 + np.exp(-x)), ()),
    "silu": (False, lambda x: x / (1 + np.exp(-x)), ()),
    "gelu": (False, lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))), ()),
    "elu": (False, lambda x: np.where(x > 0, x, 0.5 * np.expm1(x)), (0.5,)),
    "erf": (False, _erf, ()),
    "powf": (False, lambda x: x**1.5, (1.5,)),
    "scale": (False, lambda x: x * 0.375, (0.375,)),
}


@pytest.fixture(scope="module")
def backend(device: Device) -> Any:
    with HipBackend(device) as backend:
        yield backend


def values(rng: np.random.Generator, shape: Any, dtype: np.dtype) -> np.ndarray:
    """Normal floats with a few zeros, infinities and NaNs (halves too, for round); integers
    over the type's whole range; bools."""
    if dtype == BOOL:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    x = rng.standard_normal(shape) * 3
    special = rng.random(shape)
    x = np.where(special < 0.05, 0.0, np.where(special < 0.1, np.round(x) + 0.5, x))
    x = np.where(special > 0.98, rng.choice([np.inf, -np.inf, np.nan], shape), x)
    return np.asarray(x).astype(dtype)


def assert_matches(got: np.ndarray, expected: np.ndarray, dtype: np.dtype) -> None:
    assert got.dtype == dtype and got.shape == expected.shape
    if dtype in TOLERANCE:
        rtol, atol = TOLERANCE[dtype]
        with np.errstate(over="ignore", invalid="ignore"):
            rounded = np.asarray(expected).astype(dtype).astype(np.float64)
        np.testing.assert_allclose(got.astype(np.float64), rounded, rtol, atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, expected)


@SETTINGS
@given(data=st.data(), op=st.sampled_from(sorted(UNARY)), shape=shapes)
def test_unary_ops_on_any_layout_and_dtype(
    backend: HipBackend, layouts: Any, data: Any, op: str, shape: Any
) -> None:
    ints, ref, args = UNARY[op]
    dtype = data.draw(st.sampled_from(FLOATS + INTS if ints else FLOATS))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32)))
    x, hx = layouts.make(data, backend, values(rng, shape, dtype))
    got = getattr(backend, op)(x, *args).to_numpy()
    with np.errstate(all="ignore"):
        expected = ref(hx.astype(np.float64)) if dtype in TOLERANCE else ref(hx)
    assert_matches(got, np.asarray(expected), dtype)


@SETTINGS
@given(data=st.data(), shape=shapes)
def test_clamp_with_either_bound(backend: HipBackend, layouts: Any, data: Any, shape: Any) -> None:
    dtype = data.draw(st.sampled_from(FLOATS + INTS))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32)))
    x, hx = layouts.make(data, backend, values(rng, shape, dtype))
    if dtype.kind in "iu":
        bounds = sorted(int(v) for v in values(rng, 2, dtype))
    else:
        bounds = sorted(float(v) for v in np.asarray(rng.standard_normal(2) * 3, dtype))
    lo, hi = (data.draw(st.sampled_from([None, b])) for b in bounds)
    got = backend.clamp(x, lo, hi).to_numpy()
    wide = hx.astype(np.float64) if dtype in TOLERANCE else hx
    with np.errstate(invalid="ignore"):
        expected = wide if lo is None else np.maximum(wide, np.asarray(lo, wide.dtype))
        expected = expected if hi is None else np.minimum(expected, np.asarray(hi, wide.dtype))
    assert_matches(got, expected, dtype)


@SETTINGS
@given(data=st.data(), shape=shapes)
def test_gelu_tanh_and_inplace(backend: HipBackend, layouts: Any, data: Any, shape: Any) -> None:
    dtype = data.draw(st.sampled_from(FLOATS))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32)))
    host = values(rng, shape, dtype)
    x = backend.from_numpy(host)
    assert backend.gelu(x, approximate="tanh", out=x) is x
    h = host.astype(np.float64)
    with np.errstate(all="ignore"):
        expected = 0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h**3)))
    assert_matches(x.to_numpy(), expected, dtype)


def cast_values(rng: np.random.Generator, shape: Any, source: np.dtype, target: np.dtype) -> Any:
    """Values of `source` that numpy converts to `target` the same way on every platform:
    every float (specials included) between float types; between a float and an integer, only
    what the integer holds after truncation (floats outside it are undefined in C)."""
    if source.kind not in "iu" and target.kind in "iu":
        low = 0 if target.kind == "u" else max(-1000, int(np.iinfo(target).min))
        x = rng.uniform(low, min(1000, int(np.iinfo(target).max)), shape)
        return np.asarray(x).astype(source)
    return values(rng, shape, source)


@SETTINGS
@given(data=st.data(), shape=shapes)
def test_cast_between_every_pair_of_dtypes(
    backend: HipBackend, layouts: Any, data: Any, shape: Any
) -> None:
    source = data.draw(st.sampled_from([*FLOATS, *INTS, BOOL]))
    target = data.draw(st.sampled_from([*FLOATS, *INTS, BOOL]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32)))
    x, hx = layouts.make(data, backend, cast_values(rng, shape, source, target))
    got = backend.cast(x, target).to_numpy()
    with np.errstate(invalid="ignore", over="ignore"):
        expected = hx.astype(target)
    testing.assert_bits_equal(got, expected)


def test_unary_errors(backend: HipBackend) -> None:
    ints = backend.zeros(3, np.int32)
    with pytest.raises(ValueError, match="exp: x has dtype int32; this op takes float32"):
        backend.exp(ints)
    with pytest.raises(ValueError, match=r"clamp: lo = 0\.5 must be an int"):
        backend.clamp(ints, 0.5)
    with pytest.raises(ValueError, match=r"out is \(3,\) float32; this op writes \(3,\) int32"):
        backend.neg(ints, out=backend.zeros(3))
    with pytest.raises(ValueError, match="cast's target has dtype uint16"):
        backend.cast(ints, np.uint16)
    with pytest.raises(ValueError, match="out must not overlap"):
        backend.cast(ints, np.int32, out=ints)
    with pytest.raises(ValueError, match="exp: x has dtype bool"):
        backend.exp(backend.zeros(3, bool))
