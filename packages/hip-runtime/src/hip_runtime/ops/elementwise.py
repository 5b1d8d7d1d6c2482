"""Elementwise arithmetic: add, mul, scale, add_row_bias, and cast between the float types.

All take f32/f16/bf16 tensors, compute in f32 and store in the input type. Outputs may be an
input (`out=x` works in place) except for `cast`. Queued on the backend's stream.
"""

from __future__ import annotations

from hip_runtime.dtypes import DTypeLike, as_dtype, float_type
from hip_runtime.ops.base import OpsBase
from hip_runtime.tensor import DeviceTensor


class ElementwiseOps(OpsBase):
    def add(
        self, a: DeviceTensor, b: DeviceTensor, *, out: DeviceTensor | None = None
    ) -> DeviceTensor:
        """a + b (same shape and dtype)."""
        return self._binary("elementwise.hip", "add", a, b, out)

    def mul(
        self, a: DeviceTensor, b: DeviceTensor, *, out: DeviceTensor | None = None
    ) -> DeviceTensor:
        """a · b elementwise (same shape and dtype)."""
        return self._binary("elementwise.hip", "mul", a, b, out)

    def scale(
        self, x: DeviceTensor, alpha: float, *, out: DeviceTensor | None = None
    ) -> DeviceTensor:
        """alpha · x (alpha is rounded to f32)."""
        x, t = self._float(x, "x")
        y = self._output(out, x.shape, x.dtype, inputs=(x,))
        kernel = self._kernel("elementwise.hip", f"scale_{t.suffix}")
        self._launch_flat(kernel, x.size, x.dtype.itemsize, x, y, float(alpha), x.size)
        return y

    def add_row_bias(
        self, x: DeviceTensor, bias: DeviceTensor, *, out: DeviceTensor | None = None
    ) -> DeviceTensor:
        """x + bias over the last dimension: x [..., cols], bias [cols]."""
        x, t = self._float(x, "x")
        rows, cols = self._rows_cols(x, "x")
        self._same(x, bias, "bias", (cols,))
        y = self._output(out, x.shape, x.dtype, inputs=(x,), distinct_from=(bias,))
        kernel = self._kernel("elementwise.hip", f"add_row_bias_{t.suffix}")
        self._launch_flat(kernel, x.size, x.dtype.itemsize, x, bias, y, rows, cols)
        return y

    def cast(
        self, x: DeviceTensor, dtype: DTypeLike, *, out: DeviceTensor | None = None
    ) -> DeviceTensor:
        """x converted to `dtype` (f32/f16/bf16), rounding to nearest even once; the same type
        gives a copy. `out` must not overlap x."""
        x, source = self._float(x, "x")
        target = float_type(as_dtype(dtype), "the cast's target")
        y = self._output(out, x.shape, target.dtype, distinct_from=(x,))
        if source == target:
            if y.nbytes:
                y.region().copy_from(x.region(), stream=self.stream)
            return y
        kernel = self._kernel("cast.hip", f"cast_{source.suffix}_to_{target.suffix}")
        self._launch_flat(kernel, x.size, min(x.dtype.itemsize, y.dtype.itemsize), x, y, x.size)
        return y


__all__ = ["ElementwiseOps"]
