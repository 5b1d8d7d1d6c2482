"""A decode step's QKV product with rope_and_cache fused in: `rmsnorm_linear_rope_and_cache`.

One decode token of a Llama layer runs rmsnorm + the fused QKV product (one GEMV launch,
ops/gemv.py), then rope_and_cache (a launch of a few blocks that rotates q and k and stores k
and v in the KV cache). For one row of x the GEMV kernel does both in one launch
(kernels/gemv.hip's gemv_norm_rope_r1, gemv_rope.h): each block computes both columns of its
rotate-half pairs, then rotates and stores them, so the step's critical path loses a launch
and the latency of a kernel that waits on the product (H200, 1B Llama: 16 launches a token).
Other calls run the two ops, with the same results: the fused kernel rotates the product's
values as rounded to the storage type, as rope_and_cache reads them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hip_runtime.ops.base import OpsBase
from hip_runtime.ops.gemv import gemv_slices
from hip_runtime.ops.plans import address_of, byte_extent, plan_head, plan_key
from hip_runtime.tensors.dtypes import FLOAT_TYPES
from hip_runtime.tensors.tensor import DeviceTensor

_OP = "rmsnorm_linear_rope_and_cache"
_THREADS, _TEAMS = 256, 8  # the GEMV kernel's block and its teams (ops/gemv.py)
_MAX_SLICES = 4  # a block must hold whole pairs: 8 / slices outputs, an even count


class GemvRopeOps(OpsBase):
    """`rmsnorm_linear_rope_and_cache`; needs the GEMV and layout families beside it."""

    if TYPE_CHECKING:  # the families mixed into HipBackend beside this one
        gemv_rows: int

        def rmsnorm_linear(
            self, x: DeviceTensor, norm_weight: DeviceTensor, weight: DeviceTensor, *,
            eps: float = 1e-6, residual: DeviceTensor | None = None,
            out: DeviceTensor | None = None,
        ) -> DeviceTensor: ...  # fmt: skip

        def rope_and_cache(
            self, q: DeviceTensor, k: DeviceTensor, v: DeviceTensor, cos: DeviceTensor,
            sin: DeviceTensor, positions: DeviceTensor | None, k_table: DeviceTensor,
            v_table: DeviceTensor, rows: DeviceTensor, *, rot_dim: int | None = None,
            interleaved: bool = False,
        ) -> None: ...  # fmt: skip

        def _gemv_operands(
            self, op: str, x: Any, norm: Any, weight: Any, residual: Any, pairs: bool
        ) -> tuple[DeviceTensor, DeviceTensor, int]: ...

        def _gemv_takes(
            self, x: DeviceTensor, weight: DeviceTensor, norm: DeviceTensor | None = None
        ) -> bool: ...

        def _rope_and_cache_checks(
            self, q: Any, k: Any, v: Any, cos: Any, sin: Any, positions: Any, rows: Any,
            k_table: Any, v_table: Any, rot_dim: int | None,
        ) -> tuple[Any, int, tuple[int, ...]]: ...  # fmt: skip

    def rmsnorm_linear_rope_and_cache(
        self,
        x: DeviceTensor,
        norm_weight: DeviceTensor,
        weight: DeviceTensor,
        cos: DeviceTensor,
        sin: DeviceTensor,
        positions: DeviceTensor | None,
        k_table: DeviceTensor,
        v_table: DeviceTensor,
        rows: DeviceTensor,
        *,
        heads: int,
        eps: float = 1e-6,
    ) -> DeviceTensor:
        """qkv = rmsnorm_linear(x, norm_weight, weight, eps=eps), then rope_and_cache of its
        column views (rotate-half pairing over whole heads): q and k rotated inside qkv, k and
        v stored at row rows[t] of k_table and v_table. x [..., hidden] (T rows), weight
        [(heads + 2 · kv_heads) · head_dim, hidden], the tables [table_rows, kv_heads,
        head_dim] (which give kv_heads and head_dim); cos, sin, positions and rows as
        rope_and_cache takes them for the views [T, heads or kv_heads, head_dim]. Returns qkv
        [..., (heads + 2 · kv_heads) · head_dim]. One launch where the GEMV kernel takes a
        single row (the module's doc), else the two ops. ValueError before anything is queued;
        queued on the backend's stream."""
        tensors = (x, norm_weight, weight, cos, sin, positions, rows, k_table, v_table)
        key = plan_key(*tensors, None)
        if key is not None and type(heads) is int:
            key = (_OP, *key, heads)
            plan = self._planned(key)
            if plan is not None and eps == plan[4] and type(eps) is float:
                y = self._planned_output(plan, tensors, None)
                if y is not None and _tables_clear(tensors, plan[5]) is None:
                    pointers = (
                        weight.ptr, x.ptr, y.ptr, 0, norm_weight.ptr, cos.ptr, sin.ptr,
                        address_of(positions), rows.ptr, k_table.ptr, v_table.ptr,
                    )  # fmt: skip
                    kernel, grid, numbers, prepared = plan[6:]
                    if not prepared(*pointers):  # (declined: a capture, another thread in it)
                        self._rope_launch(kernel, grid, tensors, y, numbers)
                    return y
        else:
            key = None
        return self._rope_checked(key, tensors, heads, eps)

    def _rope_checked(
        self, key: tuple[Any, ...] | None, tensors: tuple[Any, ...], heads: Any, eps: Any
    ) -> DeviceTensor:
        """The op's validated path (its plan kept under `key`)."""
        x, norm_weight, weight, cos, sin, positions, rows, k_table, v_table = tensors
        if not isinstance(eps, (int, float)) or isinstance(eps, bool):
            raise TypeError(f"{_OP}: eps must be a real number, not {type(eps).__name__}")
        if type(heads) is not int or heads < 1:
            raise ValueError(f"{_OP}: heads must be a positive int, not {heads!r}")
        x, weight, n = self._gemv_operands(_OP, x, norm_weight, weight, None, False)
        k_table = self._tensor(k_table, f"{_OP}: k_table")
        if k_table.ndim != 3:
            raise ValueError(f"{_OP}: k_table is {k_table.shape}; expected [rows, kv_heads, "
                             "head_dim]")  # fmt: skip
        kv_heads, d = k_table.shape[1:]
        if n != (heads + 2 * kv_heads) * d:
            raise ValueError(
                f"{_OP}: weight has {n} rows; {heads} heads and the tables' {kv_heads} kv heads "
                f"of {d} need {(heads + 2 * kv_heads) * d}"
            )
        one_row = x.size == x.shape[-1]
        fused = one_row and d % 2 == 0 and self._gemv_takes(x, weight, norm_weight)
        y = self._output(None, (*x.shape[:-1], n), x.dtype)
        q, k, v = qkv_views(y, heads, kv_heads, d)
        _, _, ints = self._rope_and_cache_checks(  # (rot_dim None: the whole head)
            q, k, v, cos, sin, positions, rows, k_table, v_table, None
        )
        tensors = (x, norm_weight, weight, cos, sin, positions, rows, k_table, v_table)
        extents = tuple(map(byte_extent, tensors))
        clash = _tables_clear(tensors, extents)
        if clash is not None:
            raise ValueError(f"{_OP}: {clash} overlap (the tables are written)")
        if not fused:
            self.rmsnorm_linear(x, norm_weight, weight, eps=float(eps), out=y)
            self.rope_and_cache(q, k, v, cos, sin, positions, k_table, v_table, rows)
            return y
        size = x.shape[-1]
        slices = min(_MAX_SLICES, gemv_slices(
            n, size, x.dtype.itemsize, 1, self.device.properties.multiprocessors
        ))  # fmt: skip
        grid = -(-n // (_TEAMS // slices))
        # (n, k, x rows, slices, eps, x/y/residual row strides; heads, kv_heads, head_dim,
        # max_position, table_rows)
        numbers = (n, size, 1, slices, float(eps), size, n, n,
                   heads, kv_heads, d, ints[5], ints[6])  # fmt: skip
        kernel = self._kernel("gemv.hip", f"gemv_norm_rope_r1_{FLOAT_TYPES[x.dtype].suffix}")
        args = self._rope_launch(kernel, grid, tensors, y, numbers)
        prepared = kernel.prepare(grid, _THREADS, *args, stream=self.stream)
        head = plan_head(tensors, y)
        self._keep_plan(key, (*head, float(eps), extents, kernel, grid, numbers, prepared))
        return y

    def _rope_launch(
        self, kernel: Any, grid: int, tensors: tuple[Any, ...], y: DeviceTensor,
        numbers: tuple[Any, ...],
    ) -> tuple[Any, ...]:  # fmt: skip
        """Queue gemv_norm_rope_r1 and return its arguments (what `Kernel.prepare` takes)."""
        x, norm_weight, weight, cos, sin, positions, rows, k_table, v_table = tensors
        args = (weight, x, y, None, norm_weight, *numbers[:8], cos, sin, positions, rows,
                k_table, v_table, *numbers[8:])  # fmt: skip
        kernel.launch(grid, _THREADS, *args, stream=self.stream)
        return args


def qkv_views(
    qkv: DeviceTensor, heads: int, kv_heads: int, head_dim: int
) -> tuple[DeviceTensor, DeviceTensor, DeviceTensor]:
    """Queries [T, heads, D], keys and values [T, kv_heads, D]: column views of a fused QKV
    product [..., (heads + 2 kv_heads) · D] (T its rows)."""
    flat = qkv.reshape(-1, qkv.shape[-1])
    tokens, q_end, k_end = flat.shape[0], heads * head_dim, (heads + kv_heads) * head_dim
    return (flat[:, :q_end].reshape(tokens, heads, head_dim),
            flat[:, q_end:k_end].reshape(tokens, kv_heads, head_dim),
            flat[:, k_end:].reshape(tokens, kv_heads, head_dim))  # fmt: skip


_NAMES = ("x", "norm_weight", "weight", "cos", "sin", "positions", "rows", "k_table", "v_table")


def _tables_clear(
    tensors: tuple[DeviceTensor | None, ...], extents: tuple[tuple[int, int], ...]
) -> str | None:
    """The names of a written table and another operand that share a byte, or None (the
    spans from each call's addresses and the layouts' extents, which a plan keeps)."""
    spans = [
        None if t is None or low == high else (t.ptr + low, t.ptr + high)
        for t, (low, high) in zip(tensors, extents, strict=True)
    ]
    for table in (7, 8):
        a = spans[table]
        for other in range(table):
            b = spans[other]
            if a is not None and b is not None and a[0] < b[1] and b[0] < a[1]:
                return f"{_NAMES[table]} and {_NAMES[other]}"
    return None


__all__ = ["GemvRopeOps", "qkv_views"]
