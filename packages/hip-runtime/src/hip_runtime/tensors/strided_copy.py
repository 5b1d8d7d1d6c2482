"""Device copies between strided tensors: one kernel (`kernels/copy.hip`) or one memcpy.

`copy_into(dst, src)` is what `DeviceTensor.copy_`, `contiguous()` (the TensorCopies methods
here) and the strided branches of `to_numpy()` and `copy_from_host()` run. The layouts are
reduced first, on the host:

- both sides are seen in bytes, with the element as a last axis of `itemsize` bytes, so one
  kernel per unit size (1, 2, 4 or 8 bytes) serves every dtype, whatever its item size;
- axes both sides step over as one are merged and size-1 axes dropped (`strides.collapse`),
  so a contiguous pair becomes one hipMemcpyAsync and a slice of rows a rank-2 copy;
- the unit is the widest of 8, 4, 2, 1 bytes that divides the innermost contiguous run, every
  other stride and both addresses, so a copy of bytes moves 8 at a time where it can;
- a transpose (src steps by one unit along one axis, dst along another) goes through the
  tiled kernel: with 16-byte accesses on both sides where the sizes, strides and addresses
  allow (2- and 4-byte units: blocks of V 16-byte vectors transposed in registers; others 64 x 64
  tiles through shared memory; TILE_MODES), else 32 x 32 shared tiles by element; anything
  else through the elementwise kernel.

Stream semantics: everything is queued on the stream given (the destination's, for the
DeviceTensor methods); nothing waits. The source must be ready in that stream's order.
"""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING, Any

from hip_core import Device, DevicePointer, Stream, hip_api
from hip_runtime.libraries.kernel_cache import KernelCache
from hip_runtime.libraries.kernel_structs import COPY_ARGS, COPY_RANK, StructValues
from hip_runtime.tensors import strides as layout
from hip_runtime.tensors.stream_order import order_after

if TYPE_CHECKING:
    from hip_runtime.tensors.tensor import DeviceTensor

MAX_RANK = COPY_RANK  # axes the kernel takes after merging; the host splits beyond
_UNITS = (8, 4, 2, 1)  # bytes per element of the kernels: copy_u64 … copy_u8
_BLOCK = 256
_TILE = 32  # the tiled path's tile edge (kernels/copy.hip)
_TILE_RANK = 4  # most axes the tiled kernel takes
_TILE_MIN = 4  # shortest tile axis worth a tile (small enough that tests of small shapes use it)
_BLOCKS_PER_MULTIPROCESSOR = 64  # as the op kernels' grid cap (ops.base.grid_cap)
#: unit (bytes) -> copy.hip's path for 16-byte transposes (vec 1: 64 x 64 tiles through shared
#: memory element by element; 2, 2-byte units only (others take 1): 64 x 128 tiles of element
#: pairs packed into words, a 4-byte transpose; 3 and 4: V x V blocks transposed in registers,
#: with 4 or 8 threads of a warp along the read axis; 0, the element tiles, is allowed too).
#: Units not named take 1. bench/bench_opset.py --sweep times them all; on the H200 (8192², %
#: of the copy rate, best grid) f32: 1 73, 3 61, 0 61, 4 43; bf16 (before mode 2): 0 32, 1 28,
#: 3 19, 4 17.
TILE_MODES = {2: 2, 4: 1}
_caches: dict[tuple[int, int], tuple[KernelCache, int]] = {}
#: copy_<u>'s CopyArgs: (n, rank, *sizes, *src strides, *dst strides), each padded to MAX_RANK.
_COPY_ARGS = StructValues(COPY_ARGS)


class TensorCopies:
    """Mixed into DeviceTensor: the copies between layouts on the device. (A separate class to
    keep one concern per file; it holds no state.)"""

    __slots__ = ()

    if TYPE_CHECKING:
        shape: layout.Shape
        dtype: Any
        stream: Stream

        @property
        def device(self) -> Device: ...

        @property
        def is_contiguous(self) -> bool: ...

        def _temporary(self) -> DeviceTensor: ...

    def copy_(self, source: DeviceTensor) -> DeviceTensor:
        """self[...] = source, device to device on `self.stream`; returns self.

        Any strides on either side; `source` has this tensor's dtype and a shape that
        broadcasts to this one's (numpy's rules). A source ordered on another stream is
        waited for on the device first (hip_runtime.tensors.stream_order). Where the two share
        memory, source is copied to a temporary first, so the result is always what numpy's
        `dst[...] = src` gives. Writing into a broadcast view (elements that share memory) is
        a ValueError. One memcpy when both are contiguous, else one
        launch of the strided-copy kernel."""
        me = self._self()
        if not isinstance(source, TensorCopies):
            raise TypeError(f"expected a DeviceTensor, not {type(source).__name__}")
        if source.dtype != self.dtype:
            raise ValueError(f"cannot copy {source.dtype} into {self.dtype}; cast it first")
        if source.device != self.device:
            raise ValueError(f"cannot copy from device {source.device.ordinal} into "
                             f"{self.device.ordinal}")  # fmt: skip
        check_writable(me)
        if source.stream is not self.stream:
            order_after(self.stream, source, "source")
        copy_into(me, source, stream=self.stream)
        return me

    def copy_from(self, source: DeviceTensor) -> None:
        """`copy_(source)`, returning nothing (the earlier name)."""
        self.copy_(source)

    def contiguous(self) -> DeviceTensor:
        """This tensor if it is C-contiguous, else a C-contiguous copy of its elements (from
        its pool, on its stream; one strided-copy kernel, asynchronous)."""
        me = self._self()
        if self.is_contiguous:
            return me
        out = self._temporary()
        copy_into(out, me, stream=self.stream)
        return out

    def _self(self) -> DeviceTensor:
        return self  # type: ignore[return-value]  # only DeviceTensor mixes this class in


def copy_into(
    dst: DeviceTensor, src: DeviceTensor, *, stream: Stream, kernels: KernelCache | None = None
) -> None:
    """dst[...] = src, elementwise; `src` has dst's item size and a shape that broadcasts to
    dst's (checked by the caller). dst must not overlap itself (no zero stride on an axis of
    more than one element); where src and dst share memory, src is copied to a temporary first
    (from src's pool when it has one). `kernels`: the cache to take copy.hip's kernels from
    (the device's shared one by default; a self-test passes the one it records)."""
    if dst.size == 0:
        return
    src_strides = layout.broadcast_to(src.shape, src.strides, dst.shape)
    if _overlaps(dst, src):
        if src.ptr == dst.ptr and src_strides == dst.strides:
            return  # the same elements: nothing to move
        src = _staged(src, stream, kernels)
        src_strides = layout.broadcast_to(src.shape, src.strides, dst.shape)
    item = dst.dtype.itemsize
    shape, (dst_bytes, src_bytes) = layout.collapse(
        (*dst.shape, item),
        (*(s * item for s in dst.strides), 1),
        (*(s * item for s in src_strides), 1),
    )
    if len(shape) == 1 and dst_bytes == src_bytes == (1,):
        dst.buffer.view(dst.offset, shape[0]).copy_from(
            src.buffer.view(src.offset, shape[0]), stream=stream
        )
        return
    unit = _unit(shape, dst_bytes, src_bytes, dst.ptr, src.ptr)
    if unit > 1:  # the innermost run shrinks (to 1 where it was one element: merged away)
        shape, (dst_bytes, src_bytes) = layout.collapse(
            (*shape[:-1], shape[-1] // unit),
            (*(s // unit for s in dst_bytes[:-1]), 1),
            (*(s // unit for s in src_bytes[:-1]), 1),
        )
    _launch(dst, src, unit, shape, dst_bytes, src_bytes, stream, kernels)


def check_writable(dst: DeviceTensor) -> None:
    """ValueError if two of dst's elements share memory (a broadcast view: stride 0)."""
    for d, s in zip(dst.shape, dst.strides, strict=True):
        if s == 0 and d > 1:
            raise ValueError(
                f"cannot write into a tensor whose elements overlap (shape {dst.shape}, "
                f"strides {dst.strides}: a broadcast view); write into .contiguous() instead"
            )


def _overlaps(a: DeviceTensor, b: DeviceTensor) -> bool:
    """Whether the byte ranges the two layouts span intersect (conservative: interleaved views
    that share no element count as overlapping, and are copied through a temporary)."""
    if a.buffer.device != b.buffer.device or b.size == 0:
        return False
    a_low, a_high = a.span()
    b_low, b_high = b.span()
    return a_low < b_high and b_low < a_high


def _staged(src: DeviceTensor, stream: Stream, kernels: KernelCache | None) -> DeviceTensor:
    """A contiguous copy of src in fresh memory (src's pool, else hipMalloc), on `stream`."""
    from hip_runtime.tensors.tensor import DeviceTensor

    staged = DeviceTensor.empty(
        src.shape, src.dtype, device=src.device, stream=stream, pool=src.pool
    )
    copy_into(staged, src, stream=stream, kernels=kernels)
    stream.keep_until_sync(staged)  # memory from hipMalloc must outlive the kernel that reads it
    return staged


def _unit(
    shape: layout.Shape, dst: layout.Strides, src: layout.Strides, dst_ptr: int, src_ptr: int
) -> int:
    """The widest unit (bytes) the innermost run (byte stride 1 on both sides after merging,
    since the element bytes are that axis), the other strides and both addresses divide."""
    if dst[-1] != 1 or src[-1] != 1:
        return 1  # 1-byte elements whose innermost axis is strided: the element axis is gone
    for unit in _UNITS:
        if shape[-1] % unit or dst_ptr % unit or src_ptr % unit:
            continue
        if all(s % unit == 0 for s in dst[:-1]) and all(s % unit == 0 for s in src[:-1]):
            return unit
    return 1


def _launch(
    dst: DeviceTensor,
    src: DeviceTensor,
    unit: int,
    shape: layout.Shape,
    dst_strides: layout.Strides,
    src_strides: layout.Strides,
    stream: Stream,
    kernels: KernelCache | None,
) -> None:
    """Queue one kernel over a merged layout: the tiled one for a transpose of up to
    _TILE_RANK axes, else the elementwise one, splitting the leading axes beyond MAX_RANK into
    one launch per index (a layout that resists merging into 8 axes is rare)."""
    shared, grid_cap = _kernels(dst.device)
    cache = kernels or shared
    a, b = _tile_axes(shape, dst_strides, src_strides)
    if a >= 0 and len(shape) <= _TILE_RANK:
        kernel = cache.get("copy.hip", f"copy_tiles_u{unit * 8}")
        others = [k for k in range(len(shape)) if k not in (a, b)]
        batch: list[int | None] = [None] * (2 - len(others)) + others  # None: absent, size 1
        sizes = [1 if k is None else shape[k] for k in batch]
        src_batch = [0 if k is None else src_strides[k] for k in batch]
        dst_batch = [0 if k is None else dst_strides[k] for k in batch]
        # 16-byte accesses on both sides where every vector start is 16-byte aligned
        per = 16 // unit
        vec = (shape[a] % per == 0 and shape[b] % per == 0 and src.ptr % 16 == 0
               and dst.ptr % 16 == 0 and src_strides[b] % per == 0 and dst_strides[a] % per == 0
               and all(s % per == 0 for s in (*src_batch, *dst_batch)))  # fmt: skip
        mode = tile_mode(unit) if vec else 0
        edge_a, edge_b = tile_edges(mode, unit)
        tiles = sizes[0] * sizes[1] * -(-shape[a] // edge_a) * -(-shape[b] // edge_b)
        kernel.launch(min(tiles, grid_cap), _BLOCK, src, dst, shape[a], shape[b], 1,
                      src_strides[b], dst_strides[a], 1, *sizes, *src_batch, *dst_batch,
                      mode, stream=stream)  # fmt: skip
        return
    kernel = cache.get("copy.hip", f"copy_u{unit * 8}")
    lead = max(len(shape) - MAX_RANK, 0)
    inner = shape[lead:]
    n = math.prod(inner)
    grid = min(-(-n // _BLOCK), grid_cap)
    pad = (0,) * (MAX_RANK - len(inner))
    args = _COPY_ARGS(n, len(inner), *inner, *pad, *src_strides[lead:], *pad,
                      *dst_strides[lead:], *pad)  # fmt: skip
    if not lead:
        kernel.launch(grid, _BLOCK, src, dst, args, stream=stream)
        return
    for coords in itertools.product(*(range(d) for d in shape[:lead])):
        d_at = dst.ptr + sum(c * s for c, s in zip(coords, dst_strides, strict=False)) * unit
        s_at = src.ptr + sum(c * s for c, s in zip(coords, src_strides, strict=False)) * unit
        kernel.launch(grid, _BLOCK, DevicePointer(s_at), DevicePointer(d_at), args, stream=stream)


def tile_mode(unit: int) -> int:
    """copy.hip's tile path for 16-byte transposes of `unit`-byte elements (TILE_MODES)."""
    mode = TILE_MODES.get(unit, 1)
    return 1 if mode == 2 and unit != 2 else mode  # the pair path is for 2-byte units


def tile_edges(mode: int, unit: int) -> tuple[int, int]:
    """The (a, b) edges in units of a tile of copy.hip's copy_tiles_u<unit> path `mode`."""
    if mode == 0:
        return _TILE, _TILE
    if mode == 2:  # copy.hip's copy_tiles_pairs
        return 64, 128
    if mode == 1:  # copy.hip's CopyEdge
        return (32, 32) if unit == 8 else (64, 64)
    per = 16 // unit  # a thread's V x V block; 4 (mode 3) or 8 (mode 4) threads along a
    along = 4 if mode == 3 else 8
    return along * per, _BLOCK // along * per


def _tile_axes(shape: layout.Shape, dst: layout.Strides, src: layout.Strides) -> tuple[int, int]:
    """(a, b) for the tiled kernel: src steps by one unit along axis a and dst along another
    axis b, both at least _TILE_MIN long (a transpose: the elementwise kernel would read or
    write one unit per row of a warp); (-1, -1) when the layout is no transpose."""
    a = next((k for k, s in enumerate(src) if s == 1 and shape[k] >= _TILE_MIN), -1)
    b = next((k for k, s in enumerate(dst) if s == 1 and shape[k] >= _TILE_MIN), -1)
    if a < 0 or b < 0 or a == b or src[-1] == 1 == dst[-1]:
        return -1, -1
    return a, b


def _kernels(device: Device) -> tuple[KernelCache, int]:
    """The device's kernel cache (per platform: tests switch it) and grid cap."""
    key = (id(hip_api()), device.ordinal)
    found = _caches.get(key)
    if found is None:
        cap = max(1, device.properties.multiprocessors * _BLOCKS_PER_MULTIPROCESSOR)
        found = _caches[key] = (KernelCache(device), cap)
    return found


__all__ = ["MAX_RANK", "TensorCopies", "check_writable", "copy_into"]
