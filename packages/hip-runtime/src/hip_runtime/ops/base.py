"""What every op family of HipBackend shares: validation, output allocation, launch geometry.

Every op validates first (types, devices, shapes, dtypes; ValueError) and launches after, so a
mismatch never leaves half of a composite op queued. The kernels read and write C-contiguous
tensors: a strided view (a transpose, a slice with steps, a broadcast) is refused with a
ValueError naming the op and pointing at `.contiguous()`.
"""

from __future__ import annotations

import math
import sys
from _weakref import getweakrefcount as _weakrefs
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hip_core import Device, Kernel, MemoryPool, Resource, Stream, capture_in_progress
from hip_runtime.libraries.blas import Blas
from hip_runtime.libraries.kernel_cache import KernelCache
from hip_runtime.libraries.small_gemm import SmallGemm
from hip_runtime.ops.plans import (
    _UNHELD,
    PLAN_LIMIT,
    RECYCLE_BUDGET,
    RECYCLE_BYTES,
    PlanOutput,
    _strided_out_clear,
)
from hip_runtime.tensors.dtypes import DTypeLike, FloatType, as_dtype, float_type
from hip_runtime.tensors.operators import register
from hip_runtime.tensors.stream_order import order_after, ordered_with
from hip_runtime.tensors.strided_copy import check_writable
from hip_runtime.tensors.strides import broadcast_to, collapse
from hip_runtime.tensors.tensor import DeviceTensor, Shape, as_shape

_refcount = sys.getrefcount

INT_MAX = 2**31 - 1
_BLOCK = 256  # elementwise block size: 16-byte accesses, 8 warps (4 wavefronts)
_BLOCKS_PER_MULTIPROCESSOR = 64  # grid cap for grid-stride kernels: several passes per thread
_ROW_ELEMENTS_PER_THREAD = 32  # f32 elements a row kernel holds per thread (16-bit: twice)
_MAX_ROW_PARTS = 8  # rows a row kernel's 2-D block takes at most (HIPK_MAX_ROW_PARTS)
_STACKED_THREADS = 256  # threads of such a block
_STACKED_BLOCKS = 4  # blocks a multiprocessor that stacking rows must leave the grid
_FEW_ROWS = 16  # rows up to which a launch too small to fill the device takes wide blocks
_NARROW_ELEMENTS_PER_LANE = 16  # the longest row a narrow kernel's warp holds, per lane
_NARROW_WARPS_PER_MULTIPROCESSOR = 2  # the fewest warps a multiprocessor narrow launches leave


class OpsBase(Resource):
    """The state and helpers the op families use; HipBackend fills the attributes in.

    A Resource: every op of a closed backend raises hip_core.ClosedError (through `_tensor`).
    """

    device: Device
    stream: Stream
    pool: MemoryPool
    blas: Blas
    small_gemm: SmallGemm
    kernels: KernelCache
    _grid_cap: int
    _max_block: int
    #: Launch plans by the layouts of a call (ops/pointwise_core.py `_pw_cached`); made on
    #: first use (HipBackend's __init__ is not this file's).
    _plans: dict[tuple[Any, ...], tuple[Any, ...]] | None = None
    #: Bytes of the outputs its plans keep for reuse (`PlanOutput`), at most RECYCLE_BUDGET.
    _recycled_bytes = 0

    def __setattr__(self, name: str, value: Any) -> None:
        # A backend's stream marks the tensors it makes: Python operators on them find the
        # backend through it (hip_runtime.tensors.operators; sets are rare: only in __init__).
        super().__setattr__(name, value)
        if name == "stream":
            register(value, self)

    # --- validation --------------------------------------------------------------------------

    def _tensor(self, x: Any, name: str) -> DeviceTensor:
        """x as an input of a kernel that reads C-contiguous tensors (see `_operand`)."""
        tensor = self._operand(x, name)
        if not tensor.is_contiguous:
            raise not_contiguous(tensor, name, _calling_op())
        return tensor

    def _operand(self, x: Any, name: str) -> DeviceTensor:
        """x as an input of an op that reads any layout: an open DeviceTensor on this device
        (strided, broadcast and reversed views included); ValueError otherwise."""
        self._check_open()
        if not isinstance(x, DeviceTensor):
            raise ValueError(f"{name} must be a DeviceTensor, not {type(x).__name__}")
        if x.closed:
            raise ValueError(f"{name}'s memory is closed")
        if x.device != self.device:
            raise ValueError(f"{name} is on device {x.device.ordinal}, not {self.device.ordinal}")
        if x.stream is not self.stream:
            order_after(self.stream, x, name)  # (a tensor of another backend or stream)
        return x

    def _float(self, x: Any, name: str) -> tuple[DeviceTensor, FloatType]:
        tensor = self._tensor(x, name)
        return tensor, float_type(tensor.dtype, name)

    def _same(self, x: DeviceTensor, other: Any, name: str, shape: Shape | None = None) -> None:
        """`other` is a tensor of x's dtype and of `shape` (x's shape when None)."""
        other = self._tensor(other, name)
        expected = x.shape if shape is None else shape
        if other.dtype != x.dtype:
            raise ValueError(f"{name} has dtype {other.dtype}; expected {x.dtype}")
        if other.shape != expected:
            raise ValueError(f"{name} has shape {other.shape}; expected {expected}")

    def _output(
        self,
        out: DeviceTensor | None,
        shape: Sequence[int],
        dtype: DTypeLike,
        *,
        inputs: Sequence[DeviceTensor | None] = (),
        distinct_from: Sequence[DeviceTensor | None] = (),
        strided: bool = False,
    ) -> DeviceTensor:
        """A validated `out=`, or a new tensor from the backend's pool (stream-ordered).

        `out` may be exactly one of `inputs` (in place: the same elements in the same places)
        but must not otherwise overlap any of them (threads would read elements others have
        already written), and must not overlap `distinct_from` at all. `strided`: the op
        writes any layout, so `out` may be a strided view (not a broadcast one: its elements
        would overlap).
        """
        # The ops pass tuples of sizes read from validated tensors and numpy dtypes: checking
        # them again would double this method's cost (issue 15 counts the host's microseconds).
        shape = shape if type(shape) is tuple else as_shape(shape)
        dtype = dtype if isinstance(dtype, np.dtype) else as_dtype(dtype)
        if out is None:
            return DeviceTensor._allocated(shape, dtype, self.device, self.stream, self.pool)
        out = self._operand(out, "out") if strided else self._tensor(out, "out")
        if out.shape != shape or out.dtype != dtype:
            raise ValueError(f"out is {out.shape} {out.dtype}; this op writes {shape} {dtype}")
        if strided:
            check_writable(out)
        start, end = out.span()
        for other in inputs:
            if other is not None and other is not out:
                at, until = other.span()
                if _overlap(start, end - start, at, until - at) and not _same_elements(other, out):
                    raise ValueError("out must be an input exactly (in place) or not overlap it")
        for other in distinct_from:
            if other is not None:
                at, until = other.span()
                if _overlap(start, end - start, at, until - at):
                    raise ValueError("out must not overlap the inputs of this op")
        return out

    @staticmethod
    def _rows_cols(x: DeviceTensor, name: str) -> tuple[int, int]:
        """(rows, cols) of x seen as [prod(leading dims), last dim], both within C int."""
        if x.ndim == 0:
            raise ValueError(f"{name} needs at least one dimension")
        cols = x.shape[-1]
        rows = math.prod(x.shape[:-1])
        if rows > INT_MAX or cols > INT_MAX:
            raise ValueError(f"{name} {x.shape} exceeds the kernels' int range")
        return rows, cols

    # --- plans (issue 15: a repeated call costs a dict look-up, not its validation) ----------

    def _planned(self, key: tuple[Any, ...] | None) -> tuple[Any, ...] | None:
        """The plan a validated call of `key` left (`_keep_plan`), or None (also when the
        backend is closed: the checked path then raises)."""
        plans = self._plans
        if plans is None or key is None or self._releaser is None:
            return None
        return plans.get(key)

    def _keep_plan(self, key: tuple[Any, ...] | None, plan: tuple[Any, ...]) -> None:
        """Keep `plan` for calls of `key`: `plan_head(...)`, then the op's own entries."""
        if key is None:
            return
        plans = self._plans
        if plans is None:
            plans = self._plans = {}
        elif len(plans) >= PLAN_LIMIT:
            plans.clear()  # a program of ever-new shapes: start over rather than grow
            self._recycled_bytes = 0  # (the outputs they kept go with them)
        else:
            replaced = plans.get(key)
            if replaced is not None and type(replaced[2]) is PlanOutput and replaced[2].last:
                self._recycled_bytes -= replaced[2].nbytes
        plans[key] = plan

    def _inputs_open(self, inputs: Sequence[DeviceTensor | None]) -> bool:
        """Whether every tensor of a planned call is open, on this device and ordered on this
        backend's stream (what a plan's key cannot say; a tensor of another stream takes the
        checked path, which orders this stream after it: `_operand`)."""
        device, stream = self.device, self.stream
        for t in inputs:
            if t is not None:
                b = t.buffer
                if b._releaser is None or b._owner._releaser is None or b.device is not device:
                    return False
                if t.stream is not stream and not ordered_with(stream, t.stream):
                    return False
        return True

    def _planned_output(
        self,
        plan: tuple[Any, ...],
        inputs: Sequence[DeviceTensor | None],
        out: DeviceTensor | None,
    ) -> DeviceTensor | None:
        """The output of a call whose plan was found by its key (see `plan_key`): the checks
        that depend on what the key holds passed when the plan was made, so only what can
        differ between calls of one key is checked here: the memory is open and on this
        device, and out= shares no byte with an input it is not (the key says which input it
        is). A new output is the plan's last one when nothing else holds it any more
        (`PlanOutput`), else comes from the pool. None when anything is in doubt: the
        caller then takes the checked path, which raises where it should."""
        if not self._inputs_open(inputs):
            return None
        device = self.device
        if out is None:
            kept: PlanOutput = plan[2]
            y = kept.last
            if y is not None:
                # (the counts of a tensor held by kept.last and this local only, and of a
                # buffer held by its tensor and this local only: `_UNHELD`, measured so)
                b = y.buffer
                if (
                    _refcount(y) == _UNHELD[0]
                    and _refcount(b) == _UNHELD[1]
                    and b._releaser is not None
                    and not _weakrefs(y)
                    and not _weakrefs(b)
                    and not capture_in_progress()
                ):
                    return y
            # (what DeviceTensor._allocated does, of a size worked out once)
            stream, pool = self.stream, self.pool
            buffer = pool.allocate(kept.nbytes, stream=stream)
            y = DeviceTensor._make(buffer, plan[0], plan[1], 0, None, stream, pool)
            if capture_in_progress():
                return y  # (the graph's memory: never kept)
            if kept.last is not None:
                kept.last = y  # (the last one is still held: keep the newest instead)
            elif kept.nbytes <= RECYCLE_BYTES and _UNHELD[0]:
                spent = self._recycled_bytes + kept.nbytes
                if spent <= RECYCLE_BUDGET:
                    self._recycled_bytes = spent
                    kept.last = y
            return y
        b = out.buffer
        spans = plan[3]
        if b._releaser is None or b._owner._releaser is None or b.device is not device:
            return None
        if out.stream is not self.stream and not ordered_with(self.stream, out.stream):
            return None  # (the checked path orders this stream after out's)
        if spans[0] is None:  # (a strided input or output)
            return out if _strided_out_clear(out, inputs, spans) else None
        start = out.ptr
        end = start + spans[-1]
        k = 0  # (an index, not zip(..., strict=False): a call with a keyword costs ~3k
        for t in inputs:  # instructions, more than the rest of this check)
            if t is not None and t is not out:
                at = t.ptr
                if at < end and start < at + spans[k]:
                    return None  # the checked path tells in place from overlap
            k += 1  # noqa: SIM113 (enumerate is a call too)
        return out

    # --- launches (all on self.stream) --------------------------------------------------------

    def _kernel(self, source: str, name: str) -> Kernel:
        return self.kernels.get(source, name)

    def _launch_flat(self, kernel: Kernel, n: int, itemsize: int, *args: Any) -> None:
        """A grid-stride kernel over n elements: one 16-byte vector per thread per pass."""
        if n == 0:
            return
        kernel.launch(self._flat_grid(n, itemsize), _BLOCK, *args, stream=self.stream)

    def _flat_grid(self, n: int, itemsize: int) -> int:
        """The grid of `_launch_flat` over n > 0 elements of `itemsize` bytes."""
        per_block = _BLOCK * max(16 // itemsize, 1)
        return min(-(-n // per_block), self._grid_cap)

    def _launch_rows(
        self, kernel: Kernel, rows: int, cols: int, itemsize: int, *args: Any
    ) -> tuple[int, int | tuple[int, int]] | None:
        """A row kernel: one block per row, of as many threads as keep the row in registers
        with 8 × 16-byte loads in flight per thread (cols / 32 for f32, cols / 64 for 16-bit
        types, whose rows the kernels hold packed), a multiple of 64 threads, at most the
        device's block limit; many narrow rows several a block (`_row_launch`). Returns the
        (grid, block) it launched (what a plan keeps), None when there was nothing to do."""
        if rows == 0 or cols == 0:
            return None
        launch = self._row_launch(rows, cols, itemsize)
        kernel.launch(*launch, *args, stream=self.stream)
        return launch

    def _row_launch(self, rows: int, cols: int, itemsize: int) -> tuple[int, int | tuple[int, int]]:
        """(grid, block) of a row kernel (kernels/rows.h). Rows that a part of whole warps holds
        in registers, many enough that the grid stays `_STACKED_BLOCKS` blocks a
        multiprocessor, go up to HIPK_MAX_ROW_PARTS to a 2-D block (warps, rows), a block for
        every 1-2 KiB of a narrow row being the suspected cost (H200, MiniLM's 13 [16384, 384]
        bf16 layernorms: 389 µs a block per pair, 345 µs eight rows a block). Else one block
        per row, `_row_block`; a decode batch's rows (at most _FEW_ROWS, fewer than the
        multiprocessors) get blocks wide enough for one 16-byte vector a thread
        (`_few_rows_block`)."""
        block = self._row_block(cols, itemsize)
        multiprocessors = self.device.properties.multiprocessors
        if rows <= _FEW_ROWS and rows < multiprocessors:
            return rows, max(block, self._few_rows_block(cols, itemsize))
        warp = self.device.properties.warp_size
        per_thread = _ROW_ELEMENTS_PER_THREAD * 4 // max(1, min(itemsize, 4))
        width = max(warp, -(-cols // per_thread // warp) * warp)  # whole warps hold a row
        parts = min(_MAX_ROW_PARTS, _STACKED_THREADS // width)
        if parts < 2 or rows < parts * _STACKED_BLOCKS * multiprocessors:
            return rows, block
        return -(-rows // parts), (width, parts)

    def _narrow_row_launch(
        self,
        rows: int,
        cols: int,
        itemsize: int,
        rows_per_warp: int,
        pointers: tuple[DeviceTensor | None, ...],
        strides: tuple[int, int, int],
    ) -> tuple[int, tuple[int, int]] | None:
        """(grid, block) of a narrow row kernel (kernels/rows.h's run_narrow_rows: a warp
        takes `rows_per_warp` rows), or None where it does not pay or cannot hold the rows:
        rows longer than 16 elements a lane, too few rows to give every multiprocessor
        two such warps, or rows the kernel cannot read as 16-byte vectors (`pointers` and
        x's row `strides` (inner, outer, step), in elements, not all on 16-byte boundaries).
        The block is (warp, parts): up to 256 threads, fewer where the rows would not
        spread over every multiprocessor otherwise."""
        warp = self.device.properties.warp_size
        lanes = 16 // itemsize
        if not 0 < cols <= _NARROW_ELEMENTS_PER_LANE * warp or cols % lanes or strides[1] % lanes:
            return None
        if strides[2] % lanes or any(t is not None and t.ptr % 16 for t in pointers):
            return None
        multiprocessors = self.device.properties.multiprocessors
        warps = rows // (rows_per_warp * _NARROW_WARPS_PER_MULTIPROCESSOR * multiprocessors)
        if warps < 1:
            return None
        parts = min(_STACKED_THREADS // warp, warps)
        return -(-rows // (parts * rows_per_warp)), (warp, parts)

    def _few_rows_block(self, cols: int, itemsize: int) -> int:
        """The block for rows too few to fill the device (a decode step's 1-16): one 16-byte
        vector of a row a thread, so a row is read in one round of loads, and two rows a block
        (run_rows pairs rows that fit in half a block). The usual block, sized to fill the
        device with many rows, gave a thread 8 vectors in turn: H200, batch-16 decode, 16 rows
        of 2048 bf16 at 32 threads a row, 5.6 us an rmsnorm launch."""
        vectors = -(-cols // max(1, 16 // itemsize))
        return min(2 * -(-vectors // 64) * 64, self._max_block)

    def _row_block(self, cols: int, itemsize: int) -> int:
        """The block of `_launch_rows` for rows of `cols` elements of `itemsize` bytes."""
        per_thread = _ROW_ELEMENTS_PER_THREAD * 4 // max(1, min(itemsize, 4))
        return min(max(64, -(-cols // per_thread // 64) * 64), self._max_block)


def not_contiguous(x: DeviceTensor, name: str, op: str) -> ValueError:
    """The error an op gives for a strided input: names the op, the argument and the layout."""
    return ValueError(
        f"{op} takes C-contiguous tensors; {name} is a strided view (shape {x.shape}, strides "
        f"{x.strides}): pass {name}.contiguous() (a copy)"
    )


_OPS_DIR = str(Path(__file__).parent)


def _calling_op() -> str:
    """The public op a validation failure happened in: the outermost frame of the calls
    inside hip_runtime/ops/ that led here (only ever run on the error path)."""
    frame, op = sys._getframe(1), "this op"
    while frame is not None and frame.f_code.co_filename.startswith(_OPS_DIR):
        if not frame.f_code.co_name.startswith("_"):
            op = frame.f_code.co_name
        frame = frame.f_back  # type: ignore[assignment]
    return op


def _same_elements(x: DeviceTensor, out: DeviceTensor) -> bool:
    """Whether input x, broadcast to out's shape, is out's elements at out's places (so an
    elementwise op may read and write them in place)."""
    if x.ptr != out.ptr or x.dtype.itemsize != out.dtype.itemsize:
        return False
    if x.is_contiguous and out.is_contiguous:
        return x.nbytes == out.nbytes
    try:
        seen = broadcast_to(x.shape, x.strides, out.shape)
    except ValueError:
        return False
    _, (a, b) = collapse(out.shape, seen, out.strides)
    return a == b


def _overlap(a: int, a_size: int, b: int, b_size: int) -> bool:
    """Whether bytes [a, a + a_size) and [b, b + b_size) share one (empty ranges share none)."""
    return a_size > 0 and b_size > 0 and a < b + b_size and b < a + a_size


def grid_cap(device: Device) -> int:
    """The grid of a grid-stride kernel on `device`: enough blocks to fill it several times."""
    return max(1, device.properties.multiprocessors * _BLOCKS_PER_MULTIPROCESSOR)


__all__ = ["INT_MAX", "OpsBase", "grid_cap", "not_contiguous"]
