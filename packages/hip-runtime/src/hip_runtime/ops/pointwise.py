"""Elementwise ops over any layout with numpy broadcasting: binary arithmetic, comparisons,
where, and the unary functions (affine, clamp and powf among them).

Every op takes tensors of any layout (strided, reversed, broadcast, size 0, rank 0) and
Python scalars where an operand may be one; operands share a dtype (no promotion: a mismatch
is a ValueError naming both dtypes; cast explicitly), and a scalar takes the tensor's dtype.
`out=` is any writable layout of the result's shape and dtype, and may be an input exactly
(in place). 16-bit floats compute in f32, f64 in f64, integers in their own type, wrapping as
numpy does. Queued on the backend's stream; bad input raises before anything is queued.
add, mul and scale are in ops/elementwise.py, silu, gelu and swiglu in ops/activations.py.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hip_runtime.ops.pointwise_codes import (
    BINARY_CODE,
    COMPARE_CODE,
    MATH_CODE,
    UNARY_CODE,
    UNARY_OPS,
)
from hip_runtime.ops.pointwise_core import (
    ALL,
    FLOATS,
    NUMBERS,
    Operand,
    PointwiseCore,
    dtype_suffix,
    scalar_args,
)
from hip_runtime.tensors.dtypes import bool_
from hip_runtime.tensors.tensor import DeviceTensor

_INT_UNARY = frozenset(UNARY_OPS[:6])
_NO_PARAMS = (0.0, 0.0, 0, 0)
Out = DeviceTensor | None


class PointwiseOps(PointwiseCore):
    # --- binary arithmetic (add and mul: ops/elementwise.py) ----------------------------------

    def _arith(self, op: str, a: Operand, b: Operand, out: Out) -> DeviceTensor:
        types = FLOATS if op in ("div", "swiglu") else NUMBERS
        return self._pw_binary("binary.hip", "binary", BINARY_CODE[op], a, b, out, types)

    def sub(self, a: Operand, b: Operand, *, out: Out = None) -> DeviceTensor:
        """a - b, broadcast (either may be a Python scalar). Floats and integers (wrapping)."""
        return self._arith("sub", a, b, out)

    def div(self, a: Operand, b: Operand, *, out: Out = None) -> DeviceTensor:
        """a / b, broadcast: true division of floats (x / 0 is ±inf or NaN, as IEEE).
        Integer tensors are refused (ValueError): numpy's `/` would give floats and `//`
        differs from C's division; cast them to a float type first."""
        return self._arith("div", a, b, out)

    def maximum(self, a: Operand, b: Operand, *, out: Out = None) -> DeviceTensor:
        """The larger of a and b, broadcast; NaN if either is NaN (numpy's maximum)."""
        return self._arith("maximum", a, b, out)

    def minimum(self, a: Operand, b: Operand, *, out: Out = None) -> DeviceTensor:
        """The smaller of a and b, broadcast; NaN if either is NaN (numpy's minimum)."""
        return self._arith("minimum", a, b, out)

    def pow(self, a: Operand, b: Operand, *, out: Out = None) -> DeviceTensor:
        """a ** b, broadcast. Floats: the C library's pow (f32 powf for 16-bit types).
        Integers: exact by squaring, wrapping as numpy; a negative exponent gives
        1 / a**|b| truncated toward zero (0 unless a is 1 or -1; numpy refuses it)."""
        return self._pw_binary("binary.hip", "power", 0, a, b, out, NUMBERS)

    # --- comparisons ---------------------------------------------------------------------------

    def _compare(self, op: str, a: Operand, b: Operand, out: Out) -> DeviceTensor:
        return self._pw_binary("compare.hip", "compare", COMPARE_CODE[op], a, b, out, ALL,
                               result=bool_)  # fmt: skip

    def eq(self, a: Operand, b: Operand, *, out: Out = None) -> DeviceTensor:
        """a == b as a bool tensor, broadcast (every dtype; NaN equals nothing)."""
        return self._compare("eq", a, b, out)

    def ne(self, a: Operand, b: Operand, *, out: Out = None) -> DeviceTensor:
        """a != b as a bool tensor, broadcast (NaN differs from everything)."""
        return self._compare("ne", a, b, out)

    def lt(self, a: Operand, b: Operand, *, out: Out = None) -> DeviceTensor:
        """a < b as a bool tensor, broadcast (False where either is NaN)."""
        return self._compare("lt", a, b, out)

    def le(self, a: Operand, b: Operand, *, out: Out = None) -> DeviceTensor:
        """a <= b as a bool tensor, broadcast."""
        return self._compare("le", a, b, out)

    def gt(self, a: Operand, b: Operand, *, out: Out = None) -> DeviceTensor:
        """a > b as a bool tensor, broadcast."""
        return self._compare("gt", a, b, out)

    def ge(self, a: Operand, b: Operand, *, out: Out = None) -> DeviceTensor:
        """a >= b as a bool tensor, broadcast."""
        return self._compare("ge", a, b, out)

    # --- where ---------------------------------------------------------------------------------

    def where(self, cond: DeviceTensor, a: Operand, b: Operand, *, out: Out = None) -> DeviceTensor:
        """cond ? a : b elementwise, the three broadcast together (numpy's where). cond is a
        bool tensor; a and b share a dtype (either may be a Python scalar, not both). Values
        are copied unchanged."""
        key, y = self._pw_scalar_planned(("where",), (cond, a, b), out)  # (a repeated call)
        if y is not None:
            return y
        condition = self._operand(cond, "cond")
        if condition.dtype != bool_:
            raise ValueError(f"where: cond has dtype {condition.dtype}; it must be bool")
        tensors, dtype = self._pw_operands((a, b), ("a", "b"))
        suffix = dtype_suffix(dtype, ALL, "a" if tensors[0] is not None else "b")
        scalar, values = 0, [0.0, 0, 0.0, 0]
        for side, (tensor, value) in enumerate(zip(tensors, (a, b), strict=True)):
            if tensor is None:
                scalar |= 1 << side
                values[2 * side : 2 * side + 2] = scalar_args(value, dtype, "ab"[side])
        inputs = [condition, *tensors]
        y = self._pw_output(out, inputs, dtype)
        return self._pw_launch("where.hip", "where", suffix, (), inputs, y, (scalar, *values), key)

    # --- unary ---------------------------------------------------------------------------------

    def _unary(self, op: str, x: DeviceTensor, out: Out, params: Any = _NO_PARAMS) -> DeviceTensor:
        if op in MATH_CODE:
            return self._pw_unary("math.hip", MATH_CODE[op], x, out, FLOATS, params)
        types = NUMBERS if op in _INT_UNARY else FLOATS
        return self._pw_unary("unary.hip", UNARY_CODE[op], x, out, types, params)

    def abs(self, x: DeviceTensor, *, out: Out = None) -> DeviceTensor:
        """|x| (floats and integers; the most negative integer stays itself, as numpy)."""
        return self._unary("abs", x, out)

    def neg(self, x: DeviceTensor, *, out: Out = None) -> DeviceTensor:
        """-x (floats and integers, wrapping; unsigned integers wrap as numpy)."""
        return self._unary("neg", x, out)

    def sign(self, x: DeviceTensor, *, out: Out = None) -> DeviceTensor:
        """-1, 0 or 1 by the sign of x (NaN stays NaN); floats and integers."""
        return self._unary("sign", x, out)

    def sqr(self, x: DeviceTensor, *, out: Out = None) -> DeviceTensor:
        """x * x (floats and integers, wrapping)."""
        return self._unary("sqr", x, out)

    def relu(self, x: DeviceTensor, *, out: Out = None) -> DeviceTensor:
        """max(x, 0) (NaN stays NaN); floats and integers."""
        return self._unary("relu", x, out)

    def clamp(
        self, x: DeviceTensor, lo: float | None = None, hi: float | None = None, *, out: Out = None
    ) -> DeviceTensor:
        """min(max(x, lo), hi) as numpy's clip (NaN stays NaN; lo > hi gives hi); either bound
        may be None. Floats (bounds rounded to the compute type: f32 for 16-bit types) and
        integers (integer bounds)."""
        x = self._operand(x, "x")
        if x.dtype in SIGNED_OR_UNSIGNED:
            info = np.iinfo(x.dtype)
            low = info.min if lo is None else _int_bound(lo, "lo")
            high = info.max if hi is None else _int_bound(hi, "hi")
            low, high = (min(max(v, info.min), info.max) for v in (low, high))
            params: Any = (0.0, 0.0, low, high)
        else:
            params = (-math.inf if lo is None else float(lo), math.inf if hi is None else float(hi),
                      0, 0)  # fmt: skip
        return self._unary("clamp", x, out, params)

    def recip(self, x: DeviceTensor, *, out: Out = None) -> DeviceTensor:
        """1 / x (floats)."""
        return self._unary("recip", x, out)

    def floor(self, x: DeviceTensor, *, out: Out = None) -> DeviceTensor:
        """The largest integer <= x, as a float (floats)."""
        return self._unary("floor", x, out)

    def ceil(self, x: DeviceTensor, *, out: Out = None) -> DeviceTensor:
        """The smallest integer >= x, as a float (floats)."""
        return self._unary("ceil", x, out)

    def round(self, x: DeviceTensor, *, out: Out = None) -> DeviceTensor:
        """x rounded to the nearest integer, halves to even (numpy's round), as a float."""
        return self._unary("round", x, out)

    def affine(self, x: DeviceTensor, a: float, b: float, *, out: Out = None) -> DeviceTensor:
        """x * a + b (floats; a and b rounded to the compute type: f32 for 16-bit types)."""
        return self._unary("affine", x, out, (float(a), float(b), 0, 0))

    def exp(self, x: DeviceTensor, *, out: Out = None) -> DeviceTensor:
        """e ** x (floats)."""
        return self._unary("exp", x, out)

    def log(self, x: DeviceTensor, *, out: Out = None) -> DeviceTensor:
        """The natural logarithm (floats; -inf at 0, NaN below)."""
        return self._unary("log", x, out)

    def sin(self, x: DeviceTensor, *, out: Out = None) -> DeviceTensor:
        """sin x, x in radians (floats)."""
        return self._unary("sin", x, out)

    def cos(self, x: DeviceTensor, *, out: Out = None) -> DeviceTensor:
        """cos x, x in radians (floats)."""
        return self._unary("cos", x, out)

    def tanh(self, x: DeviceTensor, *, out: Out = None) -> DeviceTensor:
        """tanh x (floats)."""
        return self._unary("tanh", x, out)

    def sqrt(self, x: DeviceTensor, *, out: Out = None) -> DeviceTensor:
        """The square root (floats; NaN below 0)."""
        return self._unary("sqrt", x, out)

    def rsqrt(self, x: DeviceTensor, *, out: Out = None) -> DeviceTensor:
        """1 / sqrt(x) (floats)."""
        return self._unary("rsqrt", x, out)

    def sigmoid(self, x: DeviceTensor, *, out: Out = None) -> DeviceTensor:
        """1 / (1 + e ** -x) (floats)."""
        return self._unary("sigmoid", x, out)

    def elu(self, x: DeviceTensor, alpha: float = 1.0, *, out: Out = None) -> DeviceTensor:
        """x where x > 0, else alpha * (e ** x - 1) (floats)."""
        return self._unary("elu", x, out, (float(alpha), 0.0, 0, 0))

    def erf(self, x: DeviceTensor, *, out: Out = None) -> DeviceTensor:
        """The error function (floats)."""
        return self._unary("erf", x, out)

    def powf(self, x: DeviceTensor, p: float, *, out: Out = None) -> DeviceTensor:
        """x ** p for a float exponent p, rounded to the compute type (f32 for 16-bit types,
        not to x's dtype as `pow(x, p)` would); floats only."""
        self._operand(x, "x")
        dtype_suffix(x.dtype, FLOATS, "x")
        return self._pw_binary("binary.hip", "power", 0, x, float(p), out, FLOATS, exact=False)


SIGNED_OR_UNSIGNED = frozenset(
    np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32)
)


def _int_bound(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"clamp: {name} = {value!r} must be an int for an integer tensor")
    return int(value)


__all__ = ["PointwiseOps"]
