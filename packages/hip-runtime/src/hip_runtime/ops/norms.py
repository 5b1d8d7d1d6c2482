"""Normalizations over the last dimension: layernorm, rmsnorm.

Row kernels (kernels/rows.h): one block per row, on the device — never on the host. f32
accumulation whatever the storage type; `out=x` works in place. x's rows may be strided (the
last axis contiguous, the leading axes merging into at most two: a slice of columns,
permuted or reversed leading axes);
other layouts are refused, pointing at `.contiguous()`. weight, bias and the result are
C-contiguous. Queued on the backend's stream. A repeated call of the same layouts is served
by a plan (`OpsBase._planned`): a dict look-up and the launch.

eps must be a real number (int, float, numpy's), not a bool or a string: TypeError. Rows of any
finite magnitude normalize: the kernels rescale a row whose f32 sum of squares overflows
(|x| from about 1.8e19) or vanishes (kernels/rows.h).
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from hip_runtime.ops.base import OpsBase, not_contiguous
from hip_runtime.ops.plans import address_of, launch_pointers, plan_head, plan_key
from hip_runtime.ops.reduce_layout import row_strides
from hip_runtime.tensors.dtypes import FloatType, float_type
from hip_runtime.tensors.tensor import DeviceTensor


def real_number(value: Any, name: str, op: str) -> float:
    """`value` as a float; TypeError unless it is a real number (a bool is not one here)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{op}: {name} must be a real number, not {value!r}")
    return float(value)


def rms_of_rows(x: DeviceTensor, dtype: Any, rows: int, op: str) -> int:
    """The row length of an `rms_of` operand (a tensor whose rows' RMS an op divides by:
    kernels/row_rms.h); ValueError naming `op` unless x is C-contiguous [..., hidden] of
    `dtype` with `rows` rows and hidden < 2^31."""
    hidden = x.shape[-1] if x.ndim else 0
    if x.dtype != dtype or not hidden or x.size // hidden != rows:
        raise ValueError(f"{op}: rms_of is {x.shape} {x.dtype}; expected [..., hidden] {dtype} "
                         f"with {rows} rows")  # fmt: skip
    if not x.is_contiguous or hidden >= 1 << 31:
        raise ValueError(f"{op}: rms_of must be C-contiguous, rows < 2^31 elements")
    return hidden


def narrow_rows_per_warp(op: str, itemsize: int) -> int:
    """Rows a warp of `op`'s narrow kernel takes (kernels/rows.h's NarrowTile::rows, which
    must agree): 16-bit layernorm rows are held packed, four a warp; f32 rows and
    add_layernorm's f32 sums two."""
    return 4 if op == "layernorm" and itemsize == 2 else 2


class NormOps(OpsBase):
    def layernorm(
        self,
        x: DeviceTensor,
        weight: DeviceTensor | None = None,
        bias: DeviceTensor | None = None,
        *,
        eps: float = 1e-5,
        residual: DeviceTensor | None = None,
        input_bias: DeviceTensor | None = None,
        out: DeviceTensor | None = None,
    ) -> DeviceTensor:
        """(v - mean) / sqrt(var + eps) · weight + bias over the last dimension, where
        v = x + residual + input_bias (each addend only when given; v = x by default).

        x [..., cols]; weight and bias [cols] of x's dtype, or None (no scale / no shift).
        `residual` (x's shape and dtype, C-contiguous) and `input_bias` ([cols] of x's dtype)
        fuse a post-LN layer's residual add and its product's bias into the norm: BERT's
        LayerNorm(x Wᵀ + b + residual) is `layernorm(linear(x, W), w, c, residual=residual,
        input_bias=b)`, one launch that reads the product and the residual once and writes
        the result once. The sum is formed and kept in f32 (kernels/add_norm.h): the unfused
        ops (`add`, then `layernorm`) round it to x's dtype first, so for f16 and bf16 the
        results differ by that rounding (nearer the exact sum's here). Rows the kernel does
        not hold in registers (read as 16-byte vectors: past 32 × the device's block limit
        elements, 32768 on NVIDIA; as scalars, where cols is not a multiple of 16 bytes or
        an operand is not 16-byte aligned, past 8 × the threads of their part of a block)
        and rows that rescale (below) are summed into the output first and normalized there,
        rounded as the unfused ops round. `out` may be x or residual (in place), and must not
        otherwise overlap them, nor overlap weight, bias or input_bias (ValueError).
        """
        if residual is None and input_bias is None:
            return self._layernorm("layernorm", x, (), weight, bias, eps, out)
        return self._layernorm("add_layernorm", x, (residual, input_bias), weight, bias, eps, out)

    def _layernorm(
        self,
        op: str,
        x: DeviceTensor,
        addends: tuple[DeviceTensor | None, ...],
        weight: DeviceTensor | None,
        bias: DeviceTensor | None,
        eps: float,
        out: DeviceTensor | None,
    ) -> DeviceTensor:
        """`layernorm` as `op`: layernorm_<t>, or add_layernorm_<t> (kernels/add_norm.h) with
        `addends` (residual, input_bias) summed into x first; each with its own plans."""
        inputs = (x, *addends, weight, bias)  # the kernel's pointer order, y after them
        key = plan_key(*inputs, out)
        if key is not None:
            key = (op, *key)
            plan = self._planned(key)
            if plan is not None:
                y = self._planned_output(plan, inputs, out)
                if y is not None:
                    kernel, rows, launch, cols, strides, prepared, kept_eps = plan[4:]
                    if (
                        eps == kept_eps
                        and type(eps) is float
                        and prepared(*map(address_of, inputs), y.ptr)
                    ):
                        return y
                    e = eps if type(eps) is float else real_number(eps, "eps", "layernorm")
                    pointers = launch_pointers((*inputs, y))
                    kernel.launch(*launch, *pointers, rows, cols, e, *strides,
                                  stream=self.stream)  # fmt: skip
                    return y
        eps = real_number(eps, "eps", "layernorm")
        x, t, strides = self._rows(x, "layernorm")
        rows, cols = self._rows_cols(x, "x")
        residual, input_bias = addends if addends else (None, None)
        if residual is not None:
            self._same(x, residual, "residual")  # (C-contiguous: rows `cols` apart)
        for tensor, name in ((input_bias, "input_bias"), (weight, "weight"), (bias, "bias")):
            if tensor is not None:
                self._same(x, tensor, name, (cols,))
        y = self._output(
            out, x.shape, x.dtype, inputs=(x, residual), distinct_from=(input_bias, weight, bias)
        )
        inputs = (x, *addends, weight, bias)  # (x checked: maybe another view object)
        args = (*inputs, y, rows, cols, float(eps), *strides)
        narrow = self._narrow_row_launch(
            rows, cols, x.dtype.itemsize, narrow_rows_per_warp(op, x.dtype.itemsize),
            (*inputs, y), strides,
        )  # fmt: skip
        if narrow is not None:
            kernel = self._kernel("norms.hip", f"{op}_narrow_{t.suffix}")
            kernel.launch(*narrow, *args, stream=self.stream)
            launch = narrow
        else:
            kernel = self._kernel("norms.hip", f"{op}_{t.suffix}")
            # The fused kernel holds its rows as floats whatever the type (FloatTile): the f32
            # geometry; the plain one packs 16-bit rows.
            itemsize = 4 if addends else x.dtype.itemsize
            launch = self._launch_rows(kernel, rows, cols, itemsize, *args)
        if launch is not None:
            prepared = kernel.prepare(*launch, *args, stream=self.stream)
            plan = (*plan_head(inputs, y), kernel, rows, launch, cols, strides, prepared, eps)
            self._keep_plan(key, plan)
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
        key = plan_key(x, weight, out)
        if key is not None:
            key = ("rmsnorm", *key)
            plan = self._planned(key)
            if plan is not None:
                y = self._planned_output(plan, (x, weight), out)
                if y is not None:
                    kernel, rows, launch, cols, strides, prepared, kept_eps = plan[4:]
                    if (
                        eps == kept_eps
                        and type(eps) is float
                        and prepared(x.ptr, address_of(weight), y.ptr)
                    ):
                        return y
                    e = eps if type(eps) is float else real_number(eps, "eps", "rmsnorm")
                    pointers = launch_pointers((x, weight, y))
                    kernel.launch(*launch, *pointers, rows, cols, e, *strides,
                                  stream=self.stream)  # fmt: skip
                    return y
        eps = real_number(eps, "eps", "rmsnorm")
        x, t, strides = self._rows(x, "rmsnorm")
        rows, cols = self._rows_cols(x, "x")
        if weight is not None:
            self._same(x, weight, "weight", (cols,))
        y = self._output(out, x.shape, x.dtype, inputs=(x,), distinct_from=(weight,))
        kernel = self._kernel("norms.hip", f"rmsnorm_{t.suffix}")
        launch = self._launch_rows(
            kernel, rows, cols, x.dtype.itemsize, x, weight, y, rows, cols, float(eps), *strides
        )
        if launch is not None:
            prepared = kernel.prepare(
                *launch, x, weight, y, rows, cols, float(eps), *strides, stream=self.stream
            )
            plan = (*plan_head((x, weight), y), kernel, rows, launch, cols, strides, prepared, eps)
            self._keep_plan(key, plan)
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


__all__ = ["NormOps", "narrow_rows_per_warp", "real_number"]
