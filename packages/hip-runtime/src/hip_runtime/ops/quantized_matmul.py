"""Linear layers whose weight stays in GGUF's Q8_0 / Q4_0 blocks on the device (issue 16).

`QuantizedWeight` holds a weight's quantized bytes with its logical shape [N, K], in one of
two layouts (ops.quantized.LAYOUTS): "gguf", ggml's blocks as a GGUF file stores them, or
"split", each row's scales then its quants, which `split_quantized` makes (the Llama loader
does, for every K a multiple of 256: all Llama shapes). `quantized_linear(x, weight)` is
`x @ dequantize(weight)ᵀ`:

- up to `GEMV_MAX_ROWS` rows of x (a decode step's tokens): GEMV kernels read the quantized
  bytes once and dequantize them in registers, so a decode step streams ~1.06
  (Q8_0) or ~0.56 (Q4_0) bytes per weight instead of 2 (bf16) or 4 (f32). Split weights:
  kernels/gemv_quant_split.hip, each team of 32 lanes reading a row's quants in 512-byte
  coalesced loads (H100, Q8_0, one row of x: 0.81-0.83 of the copy rate at Llama's mid shapes).
  GGUF weights: kernels/gemv_quant.hip, which stages the 34 (18) byte blocks through shared
  memory (0.4-0.55);
- more rows (a prefill): the weight is expanded into a pooled scratch tensor of x's dtype and
  multiplied by BLAS (GEMM speed; the scratch returns to the pool once the stream is past it).

Everything is queued on the backend's stream and nothing synchronizes, so a decode step that
uses it can be captured in a graph and replayed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hip_core import Kernel
from hip_runtime.ops.base import INT_MAX, OpsBase
from hip_runtime.ops.plans import launch_pointers, plan_head, plan_key
from hip_runtime.ops.quantized import (
    BLOCK_ENCODINGS,
    LAYOUTS,
    SPLIT_MULTIPLE,
    dequantize_into,
    split_rows_into,
)  # fmt: skip
from hip_runtime.tensors.dtypes import float_type
from hip_runtime.tensors.tensor import DeviceTensor

_SOURCE = "gemv_quant.hip"
_SPLIT_SOURCE = "gemv_quant_split.hip"
_THREADS = 256  # HIPK_GEMV_THREADS and HIPK_GEMV_SPLIT_THREADS
_TEAM = 32  # lanes of a split kernel's team (HIPK_GEMV_SPLIT_TEAM)
_ROW_TILES = (1, 4, 16)  # the kernels' row tiles R (accumulators per thread)
#: Rows up to which the GEMV runs (one launch); beyond, expanding the weight once and one GEMM
#: is cheaper. bench/bench_quant.py on an H100 (bf16 x, split Q8_0, fraction of copy, GEMV /
#: dequantize + GEMM): 14336x4096 rows 4 0.43 / 0.18, rows 8 0.21 / 0.18, rows 16 0.12 / 0.18
#: (each row of x rereads its x from L1 for every chunk of weights); at most 16 (a row tile).
GEMV_MAX_ROWS = 8
#: Threads per weight row (32, 64, 128 or 256), by the row length K in elements: the first
#: entry whose bound K is at most. bench/bench_quant.py times the choices (a backend's plans
#: keep the choice made when they were made: clear `_plans` after changing this).
THREADS_PER_ROW: tuple[tuple[int, int], ...] = ((1 << 62, 64),)
#: Chunks (16 bytes of quants) each lane of the split kernels takes at least before a row is
#: split over more teams: a row of c chunks gets the largest power of two of teams (1 to 8)
#: that leaves each lane this many. On an H100 (bf16 x, rows 1, Q8_0) one team a row of 4096
#: (8 chunks a lane) and four a row of 14336 (7) were the best of 1, 2 and 4 teams: 0.83 of
#: copy each; bench/bench_quant.py times every choice (`SPLIT_SLICES`).
LANE_CHUNKS = 7
#: Teams per row for every split weight instead of LANE_CHUNKS's choice (bench/bench_quant.py;
#: a backend's plans keep the choice made when they were made: clear `_plans` after changing).
SPLIT_SLICES: int | None = None


@dataclass(frozen=True)
class QuantizedWeight:
    """A [N, K] weight held as quantized blocks on the device.

    Attributes:
        blocks: uint8 [N, K / 32 * block bytes], C-contiguous: row n's bytes (34 per 32
            elements for q8_0, 18 for q4_0), in `layout`.
        shape: (N, K), the logical shape; K is a multiple of 32.
        encoding: "q8_0" or "q4_0".
        layout: "gguf" (each row's blocks as a GGUF file stores them; 2-byte aligned) or
            "split" (each row's K / 32 f16 scales, then its quants: K a multiple of 256, blocks
            16-byte aligned; `HipBackend.split_quantized` makes it, and quantized_linear reads it
            at near the copy rate).
    """

    blocks: DeviceTensor
    shape: tuple[int, int]
    encoding: str
    layout: str = "gguf"

    def __post_init__(self) -> None:
        geometry = BLOCK_ENCODINGS.get(self.encoding)
        if geometry is None:
            raise ValueError(f"QuantizedWeight: unknown encoding {self.encoding!r}; expected "
                             f"one of {', '.join(BLOCK_ENCODINGS)}")  # fmt: skip
        if not isinstance(self.blocks, DeviceTensor):
            raise TypeError(f"QuantizedWeight: blocks must be a DeviceTensor, not "
                            f"{type(self.blocks).__name__}")  # fmt: skip
        n, k = self.shape
        per_block, block_bytes = geometry
        if n < 1 or k < per_block or k % per_block:
            raise ValueError(f"QuantizedWeight: shape {self.shape} must be [N >= 1, K] with K a "
                             f"positive multiple of {per_block}")  # fmt: skip
        expected = (n, k // per_block * block_bytes)
        if self.blocks.dtype.name != "uint8" or self.blocks.shape != expected:
            raise ValueError(f"QuantizedWeight: blocks are {self.blocks.shape} "
                             f"{self.blocks.dtype}; expected uint8 {expected}")  # fmt: skip
        if not self.blocks.is_contiguous or self.blocks.ptr % 2:
            raise ValueError("QuantizedWeight: blocks must be C-contiguous and 2-byte aligned")
        if self.layout not in LAYOUTS:
            raise ValueError(f"QuantizedWeight: unknown layout {self.layout!r}; expected one of "
                             f"{', '.join(LAYOUTS)}")  # fmt: skip
        if self.layout == "split" and (k % SPLIT_MULTIPLE or self.blocks.ptr % 16):
            raise ValueError(f"QuantizedWeight: the split layout needs K a multiple of "
                             f"{SPLIT_MULTIPLE} (K is {k}) and 16-byte aligned blocks")  # fmt: skip

    @property
    def nbytes(self) -> int:
        """Bytes of the blocks (what one pass over the weight reads)."""
        return self.blocks.nbytes


class QuantizedOps(OpsBase):
    if TYPE_CHECKING:  # the linalg family's op, mixed into HipBackend beside this one

        def linear(
            self, x: DeviceTensor, weight: DeviceTensor, bias: DeviceTensor | None = None, *,
            out: DeviceTensor | None = None,
        ) -> DeviceTensor: ...  # fmt: skip

    def dequantize(self, weight: QuantizedWeight, dtype: object = "float32") -> DeviceTensor:
        """The [N, K] weight expanded into a new tensor of `dtype` (f32, f16, bf16) from the
        backend's pool, queued on its stream (each value the f32 product of scale and quant,
        rounded once)."""
        self._qlinear_weight(weight)
        t = float_type(dtype, "dtype")
        dense = self._output(None, weight.shape, t.dtype)
        dequantize_into(self.kernels, weight.encoding, weight.blocks.ptr, dense,
                        stream=self.stream, layout=weight.layout)  # fmt: skip
        return dense

    def split_quantized(self, weight: QuantizedWeight) -> QuantizedWeight:
        """The weight in the split layout (QuantizedWeight.layout), in new blocks queued on the
        backend's stream: the same bytes per row, rearranged so that the decode GEMV reads them
        coalesced. A weight already split is returned as it is. ValueError unless K is a
        multiple of 256 (kernels/gemv_quant.hip serves the other shapes in the GGUF layout)."""
        self._qlinear_weight(weight)
        if weight.layout == "split":
            return weight
        if weight.shape[1] % SPLIT_MULTIPLE:
            raise ValueError(f"split_quantized: the split layout needs K a multiple of "
                             f"{SPLIT_MULTIPLE}; the weight is {weight.shape}")  # fmt: skip
        out = self._output(None, weight.blocks.shape, weight.blocks.dtype)
        split_rows_into(self.kernels, weight.encoding, weight.blocks, out, stream=self.stream)
        return QuantizedWeight(out, weight.shape, weight.encoding, "split")

    def quantized_linear(
        self, x: DeviceTensor, weight: QuantizedWeight, *, out: DeviceTensor | None = None
    ) -> DeviceTensor:
        """x @ Wᵀ for W the dequantized `weight`: x [..., K] (f32, f16, bf16; any layout, a
        copy is made of one whose rows are not contiguous and 16-byte aligned), result
        [..., N] in x's dtype, f32 accumulation. Up to GEMV_MAX_ROWS rows: the GEMV kernels
        read the blocks directly; more: dequantize + GEMM (module docstring). `out`: a
        C-contiguous [..., N] tensor of x's dtype not overlapping x or the blocks. Queued on
        the backend's stream; a repeated call of the same layouts is served by a plan."""
        call = plan_key(x, weight.blocks, out) if type(weight) is QuantizedWeight else None
        if call is not None:
            call = ("quantized_linear", weight.encoding, weight.layout, weight.shape, *call)
            planned = self._planned(call)
            if planned is not None:
                y = self._planned_output(planned, (x, weight.blocks), out)
                if y is not None:
                    single = planned[5]
                    if single is None:
                        self._qlinear_launch(planned[4], x, weight, y)
                        return y
                    kernel, grid, args = single  # one launch straight from x into y
                    pointers = launch_pointers((weight.blocks, x, y))
                    kernel.launch(grid, _THREADS, *pointers, *args, stream=self.stream)
                    return y
        self._qlinear_weight(weight)
        x = self._operand(x, "x")
        t = float_type(x.dtype, "x")
        n, k = weight.shape
        if x.ndim == 0 or x.shape[-1] != k:
            raise ValueError(f"quantized_linear: x is {x.shape}; expected [..., {k}] for a weight "
                             f"{weight.shape}")  # fmt: skip
        rows = math.prod(x.shape[:-1])
        if rows > INT_MAX or n > INT_MAX or k > INT_MAX:
            raise ValueError(f"quantized_linear: x {x.shape} exceeds the kernels' int range")
        y = self._output(out, (*x.shape[:-1], n), x.dtype, distinct_from=(x, weight.blocks))
        direct = x.is_contiguous and x.ptr % 16 == 0
        launch = (rows, n, k, t.suffix, direct)
        self._qlinear_launch(launch, x, weight, y)
        single = None
        if direct and 0 < rows <= gemv_max_rows():  # what _qlinear_launch did, kept whole
            kernel, grid, split = self._gemv(weight, rows, t.suffix)
            single = (kernel, grid, (n, k, rows, split, k, n))
        self._keep_plan(call, (*plan_head((x, weight.blocks), y), launch, single))
        return y

    def _qlinear_weight(self, weight: object) -> None:
        if not isinstance(weight, QuantizedWeight):
            raise TypeError(f"weight must be a QuantizedWeight, not {type(weight).__name__}")
        self._operand(weight.blocks, "weight.blocks")

    def _qlinear_launch(
        self, launch: tuple[int, int, int, str, bool], x: DeviceTensor, weight: QuantizedWeight,
        y: DeviceTensor,
    ) -> None:  # fmt: skip
        rows, n, k, suffix, direct = launch
        if rows == 0:
            return
        if rows > gemv_max_rows():
            dense = self.dequantize(weight, x.dtype)
            self.linear(x, dense, out=y)
            return
        if not direct:  # rows of k elements from a 16-byte aligned pool address
            copy = self._output(None, x.shape, x.dtype)
            copy.copy_(x)
            x = copy
        kernel, grid, split = self._gemv(weight, rows, suffix)  # (rows <= gemv_max_rows())
        kernel.launch(
            grid, _THREADS, weight.blocks, x, y, n, k, rows, split, k, n, stream=self.stream
        )

    def _gemv(self, weight: QuantizedWeight, rows: int, suffix: str) -> tuple[Kernel, int, int]:
        """The GEMV kernel for up to 16 rows of x, its grid, and its split argument (the split
        kernels' teams per row, or the staging kernels' threads per row)."""
        n, k = weight.shape
        tile = next(r for r in _ROW_TILES if r >= rows)
        if weight.layout == "split":
            slices = split_slices(weight.encoding, k)
            name = f"gemv_split_{weight.encoding}_r{tile}_{suffix}"
            return self._kernel(_SPLIT_SOURCE, name), -(-n // (_THREADS // _TEAM // slices)), slices
        tpr = threads_per_row(k)
        name = f"gemv_{weight.encoding}_r{tile}_{suffix}"
        return self._kernel(_SOURCE, name), -(-n // (_THREADS // tpr)), tpr


def threads_per_row(k: int) -> int:
    """The staging kernels' threads per weight row for rows of k elements (THREADS_PER_ROW)."""
    return next(tpr for bound, tpr in THREADS_PER_ROW if k <= bound)


def gemv_max_rows() -> int:
    """GEMV_MAX_ROWS, checked: the GEMV kernels' largest row tile (16) bounds it."""
    if not 0 <= GEMV_MAX_ROWS <= _ROW_TILES[-1]:
        raise ValueError(f"GEMV_MAX_ROWS must be 0..{_ROW_TILES[-1]}, not {GEMV_MAX_ROWS!r}")
    return GEMV_MAX_ROWS


def split_slices(encoding: str, k: int) -> int:
    """The split kernels' teams per weight row for rows of k elements (LANE_CHUNKS, or
    SPLIT_SLICES where set)."""
    if SPLIT_SLICES is not None:
        if SPLIT_SLICES not in (1, 2, 4, 8):
            raise ValueError(f"SPLIT_SLICES must be None, 1, 2, 4 or 8, not {SPLIT_SLICES!r}")
        return SPLIT_SLICES
    chunks = k // (16 if encoding == "q8_0" else 32)  # 16-byte chunks of quants a row
    slices = 1
    while slices < 8 and chunks >= 2 * slices * _TEAM * LANE_CHUNKS:
        slices *= 2
    return slices


__all__ = [
    "GEMV_MAX_ROWS", "LANE_CHUNKS", "SPLIT_SLICES", "THREADS_PER_ROW", "QuantizedOps",
    "QuantizedWeight", "gemv_max_rows", "split_slices", "threads_per_row",
]  # fmt: skip
