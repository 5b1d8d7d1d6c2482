"""float64 numpy references of every HipBackend op, and the comparisons to check results with.

As numpy.testing and torch.testing are: public, for the tests and `hip-backend selftest` alike,
and free of any test framework (a failure raises `Mismatch`, an AssertionError).

    from hip_runtime import testing

    rng = np.random.default_rng(0)
    x = testing.random(rng, (3, 1000), "bf16", scale=2.0)
    got = backend.rmsnorm(backend.from_numpy(x), eps=1e-5).to_numpy()
    testing.assert_close(got, testing.rmsnorm(x, eps=1e-5), "bf16")

Conventions:

- Each reference takes the op's arguments (names, defaults, row-major layouts; matmul operands
  as stored, with the transpose flags) as numpy arrays in the op's storage type, so it sees
  exactly what the device sees (`random` draws such inputs). It computes in float64 and
  returns float64, except the bit-exact ops (cast, embedding, transpose, dequantize), which
  return the device's exact result in its dtype: compare those with `assert_bits_equal`.
- Scalars the device receives as f32 (eps, scale, alpha) are rounded to f32 first.
- Sums of products (layernorm, matmul, linear, mlp_swiglu) return a `Reference`: the value, and
  the magnitude of the terms behind each element. f32 accumulation rounds at the scale of the
  terms, not of a result that cancels, so `assert_close` allows rtol of the larger of the two.
- Float types are named by the kernels' suffixes, "f32", "f16" and "bf16" (`DTYPES`); numpy
  dtypes are accepted too.

The spatial ops' references (convolutions, pooling, upsampling, group and batch norm) are in
`hip_runtime.testing.conv`, on the same conventions.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from hip_runtime.ops.quantized import BLOCK_ENCODINGS
from hip_runtime.tensors.dtypes import DTypeLike, as_dtype, bfloat16, float16, float32, float_type

Array = npt.NDArray[Any]

#: The float types the kernels take, by kernel suffix.
DTYPES: dict[str, np.dtype[Any]] = {"f32": float32, "f16": float16, "bf16": bfloat16}

#: (rtol, atol) per output type: about twice the unit roundoff of f16 (2^-11) and bf16 (2^-8);
#: for f32, the few ulps of expf/erff/tanhf and of f32 accumulation over long rows.
TOLERANCE: dict[str, tuple[float, float]] = {
    "f32": (1e-5, 1e-6),
    "f16": (1e-3, 1e-5),
    "bf16": (8e-3, 1e-5),
}


class Mismatch(AssertionError):
    """A result out of tolerance (or of the wrong dtype or shape); the message says where and
    by how much."""


class Reference(NamedTuple):
    """A float64 reference `value`, and the `magnitude` of the terms summed into each element
    (|a| @ |b| for a product): the scale at which f32 accumulation rounds."""

    value: Array
    magnitude: Array


def dtype_name(dtype: DTypeLike) -> str:
    """The kernel suffix ("f32", "f16" or "bf16") of a name or a numpy dtype; ValueError for
    types the kernels do not take."""
    if isinstance(dtype, str) and dtype in DTYPES:
        return dtype
    return float_type(as_dtype(dtype), "the reference").suffix


def tolerance(dtype: DTypeLike) -> tuple[float, float]:
    """(rtol, atol) of results of `dtype` (see TOLERANCE)."""
    return TOLERANCE[dtype_name(dtype)]


def random(
    rng: np.random.Generator, shape: Any, dtype: DTypeLike, *, scale: float = 1.0,
    shift: float = 0.0,
) -> Array:  # fmt: skip
    """Normal numbers · scale + shift, stored as `dtype` (the values the device will see)."""
    return np.asarray(rng.standard_normal(shape) * scale + shift, dtype=DTYPES[dtype_name(dtype)])


# --- comparisons ---------------------------------------------------------------------------


def assert_close(
    got: Array, expected: Array | Reference, dtype: DTypeLike, magnitude: Any = 0.0
) -> float:
    """Check |got - expected| <= rtol · max(|expected|, magnitude) + atol, elementwise.

    `got` must be of `dtype` and of expected's shape; (rtol, atol) = tolerance(dtype). A
    Reference brings its own magnitude (the larger of it and `magnitude` applies). Returns the
    largest error as a fraction of the allowed one (<= 1); raises Mismatch naming the first bad
    element otherwise (a NaN is always bad).
    """
    if isinstance(expected, Reference):
        magnitude = np.maximum(expected.magnitude, magnitude)
        expected = expected.value
    expected_type = DTYPES[dtype_name(dtype)]
    if got.dtype != expected_type:
        raise Mismatch(f"result dtype {got.dtype}, expected {expected_type}")
    if got.shape != expected.shape:
        raise Mismatch(f"result shape {got.shape}, expected {expected.shape}")
    rtol, atol = tolerance(dtype)
    actual = _f64(got)
    bound = rtol * np.maximum(np.abs(expected), magnitude) + atol
    error = np.abs(actual - expected)
    bad = ~(error <= bound)
    if bad.any():
        where = np.unravel_index(np.argmax(bad), bad.shape)
        raise Mismatch(
            f"{np.count_nonzero(bad)}/{bad.size} elements out of tolerance; first at "
            f"{tuple(map(int, where))}: got {actual[where]!r}, expected {expected[where]!r}, "
            f"allowed error {bound[where]!r} (rtol {rtol}, atol {atol})"
        )
    return float((error / bound).max()) if error.size else 0.0


def assert_bits_equal(got: Array, expected: Array) -> None:
    """Check dtype, shape and every bit, except that any NaN matches any NaN (payloads differ
    by hardware). Raises Mismatch."""
    if got.dtype != expected.dtype or got.shape != expected.shape:
        raise Mismatch(
            f"result {got.shape} {got.dtype}, expected {expected.shape} {expected.dtype}"
        )
    with np.errstate(invalid="ignore"):  # converting a signalling NaN raises "invalid"
        nan = np.isnan(expected.astype(np.float64))
        if not np.array_equal(np.isnan(got.astype(np.float64)), nan):
            raise Mismatch("NaNs differ")
    bits = np.dtype(f"u{got.dtype.itemsize}")
    differ = got.view(bits)[~nan] != expected.view(bits)[~nan]
    if differ.any():
        first = int(np.argmax(differ))
        raise Mismatch(
            f"{int(np.count_nonzero(differ))}/{differ.size} elements differ in bits; first "
            f"(of the non-NaN elements) at {first}: got {got[~nan][first]!r}, expected "
            f"{expected[~nan][first]!r}"
        )


def assert_close_with_nans(got: Array, expected: Array, dtype: DTypeLike) -> None:
    """Check that `got` is NaN exactly where `expected` is (which must have some NaN: the test
    planted them) and within `assert_close`'s tolerance everywhere else. Raises Mismatch."""
    nan = np.isnan(expected)
    if not nan.any():
        raise Mismatch("the reference has no NaN to compare")
    if not np.array_equal(np.isnan(_f64(got)), nan):
        raise Mismatch("NaNs differ")
    got, expected = got.copy(), expected.copy()
    got[nan], expected[nan] = 0, 0
    assert_close(got, expected, dtype)


def call_twice(op: Any, x: Any, *args: Any, **kwargs: Any) -> Array:
    """`op(x, *args, **kwargs)`'s result as a numpy array, after checking that the same call
    again (served by the plan the first made: `OpsBase._planned`) and a call into a fresh
    `out=` (a plan key of its own, so the checked path again) give the same bits. `op` is a
    HipBackend op returning a DeviceTensor. Raises Mismatch."""
    first = op(x, *args, **kwargs)
    planned = op(x, *args, **kwargs).to_numpy()
    out = first.__class__.empty(first.shape, first.dtype, device=first.device,
                                stream=first.stream)  # fmt: skip
    into = op(x, *args, **kwargs, out=out).to_numpy()
    result: Array = first.to_numpy()
    for again, how in ((planned, "the same call again (its plan)"), (into, "a call into out=")):
        if not np.array_equal(again.view(np.uint8), result.view(np.uint8)):
            raise Mismatch(f"{how} gave other bits than the first")
    return result


# --- elementwise and activations -------------------------------------------------------------


def add(a: Array, b: Array) -> Array:
    return _f64(a) + _f64(b)


def mul(a: Array, b: Array) -> Array:
    return _f64(a) * _f64(b)


def scale(x: Array, alpha: float) -> Array:
    return _f32(alpha) * _f64(x)


def add_row_bias(x: Array, bias: Array) -> Array:
    """x [..., cols] + bias [cols]."""
    return _f64(x) + _f64(bias)


def cast(x: Array, dtype: DTypeLike) -> Array:
    """x in `dtype` as the device converts it: widened to f32 (exact), rounded once to nearest
    even."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(x).astype(np.float32).astype(DTYPES[dtype_name(dtype)])


def silu(x: Array) -> Array:
    v = _f64(x)
    return np.asarray(v / (1.0 + np.exp(-v)))


_ERF = np.vectorize(math.erf)


def gelu(x: Array, *, approximate: str = "none") -> Array:
    """Exact ("none": with erf) or the tanh approximation ("tanh")."""
    v = _f64(x)
    if approximate == "tanh":
        return 0.5 * v * (1.0 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3)))
    return np.asarray(0.5 * v * (1.0 + _ERF(v / math.sqrt(2.0))))


def swiglu(gate: Array, up: Array) -> Array:
    """silu(gate) · up (the silu is on the gate)."""
    return silu(gate) * _f64(up)


# --- rows: norms and softmax -----------------------------------------------------------------


def layernorm(
    x: Array, weight: Array | None = None, bias: Array | None = None, *, eps: float = 1e-5
) -> Reference:
    """(x - mean) / sqrt(var + eps) · weight + bias over the last dimension. The magnitude is
    |x| · rstd · |weight| + |bias|: f32 rounds x - mean at the scale of x."""
    v = _f64(x)
    rstd = 1.0 / np.sqrt(v.var(-1, keepdims=True) + _f32(eps))
    y, magnitude = (v - v.mean(-1, keepdims=True)) * rstd, np.abs(v) * rstd
    if weight is not None:
        y, magnitude = y * _f64(weight), magnitude * np.abs(_f64(weight))
    if bias is not None:
        y, magnitude = y + _f64(bias), magnitude + np.abs(_f64(bias))
    return Reference(y, magnitude)


def rmsnorm(x: Array, weight: Array | None = None, *, eps: float = 1e-6) -> Array:
    """x / sqrt(mean(x²) + eps) · weight over the last dimension."""
    v = _f64(x)
    y = v / np.sqrt((v * v).mean(-1, keepdims=True) + _f32(eps))
    return np.asarray(y if weight is None else y * _f64(weight))


def softmax(x: Array, *, scale: float = 1.0, causal_rows: int = 0) -> Array:
    """softmax(scale · x) over the last dimension. With causal_rows = q > 0, row r (counted
    over all leading dimensions) sees keys c <= r % q + keys - q; masked entries are 0, and a
    row that sees no key is all zeros."""
    v = _f64(x)
    cols = v.shape[-1]
    scores = v.reshape(-1, cols) * _f32(scale)
    if causal_rows:
        last = np.arange(scores.shape[0]) % causal_rows + cols - causal_rows
        scores[np.arange(cols)[None, :] > last[:, None]] = -np.inf
    top = scores.max(axis=-1, keepdims=True, initial=-np.inf)
    e = np.exp(scores - np.where(np.isinf(top), 0.0, top))
    total = e.sum(axis=-1, keepdims=True)
    result: Array = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    return result.reshape(v.shape)


def attention(
    q: Array, k: Array, v: Array, *, causal: bool = False, mask: Array | None = None,
    scale: float | None = None,
) -> Reference:  # fmt: skip
    """softmax(scale · q kᵀ + mask) v for q [B, Hq, Sq, D] and k, v [B, Hkv, Skv, D]: query
    head h reads key/value head h // (Hq // Hkv). `scale` defaults to 1/sqrt(D); a boolean
    `mask` (True attends) or an additive one broadcasts to [B, Hq, Sq, Skv]; `causal` lets
    query i see key j <= i + Skv - Sq. A query that sees no key gives zeros."""
    queries, keys, values = _f64(q), _f64(k), _f64(v)
    group = queries.shape[1] // keys.shape[1]
    keys, values = np.repeat(keys, group, axis=1), np.repeat(values, group, axis=1)
    factor = _f32(1.0 / math.sqrt(queries.shape[-1]) if scale is None else scale)
    scores = (queries * factor) @ np.swapaxes(keys, -1, -2)
    sq, skv = scores.shape[-2:]
    allowed = np.ones(scores.shape, dtype=bool)
    if causal:
        allowed &= np.arange(skv)[None, :] <= np.arange(sq)[:, None] + skv - sq
    if mask is not None and np.asarray(mask).dtype == np.bool_:
        allowed &= np.broadcast_to(mask, scores.shape)
    elif mask is not None:
        scores = scores + _f64(mask)
    scores = np.where(allowed, scores, -np.inf)
    top = scores.max(axis=-1, keepdims=True, initial=-np.inf)
    e = np.exp(scores - np.where(np.isinf(top), 0.0, top))
    total = e.sum(axis=-1, keepdims=True)
    weights: Array = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    return Reference(weights @ values, weights @ np.abs(values))


# --- linear algebra --------------------------------------------------------------------------


def matmul(
    a: Array, b: Array, *, transpose_a: bool = False, transpose_b: bool = False,
    alpha: float = 1.0,
) -> Reference:  # fmt: skip
    """alpha · op(a) @ op(b), batches broadcast as the op does; a and b as stored (a [k, m]
    with transpose_a, b [n, k] with transpose_b)."""
    left, right = _f64(a), _f64(b)
    left = np.swapaxes(left, -1, -2) if transpose_a else left
    right = np.swapaxes(right, -1, -2) if transpose_b else right
    factor = _f32(alpha)
    return Reference(factor * (left @ right), abs(factor) * (np.abs(left) @ np.abs(right)))


def linear(x: Array, weight: Array, bias: Array | None = None) -> Reference:
    """x [..., in] @ weight [out, in]ᵀ + bias [out], as torch.nn.Linear."""
    product = matmul(x, weight, transpose_b=True)
    if bias is None:
        return product
    return Reference(product.value + _f64(bias), product.magnitude + np.abs(_f64(bias)))


def mlp_swiglu(x: Array, w_gate: Array, w_up: Array, w_down: Array) -> Reference:
    """The Llama MLP, (silu(x @ w_gateᵀ) · (x @ w_upᵀ)) @ w_downᵀ, with the intermediate rounded
    to x's type as the backend stores it. (That rounding may differ from the device's by one
    unit of the type: callers comparing 16-bit results allow twice the magnitude.)"""
    v = _f64(x)
    hidden = swiglu(v @ _f64(w_gate).T, v @ _f64(w_up).T).astype(np.asarray(x).dtype)
    return matmul(hidden, w_down, transpose_b=True)


# --- layout and indexing ---------------------------------------------------------------------


def rope_tables(max_position: int, rot_dim: int, *, base: float = 10000.0) -> tuple[Array, Array]:
    """(cos, sin), f32 [max_position, rot_dim / 2]: the angle of pair i at position p is
    p · base^(-2i / rot_dim), as Llama's."""
    angles = np.arange(max_position)[:, None] * base ** (-np.arange(0, rot_dim, 2) / rot_dim)
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def rope(
    x: Array, cos: Array, sin: Array, positions: Array | None = None, *,
    rot_dim: int | None = None, interleaved: bool = False,
) -> Array:  # fmt: skip
    """x [tokens, heads, head_dim] rotated by the angles of each token's position (its index
    when positions is None): pairs (i, i + rot_dim/2), or (2i, 2i + 1) when interleaved;
    elements from rot_dim on are copied."""
    out = _f64(x)
    tokens, _, head_dim = out.shape
    rot = head_dim if rot_dim is None else rot_dim
    at = np.arange(tokens) if positions is None else np.asarray(positions)
    c, s = _f64(cos[at])[:, None, :], _f64(sin[at])[:, None, :]  # [tokens, 1 (heads), rot/2]
    if interleaved:
        first, second = slice(0, rot, 2), slice(1, rot, 2)
    else:
        first, second = slice(0, rot // 2), slice(rot // 2, rot)
    a, b = out[..., first].copy(), out[..., second].copy()
    out[..., first], out[..., second] = a * c - b * s, b * c + a * s
    return out


def embedding(ids: Array, table: Array) -> Array:
    """Rows of table [vocab, dim] by id, [*ids.shape, dim] in table's dtype; an id outside
    [0, vocab) gives a row of zeros."""
    ids, table = np.asarray(ids), np.asarray(table)
    known = (ids >= 0) & (ids < table.shape[0])
    out = np.zeros((*ids.shape, table.shape[1]), table.dtype)
    out[known] = table[ids[known]]
    return out


def transpose(x: Array) -> Array:
    """xᵀ of a 2-D x, in x's dtype."""
    return np.ascontiguousarray(np.asarray(x).T)


# --- quantized -------------------------------------------------------------------------------


def dequantize(blocks: Array, encoding: str, dtype: DTypeLike = "f32") -> Array:
    """GGUF blocks (raw bytes, ggml's layout: see ops.quantized.BLOCK_ENCODINGS) as the flat
    values they hold: each f32(scale) · quant as one f32 product (exact), rounded once to
    `dtype`. q8_0 quants are int8; q4_0's are nibbles - 8, the low nibbles first."""
    block_bytes = BLOCK_ENCODINGS[encoding][1]
    raw = np.ascontiguousarray(blocks).reshape(-1).view(np.uint8).reshape(-1, block_bytes)
    scales = raw[:, :2].copy().view("<f2").astype(np.float32)
    if encoding == "q8_0":
        quants = raw[:, 2:].copy().view(np.int8).astype(np.float32)
    else:
        packed = raw[:, 2:]
        quants = np.concatenate([packed & 0xF, packed >> 4], axis=1).astype(np.float32) - 8
    with np.errstate(all="ignore"):  # random blocks hold infinite and NaN scales
        return np.asarray((scales * quants).reshape(-1), DTYPES[dtype_name(dtype)])


def _f64(x: Any) -> Array:
    return np.asarray(x).astype(np.float64)


def _f32(value: float) -> float:
    """A host scalar as the device receives it: rounded to f32."""
    return float(np.float32(value))


__all__ = [
    "DTYPES",
    "TOLERANCE",
    "Mismatch",
    "Reference",
    "add",
    "add_row_bias",
    "assert_bits_equal",
    "assert_close",
    "assert_close_with_nans",
    "attention",
    "call_twice",
    "cast",
    "dequantize",
    "dtype_name",
    "embedding",
    "gelu",
    "layernorm",
    "linear",
    "matmul",
    "mlp_swiglu",
    "mul",
    "random",
    "rmsnorm",
    "rope",
    "rope_tables",
    "scale",
    "silu",
    "softmax",
    "swiglu",
    "tolerance",
    "transpose",
]
