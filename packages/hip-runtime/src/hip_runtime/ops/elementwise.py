"""Elementwise arithmetic: add, mul, scale, add_row_bias, and cast between any two dtypes.

add and mul are the broadcasting binary ops of ops/pointwise.py (any layout, numpy's
broadcasting, floats and integers, Python scalars); scale and add_row_bias are their common
special cases under their earlier names. Outputs may be an input exactly (`out=x` works in
place) except for `cast`. Queued on the backend's stream.
"""

from __future__ import annotations

from hip_runtime.ops.pointwise_codes import BINARY_CODE
from hip_runtime.ops.pointwise_core import (
    FLOATS,
    NUMBERS,
    Operand,
    PointwiseCore,
    dtype_suffix,
)
from hip_runtime.tensors.dtypes import DTypeLike
from hip_runtime.tensors.tensor import DeviceTensor


class ElementwiseOps(PointwiseCore):
    def add(self, a: Operand, b: Operand, *, out: DeviceTensor | None = None) -> DeviceTensor:
        """a + b, broadcast as numpy (either may be a Python scalar, which takes the tensor's
        dtype). Operands share a dtype: floats or integers (wrapping)."""
        return self._pw_binary("binary.hip", "binary", BINARY_CODE["add"], a, b, out, NUMBERS)

    def mul(self, a: Operand, b: Operand, *, out: DeviceTensor | None = None) -> DeviceTensor:
        """a · b elementwise, broadcast as `add`."""
        return self._pw_binary("binary.hip", "binary", BINARY_CODE["mul"], a, b, out, NUMBERS)

    def scale(
        self, x: DeviceTensor, alpha: float, *, out: DeviceTensor | None = None
    ) -> DeviceTensor:
        """alpha · x of a float tensor (alpha is rounded to the compute type: f32 for the
        16-bit types, f64 for f64)."""
        mul = BINARY_CODE["mul"]
        if type(alpha) is float or type(alpha) is int:  # (a repeated call: _pw_binary's plan)
            _, y = self._pw_scalar_planned(
                ("binary", mul, FLOATS, None, False), (x, float(alpha)), out
            )
            if y is not None:
                return y
        x = self._operand(x, "x")
        dtype_suffix(x.dtype, FLOATS, "x")
        return self._pw_binary(
            "binary.hip", "binary", mul, x, float(alpha), out, FLOATS, exact=False
        )

    def add_row_bias(
        self, x: DeviceTensor, bias: DeviceTensor, *, out: DeviceTensor | None = None
    ) -> DeviceTensor:
        """x + bias over the last dimension: x [..., cols], bias [cols] (float types); `add`
        with the shape checked. `out` may be x, not bias."""
        x = self._operand(x, "x")
        bias = self._operand(bias, "bias")
        if x.ndim == 0 or bias.shape != x.shape[-1:]:
            raise ValueError(f"add_row_bias: bias has shape {bias.shape}; expected {x.shape[-1:]}")
        dtype_suffix(x.dtype, FLOATS, "x")
        if out is not None:
            self._output(out, x.shape, x.dtype, inputs=(x,), distinct_from=(bias,), strided=True)
        return self._pw_binary("binary.hip", "binary", BINARY_CODE["add"], x, bias, out, FLOATS)

    def cast(
        self, x: DeviceTensor, dtype: DTypeLike, *, out: DeviceTensor | None = None
    ) -> DeviceTensor:
        """x converted to `dtype`, any of the kernels' dtypes to any other (numpy's astype:
        floats round to nearest even once, floats to integers truncate, to bool is x != 0;
        kernels/cast.hip has the details). x may have any layout; the same type gives a
        copy. `out` must not overlap x."""
        return self._pw_cast(x, dtype, out)  # (ops/pointwise_core.py: with its launch plan)


__all__ = ["ElementwiseOps"]
