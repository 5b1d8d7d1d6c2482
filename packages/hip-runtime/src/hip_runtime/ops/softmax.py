"""softmax over the last dimension, with the causal mask of attention scores.

A row kernel (kernels/rows.h): one block per row, on the device — never on the host. f32
accumulation whatever the storage type; `out=x` works in place. Queued on the backend's stream.
"""

from __future__ import annotations

from hip_runtime.ops.base import INT_MAX, OpsBase
from hip_runtime.tensor import DeviceTensor


class SoftmaxOps(OpsBase):
    def softmax(
        self,
        x: DeviceTensor,
        *,
        scale: float = 1.0,
        causal_rows: int = 0,
        out: DeviceTensor | None = None,
    ) -> DeviceTensor:
        """softmax(scale · x) over the last dimension.

        `causal_rows = q > 0` masks attention scores: rows are stacked [.., q, keys] blocks
        whose last q keys are the queries, so row r sees keys c <= r % q + keys - q. Masked
        entries are 0; a row that sees no key is all zeros.
        """
        x, t = self._float(x, "x")
        rows, cols = self._rows_cols(x, "x")
        if isinstance(causal_rows, bool) or not isinstance(causal_rows, int) or causal_rows < 0:
            raise ValueError(f"causal_rows must be an int >= 0, not {causal_rows!r}")
        if causal_rows > INT_MAX:
            raise ValueError("causal_rows exceeds the kernel's int range")
        y = self._output(out, x.shape, x.dtype, inputs=(x,))
        kernel = self._kernel("softmax.hip", f"softmax_{t.suffix}")
        self._launch_rows(
            kernel, rows, cols, x.dtype.itemsize, x, y, rows, cols, float(scale), causal_rows
        )
        return y


__all__ = ["SoftmaxOps"]
