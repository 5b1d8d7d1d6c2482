"""How a matmul of two strided tensors becomes hipBLAS calls: planned on the host, cached.

numpy's `matmul` rules: the last two axes of each operand are a matrix (a 1-D `a` is one row,
a 1-D `b` one column, and that axis is left out of the result); the axes before broadcast.

What BLAS reads in place, and what is copied:
- A matrix whose last two axes have one unit stride and a leading dimension (the other
  stride) of at least the unit axis' size: row-major (a slice of columns included), or
  column-major (a transposed view, `.mT`: the op flag flips instead of the data moving).
  Anything else (steps on both axes, a reversed or broadcast axis inside the matrix) is
  copied with `.contiguous()` first (`MatmulPlan.copy_a` / `copy_b`): the only copies.
- Batch axes need no copy, whatever their strides. Trailing batch axes over which b is
  broadcast (stride 0) and along which a's rows continue are folded into M: x [..., in] @ wᵀ
  is one GEMM, and so is grouped-query attention's q [B, Hkv, G, S, D] @ kᵀ with k
  [B, Hkv, 1, S, D] (or its `expand` to G: stride 0). The remaining axes are merged where
  every operand (and the C-contiguous result) steps over them as over one
  (`strides.collapse`): one merged axis is one strided-batched call; several are one
  strided-batched call over the largest (of non-negative strides) per index of the others.

A plan depends only on the shapes, strides and flags, so it is cached (issue 15: a repeated
matmul costs one dictionary look-up on the host, not this arithmetic).
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass

from hip_runtime.libraries.blas import Gemm
from hip_runtime.tensors.strides import (
    Shape,
    Strides,
    broadcast_shapes,
    broadcast_to,
    c_strides,
    collapse,
)

INT_MAX = 2**31 - 1
_PLANS = 1024  # cached plans (shapes, strides and flags each)


@dataclass(frozen=True)
class MatmulPlan:
    """What one matmul queues.

    shape: the result's. spec: every call's product (spec.k == 0: the result is zeros, no
    call). offsets: one call per entry, the byte offsets of a, b and the result from their
    first elements (empty when the result has no element, or k == 0). copy_a, copy_b: the
    operand must be made contiguous first (a matrix layout BLAS cannot read); the plan is
    then for the copy's layout. copy_out: the result's layout (a strided `out`) is one BLAS
    cannot write: the plan is for a C-contiguous result, to be copied into `out`. swap: the
    result is column-major (a transposed `out`), so the calls compute its transpose,
    op(b)ᵀ @ op(a)ᵀ: b goes where spec and offsets say A, a where they say B.
    """

    shape: Shape
    spec: Gemm
    offsets: tuple[tuple[int, int, int], ...]
    copy_a: bool
    copy_b: bool
    copy_out: bool = False
    swap: bool = False


@dataclass(frozen=True)
class _Operand:
    """One operand (or the result) seen as a batch of rows x cols matrices."""

    batch: Shape
    batch_strides: Strides
    rows: int
    cols: int
    row_stride: int
    col_stride: int

    def transposed(self) -> _Operand:
        return _Operand(
            self.batch, self.batch_strides, self.cols, self.rows, self.col_stride, self.row_stride
        )


def matrix_layout(
    rows: int, cols: int, row_stride: int, col_stride: int
) -> tuple[bool, int] | None:
    """How BLAS reads a rows x cols matrix with these strides (elements): (column_major,
    leading dimension), or None when it cannot. Row-major needs unit column steps and a row
    stride >= cols; column-major (a transposed view) unit row steps and a column stride >=
    rows. The stride of an axis of one element does not matter."""
    if cols == 1 or col_stride == 1:
        ld = row_stride if rows > 1 else max(cols, 1)
        if max(cols, 1) <= ld <= INT_MAX:
            return False, ld
    if rows == 1 or row_stride == 1:
        ld = col_stride if cols > 1 else max(rows, 1)
        if max(rows, 1) <= ld <= INT_MAX:
            return True, ld
    return None


@functools.lru_cache(maxsize=_PLANS)
def plan(
    a_shape: Shape,
    a_strides: Strides | None,
    b_shape: Shape,
    b_strides: Strides | None,
    transpose_a: bool,
    transpose_b: bool,
    itemsize: int,
    out_strides: Strides | None = None,
) -> MatmulPlan:
    """The plan of matmul(a, b) (strides in elements; None: C-contiguous) for elements of
    `itemsize` bytes, into a result of `out_strides` (of the result's shape and writable:
    checked by the caller). transpose_a / transpose_b swap the operand's last two axes first.
    ValueError, naming matmul, for operands of no dimension, inner sizes that differ and
    batches that do not broadcast."""
    for name, shape, flag in (("a", a_shape, transpose_a), ("b", b_shape, transpose_b)):
        if len(shape) < (2 if flag else 1):
            raise ValueError(
                f"matmul: {name} of shape {shape} has too few dimensions"
                + (f" for transpose_{name}" if flag else " (0-d operands have no matrix)")
            )
    a = _operand(a_shape, a_strides, transpose_a, vector_is_row=True)
    b = _operand(b_shape, b_strides, transpose_b, vector_is_row=False)
    if a.cols != b.rows:
        raise ValueError(
            f"matmul: inner dimensions differ: a {a_shape}{'ᵀ' * transpose_a} has {a.cols} "
            f"columns, b {b_shape}{'ᵀ' * transpose_b} has {b.rows} rows"
        )
    try:
        batch = broadcast_shapes(a.batch, b.batch)
    except ValueError:
        raise ValueError(
            f"matmul: batch dimensions {a.batch} (a {a_shape}) and {b.batch} (b {b_shape}) "
            "do not broadcast"
        ) from None
    m, k, n = a.rows, a.cols, b.cols
    shape = (*batch, *((m,) if len(a_shape) > 1 else ()), *((n,) if len(b_shape) > 1 else ()))
    copy_a = matrix_layout(a.rows, a.cols, a.row_stride, a.col_stride) is None
    copy_b = matrix_layout(b.rows, b.cols, b.row_stride, b.col_stride) is None
    if copy_a:
        a = _operand(a_shape, None, transpose_a, vector_is_row=True)
    if copy_b:
        b = _operand(b_shape, None, transpose_b, vector_is_row=False)
    c = _result(shape, out_strides, len(batch), m, n)
    c_layout = matrix_layout(c.rows, c.cols, c.row_stride, c.col_stride)
    # (k == 0: the zeros are filled into a C-contiguous result, one region of memory.)
    copy_out = c_layout is None or (k == 0 and out_strides is not None)
    if copy_out:
        c = _result(shape, None, len(batch), m, n)
    if min(m, n, math.prod(batch)) == 0 or k == 0:
        return MatmulPlan(shape, Gemm(m=m, n=n, k=k), (), copy_a, copy_b, copy_out)
    swap = c_layout is not None and c_layout[0]
    if swap:  # a column-major result: Cᵀ = op(b)ᵀ @ op(a)ᵀ, whose result is row-major
        a, b, c = b.transposed(), a.transposed(), c.transposed()
    spec, offsets = _batched(a, b, c, batch, itemsize)
    return MatmulPlan(shape, spec, offsets, copy_a, copy_b, copy_out, swap)


def _operand(
    shape: Shape,
    strides: Strides | None,
    transposed: bool,
    *,
    vector_is_row: bool,
) -> _Operand:
    """The operand's batch and matrix (a 1-D one as a row for a, a column for b), after the
    transpose flag. strides None: C-contiguous in the stored shape (a copy's layout too)."""
    steps = c_strides(shape) if strides is None else strides
    if transposed:
        shape = (*shape[:-2], shape[-1], shape[-2])
        steps = (*steps[:-2], steps[-1], steps[-2])
    if len(shape) == 1:
        if vector_is_row:
            return _Operand((), (), 1, shape[0], 0, steps[0])
        return _Operand((), (), shape[0], 1, steps[0], 0)
    return _Operand(shape[:-2], steps[:-2], shape[-2], shape[-1], steps[-2], steps[-1])


def _result(shape: Shape, strides: Strides | None, batch_ndim: int, m: int, n: int) -> _Operand:
    """The result as a batch of m x n matrices (a 1-D operand's axis is missing from it: its
    stride does not matter, as the axis has one element)."""
    steps = c_strides(shape) if strides is None else strides
    core = steps[batch_ndim:]
    if len(core) == 2:
        row_stride, col_stride = core
    else:  # one axis: m of one row (a was 1-D) or n of one column (b was 1-D); none: 1 x 1
        row_stride = core[0] if core and n == 1 else 0
        col_stride = core[0] if core and n != 1 else 0
    return _Operand(shape[:batch_ndim], steps[:batch_ndim], m, n, row_stride, col_stride)


def _continued(m: int, row_stride: int, stride: int) -> int | None:
    """The row stride of m-row matrices and a batch axis of `stride` seen as one matrix of
    rows, or None when the rows do not run on across the axis."""
    if m == 1:
        return stride
    return row_stride if stride == m * row_stride else None


def _batched(
    a: _Operand, b: _Operand, c: _Operand, batch: Shape, item: int
) -> tuple[Gemm, tuple[tuple[int, int, int], ...]]:
    m, k, n = a.rows, a.cols, b.cols
    sa = list(broadcast_to(a.batch, a.batch_strides, batch))
    sb = list(broadcast_to(b.batch, b.batch_strides, batch))
    sc = list(c.batch_strides)
    dims = list(batch)
    for i in reversed(range(len(dims))):  # size-1 axes step nowhere: drop them
        if dims[i] == 1:
            del dims[i], sa[i], sb[i], sc[i]
    # Fold trailing axes b is broadcast over into M where a's rows and the result's run on
    # across them (the result stays row-major).
    a_rows, c_rows = a.row_stride, c.row_stride
    while dims and sb[-1] == 0 and dims[-1] * m <= INT_MAX:
        rows = dims[-1] * m
        step_a, step_c = _continued(m, a_rows, sa[-1]), _continued(m, c_rows, sc[-1])
        if step_a is None or step_c is None:
            break
        if matrix_layout(rows, k, step_a, a.col_stride) is None:
            break
        if matrix_layout(rows, n, step_c, c.col_stride) != (False, step_c):
            break
        m, a_rows, c_rows = rows, step_a, step_c
        del dims[-1], sa[-1], sb[-1], sc[-1]
    column_a, lda = matrix_layout(m, k, a_rows, a.col_stride) or (False, k)
    column_b, ldb = matrix_layout(k, n, b.row_stride, b.col_stride) or (False, n)
    ldc = (matrix_layout(m, n, c_rows, c.col_stride) or (False, n))[1]
    merged, (ma, mb, mc) = collapse(tuple(dims), tuple(sa), tuple(sb), tuple(sc))
    # One axis goes to the strided-batched call (the largest whose strides BLAS takes: none
    # negative); every index of the others is a call of its own.
    usable = [i for i in range(len(merged)) if min(ma[i], mb[i], mc[i]) >= 0]
    axis = max(usable, key=lambda i: merged[i], default=None)
    count = 1 if axis is None else merged[axis]
    outer = [i for i in range(len(merged)) if i != axis]
    offsets = tuple(
        (
            item * sum(j * ma[i] for i, j in zip(outer, index, strict=True)),
            item * sum(j * mb[i] for i, j in zip(outer, index, strict=True)),
            item * sum(j * mc[i] for i, j in zip(outer, index, strict=True)),
        )
        for index in itertools.product(*(range(merged[i]) for i in outer))
    )
    if count > INT_MAX:
        raise ValueError(f"matmul: a batch of {count} exceeds hipBLAS's int range")
    spec = Gemm(
        m=m, n=n, k=k, batch=count, transpose_a=column_a, transpose_b=column_b,
        stride_a=0 if axis is None else ma[axis], stride_b=0 if axis is None else mb[axis],
        stride_c=0 if axis is None else mc[axis], lda=lda, ldb=ldb, ldc=ldc,
    )  # fmt: skip
    return spec, offsets


__all__ = ["MatmulPlan", "matrix_layout", "plan"]
