"""Ops that move elements by position: rope (pairs rotated by position), transpose (a layout
change). Queued on the backend's stream. (embedding lives with the indexing ops.)"""

from __future__ import annotations

from hip_runtime.dtypes import float32, int32
from hip_runtime.ops.base import INT_MAX, OpsBase
from hip_runtime.tensor import DeviceTensor


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
        rot = head_dim if rot_dim is None else rot_dim
        if rot <= 0 or rot % 2 or rot > head_dim:
            raise ValueError(f"rot_dim must be even, > 0 and <= head_dim {head_dim}, not {rot}")
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
        if x.size > INT_MAX or cos.shape[0] > INT_MAX:
            raise ValueError(f"x {x.shape} or the tables {cos.shape} exceed the kernel's int range")
        y = self._output(out, x.shape, x.dtype, inputs=(x,), distinct_from=(cos, sin, positions))
        name = f"rope_{'interleaved' if interleaved else 'half'}_{t.suffix}"
        self._launch_flat(
            self._kernel("rope.hip", name), x.size // 2, 4, x, cos, sin, positions, y,
            tokens, heads, head_dim, rot, cos.shape[0],
        )  # fmt: skip
        return y

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


__all__ = ["LayoutOps"]
