"""Reductions along any axes: sum, mean, max, min, argmax, argmin (kernels/reduce.hip,
reduce_arg.hip); l2_normalize along an axis (softmax.hip's along-axis kernel).

Every op takes `axis` = None (all axes), an int or a tuple of ints (negative allowed),
`keepdim=False` and `out=` (C-contiguous, of the result's shape and dtype), and inputs of any
layout. The reduced axes are merged on the host into one (`reduce_layout.along`: the kernel sees
[outer, reduced, inner]); a layout that does not merge is first copied with the reduced axes
moved last. Reducing the last axis runs one block (or a group of a warp's lanes, for short
rows) per output with 16-byte loads; reducing a leading or middle axis runs threads across
the inner axis (coalesced, 16 bytes each), each walking down the reduced one. When that leaves
too few blocks to fill the device once (the kernel's occupancy times the multiprocessors),
the reduced axis is split over as many blocks as fit in one wave (`reduce_geometry`, a pure
function of the view, the dtype and the resident blocks), whose partial results the last
block of each split merges in a fixed order (deterministic), or a second launch. max/min run
their own kernel (reduce_max.hip: no index, no branch); argmax/argmin reduce_arg.hip's.

Types (numpy's rules): 16-bit floats accumulate in f32 and return their type, f64 in f64;
sums of integers and bool accumulate in and return int64 (unsigned ones too: numpy would give
uint64, which DeviceTensor does not have); mean takes float types only; max/min take every
dtype and propagate NaN; argmax/argmin return int64, the first index of the extreme value, a
NaN counting as the extreme. Empty reductions: sum 0, mean NaN, max/min/argmax/argmin a
ValueError before anything is queued. Everything is queued on the backend's stream.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from hip_core import capture_in_progress, hip_api
from hip_runtime.ops.base import OpsBase
from hip_runtime.ops.norms import real_number
from hip_runtime.ops.reduce_layout import Merged, along, axes_argument, kept_shape, moved_last
from hip_runtime.ops.reduce_layout import next_power_of_two as pow2
from hip_runtime.ops.softmax import L2, along_axis, axis_argument
from hip_runtime.tensors.dtypes import float_type, suffix
from hip_runtime.tensors.tensor import DeviceTensor

_BLOCK = 256
_PER_THREAD = 8  # vectors a row thread reads at least before another one is added
_INT64 = np.dtype(np.int64)
_SHORT = 32  # rows of at most this many strided elements: one thread per output
_ROWS_PER_THREAD = 16  # rows a cols thread walks at least before another split is added
#: Threads across the inner axis per row of a cols block, at most (of 256; with 16-byte loads
#: 16 read 256 bytes of a row at a time). bench_opset.py --sweep on an H100, 8192^2 over the
#: first axis, one launch, % of copy at 16 / 32 lanes: bf16 sum 91.1 / 90.1, bf16 max 90.5 /
#: 90.1, f32 max 96.2 / 95.8; f32 sum 96.5 (fence.sc build) / 96.6.
_COLS_LANES = 16
#: Waves of resident blocks a split fills (H100, 8192^2 over the first axis, one launch, % of
#: copy at 0.5 / 1 / 1.5 / 2 / 3 waves: f32 sum 90.8 / 95.4 / 90.7 / 91.4 / 89.0, bf16 sum
#: 80.7 / 89.3 / 80.0 / 82.8 / 79.0 (2 loads in flight): past one wave the second is partly
#: filled, and below it the device is).
_SPLIT_WAVES = 1.0
Geometry = tuple[int, int, int, int, int, int]  # blocks, splits, chunk, lanes, vec, by_cols
# op -> (source, entry point prefix): the first pass's kernel, whose occupancy sizes the split
_KERNELS = {
    "sum": ("reduce.hip", "reduce_sum_"), "mean": ("reduce.hip", "reduce_sum_"),
    "max": ("reduce_max.hip", "reduce_max_"), "min": ("reduce_max.hip", "reduce_max_"),
    "argmax": ("reduce_arg.hip", "reduce_arg_"), "argmin": ("reduce_arg.hip", "reduce_arg_"),
}  # fmt: skip
_WIDE = frozenset(("sum", "mean", "max", "min"))  # 16-byte cols loads of 16-bit types too
_PLANS = 1024  # layouts whose plans (_reduce) are kept; the cache is emptied when full
_plans: dict[tuple[Any, ...], tuple[Any, ...]] = {}
_COUNTERS = 16384  # blocks of a split finished by its last block: one uint32 counter each
_resident: dict[tuple[int, int, str, int], int] = {}  # (platform, device, kernel, block) -> wave


def _sum_acc(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """The accumulator (and partial results') type of a sum of `dtype`."""
    if dtype.kind == "f" or dtype.name == "bfloat16":
        return np.dtype(np.float64) if dtype.itemsize == 8 else np.dtype(np.float32)
    return _INT64


def _is_float(dtype: np.dtype[Any]) -> bool:
    return dtype.kind == "f" or dtype.name == "bfloat16"


def reduce_geometry(
    m: Merged, itemsize: int, *, aligned: bool, wide: bool,
    wave: Callable[[int], int] | None, waves: float | None = None,
) -> tuple[Merged, Geometry]:  # fmt: skip
    """The view and (blocks, splits, chunk, lanes, vec, by_cols) of a reduction pass over `m`
    (elements of `itemsize` bytes; `aligned`: the input starts 16-byte aligned; `wide`: the
    kernel takes 16-byte cols loads of 16-bit types). Rows (I = 1) that take 16-byte loads get
    `lanes` threads each; others go to the cols layout, as I = 1 with one block per output, or
    with the outputs as i when rows are short. `wave(block)`: blocks of `block` threads the
    device runs at once (the kernel's occupancy times the multiprocessors; None: never split).
    When the blocks leave the device short of a wave, the reduced axis is split so that the
    blocks make `waves` waves (`_SPLIT_WAVES` by default: more would leave a partly filled last
    wave and more partials to merge) while each thread still walks a few rows or vectors."""
    n = max(min(16 // itemsize, 8), 1)
    if m.I == 1 and aligned and m.sr == 1 and m.so % n == 0 and m.R % n == 0:
        lanes = min(pow2(-(-m.R // n // _PER_THREAD)), _BLOCK)
        per_block = _BLOCK // lanes if lanes < 64 else 1
        blocks, width, vec, by_cols = -(-m.O // per_block), n, 1, 0
        most = -(-m.R // n) // (lanes * 4)  # splits that leave each thread 4 vectors
    else:
        if m.I == 1 and m.R <= _SHORT:
            m = Merged(1, m.R, m.O, 0, m.sr, m.so)
        n = min(n, 8 if wide and itemsize == 2 else 4)  # as reduce.h's NC
        vec = int(aligned and m.I % n == 0 and m.si == 1 and m.so % n == 0 and m.sr % n == 0)
        width = n if vec else 1
        lanes = min(pow2(-(-m.I // width)), _COLS_LANES)
        blocks, by_cols = m.O * -(-m.I // (lanes * width)), 1
        most = m.R // (_BLOCK // lanes * _ROWS_PER_THREAD)
    splits = 1
    if wave is not None and most > 1:
        resident = wave(lanes if not by_cols and lanes >= 64 else _BLOCK)
        splits = split_count(blocks, resident, most, _SPLIT_WAVES if waves is None else waves)
    chunk = -(-m.R // splits)
    if not by_cols:  # rows split at whole vectors
        chunk = -(-chunk // width) * width
    splits = max(-(-m.R // chunk), 1) if m.R else 1
    return m, (blocks, splits, chunk, lanes, vec, by_cols)


def split_count(blocks: int, wave: int, most: int, waves: float) -> int:
    """Blocks sharing each output so that `blocks` of them make about `waves` waves of `wave`
    resident blocks (at most `most`, at most the grid's 65535 rows); 1 when the blocks fill
    half a wave already."""
    if blocks * 2 > wave:
        return 1
    return max(min(int(wave * waves) // blocks, most, 65535), 1)


class ReductionOps(OpsBase):
    def sum(
        self, x: DeviceTensor, axis: Any = None, *, keepdim: bool = False,
        out: DeviceTensor | None = None,
    ) -> DeviceTensor:  # fmt: skip
        """Σ x over `axis`; float types keep their dtype, integers and bool give int64."""
        return self._reduce("sum", x, axis, keepdim, out)

    def mean(
        self, x: DeviceTensor, axis: Any = None, *, keepdim: bool = False,
        out: DeviceTensor | None = None,
    ) -> DeviceTensor:  # fmt: skip
        """The mean over `axis` (float types only; NaN where the reduced axes are empty)."""
        return self._reduce("mean", x, axis, keepdim, out)

    def max(
        self, x: DeviceTensor, axis: Any = None, *, keepdim: bool = False,
        out: DeviceTensor | None = None,
    ) -> DeviceTensor:  # fmt: skip
        """The largest element over `axis` (NaN if any is NaN); every dtype."""
        return self._reduce("max", x, axis, keepdim, out)

    def min(
        self, x: DeviceTensor, axis: Any = None, *, keepdim: bool = False,
        out: DeviceTensor | None = None,
    ) -> DeviceTensor:  # fmt: skip
        """The smallest element over `axis` (NaN if any is NaN); every dtype."""
        return self._reduce("min", x, axis, keepdim, out)

    def argmax(
        self, x: DeviceTensor, axis: Any = None, *, keepdim: bool = False,
        out: DeviceTensor | None = None,
    ) -> DeviceTensor:  # fmt: skip
        """int64 index of the first largest element along the merged `axis` (row-major over
        the reduced axes, as numpy's argmax of the flattened array for axis=None)."""
        return self._reduce("argmax", x, axis, keepdim, out)

    def argmin(
        self, x: DeviceTensor, axis: Any = None, *, keepdim: bool = False,
        out: DeviceTensor | None = None,
    ) -> DeviceTensor:  # fmt: skip
        """int64 index of the first smallest element (see argmax)."""
        return self._reduce("argmin", x, axis, keepdim, out)

    def l2_normalize(
        self, x: DeviceTensor, axis: int = -1, *, eps: float = 1e-12,
        out: DeviceTensor | None = None,
    ) -> DeviceTensor:  # fmt: skip
        """x / max(||x||_2, eps) along `axis` (as torch.nn.functional.normalize); f32, f16,
        bf16 (f32 accumulation), any layout, C-contiguous result. eps: a real number
        (TypeError otherwise); slices of any finite magnitude (the kernel rescales sums of
        squares that overflow or vanish in f32)."""
        eps = real_number(eps, "eps", "l2_normalize")
        x = self._operand(x, "x")
        float_type(x.dtype, "x")
        a = axis_argument(x, axis, "l2_normalize")
        y = self._output(out, x.shape, x.dtype, inputs=(x,))
        along_axis(self, x, y, a, L2, 1.0, eps)
        return y

    # --- the one path -------------------------------------------------------------------------

    def _reduce(
        self, op: str, x: Any, axis: Any, keepdim: bool, out: DeviceTensor | None
    ) -> DeviceTensor:
        x = self._operand(x, "x")
        # A layout seen before: its result's shape and dtype, view and geometry (plain int
        # axes only: 1.0 or True hash as 1 but are refused, or taken, by axes_argument).
        key: tuple[Any, ...] | None = None
        plan = None
        if (
            axis is None
            or type(axis) is int
            or (type(axis) is tuple and all(type(a) is int for a in axis))
        ):
            key = (op, x.shape, x.strides, x.dtype, axis, bool(keepdim), x.ptr % 16 == 0,
                   id(hip_api()), self.device.ordinal)  # fmt: skip
            plan = _plans.get(key)
        if plan is not None:
            shape, dtype, m, geometry = plan
            y = self._output(out, shape, dtype, distinct_from=(x,))
            self._run(op, x, y, m, geometry)
            return y
        axes = axes_argument(axis, x.ndim, op)
        if op == "mean" and not _is_float(x.dtype):
            raise ValueError(f"mean takes float tensors, not {x.dtype}")
        reduced = math.prod(x.shape[a] for a in axes)
        if reduced == 0 and op not in ("sum", "mean"):
            raise ValueError(f"{op} of an empty axis (shape {x.shape}, axis {axis!r})")
        if op == "sum":
            dtype = x.dtype if _is_float(x.dtype) else _INT64
        else:
            dtype = _INT64 if op.startswith("arg") else x.dtype
        shape = kept_shape(x.shape, axes, keepdim)
        y = self._output(out, shape, dtype, distinct_from=(x,))
        if y.size == 0:
            return y
        merged = along(x.shape, x.strides, axes)
        if merged is None:  # reduced axes apart: one strided copy with them moved last
            x = x.permute(*moved_last(x.ndim, axes)).contiguous()
            merged, key = Merged(y.size, reduced, 1, reduced, 1, 0), None
        geometry = self._geometry(self._reduce_kernel(op, x), x, merged, wide=op in _WIDE)
        if key is not None:
            if len(_plans) >= _PLANS:
                _plans.clear()
            _plans[key] = (shape, dtype, *geometry)
        self._run(op, x, y, *geometry)
        return y

    def _reduce_kernel(self, op: str, x: DeviceTensor) -> Any:
        """The first pass's kernel of `op` over x's dtype."""
        source, name = _KERNELS[op]
        return self._kernel(source, name + suffix(x.dtype))

    def _run(
        self, op: str, x: DeviceTensor, y: DeviceTensor, m: Merged, geometry: Geometry
    ) -> None:
        """Queue the launch(es) of `op` over x's [O, R, I] view `m` into y (`_geometry`'s)."""
        t = suffix(x.dtype)
        kernel = self._reduce_kernel(op, x)
        splits = geometry[1]
        if op in ("sum", "mean"):
            mean = int(op == "mean")
            if splits == 1:
                self._launch(kernel, x, m, geometry, (y, None, None), (m.R, mean))
                return
            acc = _sum_acc(x.dtype)
            part = self._output(None, (m.O, splits, m.I), acc)
            counters = self._reduce_counters(geometry[0], x.dtype)
            if counters is not None:  # one launch: the last block of each split finishes it
                self._launch(kernel, x, m, geometry, (y, part, counters), (m.R, mean))
                return
            self._launch(kernel, x, m, geometry, (None, part, None), (m.R, 0))
            ptrs: tuple[Any, ...]
            if acc in (x.dtype, _INT64):
                second = self._kernel("reduce.hip", f"reduce_sum_{suffix(acc)}")
                ptrs = (y, None, None)
            else:  # 16-bit floats: f32 partials in, the 16-bit type out
                second, ptrs = self._kernel("reduce.hip", f"reduce_sum2_{t}"), (y,)
            self._second(second, part, m, ptrs, (m.R, mean))
            return
        if op in ("max", "min"):  # values only: reduce_max.hip
            smallest = (int(op == "min"),)
            if splits == 1:
                self._launch(kernel, x, m, geometry, (y, None, None), smallest)
                return
            part = self._output(None, (m.O, splits, m.I), x.dtype)
            counters = self._reduce_counters(geometry[0], x.dtype)
            self._launch(kernel, x, m, geometry, (y, part, counters), smallest)
            if counters is None:  # the first pass wrote the partials: merge them
                self._second(kernel, part, m, (y, None, None), smallest)
            return
        # argmax, argmin: values and indices through the partials, the indices at the end.
        lowest = int(op == "argmin")
        if splits == 1:
            self._launch(kernel, x, m, geometry, (None, y), (lowest, 0), source=True)
            return
        part = self._output(None, (m.O, splits, m.I), x.dtype)
        index = self._output(None, (m.O, splits, m.I), _INT64)
        self._launch(kernel, x, m, geometry, (part, index), (lowest, 1), source=True)
        self._second(kernel, part, m, (None, y), (lowest, 0), source=index)

    def _geometry(
        self, kernel: Any, x: DeviceTensor, m: Merged, *, scalar: bool = False,
        wide: bool = False,
    ) -> tuple[Merged, Geometry]:  # fmt: skip
        """`reduce_geometry` of a pass of `kernel` over x's view `m` on this device (no split
        when `kernel` is None: a second pass)."""
        wave = None if kernel is None else lambda block: self._reduce_wave(kernel, block)
        aligned = x.ptr % 16 == 0 and not scalar
        return reduce_geometry(m, x.dtype.itemsize, aligned=aligned, wide=wide, wave=wave)

    def _reduce_counters(self, blocks: int, dtype: np.dtype[Any]) -> DeviceTensor | None:
        """The counters of a split finished by its last block (reduce.h's reduce_split): zeroed
        once, set back to zero by each launch, kept as long as the backend (a captured graph
        replays with them, so it must not run on another stream while this backend's stream
        runs a reduction). None where they cannot be used: integer and bool inputs (the
        kernels leave that code out for them), more blocks than counters, or no counters yet
        while a capture is in progress (their zeroing would be captured)."""
        if not _is_float(dtype) or blocks > _COUNTERS:
            return None
        counters: DeviceTensor | None = getattr(self, "_reduce_counter_buffer", None)
        if counters is None:
            if capture_in_progress():
                return None
            counters = self.zeros((_COUNTERS,), np.uint32)  # type: ignore[attr-defined]
            self._reduce_counter_buffer = counters
        return counters

    def _reduce_wave(self, kernel: Any, block: int) -> int:
        """Blocks of `block` threads of `kernel` that the device runs at once (cached)."""
        key = (id(hip_api()), self.device.ordinal, kernel.name, block)
        wave = _resident.get(key)
        if wave is None:
            per = max(kernel.max_active_blocks(block), 1)
            wave = _resident[key] = per * self.device.properties.multiprocessors
        return wave

    def _launch(
        self,
        kernel: Any,
        x: DeviceTensor,
        m: Merged,
        geometry: Geometry,
        ptrs: tuple[Any, ...],
        extra: tuple[Any, ...],
        *,
        source: DeviceTensor | bool | None = None,
    ) -> None:
        """One launch over x's [O, R, I] view; `source`: the arg kernels' partial indices
        (True: none, the index is r)."""
        blocks, splits, chunk, lanes, vec, by_cols = geometry
        block = lanes if not by_cols and lanes >= 64 else _BLOCK
        head = (x,) if source is None else (x, None if source is True else source)
        kernel.launch(
            (blocks, splits), block, *head, *ptrs, m.O, m.R, m.I, m.so, m.sr, m.si, splits,
            chunk, by_cols, lanes, vec, *extra, stream=self.stream,
        )  # fmt: skip

    def _second(
        self, kernel: Any, part: DeviceTensor, m: Merged, ptrs: tuple[Any, ...],
        extra: tuple[Any, ...], *, source: DeviceTensor | bool | None = None,
    ) -> None:  # fmt: skip
        """Merge the partials [O, S, I] over S into the result (`ptrs` after the input). The
        arg kernels' partial indices (`source`) are read with the values, one at a time."""
        splits = part.shape[1]
        merged = Merged(m.O, splits, m.I, splits * m.I, m.I, 1)
        arg = isinstance(source, DeviceTensor)
        merged, geometry = self._geometry(None, part, merged, scalar=arg, wide=not arg)
        self._launch(kernel, part, merged, (*geometry[:1], 1, splits, *geometry[3:]), ptrs,
                     extra, source=source)  # fmt: skip


__all__ = ["ReductionOps", "reduce_geometry", "split_count"]
