"""Normalizations over the last dimension: layernorm, rmsnorm.

Row kernels (kernels/rows.h): one block per row, on the device — never on the host. f32
accumulation whatever the storage type; `out=x` works in place. x's rows may be strided (the
last axis contiguous, the leading axes merging into at most two: a slice of columns,
permuted or reversed leading axes);
other layouts are refused, pointing at `.contiguous()`. weight, bias and the result are
C-contiguous. Queued on the backend's stream.
"""

from __future__ import annotations

from typing import Any

from hip_runtime.dtypes import FloatType, float_type
from hip_runtime.ops.base import OpsBase, not_contiguous
from hip_runtime.ops.reduce_layout import row_strides
from hip_runtime.tensor import DeviceTensor


class NormOps(OpsBase):
    def layernorm(
        self,
        x: DeviceTensor,
        weight: DeviceTensor | None = None,
        bias: DeviceTensor | None = None,
        *,
        eps: float = 1e-5,
        out: DeviceTensor | None = None,
    ) -> DeviceTensor:
        """(x - mean) / sqrt(var + eps) · weight + bias over the last dimension.

        x [..., cols]; weight and bias [cols] of x's dtype, or None (no scale / no shift).
        """
        x, t, strides = self._rows(x, "layernorm")
        rows, cols = self._rows_cols(x, "x")
        if weight is not None:
            self._same(x, weight, "weight", (cols,))
        if bias is not None:
            self._same(x, bias, "bias", (cols,))
        y = self._output(out, x.shape, x.dtype, inputs=(x,), distinct_from=(weight, bias))
        kernel = self._kernel("norms.hip", f"layernorm_{t.suffix}")
        self._launch_rows(
            kernel, rows, cols, x.dtype.itemsize, x, weight, bias, y, rows, cols, float(eps),
            *strides,
        )  # fmt: skip
        return y

    def rmsnorm(
        self,
        x: DeviceTensor,
        weight: DeviceTensor | None = None,
        *,
        eps: float = 1e-6,
        out: DeviceTensor | None = None,
    ) -> DeviceTensor:
        """x / sqrt(mean(x²) + eps) · weight over the last dimension (weight [cols] or None)."""
        x, t, strides = self._rows(x, "rmsnorm")
        rows, cols = self._rows_cols(x, "x")
        if weight is not None:
            self._same(x, weight, "weight", (cols,))
        y = self._output(out, x.shape, x.dtype, inputs=(x,), distinct_from=(weight,))
        kernel = self._kernel("norms.hip", f"rmsnorm_{t.suffix}")
        self._launch_rows(
            kernel, rows, cols, x.dtype.itemsize, x, weight, y, rows, cols, float(eps), *strides
        )
        return y

    def _rows(self, x: Any, op: str) -> tuple[DeviceTensor, FloatType, tuple[int, int, int]]:
        """x, its float type and where its rows start (`reduce_layout.row_strides`); ValueError
        for a layout the row kernels cannot read."""
        x = self._operand(x, "x")
        t = float_type(x.dtype, "x")
        if x.is_contiguous or x.ndim == 0:
            return x, t, (1, x.shape[-1] if x.ndim else 1, 0)
        strides = row_strides(x.shape, x.strides)
        if strides is None:
            raise not_contiguous(x, "x", op)
        return x, t, strides


__all__ = ["NormOps"]
