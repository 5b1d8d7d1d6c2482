"""Sorting along the last axis: argsort and topk (kernels/sort.hip). Queued on the backend's
stream; nothing waits.

Stable (equal elements keep their order, as `np.argsort(kind="stable")`) for every dtype of
kernels/dtypes.h. Floats order as numpy's sort: -0.0 equals +0.0, and NaN is larger than
everything (last ascending; first when descending and among topk's largest). Rows of up to
2048 elements are sorted in one block's shared memory (bitonic); longer rows (vocabularies of
32k-256k for sampling) as 2048-element sorted runs merged pairwise, one launch per doubling.
topk(k <= 2048) keeps only each run's first k, so sampling's top-50 of a 256k vocabulary
merges 125 x 50 candidates per row, not the row. Scratch from the backend's pool: 8 or 12
bytes per kept pair (two buffers of keys and int32 columns when there are merges).
"""

from __future__ import annotations

import math

import numpy as np

from hip_runtime.ops.base import INT_MAX, OpsBase
from hip_runtime.tensors import strides as layout
from hip_runtime.tensors.dtypes import suffix
from hip_runtime.tensors.tensor import DeviceTensor

_TILE = 2048  # HIPK_SORT_TILE: columns one block sorts in shared memory
_BLOCK = 256  # HIPK_SORT_BLOCK
_INT64 = np.dtype(np.int64)
_BYTES = np.dtype(np.uint8)


class SortingOps(OpsBase):
    def argsort(self, x: DeviceTensor, descending: bool = False) -> DeviceTensor:
        """Indices (int64, x's shape, C-contiguous) that sort each row of x's last axis:
        stable, NaN last ascending (first descending). x: any dtype of kernels/dtypes.h, rank
        >= 1, any layout."""
        x = self._operand(x, "x")
        rows, n, row_stride, col_stride, x = self._sorting_rows(x, "argsort")
        indices = self._output(None, x.shape, _INT64)
        self._sorting_run(x, rows, n, row_stride, col_stride, n, bool(descending), None, indices)
        return indices

    def topk(
        self, x: DeviceTensor, k: int, largest: bool = True
    ) -> tuple[DeviceTensor, DeviceTensor]:
        """(values, indices): the k largest (or smallest) elements of each row of x's last
        axis, in order (largest first; smallest first when not `largest`), ties in their
        order along the row; indices int64. NaN counts as the largest value. x: any dtype,
        rank >= 1, any layout; 0 <= k <= x.shape[-1]."""
        x = self._operand(x, "x")
        rows, n, row_stride, col_stride, x = self._sorting_rows(x, "topk")
        count = layout.as_index(k, "k")
        if not 0 <= count <= n:
            raise ValueError(f"topk: k = {count} is outside [0, {n}] (the last axis)")
        shape = (*x.shape[:-1], count)
        values = self._output(None, shape, x.dtype)
        indices = self._output(None, shape, _INT64)
        self._sorting_run(x, rows, n, row_stride, col_stride, count, bool(largest), values,
                          indices)  # fmt: skip
        return values, indices

    # --- private ------------------------------------------------------------------------------

    def _sorting_rows(self, x: DeviceTensor, op: str) -> tuple[int, int, int, int, DeviceTensor]:
        """(rows, n, row stride, column stride, x): x's leading axes merged into rows (a
        contiguous copy of x where they do not merge: rare)."""
        if x.ndim == 0:
            raise ValueError(f"{op} needs x of at least one dimension")
        suffix(x.dtype, "x")  # a dtype the kernels take (ValueError otherwise)
        n = x.shape[-1]
        if n > INT_MAX:
            raise ValueError(f"{op}: rows of {n} elements exceed the kernels' int32 columns")
        rows = math.prod(x.shape[:-1])
        dims, (steps,) = layout.collapse(x.shape[:-1], x.strides[:-1])
        if len(dims) > 1:
            x = x.contiguous()
            return rows, n, n, 1, x
        return rows, n, (steps[0] if dims[0] > 1 else 0), x.strides[-1], x

    def _sorting_run(
        self,
        x: DeviceTensor,
        rows: int,
        n: int,
        row_stride: int,
        col_stride: int,
        k: int,
        descending: bool,
        values: DeviceTensor | None,
        indices: DeviceTensor,
    ) -> None:
        if rows * k == 0:
            return
        key_bytes = 8 if x.dtype.itemsize == 8 else 4
        # Each 2048-column tile keeps its first `keep` sorted pairs: all of them for a sort, k
        # for a topk of k <= 2048 (the merges then see only the candidates).
        keep = min(k, _TILE)
        m = -(-n // _TILE) * keep  # pairs per row in the scratch
        total = rows * m
        buffers = 2 if keep < m else 1
        scratch = self._output(None, (buffers * total * (key_bytes + 4),), _BYTES)
        keys = [scratch[i * total * key_bytes : (i + 1) * total * key_bytes] for i in range(2)]
        base = buffers * total * key_bytes
        cols = [scratch[base + i * total * 4 : base + (i + 1) * total * 4] for i in range(2)]
        tiles = rows * -(-n // _TILE)
        block = self._kernel("sort.hip", f"sort_block_{suffix(x.dtype)}")
        block.launch(min(tiles, self._grid_cap), _BLOCK, x, keys[0], cols[0], rows, n,
                     row_stride, col_stride, int(descending), keep,
                     stream=self.stream)  # fmt: skip
        merge = self._kernel("sort.hip", f"sort_merge_k{key_bytes * 8}")
        width, at = keep, 0
        while width < m:
            self._launch_flat(merge, total, 16, keys[at], cols[at], keys[1 - at], cols[1 - at],
                              rows, m, width)  # fmt: skip
            at, width = 1 - at, width * 2
        finish = self._kernel("sort.hip", f"sort_finish_u{x.dtype.itemsize * 8}")
        self._launch_flat(finish, rows * k, 16, x, cols[at], values, indices, rows, m, k,
                          row_stride, col_stride)  # fmt: skip


__all__ = ["SortingOps"]
