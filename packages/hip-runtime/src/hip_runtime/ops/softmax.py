"""softmax and log_softmax along any axis, with the causal mask of attention scores.

On the device, never on the host; f32 accumulation whatever the storage type (f32, f16,
bf16). Two kernels (kernels/softmax.hip):

- softmax over the last axis when it is contiguous and the leading axes merge into at most
  two (contiguous tensors, a slice of columns, permuted leading axes): a row kernel
  (kernels/rows.h), one block per row that keeps the row in registers: one read, one write.
- everything else (another axis, log_softmax, any other layout): the along-axis kernel, which
  sees the input as [outer, axis, inner] (`reduce_layout.along`; a layout that does not merge
  is copied first) with threads across the inner axis (coalesced) and reads it twice.

Results are C-contiguous; `out=x` works in place for a contiguous x. A slice whose scores are
all -inf (or masked) gives zeros from softmax and -inf from log_softmax (numpy: NaN); a NaN
makes its slice NaN (in the row kernel, entries of -inf next to it may stay 0). Queued on the
backend's stream; a repeated row-kernel call of the same layouts is served by a plan
(`OpsBase._planned`).
"""

from __future__ import annotations

from typing import Any

from hip_runtime.ops.base import INT_MAX, OpsBase
from hip_runtime.ops.plans import launch_pointers, layout_id, plan_head
from hip_runtime.ops.reduce_layout import Merged, along, axes_argument, row_strides
from hip_runtime.ops.reduce_layout import next_power_of_two as pow2
from hip_runtime.tensors.dtypes import float_type
from hip_runtime.tensors.tensor import DeviceTensor

_BLOCK = 256
SOFTMAX, LOG_SOFTMAX, L2 = 0, 1, 2  # the along-axis kernel's modes


class SoftmaxOps(OpsBase):
    def softmax(
        self,
        x: DeviceTensor,
        axis: int = -1,
        *,
        scale: float = 1.0,
        causal_rows: int = 0,
        out: DeviceTensor | None = None,
    ) -> DeviceTensor:
        """softmax(scale · x) along `axis`.

        `causal_rows = q > 0` (last axis only) masks attention scores: rows are stacked
        [.., q, keys] blocks whose last q keys are the queries, so row r sees keys
        c <= r % q + keys - q. Masked entries are 0; a row that sees no key is all zeros.
        """
        key = None
        if (
            type(axis) is int is type(causal_rows)  # (ints only: True == 1 would share 1's key)
            and type(x) is DeviceTensor
            and (out is None or type(out) is DeviceTensor)
        ):  # (plan_key's key, inline: layout ids; issue 15 counts each call)
            key = ("softmax", x._layout or layout_id(x),
                   None if out is None else (out._layout or layout_id(out), out is x),
                   axis, causal_rows)  # fmt: skip
            plan = self._planned(key)
            if plan is not None:
                y = self._planned_output(plan, (x,), out)
                if y is not None:
                    kernel, rows, launch, cols, rows_at, prepared, kept_scale = plan[4:]
                    if scale == kept_scale and type(scale) is float and prepared(x.ptr, y.ptr):
                        return y
                    pointers = launch_pointers((x, y))
                    kernel.launch(*launch, *pointers, rows, cols, float(scale), causal_rows,
                                  *rows_at, stream=self.stream)  # fmt: skip
                    return y
        x = self._operand(x, "x")
        t = float_type(x.dtype, "x")
        if isinstance(causal_rows, bool) or not isinstance(causal_rows, int) or causal_rows < 0:
            raise ValueError(f"causal_rows must be an int >= 0, not {causal_rows!r}")
        if causal_rows > INT_MAX:
            raise ValueError("causal_rows exceeds the kernel's int range")
        # The usual call (the last axis of a contiguous tensor) skips the layout arithmetic:
        # issue 15 counts the host's microseconds per op.
        last = axis == -1 and type(axis) is int and x.ndim > 0
        a = x.ndim - 1 if last else axis_argument(x, axis, "softmax")
        if causal_rows and a != x.ndim - 1:
            raise ValueError("softmax: causal_rows masks the last axis only")
        y = self._output(out, x.shape, x.dtype, inputs=(x,))
        source = x
        if a == x.ndim - 1 and x.size:
            rows_at = (1, x.shape[-1], 0) if x.is_contiguous else row_strides(x.shape, x.strides)
            if rows_at is None and causal_rows:
                x, rows_at = x.contiguous(), (1, x.shape[-1], 0)
            if rows_at is not None:
                rows, cols = self._rows_cols(x, "x")
                kernel = self._kernel("softmax.hip", f"softmax_{t.suffix}")
                launch = self._launch_rows(kernel, rows, cols, x.dtype.itemsize, x, y, rows,
                                           cols, float(scale), causal_rows, *rows_at)  # fmt: skip
                if launch is not None and x is source:  # (not after a copy: a plan launches x)
                    prepared = kernel.prepare(
                        *launch,
                        x,
                        y,
                        rows,
                        cols,
                        float(scale),
                        causal_rows,
                        *rows_at,
                        stream=self.stream,
                    )
                    plan = (*plan_head((x,), y), kernel, rows, launch, cols, rows_at, prepared,
                            scale)  # fmt: skip
                    self._keep_plan(key, plan)
                return y
        along_axis(self, x, y, a, SOFTMAX, float(scale), 0.0)
        return y

    def log_softmax(
        self, x: DeviceTensor, axis: int = -1, *, scale: float = 1.0,
        out: DeviceTensor | None = None,
    ) -> DeviceTensor:  # fmt: skip
        """log(softmax(scale · x)) along `axis`, computed as s - max - log Σ exp(s - max)."""
        x = self._operand(x, "x")
        float_type(x.dtype, "x")
        a = axis_argument(x, axis, "log_softmax")
        y = self._output(out, x.shape, x.dtype, inputs=(x,))
        along_axis(self, x, y, a, LOG_SOFTMAX, float(scale), 0.0)
        return y


def axis_argument(x: DeviceTensor, axis: Any, op: str) -> int:
    """The one axis an op along an axis takes, in [0, ndim)."""
    if x.ndim == 0:
        raise ValueError(f"{op} needs at least one dimension")
    if axis is None or isinstance(axis, (tuple, list)):
        raise TypeError(f"{op} takes one int axis, not {axis!r}")
    return axes_argument(axis, x.ndim, op)[0]


def along_axis(
    ops: OpsBase, x: DeviceTensor, y: DeviceTensor, a: int, mode: int, scale: float, eps: float
) -> None:
    """Queue the along-axis kernel in `mode` over x along axis a into y (C-contiguous), on
    `ops`' stream (softmax, log_softmax and ReductionOps.l2_normalize)."""
    if x.size == 0:
        return
    m = along(x.shape, x.strides, (a,))
    if m is None:
        x = x.contiguous()
        m = along(x.shape, x.strides, (a,))
        assert m is not None  # a contiguous layout always merges
    y_strides = (m.R * m.I, m.I, 1)
    if m.I == 1 and m.O > 1 and m.R < 32:  # short rows: the outputs as i, one thread each
        m, y_strides = Merged(1, m.R, m.O, 0, m.sr, m.so), (0, 1, m.R)
    vec = int(m.si == 1 == y_strides[2] and m.I % 4 == 0 and m.so % 4 == 0 and m.sr % 4 == 0
              and x.ptr % 16 == 0 and y.ptr % 16 == 0)  # fmt: skip
    width = 4 if vec else 1
    lanes = min(pow2(-(-m.I // width)), 32)
    # Narrower blocks (down to 8 lanes: 128-byte runs) where the slices leave the device's
    # multiprocessors short of blocks (an axis this kernel does not split).
    while lanes > 8 and m.O * -(-m.I // (lanes * width)) < ops._grid_cap // 8:
        lanes //= 2
    blocks = m.O * -(-m.I // (lanes * width))
    kernel = ops._kernel("softmax.hip", f"softmax_axis_{float_type(x.dtype).suffix}")
    kernel.launch(blocks, _BLOCK, x, y, *m, *y_strides, lanes, vec, mode, scale, eps,
                  stream=ops.stream)  # fmt: skip


__all__ = ["L2", "LOG_SOFTMAX", "SOFTMAX", "SoftmaxOps", "along_axis", "axis_argument"]
