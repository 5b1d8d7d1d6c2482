"""The pointwise ops against numpy, under hypothesis: binary ops, comparisons and where over
shapes of rank 0-5 that broadcast together, unary ops and casts over shapes of rank 0-5 (size-0
and size-1 axes), every dtype each op takes, operands in random layouts (the `layouts` fixture:
permuted, stepped, reversed, broadcast) or Python scalars on either side, and `out=` (new, in
place, strided). References are numpy in float64 for floats (rounded once to the result's dtype,
then compared at the dtype's tolerance, NaN and inf included) and numpy in the dtype itself for
integers (exact: both wrap); casts are compared bit for bit with numpy's (ml_dtypes') astype.

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
#: (rtol, atol) of a result of each float type after the reference is rounded to it.
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
pair_shapes = hnp.mutually_broadcastable_shapes(
    num_shapes=2, min_dims=0, max_dims=5, min_side=0, max_side=4
)
triple_shapes = hnp.mutually_broadcastable_shapes(
    num_shapes=3, min_dims=0, max_dims=5, min_side=0, max_side=4
)
shapes = hnp.array_shapes(min_dims=0, max_dims=5, min_side=0, max_side=4)
_erf = np.vectorize(math.erf, otypes=[np.float64])

Reference = Callable[[np.ndarray, np.ndarray], np.ndarray]
#: op -> (dtypes, reference on float64 (floats) or on the dtype itself (integers)).
BINARY: dict[str, tuple[list[np.dtype], Reference]] = {
    "add": (FLOATS + INTS, np.add),
    "sub": (FLOATS + INTS, np.subtract),
    "mul": (FLOATS + INTS, np.multiply),
    "div": (FLOATS, np.divide),
    "maximum": (FLOATS + INTS, np.maximum),
    "minimum": (FLOATS + INTS, np.minimum),
    "pow": (FLOATS + INTS, np.power),
    "swiglu": (FLOATS, lambda g, u: g / (1 + np.exp(-g)) * u),
}
COMPARE = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
           "gt": np.greater, "ge": np.greater_equal}  # fmt: skip


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


def values(rng: np.random.Generator, shape: Any, dtype: np.dtype, op: str = "") -> np.ndarray:
    """Random values of `dtype`: normal floats (a few zeros, halves, infinities and NaNs),
    small integers for pow, the whole range of other integers; bools."""
    if dtype == BOOL:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind in "iu":
        if op == "pow":
            return rng.integers(0 if dtype.kind == "u" else -3, 6, shape).astype(dtype)
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    x = rng.standard_normal(shape) * 3
    special = rng.random(shape)
    x = np.where(special < 0.05, 0.0, np.where(special < 0.1, np.round(x) + 0.5, x))
    if op != "pow":
        x = np.where(special > 0.98, rng.choice([np.inf, -np.inf, np.nan], shape), x)
    return np.asarray(x).astype(dtype)


def assert_matches(got: np.ndarray, expected: np.ndarray, dtype: np.dtype) -> None:
    """got (of dtype) against a reference: float64 ones rounded to dtype first, then within
    the dtype's tolerance (NaN where NaN, inf where inf); integers and bools exactly."""
    assert got.dtype == dtype and got.shape == expected.shape
    if dtype in TOLERANCE:
        rtol, atol = TOLERANCE[dtype]
        with np.errstate(over="ignore", invalid="ignore"):
            rounded = np.asarray(expected).astype(dtype).astype(np.float64)
        np.testing.assert_allclose(got.astype(np.float64), rounded, rtol, atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, expected)


def reference(op: Reference, dtype: np.dtype, *arrays: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        if dtype in TOLERANCE:
            return np.asarray(op(*(a.astype(np.float64) for a in arrays)))
        return np.asarray(op(*arrays))


def operand(data: Any, backend: HipBackend, layouts: Any, array: np.ndarray) -> tuple[Any, Any]:
    """(device operand, host array): a tensor in a random layout, or (for a 0-d array,
    sometimes) the Python scalar itself."""
    if array.ndim == 0 and data.draw(st.booleans()):
        return array.item(), array
    return layouts.make(data, backend, array)


@SETTINGS
@given(data=st.data(), op=st.sampled_from(sorted(BINARY)), shapes=pair_shapes)
def test_binary_ops_broadcast_any_layout_and_dtype(
    backend: HipBackend, layouts: Any, data: Any, op: str, shapes: Any
) -> None:
    types, ref = BINARY[op]
    dtype = data.draw(st.sampled_from(types))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32)))
    (a, ha), (b, hb) = (
        operand(data, backend, layouts, values(rng, shape, dtype, op))
        for shape in shapes.input_shapes
    )
    if not hasattr(a, "shape") and not hasattr(b, "shape"):
        a, ha = layouts.make(data, backend, ha)
    if op == "pow" and dtype.kind in "iu":
        hb = np.abs(hb).astype(dtype)  # numpy refuses negative integer exponents
        b = hb.item() if not hasattr(b, "shape") else backend.from_numpy(hb)
    got = getattr(backend, op)(a, b).to_numpy()
    assert_matches(got, reference(ref, dtype, ha, hb), dtype)


@SETTINGS
@given(data=st.data(), op=st.sampled_from(sorted(COMPARE)), shapes=pair_shapes)
def test_comparisons_give_bool_for_every_dtype(
    backend: HipBackend, layouts: Any, data: Any, op: str, shapes: Any
) -> None:
    dtype = data.draw(st.sampled_from([*FLOATS, *INTS, BOOL]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32)))
    arrays = [values(rng, shape, dtype) for shape in shapes.input_shapes]
    if dtype.kind in "iu":  # equal elements too, not only the whole range
        arrays = [np.where(rng.random(x.shape) < 0.5, x % 3, x).astype(dtype) for x in arrays]
    (a, ha), (b, hb) = (operand(data, backend, layouts, x) for x in arrays)
    if not hasattr(a, "shape") and not hasattr(b, "shape"):
        a, ha = layouts.make(data, backend, ha)
    got = getattr(backend, op)(a, b).to_numpy()
    expected = COMPARE[op](*(x.astype(np.float64) if dtype in TOLERANCE else x for x in (ha, hb)))
    assert_matches(got, np.asarray(expected), BOOL)


@SETTINGS
@given(data=st.data(), shapes=triple_shapes)
def test_where_selects_with_broadcasting(
    backend: HipBackend, layouts: Any, data: Any, shapes: Any
) -> None:
    dtype = data.draw(st.sampled_from([*FLOATS, *INTS, BOOL]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32)))
    c_shape, a_shape, b_shape = shapes.input_shapes
    cond, hc = layouts.make(data, backend, values(rng, c_shape, BOOL))
    (a, ha), (b, hb) = (
        operand(data, backend, layouts, values(rng, s, dtype)) for s in (a_shape, b_shape)
    )
    if not hasattr(a, "shape") and not hasattr(b, "shape"):
        a, ha = layouts.make(data, backend, ha)
    got = backend.where(cond, a, b).to_numpy()
    expected = np.where(hc, ha, hb)
    assert_matches(got, expected.astype(np.float64) if dtype in TOLERANCE else expected, dtype)


@SETTINGS
@given(data=st.data(), shapes=pair_shapes)
def test_out_in_place_and_strided(
    backend: HipBackend, layouts: Any, data: Any, shapes: Any
) -> None:
    """out= the first operand (in place), or a strided view of a bigger tensor."""
    dtype = data.draw(st.sampled_from([np.dtype(np.float32), np.dtype(np.int32)]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32)))
    ha, hb = (values(rng, s, dtype) for s in shapes.input_shapes)
    shape = shapes.result_shape
    ha = np.broadcast_to(ha, shape).copy()
    a, ha = layouts.make(data, backend, ha)
    b, hb = layouts.make(data, backend, hb)
    expected = reference(np.subtract, dtype, ha, hb)
    if all(s != 0 or d <= 1 for d, s in zip(a.shape, a.strides, strict=True)):
        result = backend.sub(a, b, out=a)  # in place: a is written where it is read
        assert result is a
        assert_matches(a.to_numpy(), expected, dtype)
    big = backend.zeros(tuple(2 * d for d in shape), dtype)
    view = big[tuple(slice(None, None, -2) for _ in shape)]  # reversed, with steps
    assert backend.sub(backend.from_numpy(ha), b, out=view) is view
    assert_matches(view.to_numpy(), expected, dtype)
    if shape:  # the elements between stay untouched
        assert not big.to_numpy()[tuple(slice(None, None, 2) for _ in shape)].any()


def test_scalars_take_the_tensors_dtype(backend: HipBackend) -> None:
    x = backend.from_numpy(np.array([1.0, 2.0], ml_dtypes.bfloat16))
    # 1.001 rounds to 1.0 in bf16 first: a bf16 + a Python float is a bf16 sum.
    got = backend.add(x, 1.001).to_numpy().astype(np.float64)
    np.testing.assert_array_equal(got, [2.0, 3.0])
    ints = backend.from_numpy(np.array([5, -7], np.int64))
    np.testing.assert_array_equal(backend.sub(2**40, ints).to_numpy(), [2**40 - 5, 2**40 + 7])
    np.testing.assert_array_equal(backend.lt(ints, 0).to_numpy(), [False, True])
    with pytest.raises(ValueError, match=r"sub: b = 1.5 cannot take the tensor's dtype int64"):
        backend.sub(ints, 1.5)
    small = backend.from_numpy(np.array([1], np.int8))
    with pytest.raises(ValueError, match="out of the range of int8"):
        backend.add(small, 300)
    with pytest.raises(TypeError, match="at least one DeviceTensor"):
        backend.add(1, 2)


def test_integer_pow_with_negative_exponents(backend: HipBackend) -> None:
    a = backend.from_numpy(np.array([1, -1, -1, 2, -3, 0], np.int32))
    b = backend.from_numpy(np.array([-3, -3, -2, -1, -2, 0], np.int32))
    np.testing.assert_array_equal(backend.pow(a, b).to_numpy(), [1, -1, 1, 0, 0, 1])


BAD_CALLS: dict[str, tuple[Callable[[HipBackend], Any], str]] = {
    "dtypes": (
        lambda b: b.add(b.zeros(3), b.zeros(3, np.float16)),
        r"add: a has dtype float32 and b has dtype float16; cast",
    ),
    "shapes": (lambda b: b.mul(b.zeros((2, 3)), b.zeros((3, 2))), r"mul: shapes .* broadcast"),
    "int div": (lambda b: b.div(b.zeros(3, np.int32), 2), r"div: a has dtype int32; this op"),
    "bool add": (lambda b: b.add(b.zeros(3, bool), True), r"add: a has dtype bool"),
    "host array": (lambda b: b.add(b.zeros(3), np.ones(3, np.float32)), r"b must be a Device"),
    "out shape": (lambda b: b.sub(b.zeros(3), 1.0, out=b.zeros(4)), r"out is \(4,\)"),
    "out dtype": (lambda b: b.eq(b.zeros(3), 1.0, out=b.zeros(3)), r"writes \(3,\) bool"),
    "out broadcast": (
        lambda b: b.add(b.zeros(3), 1.0, out=b.zeros(1).expand(3)),
        r"elements overlap",
    ),
    "out overlaps": (lambda b: _shifted(b), r"out must be an input exactly"),
    "out transposed input": (lambda b: _transposed(b), r"out must be an input exactly"),
    "9 unmergeable axes": (
        lambda b: b.add(b.zeros((2,) * 9), b.zeros((2,) * 9).T),
        r"add: the operands' layouts merge into 9 axes; the kernels take up to 8",
    ),
    "where scalars only": (
        lambda b: b.where(b.zeros(3, bool), 1.0, 2.0),
        r"where needs at least one DeviceTensor",
    ),
    "where cond": (lambda b: b.where(b.zeros(3), 1.0, 2.0), r"where: cond has dtype float32"),
    "where dtypes": (
        lambda b: b.where(b.zeros(3, bool), b.zeros(3), b.zeros(3, np.float64)),
        r"where: a has dtype float32 and b has dtype float64",
    ),
}


def _shifted(b: HipBackend) -> Any:
    x = b.zeros((4, 3))
    return b.add(x[0:3], 1.0, out=x[1:4])


def _transposed(b: HipBackend) -> Any:
    x = b.zeros((3, 3))
    return b.add(x.T, x, out=x)  # x.T reads elements others write


@pytest.mark.parametrize("call", sorted(BAD_CALLS))
def test_bad_calls_raise_before_anything_is_queued(
    backend: HipBackend, call: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hip_core import Kernel

    make, pattern = BAD_CALLS[call]
    launched: list[str] = []
    original = Kernel.launch

    def launch(self: Kernel, *args: Any, **kwargs: Any) -> None:
        launched.append(self.name)
        original(self, *args, **kwargs)

    monkeypatch.setattr(Kernel, "launch", launch)
    with pytest.raises((ValueError, TypeError), match=pattern):
        make(backend)
    assert not [name for name in launched if not name.startswith(("fill", "copy"))]


# --- unary ops and casts ------------------------------------------------------------------


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


# --- large shapes (nvidia only: the H200 run) -----------------------------------------------

NVIDIA_ONLY = pytest.mark.parametrize(
    "platform", [pytest.param("nvidia", marks=pytest.mark.gpu)], indirect=True
)


@NVIDIA_ONLY
@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16)])
def test_large_broadcast_row_unary_and_where(backend: HipBackend, dtype: np.dtype) -> None:
    """The benchmark's shapes: 8192 x 8192 plus a broadcast row, exp, where (rows path)."""
    rng = np.random.default_rng(7)
    x_host = rng.standard_normal((8192, 8192)).astype(dtype)
    row_host = rng.standard_normal(8192).astype(dtype)
    x, row = backend.from_numpy(x_host), backend.from_numpy(row_host)
    wide = x_host.astype(np.float64)
    assert_matches((x + row).to_numpy(), wide + row_host.astype(np.float64), dtype)
    assert_matches(backend.exp(x).to_numpy(), np.exp(wide), dtype)
    picked = backend.where(x > 0, x, row).to_numpy()
    np.testing.assert_array_equal(picked, np.where(x_host > 0, x_host, row_host))


@NVIDIA_ONLY
def test_strided_path_past_32_bit_indices(backend: HipBackend) -> None:
    """More than 2^32 elements on the strided path (a broadcast, reversed row): 64-bit
    division. Rows are checked, not the whole 4 GiB."""
    row = (np.arange(65536) % 251).astype(np.uint8)
    x = backend.from_numpy(row)[None].expand(65537, 65536)[:, ::-1]
    y = backend.add(x, 3)
    assert y.size > 2**32
    for r in (0, 12345, 65536):
        np.testing.assert_array_equal(y[r].to_numpy(), (row[::-1] + 3).astype(np.uint8))
