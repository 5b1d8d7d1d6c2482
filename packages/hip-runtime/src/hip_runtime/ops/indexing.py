"""Indexing by device ids: index_select, embedding, gather, scatter_add, index_add
(kernels/indexing.hip). Queued on the backend's stream; nothing waits.

Ids are int32 or int64 tensors of any layout, read on the device: the host cannot look at them
without a sync, so an id outside [0, size) is never an error. It reads zeros (index_select,
embedding, gather: a row or element of zero bits) and is skipped (scatter_add, index_add: it
adds nothing). Negative ids are not wrapped as numpy's are: they are outside the range too.
Every other argument (dtypes, axes, shapes) is checked before anything is queued.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hip_core import Kernel
from hip_runtime.libraries.kernel_structs import INDEX_ARGS, INDEX_RANK, StructValues
from hip_runtime.ops.base import _BLOCK, OpsBase
from hip_runtime.ops.plans import launch_pointers, plan_head, plan_key
from hip_runtime.tensors import strides as layout
from hip_runtime.tensors.dtypes import suffix
from hip_runtime.tensors.strided_copy import check_writable
from hip_runtime.tensors.tensor import DeviceTensor

_ID_TYPES = (np.dtype(np.int32), np.dtype(np.int64))
_UNITS = (16, 8, 4, 2, 1)  # bytes moved per element of index_select_u<bits>
_RANK = INDEX_RANK  # axes gather/scatter_add take after merging
#: gather's and scatter_add's IndexArgs: (n, rank, wide, size along the axis, stride along it,
#: *sizes, *big strides, *index strides, *other strides), from `_index_layout`.
_INDEX_ARGS = StructValues(INDEX_ARGS)


class IndexingOps(OpsBase):
    def index_select(
        self, x: DeviceTensor, axis: int, ids: DeviceTensor, *, out: DeviceTensor | None = None
    ) -> DeviceTensor:
        """x's slices along `axis` picked by `ids` (int32 or int64, any shape): a C-contiguous
        [*x.shape[:axis], *ids.shape, *x.shape[axis + 1:]] of x's dtype (as `np.take`). Any
        dtype and layout; bits are copied, 16 bytes per access where the innermost run and
        addresses allow. An id outside [0, x.shape[axis]) gives zeros (module docstring)."""
        x = self._operand(x, "x")
        ids = self._index_ids(ids, "ids", "index_select")
        a = _axis(axis, x.ndim, "index_select")
        _item(x, "index_select")
        shape = (*x.shape[:a], *ids.shape, *x.shape[a + 1 :])
        y = self._output(out, shape, x.dtype, distinct_from=(x, ids))
        self._index_rows(x, a, ids, y)
        return y

    def embedding(
        self, ids: DeviceTensor, table: DeviceTensor, *, out: DeviceTensor | None = None
    ) -> DeviceTensor:
        """Rows of table [vocab, dim] picked by ids (int32 or int64, any shape and layout):
        [*ids.shape, dim] in table's dtype (any dtype, any layout). An id outside [0, vocab)
        yields a row of zeros. `index_select(table, 0, ids)`."""
        key = plan_key(table, ids, out)
        if key is not None:
            key = ("embedding", *key)
            plan = self._planned(key)
            if plan is not None:
                y = self._planned_output(plan, (table, ids), out)
                if y is not None and y.ptr & 15 == plan[-1]:  # (the unit: y's alignment too)
                    kernel, grid, wide, tail, prepared = plan[4:-1]
                    if prepared(table.ptr, ids.ptr, y.ptr):  # (Kernel.prepare: addresses only)
                        return y
                    table_, ids_, y_ = launch_pointers((table, ids, y))
                    kernel.launch(grid, _BLOCK, table_, ids_, wide, y_, *tail, stream=self.stream)
                    return y
        table = self._operand(table, "table")
        ids = self._index_ids(ids, "ids", "embedding")
        if table.ndim != 2:
            raise ValueError(f"embedding: table must be [vocab, dim], not {table.shape}")
        _item(table, "embedding")
        y = self._output(out, (*ids.shape, table.shape[1]), table.dtype, distinct_from=(table, ids))
        launched = self._index_rows(table, 0, ids, y)
        if launched is not None:
            kernel, grid, wide, tail = launched
            prepared = kernel.prepare(grid, _BLOCK, table, ids, wide, y, *tail, stream=self.stream)
            plan = (*plan_head((table, ids), y), *launched, prepared, y.ptr & 15)
            self._keep_plan(key, plan)
        return y

    def gather(
        self, x: DeviceTensor, axis: int, index: DeviceTensor, *, out: DeviceTensor | None = None
    ) -> DeviceTensor:
        """torch.gather: y[p] = x[p with its `axis` coordinate replaced by index[p]], of index's
        shape and x's dtype (`np.take_along_axis` where every id is in range). index: int32 or
        int64 of x's rank, index.shape[d] <= x.shape[d] on every other axis d. An id outside
        [0, x.shape[axis]) gives a zero element. Any dtype, any layouts."""
        x = self._operand(x, "x")
        index = self._index_ids(index, "index", "gather")
        a = self._index_along(x, axis, index, "gather")
        kernel = self._kernel("indexing.hip", f"gather_u{_item(x, 'gather') * 8}")
        big = _without_axis(x.strides, a)
        rank, sizes, strides = _index_layout(index.shape, a, big, index.strides,
                                             layout.c_strides(index.shape), "gather")  # fmt: skip
        y = self._output(out, index.shape, x.dtype, distinct_from=(x, index))
        if y.size == 0:
            return y
        args = _INDEX_ARGS(y.size, rank, _wide(index), x.shape[a], x.strides[a], *sizes, *strides)
        self._launch_flat(kernel, y.size, 16, x, index, y, args)
        return y

    def scatter_add(
        self,
        x: DeviceTensor,
        axis: int,
        index: DeviceTensor,
        src: DeviceTensor,
        *,
        out: DeviceTensor | None = None,
    ) -> DeviceTensor:
        """torch.scatter_add: a copy of x in which y[p with its `axis` coordinate replaced by
        index[p]] += src[p] for every p of index's shape. index: int32 or int64 of x's rank;
        src: x's dtype and rank, index.shape[d] <= src.shape[d] on every axis and <=
        x.shape[d] on the others. `out=x` adds in place (x then must not be a broadcast view).
        Atomic adds, so sums into one element come in any order (floats may differ in the last
        bits from run to run); bool adds are a logical or, integers wrap. An id outside
        [0, x.shape[axis]) adds nothing. Any dtype of kernels/dtypes.h, any layouts."""
        x = self._operand(x, "x")
        index = self._index_ids(index, "index", "scatter_add")
        src = self._operand(src, "src")
        a = self._index_along(x, axis, index, "scatter_add")
        self._index_source(x, src, "scatter_add")
        if any(i > s for i, s in zip(index.shape, src.shape, strict=True)):
            raise ValueError(f"scatter_add: index {index.shape} is larger than src {src.shape}")
        return self._index_scatter(x, out, a, index, index.shape, index.strides, src, "scatter_add")

    def index_add(
        self,
        x: DeviceTensor,
        axis: int,
        ids: DeviceTensor,
        src: DeviceTensor,
        *,
        out: DeviceTensor | None = None,
    ) -> DeviceTensor:
        """torch.index_add: a copy of x in which slice ids[j] along `axis` gets src's slice j
        added, for 1-D ids (int32 or int64) and src of x's shape but len(ids) along `axis`.
        `out=x` adds in place. Atomic adds as in `scatter_add`; an id outside
        [0, x.shape[axis]) adds nothing. Any dtype of kernels/dtypes.h, any layouts."""
        x = self._operand(x, "x")
        ids = self._index_ids(ids, "ids", "index_add")
        src = self._operand(src, "src")
        a = _axis(axis, x.ndim, "index_add")
        if ids.ndim != 1:
            raise ValueError(f"index_add: ids must be 1-D, not {ids.shape}")
        self._index_source(x, src, "index_add")
        expected = (*x.shape[:a], ids.shape[0], *x.shape[a + 1 :])
        if src.shape != expected:
            raise ValueError(f"index_add: src is {src.shape}; expected {expected}")
        # The scatter kernel with ids broadcast over every other axis: index[p] = ids[p[axis]].
        index_strides = tuple(ids.strides[0] if d == a else 0 for d in range(x.ndim))
        return self._index_scatter(x, out, a, ids, src.shape, index_strides, src, "index_add")

    # --- private ------------------------------------------------------------------------------

    def _index_ids(self, ids: Any, name: str, op: str) -> DeviceTensor:
        tensor = self._operand(ids, name)
        if tensor.dtype not in _ID_TYPES:
            raise ValueError(f"{op}: {name} must be int32 or int64, not {tensor.dtype}")
        return tensor

    @staticmethod
    def _index_along(x: DeviceTensor, axis: int, index: DeviceTensor, op: str) -> int:
        """The normalized axis of gather/scatter_add, with index's shape checked against x."""
        a = _axis(axis, x.ndim, op)
        if index.ndim != x.ndim:
            raise ValueError(f"{op}: index has {index.ndim} dimensions; x has {x.ndim}")
        for d, (i, s) in enumerate(zip(index.shape, x.shape, strict=True)):
            if d != a and i > s:
                raise ValueError(f"{op}: index {index.shape} is larger than x {x.shape} on "
                                 f"axis {d}")  # fmt: skip
        return a

    @staticmethod
    def _index_source(x: DeviceTensor, src: DeviceTensor, op: str) -> None:
        if src.dtype != x.dtype:
            raise ValueError(f"{op}: src has dtype {src.dtype}; x has {x.dtype}")
        if src.ndim != x.ndim:
            raise ValueError(f"{op}: src has {src.ndim} dimensions; x has {x.ndim}")

    def _index_rows(
        self, x: DeviceTensor, a: int, ids: DeviceTensor, y: DeviceTensor
    ) -> tuple[Kernel, int, int, tuple[int, ...]] | None:
        """y = index_select(x, a, ids) for a checked C-contiguous y: x seen as [outer, size,
        inner] (axes that do not merge so make one contiguous copy of x first: rare). Returns
        what a plan repeats (kernel, grid, ids' width, the arguments after y) when x and ids
        were launched as given (no copy), else None."""
        if y.size == 0:
            return None
        item, shape = x.dtype.itemsize, x.shape
        as_given = ids.is_contiguous
        merged = None if x.is_contiguous else _rows_of(shape, x.strides, a)
        if merged is None:  # contiguous, or axes that do not merge: one contiguous copy (rare)
            as_given = as_given and x.is_contiguous
            x = x.contiguous()
            inner = math.prod(shape[a + 1 :])
            merged = (math.prod(shape[:a]), shape[a] * inner), (inner, 1), inner
        (outer, xo), (inner, xi), xa = merged
        xa = xa if x.shape[a] > 1 else 0  # (a size-1 axis may have any stride)
        unit = item
        if xi == 1 or inner == 1:  # contiguous rows: moved in the widest unit all divide
            unit = next(u for u in _UNITS if not (inner * item | xo * item | xa * item
                                                  | x.ptr | y.ptr) % u)  # fmt: skip
        per = unit // item
        kernel = self._kernel("indexing.hip", f"index_select_u{unit * 8}")
        ids = ids.contiguous()
        n = outer * ids.size * (inner // per)
        tail = (outer, ids.size, inner // per, x.shape[a], xo // per, xa // per, xi)
        self._launch_flat(kernel, n, unit, x, ids, _wide(ids), y, *tail)
        if not (as_given and n):
            return None
        return kernel, self._flat_grid(n, unit), _wide(ids), tail

    def _index_scatter(
        self,
        x: DeviceTensor,
        out: DeviceTensor | None,
        a: int,
        index: DeviceTensor,
        shape: tuple[int, ...],
        index_strides: tuple[int, ...],
        src: DeviceTensor,
        op: str,
    ) -> DeviceTensor:
        """y = x, then y[... index[p] ...] += src[p] for every p of `shape` (index's layout
        given by `index_strides`). y is `out`: x itself (in place, any writable layout) or a
        C-contiguous tensor that gets x's values first; a new tensor when None."""
        kernel = self._kernel("indexing.hip", f"scatter_add_{suffix(x.dtype, 'x')}")
        if out is x:
            check_writable(x)
            if _shares_memory(x, index) or _shares_memory(x, src):
                raise ValueError(f"{op}: out=x must not overlap the ids or src")
            y = x
        else:
            y = self._output(out, x.shape, x.dtype, distinct_from=(x, index, src))
        big = _without_axis(y.strides, a)
        rank, sizes, strides = _index_layout(shape, a, big, index_strides, src.strides, op)
        if y is not x:
            y.copy_(x)
        n = math.prod(shape)
        if n:
            args = _INDEX_ARGS(n, rank, _wide(index), y.shape[a], y.strides[a], *sizes, *strides)
            self._launch_flat(kernel, n, 16, y, index, src, args)
        return y


def _axis(axis: Any, ndim: int, op: str) -> int:
    if ndim == 0:
        raise ValueError(f"{op} needs x of at least one dimension")
    try:
        return layout.normalize_axis(axis, ndim)
    except (IndexError, TypeError) as error:
        raise ValueError(f"{op}: {error}") from None


def _item(x: DeviceTensor, op: str) -> int:
    """x's item size, one the bit-moving kernels take (1, 2, 4 or 8 bytes)."""
    item = x.dtype.itemsize
    if item not in (1, 2, 4, 8):
        raise ValueError(f"{op}: {x.dtype} elements of {item} bytes; the kernels move 1, 2, 4 "
                         "or 8")  # fmt: skip
    return item


def _wide(ids: DeviceTensor) -> int:
    return 1 if ids.dtype.itemsize == 8 else 0


def _without_axis(strides: tuple[int, ...], a: int) -> tuple[int, ...]:
    return tuple(0 if d == a else s for d, s in enumerate(strides))


def _rows_of(
    shape: tuple[int, ...], strides: tuple[int, ...], a: int
) -> tuple[tuple[int, int], tuple[int, int], int] | None:
    """((outer, stride), (inner, stride), axis stride) of a strided x seen as [outer, size,
    inner]; None when the axes before or after `a` do not merge."""
    outer = _merged(shape[:a], strides[:a])
    inner = _merged(shape[a + 1 :], strides[a + 1 :])
    return None if outer is None or inner is None else (outer, inner, strides[a])


def _merged(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[int, int] | None:
    """(size, stride) of non-empty axes that step as one axis (stride 0 for one element);
    None when they do not merge."""
    dims, (steps,) = layout.collapse(shape, strides)
    if len(dims) != 1:
        return None
    return (dims[0], steps[0]) if dims[0] > 1 else (1, 0)


def _index_layout(
    shape: tuple[int, ...],
    a: int,
    big: tuple[int, ...],
    index: tuple[int, ...],
    other: tuple[int, ...],
    op: str,
) -> tuple[int, list[int], list[int]]:
    """gather/scatter_add's layout arguments: (rank, sizes padded to _RANK, the stride sets
    each padded to _RANK, concatenated: IndexArgs' big, index and other). Axes before and
    after `a` merge among themselves (never with `a`, whose coordinate the kernel replaces by
    an id)."""
    sets = (big, index, other)
    parts: list[tuple[tuple[int, ...], list[tuple[int, ...]]]] = []
    for lo, hi in ((0, a), (a, a + 1), (a + 1, len(shape))):
        if hi > lo:
            part = shape[lo:hi]
            if hi == a + 1 and lo == a:  # the axis itself: kept as it is
                parts.append((part, [s[lo:hi] for s in sets]))
            else:
                parts.append(layout.collapse(part, *(s[lo:hi] for s in sets)))
    dims = [d for p, _ in parts for d in p]
    per_set = [[s for _, st in parts for s in st[k]] for k in range(len(sets))]
    if not dims:  # a 0-d index: one element
        dims, per_set = [1], [[0] for _ in sets]
    if len(dims) > _RANK:
        raise ValueError(f"{op}: the layouts need {len(dims)} axes after merging; the "
                         f"kernel takes {_RANK} (pass contiguous tensors)")  # fmt: skip
    pad = [0] * (_RANK - len(dims))
    sizes = [*dims, *([1] * len(pad))]
    return len(dims), sizes, [s for st in per_set for s in (*st, *pad)]


def _shares_memory(a: DeviceTensor, b: DeviceTensor) -> bool:
    a_low, a_high = a.span()
    b_low, b_high = b.span()
    return a.size > 0 and b.size > 0 and a_low < b_high and b_low < a_high


__all__ = ["IndexingOps"]
