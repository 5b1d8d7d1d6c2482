"""Normalizations over the last dimension: layernorm, rmsnorm.

Row kernels (kernels/rows.h): one block per row, on the device — never on the host. f32
accumulation whatever the storage type; `out=x` works in place. Queued on the backend's stream.
"""

from __future__ import annotations

from hip_runtime.ops.base import OpsBase
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
        x, t = self._float(x, "x")
        rows, cols = self._rows_cols(x, "x")
        if weight is not None:
            self._same(x, weight, "weight", (cols,))
        if bias is not None:
            self._same(x, bias, "bias", (cols,))
        y = self._output(out, x.shape, x.dtype, inputs=(x,), distinct_from=(weight, bias))
        kernel = self._kernel("norms.hip", f"layernorm_{t.suffix}")
        self._launch_rows(
            kernel, rows, cols, x.dtype.itemsize, x, weight, bias, y, rows, cols, float(eps)
        )
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
        x, t = self._float(x, "x")
        rows, cols = self._rows_cols(x, "x")
        if weight is not None:
            self._same(x, weight, "weight", (cols,))
        y = self._output(out, x.shape, x.dtype, inputs=(x,), distinct_from=(weight,))
        kernel = self._kernel("norms.hip", f"rmsnorm_{t.suffix}")
        self._launch_rows(
            kernel, rows, cols, x.dtype.itemsize, x, weight, y, rows, cols, float(eps)
        )
        return y


__all__ = ["NormOps"]
