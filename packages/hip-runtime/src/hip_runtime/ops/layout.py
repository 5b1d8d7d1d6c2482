"""Ops that move elements by position: rope (pairs rotated by position), rope_and_cache (a
layer's queries and keys rotated and its keys and values stored in KV-cache rows, one launch),
transpose (a layout change). Queued on the backend's stream. (embedding lives with the
indexing ops.)"""

from __future__ import annotations

from numbers import Integral
from typing import Any

from hip_runtime.ops.base import INT_MAX, OpsBase
from hip_runtime.ops.norms import real_number, rms_of_rows
from hip_runtime.ops.plans import byte_extent, launch_pointers, plan_key
from hip_runtime.tensors.dtypes import FloatType, float32, int32
from hip_runtime.tensors.strided_copy import check_writable
from hip_runtime.tensors.tensor import DeviceTensor


class LayoutOps(OpsBase):
    def rope(
        self,
        x: DeviceTensor,
        cos: DeviceTensor,
        sin: DeviceTensor,
        positions: DeviceTensor | None = None,
        *,
        rot_dim: int | None = None,
        interleaved: bool = False,
        out: DeviceTensor | None = None,
    ) -> DeviceTensor:
        """Rotary position embedding of x [tokens, heads, head_dim] (queries or keys).

        cos, sin: f32 tables [max_position, rot_dim / 2], one angle per pair. positions: int32
        [tokens], or None for position = token index. The positions stay on the device, so the
        kernel checks them: a position outside [0, max_position) reads cos = sin = 0 (its
        rotated pairs become 0, as `embedding` gives an unknown id a row of zeros) and nothing
        is read outside the tables. rot_dim (even, <= head_dim;
        default head_dim): elements from rot_dim on are copied. Pairs are (i, i + rot_dim/2)
        as Llama/NeoX, or (2i, 2i + 1) with `interleaved` as GPT-J. `out=x` works in place.
        """
        x, t = self._float(x, "x")
        if x.ndim != 3:
            raise ValueError(f"rope takes x [tokens, heads, head_dim], not {x.shape}")
        tokens, heads, head_dim = x.shape
        rot, cos, sin, positions = self._rope_tables(x, rot_dim, cos, sin, positions)
        if x.size > INT_MAX:
            raise ValueError(f"x {x.shape} exceeds the kernel's int range")
        y = self._output(out, x.shape, x.dtype, inputs=(x,), distinct_from=(cos, sin, positions))
        name = f"rope_{'interleaved' if interleaved else 'half'}_{t.suffix}"
        self._launch_flat(
            self._kernel("rope.hip", name), x.size // 2, 4, x, cos, sin, positions, y,
            tokens, heads, head_dim, rot, cos.shape[0],
        )  # fmt: skip
        return y

    def rope_and_cache(
        self,
        q: DeviceTensor,
        k: DeviceTensor,
        v: DeviceTensor,
        cos: DeviceTensor,
        sin: DeviceTensor,
        positions: DeviceTensor | None,
        k_table: DeviceTensor,
        v_table: DeviceTensor,
        rows: DeviceTensor,
        *,
        rot_dim: int | None = None,
        interleaved: bool = False,
        rms_of: DeviceTensor | None = None,
        eps: float = 1e-6,
    ) -> None:
        """A transformer layer's rotary step and KV-cache write in one launch: q [tokens,
        heads, head_dim] and k [tokens, kv_heads, head_dim] rotated in place as `rope` rotates
        them, then the rotated k and the values v [tokens, kv_heads, head_dim] stored at row
        rows[t] of k_table and v_table [table_rows, kv_heads, head_dim] (a KVCache's
        `tables`). What two ropes and two scatters did, at one op's host cost (a decode step
        is bound by it).

        q, k, v: one float dtype, any token and head strides with the last axis contiguous
        (column views of one fused QKV projection need no copy); q and k are written, so they
        must not be broadcast views or overlap each other. cos, sin, positions, rot_dim and
        interleaved: as `rope`. rows: int32 [tokens] on the device, read by the kernel only:
        a row outside [0, table_rows) (-1 for a padding token) stores nothing; two tokens
        storing one row race (which lands is undefined). The tables:
        C-contiguous, of q's dtype. q, k, v and the tables may not overlap another argument
        (q, k and v each other's elements). ValueError before anything is queued; queued on
        the backend's stream.

        rms_of: x [..., hidden], C-contiguous, of q's dtype, with `tokens` rows, or None. Given,
        q, k and v are taken as products of x's rows not yet RMS-normalized (the norm's weight
        folded into the QKV weight: rmsnorm(x, g) Wᵀ = x (W diag(g))ᵀ / rms(x)), and each
        token's are first multiplied by 1 / sqrt(mean(x[t]²) + eps), as `rmsnorm` computes it
        (but a row whose f32 sum of squares overflows gets factor 0; `eps` is read only with
        rms_of); v is then written too, scaled in place (a prefill's attention reads q, k and
        v). The norm's launch between two BLAS products is what this saves (row_rms.h)."""
        # the kernel's order (rms_of after the ints in the kernel's arguments)
        tensors = (q, k, v, cos, sin, positions, rows, k_table, v_table, rms_of)
        key = plan_key(*tensors, None)
        if (
            key is not None
            and (rot_dim is None or type(rot_dim) is int)
            and (rms_of is None or type(eps) is float)
        ):
            normed_eps = None if rms_of is None else eps
            key = ("rope_and_cache", *key, rot_dim, bool(interleaved), normed_eps)
            if self._planned_rope_and_cache(self._planned(key), tensors):
                return
        else:
            key = None  # (a rot_dim or eps of another type: checked every call)
        t, rot, ints = self._rope_and_cache_checks(*tensors, rot_dim)
        mode = "interleaved" if interleaved else "half"
        tokens, heads, head_dim = q.shape
        half, kv_heads = rot // 2, k.shape[1]
        work = tokens * ((heads + kv_heads) * (half + head_dim - rot) + kv_heads * head_dim)
        if rms_of is None:
            kernel = self._kernel("rope.hip", f"rope_and_cache_{mode}_{t.suffix}")
            grid: int | tuple[int, int] = self._flat_grid(max(work, 1), 16)
            normed: tuple[DeviceTensor, ...] = ()
            tail: tuple[int | float, ...] = ()
        else:  # blocks of (a token's items, the token): each the token's factor, an item a thread
            rms_of, hidden = self._rms_rows(rms_of, q, eps)
            kernel = self._kernel("rope.hip", f"rope_and_cache_rms_{mode}_{t.suffix}")
            grid = (-(-max(work, 1) // max(tokens * 256, 1)), min(max(tokens, 1), 65535))
            normed = (rms_of,)
            tail = (hidden, hidden, float(eps))  # (x_token: rows `hidden` apart)
        if work:
            kernel.launch(grid, 256, *tensors[:9], *ints, *normed, *tail, stream=self.stream)
        self._keep_plan(key, (kernel, grid, ints, tail, *_layouts(tensors)))

    def _planned_rope_and_cache(self, plan: Any, tensors: tuple[Any, ...]) -> bool:
        """Queue rope_and_cache by its plan (None: none yet) when the tensors are open and do
        not overlap; whether it did."""
        if plan is None or not self._inputs_open(tensors):
            return False
        kernel, grid, ints, tail, extents, periods = plan
        if _aliased(tensors, extents, periods) is not None:
            return False
        normed = launch_pointers(tensors[9:10]) if tail else ()  # (rms_of, after the ints)
        kernel.launch(grid, 256, *launch_pointers(tensors[:9]), *ints, *normed, *tail,
                      stream=self.stream)  # fmt: skip
        return True

    def _rms_rows(self, x: Any, q: DeviceTensor, eps: Any) -> tuple[DeviceTensor, int]:
        """rope_and_cache's rms_of checked against q [tokens, heads, head_dim]: (x, its row
        length). ValueError unless x is C-contiguous [..., hidden] of q's dtype with `tokens`
        rows and eps a real number."""
        x = self._tensor(x, "rms_of")
        real_number(eps, "eps", "rope_and_cache")
        return x, rms_of_rows(x, q.dtype, q.shape[0], "rope_and_cache")

    def _rope_and_cache_checks(
        self, q: Any, k: Any, v: Any, cos: Any, sin: Any, positions: Any, rows: Any,
        k_table: Any, v_table: Any, rms_of: Any, rot_dim: int | None,
    ) -> tuple[FloatType, int, tuple[int, ...]]:  # fmt: skip
        """rope_and_cache's validation: (q's float type, rot_dim, the kernel's int arguments)."""
        q, k, v = self._operand(q, "q"), self._operand(k, "k"), self._operand(v, "v")
        k_table, t = self._float(k_table, "k_table")
        v_table = self._tensor(v_table, "v_table")
        rows = self._tensor(rows, "rows")
        if q.ndim != 3 or k.ndim != 3 or k.shape != v.shape or k.shape[::2] != q.shape[::2]:
            raise ValueError(f"rope_and_cache takes q [tokens, heads, head_dim] and k, v "
                             f"[tokens, kv_heads, head_dim]; got {q.shape}, {k.shape}, "
                             f"{v.shape}")  # fmt: skip
        tokens, _, head_dim = q.shape
        table = (k_table.shape[0], *k.shape[1:])
        for name, x in (("q", q), ("k", k), ("v", v), ("v_table", v_table)):
            if x.dtype != k_table.dtype:
                raise ValueError(f"rope_and_cache: {name} has dtype {x.dtype}; the cache holds "
                                 f"{k_table.dtype}")  # fmt: skip
        if k_table.ndim != 3 or k_table.shape[1:] != k.shape[1:] or v_table.shape != table:
            raise ValueError(f"rope_and_cache: the tables are {k_table.shape} and {v_table.shape}"
                             f"; expected [rows, {k.shape[1]}, {head_dim}] both")  # fmt: skip
        if rows.dtype != int32 or rows.shape != (tokens,):
            raise ValueError(f"rows is {rows.shape} {rows.dtype}; expected int32 ({tokens},)")
        for name, x in (("q", q), ("k", k), ("v", v)):
            if head_dim > 1 and x.strides[2] != 1:
                raise ValueError(f"rope_and_cache: {name}'s last axis must be contiguous "
                                 f"(strides {x.strides})")  # fmt: skip
        check_writable(q)
        check_writable(k)
        rot, cos, sin, positions = self._rope_tables(q, rot_dim, cos, sin, positions)
        if rms_of is not None:
            rms_of = self._tensor(rms_of, "rms_of")
            check_writable(v)
        tensors = (q, k, v, cos, sin, positions, rows, k_table, v_table, rms_of)
        aliased = _aliased(tensors, *_layouts(tensors))
        if aliased is not None:
            raise ValueError(f"rope_and_cache: {aliased} overlap (q, k, v and the tables are "
                             "written)")  # fmt: skip
        if max(tokens, k_table.shape[0]) > INT_MAX:
            raise ValueError("rope_and_cache: shapes exceed the kernel's int range")
        ints = (tokens, q.shape[1], k.shape[1], head_dim, rot, cos.shape[0], k_table.shape[0],
                *q.strides[:2], *k.strides[:2], *v.strides[:2])  # fmt: skip
        return t, rot, ints

    def _rope_tables(
        self, x: DeviceTensor, rot_dim: int | None, cos: Any, sin: Any, positions: Any
    ) -> tuple[int, DeviceTensor, DeviceTensor, DeviceTensor | None]:
        """The rotary arguments checked against x [tokens, heads, head_dim]: (rot_dim, cos,
        sin, positions)."""
        tokens, _, head_dim = x.shape
        rot: Any = head_dim if rot_dim is None else rot_dim  # (numpy ints too)
        integral = isinstance(rot, Integral) and not isinstance(rot, bool)
        if not integral or not 0 < rot <= head_dim or rot % 2:
            raise ValueError(f"rot_dim must be an even int, > 0 and <= head_dim {head_dim}, not "
                             f"{rot!r}")  # fmt: skip
        rot = int(rot)
        cos, sin = self._tensor(cos, "cos"), self._tensor(sin, "sin")
        for name, table in (("cos", cos), ("sin", sin)):
            if table.dtype != float32 or table.ndim != 2 or table.shape[1] != rot // 2:
                raise ValueError(f"{name} is {table.shape} {table.dtype}; expected float32 "
                                 f"[max_position, {rot // 2}]")  # fmt: skip
        if cos.shape != sin.shape:
            raise ValueError(f"cos {cos.shape} and sin {sin.shape} differ")
        if positions is not None:
            positions = self._tensor(positions, "positions")
            if positions.dtype != int32 or positions.shape != (tokens,):
                raise ValueError(f"positions is {positions.shape} {positions.dtype}; expected "
                                 f"int32 ({tokens},)")  # fmt: skip
        elif tokens > cos.shape[0]:
            raise ValueError(f"{tokens} tokens need {tokens} positions; the tables hold "
                             f"{cos.shape[0]}")  # fmt: skip
        if cos.shape[0] > INT_MAX:
            raise ValueError(f"the tables {cos.shape} exceed the kernel's int range")
        return rot, cos, sin, positions

    def transpose(self, x: DeviceTensor, *, out: DeviceTensor | None = None) -> DeviceTensor:
        """xᵀ of a 2-D x, materialized ([rows, cols] -> [cols, rows]); `out` must not overlap x.
        (matmul reads transposed operands in place: this is for layout changes.)"""
        x, t = self._float(x, "x")
        if x.ndim != 2:
            raise ValueError(f"transpose takes a 2-D tensor, not {x.shape}")
        rows, cols = self._rows_cols(x, "x")
        y = self._output(out, (cols, rows), x.dtype, distinct_from=(x,))
        if x.size:
            tiles = -(-rows // 32) * -(-cols // 32)
            kernel = self._kernel("transpose.hip", f"transpose_{t.suffix}")
            kernel.launch(min(tiles, self._grid_cap), (32, 8), x, y, rows, cols, stream=self.stream)
        return y


#: rope_and_cache's tensors, in the kernel's order, and the pairs whose spans must be disjoint:
#: each written one (q, k, v with rms_of, the tables) against every other, but q, k and v
#: among themselves, which interleave as views of one fused product (`_HEADS`: decided by
#: `_period`). (v counts as written either way: one plan's checks for both kernels.)
_NAMES = ("q", "k", "v", "cos", "sin", "positions", "rows", "k_table", "v_table", "rms_of")
_WRITTEN = (0, 1, 2, 7, 8)
_DISJOINT = tuple(
    (i, j) for i in _WRITTEN for j in range(len(_NAMES))
    if j != i and not (i in _WRITTEN and j in _WRITTEN and j < i) and {i, j} - {0, 1, 2}
)  # fmt: skip
_HEADS = ((0, 1), (0, 2), (1, 2))
#: What a pair of _HEADS repeats with, when it does (`_period`): (token stride, item size, one
#: token's heads' extent in each), all in elements but the item size.
Period = tuple[int, int, int, int]


def _layouts(
    tensors: tuple[DeviceTensor | None, ...],
) -> tuple[tuple[tuple[int, int], ...], tuple[Period | None, ...]]:
    """What of rope_and_cache's tensors their layouts fix (a plan keeps it): each one's span
    as byte offsets from its address, and each _HEADS pair's period."""
    periods = tuple(_period(tensors[i], tensors[j]) for i, j in _HEADS)  # type: ignore[arg-type]
    return tuple(map(byte_extent, tensors)), periods


def _period(a: DeviceTensor, b: DeviceTensor) -> Period | None:
    """How [tokens, heads, head_dim] tensors a and b repeat, when both have one token stride
    that holds a token's heads (column views of one fused projection do): then they share no
    byte where one token's heads of each miss the other's modulo that stride. None: their
    spans decide."""
    stride = a.strides[0]
    extent_a = (a.shape[1] - 1) * a.strides[1] + a.shape[2]  # one token's heads, in elements
    extent_b = (b.shape[1] - 1) * b.strides[1] + b.shape[2]
    if (
        a.shape[0] > 1 and b.strides[0] == stride and stride > 0
        and min(a.strides[1], b.strides[1]) >= 0 and max(extent_a, extent_b) <= stride
    ):  # fmt: skip
        return stride, a.dtype.itemsize, extent_a, extent_b
    return None


def _aliased(
    tensors: tuple[DeviceTensor | None, ...],
    extents: tuple[tuple[int, int], ...],
    periods: tuple[Period | None, ...],
) -> str | None:
    """The names of two of rope_and_cache's tensors that may share a byte although one of them
    is written, or None; from their addresses and what their layouts fix (`_layouts`)."""
    spans = [
        None if t is None or low == high else (t.ptr + low, t.ptr + high)
        for t, (low, high) in zip(tensors, extents, strict=True)
    ]
    for i, j in _DISJOINT:
        a, b = spans[i], spans[j]
        if a is not None and b is not None and a[0] < b[1] and b[0] < a[1]:
            return f"{_NAMES[i]} and {_NAMES[j]}"
    for (i, j), period in zip(_HEADS, periods, strict=True):
        a, b = spans[i], spans[j]
        if a is not None and b is not None and a[0] < b[1] and b[0] < a[1]:
            if period is None:
                return f"{_NAMES[i]} and {_NAMES[j]}"
            stride, item, extent_a, extent_b = period
            gap = tensors[j].ptr - tensors[i].ptr  # type: ignore[union-attr]
            offset = (gap // item) % stride  # where b's heads start within a's token period
            if gap % item or offset < extent_a or offset + extent_b > stride:
                return f"{_NAMES[i]} and {_NAMES[j]}"
    return None


__all__ = ["LayoutOps"]
