"""DeviceTensor: a shape, strides and a dtype over device memory (a buffer and an offset).

Stream semantics: every tensor carries the stream that orders work on it (`tensor.stream`; the
device's null stream unless one was given; tensors made by a HipBackend carry the backend's
stream). Copies in and out are queued on that stream. Only methods that return host data
(`to_numpy`) wait, and they wait for exactly that stream — never the whole device.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from hip_core import Device, DeviceBuffer, MemoryPool, Stream
from hip_runtime.tensors.dtypes import DTypeLike, as_dtype, float32
from hip_runtime.tensors.operators import TensorOperators
from hip_runtime.tensors.strided_copy import TensorCopies, check_writable, copy_into
from hip_runtime.tensors.strides import Strides, as_index, c_strides, extent, is_c_contiguous
from hip_runtime.tensors.views import TensorViews

if TYPE_CHECKING:
    from hip_runtime.tensors.dlpack import DLPackCapsule

Shape = tuple[int, ...]
STAGED_UPLOAD_BYTES = 32 << 20  # from here on host uploads go through pinned staging
ShapeLike = int | Sequence[int]


def as_shape(shape: ShapeLike) -> Shape:
    """`shape` as a tuple of non-negative ints; ValueError otherwise."""
    dims = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 0:
            raise ValueError(f"shape must hold non-negative ints, not {shape!r}")
    return tuple(int(d) for d in dims)


def _allocate(nbytes: int, device: Device, stream: Stream, pool: MemoryPool | None) -> DeviceBuffer:
    size = max(nbytes, 1)  # an empty tensor still gets a valid address
    if pool is not None:
        if pool.device != device:
            raise ValueError(f"the pool is on device {pool.device.ordinal}, not {device.ordinal}")
        return pool.allocate(size, stream=stream)
    return device.allocate(size)


class DeviceTensor(TensorViews, TensorCopies, TensorOperators):
    """An array in device memory: a shape, strides and a dtype over a buffer.

    Attributes:
        buffer: the DeviceBuffer holding the storage; views share it (`view.buffer is
            parent.buffer`), keep it alive and never free it.
        offset: where the first element (index 0 on every axis) is, in bytes from
            `buffer.ptr` (`storage_offset` is the same in elements).
        shape, dtype: as in numpy; bfloat16 is `ml_dtypes.bfloat16`. Any fixed-size numpy
            dtype may live here (f32, f64, f16, bf16, i8, i16, i32, i64, u8, u32, bool…).
        strides: per axis, in elements (not bytes, unlike numpy): negative for reversed
            views, 0 for broadcast ones. Tensors made by factories and ops are C-contiguous.
        stream: the stream that orders work on this tensor.
        pool: the MemoryPool the storage came from (None for hipMalloc'd or wrapped memory);
            copies made from this tensor (`contiguous()`) allocate from it too.

    Views (`t[1:, ::-2]`, `permute`, `transpose`, `T`, `mT`, `narrow`, `expand`,
    `broadcast_to`, `squeeze`, `unsqueeze`, `reshape`, `view(dtype)`: see
    hip_runtime.tensors.views) share the storage and never copy; `copy_` and `contiguous()` copy
    between layouts on the device (hip_runtime.tensors.strided_copy). The pointwise ops take any
    layout; ops that need C-contiguous tensors (`is_contiguous`) refuse others with a
    ValueError that points at `contiguous()`. Python operators (`a + b`, `a @ b`, `a < 0`…)
    run the ops of the HipBackend that made the tensor, on its stream
    (hip_runtime.tensors.operators); tensors hash by identity.

    A tensor is accepted wherever hip-core expects a device pointer (`ptr` is the address of
    the first element), so it can be passed straight to `Kernel.launch`.
    """

    __slots__ = (
        "__weakref__", "_layout", "_strides", "buffer", "dtype", "offset", "pool", "ptr", "shape",
        "stream",
    )  # fmt: skip

    _strides: Strides | None  # None: C-contiguous (the common case costs no stride arithmetic)
    #: Device address of the first element (index 0 on every axis): `buffer.ptr + offset`,
    #: kept (both are fixed at construction) since every launch reads it.
    ptr: int
    #: What launch plans know this tensor's layout by (hip_runtime.ops.plans.layout_id): 0
    #: until first asked.
    _layout: int

    def __init__(
        self,
        buffer: DeviceBuffer,
        shape: ShapeLike,
        dtype: DTypeLike = float32,
        *,
        offset: int = 0,
        strides: Sequence[int] | None = None,
        stream: Stream | None = None,
    ) -> None:
        self.shape = as_shape(shape)
        self.dtype = as_dtype(dtype)
        self._strides = None if strides is None else _as_strides(strides, self.shape)
        if self._strides is not None and is_c_contiguous(self.shape, self._strides):
            self._strides = None
        first, end = self._byte_extent(offset)
        if first < 0 or end > buffer.size:
            raise ValueError(
                f"a {self.shape} {self.dtype} layout with strides {self.strides} at byte offset "
                f"{offset} reaches bytes [{first}, {end}) of a buffer of {buffer.size}"
            )
        if stream is not None and stream.device != buffer.device:
            raise ValueError("the stream and the buffer are on different devices")
        self.buffer = buffer
        self.offset = offset
        self.ptr = buffer.ptr + offset
        self.stream = stream if stream is not None else buffer.device.default_stream
        self.pool: MemoryPool | None = None
        self._layout = 0

    @classmethod
    def _make(
        cls,
        buffer: DeviceBuffer,
        shape: Shape,
        dtype: np.dtype[Any],
        offset: int,
        strides: Strides | None,
        stream: Stream,
        pool: MemoryPool | None,
    ) -> DeviceTensor:
        """A tensor over a layout already known to be valid (views, fresh allocations): no
        checks, so ops and views stay cheap. `strides` must be None when contiguous."""
        tensor = object.__new__(cls)
        tensor.buffer, tensor.shape, tensor.dtype, tensor.offset = buffer, shape, dtype, offset
        tensor._strides, tensor.stream, tensor.pool = strides, stream, pool
        tensor.ptr = buffer.ptr + offset
        tensor._layout = 0
        return tensor

    def _derive(
        self,
        shape: Shape,
        strides: Strides | None,
        offset: int = 0,
        *,
        dtype: np.dtype[Any] | None = None,
    ) -> DeviceTensor:
        """A view: `shape` and `strides` (elements) from `offset` elements past this tensor's
        first element, of `dtype` (this tensor's by default)."""
        if strides is not None and is_c_contiguous(shape, strides):
            strides = None
        return DeviceTensor._make(
            self.buffer, shape, self.dtype if dtype is None else dtype,
            self.offset + offset * self.dtype.itemsize, strides, self.stream, self.pool,
        )  # fmt: skip

    # --- factories ---------------------------------------------------------------------------

    @classmethod
    def empty(
        cls,
        shape: ShapeLike,
        dtype: DTypeLike = float32,
        *,
        device: Device | None = None,
        stream: Stream | None = None,
        pool: MemoryPool | None = None,
    ) -> DeviceTensor:
        """Uninitialized C-contiguous memory. With `pool`, allocated in order on `stream` (and
        returned to the pool in stream order when the tensor and its views are gone); else
        hipMalloc."""
        device = _device_of(device, stream)
        stream = stream if stream is not None else device.default_stream
        return cls._allocated(as_shape(shape), as_dtype(dtype), device, stream, pool)

    @classmethod
    def _allocated(
        cls,
        shape: Shape,
        dtype: np.dtype[Any],
        device: Device,
        stream: Stream,
        pool: MemoryPool | None,
    ) -> DeviceTensor:
        """`empty` of a checked shape and dtype (the ops' outputs: no checks twice)."""
        buffer = _allocate(math.prod(shape) * dtype.itemsize, device, stream, pool)
        return cls._make(buffer, shape, dtype, 0, None, stream, pool)

    @classmethod
    def zeros(
        cls,
        shape: ShapeLike,
        dtype: DTypeLike = float32,
        *,
        device: Device | None = None,
        stream: Stream | None = None,
        pool: MemoryPool | None = None,
    ) -> DeviceTensor:
        """All-zero bits (0.0 in every float type), set asynchronously on `stream`."""
        tensor = cls.empty(shape, dtype, device=device, stream=stream, pool=pool)
        tensor.region().fill(0, stream=tensor.stream)
        return tensor

    @classmethod
    def from_numpy(
        cls,
        array: Any,
        *,
        device: Device | None = None,
        stream: Stream | None = None,
        pool: MemoryPool | None = None,
    ) -> DeviceTensor:
        """A device copy of `array` (anything np.asarray takes), queued on `stream`.

        Host memory is pageable, so the call returns only once the host side has been read;
        the device side is ordered on `stream`. Arrays from 32 MiB on are copied by several
        threads through pinned staging chunks (`hip_runtime.transfers.staging`), at memory speed
        rather than HIP's pageable rate; smaller ones by one hipMemcpyAsync.
        """
        host = np.asarray(array, order="C")  # (ascontiguousarray makes 0-d 1-d)
        tensor = cls.empty(host.shape, host.dtype, device=device, stream=stream, pool=pool)
        tensor.copy_from_host(host)
        return tensor

    @classmethod
    def from_mmap(
        cls,
        path: str | os.PathLike[str],
        offset: int,
        shape: ShapeLike,
        dtype: DTypeLike,
        *,
        device: Device | None = None,
        stream: Stream | None = None,
        pool: MemoryPool | None = None,
    ) -> DeviceTensor:
        """The bytes of file `path` from byte `offset`, read as a C-ordered `shape` of `dtype`.

        The file is memory-mapped (not read into a Python object) and copied to the device on
        `stream`; ValueError if the region runs past the end of the file.
        """
        shape, dtype = as_shape(shape), as_dtype(dtype)
        nbytes = math.prod(shape) * dtype.itemsize
        size = os.path.getsize(path)
        if offset < 0 or offset + nbytes > size:
            raise ValueError(f"{path}: {nbytes} bytes at offset {offset} run past its {size} bytes")
        tensor = cls.empty(shape, dtype, device=device, stream=stream, pool=pool)
        if nbytes:
            host = np.memmap(path, dtype=np.uint8, mode="r", offset=offset, shape=(nbytes,))
            tensor._upload(host)
        return tensor

    @classmethod
    def from_dlpack(cls, obj: Any, *, stream: Stream | None = None) -> DeviceTensor:
        """A zero-copy tensor over the memory of a DLPack producer (torch, CuPy, numpy on the
        cpu platform…), kept alive until this tensor and its views are gone. The producer's
        pending work is ordered before later work on `stream` (the null stream by default)."""
        from hip_runtime.tensors.dlpack import import_dlpack

        return import_dlpack(obj, stream=stream)

    # --- properties --------------------------------------------------------------------------

    @property
    def device(self) -> Device:
        return self.buffer.device

    @property
    def closed(self) -> bool:
        return self.buffer.closed

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes of the elements (a view with steps spans more memory; see `span`)."""
        return self.size * self.dtype.itemsize

    @property
    def strides(self) -> Strides:
        """Per axis, the elements between neighbours along it (numpy's are in bytes)."""
        return c_strides(self.shape) if self._strides is None else self._strides

    @property
    def storage_offset(self) -> int:
        """`offset` in elements (exact when the byte offset is a multiple of the item size,
        as it is for every tensor this package makes)."""
        return self.offset // self.dtype.itemsize

    @property
    def is_contiguous(self) -> bool:
        """Whether the elements lie row-major without gaps from `ptr` (numpy's C-contiguity:
        size-1 axes may have any stride). What ops and `region()` need."""
        return self._strides is None

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def _byte_extent(self, offset: int) -> tuple[int, int]:
        """[first, end) bytes from buffer.ptr that the elements occupy, for a first element at
        byte `offset`; (offset, offset) when there is none."""
        if self._strides is None:
            return offset, offset + self.nbytes
        low, high = extent(self.shape, self._strides)
        if high < low:
            return offset, offset
        item = self.dtype.itemsize
        return offset + low * item, offset + (high + 1) * item

    def span(self) -> tuple[int, int]:
        """Device addresses [first, end) between which every element lies (ptr and ptr +
        nbytes when contiguous; wider for steps, narrower for a broadcast view)."""
        first, end = self._byte_extent(self.offset)
        return self.buffer.ptr + first, self.buffer.ptr + end

    def region(self) -> DeviceBuffer:
        """This tensor's bytes as a DeviceBuffer view (keeps the storage alive). Contiguous
        tensors only: a strided one's elements are not one run of bytes (ValueError)."""
        if self._strides is not None:
            raise ValueError(
                f"a strided tensor (strides {self._strides}) is not one region of memory; "
                "call .contiguous() first"
            )
        return self.buffer.view(self.offset, self.nbytes)

    # --- copies ------------------------------------------------------------------------------

    def copy_from_host(self, array: Any) -> None:
        """Copy a host array of the same shape and dtype in, queued on `self.stream` (returns
        once the host array has been read; staged as in `from_numpy`). Into a strided tensor
        the array goes to a contiguous temporary first, then through the copy kernel."""
        host = np.asarray(array, order="C")  # (ascontiguousarray makes 0-d 1-d)
        if host.shape != self.shape or host.dtype != self.dtype:
            raise ValueError(f"host array {host.shape} {host.dtype} does not fit {self}")
        if self._strides is None:
            self._upload(host.reshape(-1).view(np.uint8))
            return
        check_writable(self)
        staged = self._temporary()
        staged._upload(host.reshape(-1).view(np.uint8))
        copy_into(self, staged, stream=self.stream)

    def _upload(self, raw: np.ndarray[Any, Any]) -> None:
        if self.nbytes >= STAGED_UPLOAD_BYTES:
            # HIP copies pageable memory synchronously at a fraction of the bus; several threads
            # through pinned chunks run at memory speed, and the copy stays stream-ordered.
            from hip_runtime.transfers.staging import StagedCopier, split_host_copy

            copier = StagedCopier.default(self.device)
            self.stream.keep_until_sync(self)  # copies in flight must not outlive the memory
            chunks = split_host_copy(raw, self.ptr, copier.chunk_bytes)
            copier.run(chunks, ordered_with=self.stream)
        elif self.nbytes:
            self.region().copy_from(raw, stream=self.stream)

    def _temporary(self) -> DeviceTensor:
        """A fresh C-contiguous tensor like this one, on its stream and from its pool."""
        return DeviceTensor.empty(
            self.shape, self.dtype, device=self.device, stream=self.stream, pool=self.pool
        )

    def copy_from_device_region(self, source: DeviceBuffer | DeviceTensor, offset: int = 0) -> None:
        """Fill this (contiguous) tensor with `self.nbytes` bytes of `source` starting at byte
        `offset` (e.g. a tensor inside a checkpoint blob already on the device), on
        `self.stream`."""
        buffer = source.region() if isinstance(source, DeviceTensor) else source
        if not isinstance(buffer, DeviceBuffer):
            raise TypeError(f"expected a DeviceBuffer or DeviceTensor, not {type(source)}")
        if buffer.device != self.device:
            raise ValueError("the source region is on another device")
        if offset < 0 or offset + self.nbytes > buffer.size:
            raise ValueError(
                f"{self.nbytes} bytes at offset {offset} run past the source's {buffer.size}"
            )
        if self.nbytes:
            self.region().copy_from(buffer.view(offset, self.nbytes), stream=self.stream)

    def to_numpy(self) -> np.ndarray[Any, Any]:
        """A C-contiguous host copy. Queues the copy on `self.stream` and waits for that
        stream only.

        A strided tensor moves the fewer bytes across the bus of two ways: a broadcast view,
        whose memory is smaller than its elements, copies that memory and lets numpy repeat
        it on the host; any other (steps, permutations) is gathered on the device into a
        contiguous temporary first (the device reorders at hundreds of GB/s, the host at a
        few) and crosses the bus as exactly `nbytes`.
        """
        host = np.empty(self.shape, self.dtype)
        if not self.nbytes:
            return host
        first, end = self.span()
        if self._strides is not None and end - first < self.nbytes:
            raw = np.empty(end - first, np.uint8)
            self.buffer.view(first - self.buffer.ptr, end - first).copy_to(raw, stream=self.stream)
            self.stream.sync()
            item = self.dtype.itemsize
            host[...] = np.ndarray(
                self.shape, self.dtype, raw, self.ptr - first, [s * item for s in self._strides]
            )
            return host
        source = self.contiguous()
        source.region().copy_to(host.reshape(-1).view(np.uint8), stream=self.stream)
        self.stream.sync()
        return host

    # --- interchange -------------------------------------------------------------------------

    def __dlpack__(
        self,
        *,
        stream: int | Any | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> DLPackCapsule:
        """A DLPack capsule over this tensor's memory (no copy); see hip_runtime.tensors.dlpack."""
        from hip_runtime.tensors.dlpack import export_dlpack

        return export_dlpack(
            self, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy
        )

    def __dlpack_device__(self) -> tuple[int, int]:
        from hip_runtime.tensors.dlpack import dlpack_device

        return dlpack_device(self.device)

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """CUDA Array Interface v3 where the platform's traits say CUDA consumers can take the
        memory (nvidia); AttributeError elsewhere."""
        from hip_runtime.tensors.dlpack import cuda_array_interface

        return cuda_array_interface(self)

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"0x{self.ptr:x}"
        layout = "" if self._strides is None else f" strides {self._strides}"
        return (
            f"<DeviceTensor {self.shape} {self.dtype}{layout} at {state} on device "
            f"{self.device.ordinal}>"
        )


def _as_strides(strides: Sequence[int], shape: Shape) -> Strides:
    values = tuple(as_index(s, "a stride") for s in strides)
    if len(values) != len(shape):
        raise ValueError(f"{len(values)} strides for {len(shape)} dimensions")
    return values


def _device_of(device: Device | None, stream: Stream | None) -> Device:
    if device is None:
        return stream.device if stream is not None else Device.current()
    if stream is not None and stream.device != device:
        raise ValueError("the stream is on another device")
    return device


__all__ = ["DeviceTensor", "Shape", "ShapeLike", "as_shape"]
