"""DeviceTensor: a shape and a dtype over contiguous device memory (a buffer and an offset).

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
from hip_runtime.dtypes import DTypeLike, as_dtype, float32

if TYPE_CHECKING:
    from hip_runtime.dlpack import DLPackCapsule

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


class DeviceTensor:
    """A C-contiguous (row-major) array in device memory.

    Attributes:
        buffer: the DeviceBuffer holding the storage (views share their parent's buffer).
        offset: where the first element is, in bytes from `buffer.ptr`.
        shape, dtype: as in numpy; bfloat16 is `ml_dtypes.bfloat16`.
        stream: the stream that orders work on this tensor.

    A tensor is accepted wherever hip-core expects a device pointer (`ptr` is the address of
    the first element), so it can be passed straight to `Kernel.launch`.
    """

    __slots__ = ("__weakref__", "buffer", "dtype", "offset", "shape", "stream")

    def __init__(
        self,
        buffer: DeviceBuffer,
        shape: ShapeLike,
        dtype: DTypeLike = float32,
        *,
        offset: int = 0,
        stream: Stream | None = None,
    ) -> None:
        self.shape = as_shape(shape)
        self.dtype = as_dtype(dtype)
        if offset < 0 or offset + self.nbytes > buffer.size:
            raise ValueError(
                f"{self.nbytes} bytes at offset {offset} do not fit a buffer of {buffer.size}"
            )
        if stream is not None and stream.device != buffer.device:
            raise ValueError("the stream and the buffer are on different devices")
        self.buffer = buffer
        self.offset = offset
        self.stream = stream if stream is not None else buffer.device.default_stream

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
        """Uninitialized memory. With `pool`, allocated in order on `stream` (and returned to
        the pool in stream order when the tensor and its views are gone); else hipMalloc."""
        device = _device_of(device, stream)
        shape, dtype = as_shape(shape), as_dtype(dtype)
        stream = stream if stream is not None else device.default_stream
        nbytes = math.prod(shape) * dtype.itemsize
        return cls(_allocate(nbytes, device, stream, pool), shape, dtype, stream=stream)

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
        threads through pinned staging chunks (`hip_runtime.staging`), at memory speed rather
        than HIP's pageable rate; smaller ones by one hipMemcpyAsync.
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
        from hip_runtime.dlpack import import_dlpack

        return import_dlpack(obj, stream=stream)

    # --- properties --------------------------------------------------------------------------

    @property
    def device(self) -> Device:
        return self.buffer.device

    @property
    def ptr(self) -> int:
        """Device address of the first element."""
        return self.buffer.ptr + self.offset

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
        return self.size * self.dtype.itemsize

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def region(self) -> DeviceBuffer:
        """This tensor's bytes as a DeviceBuffer view (keeps the storage alive)."""
        return self.buffer.view(self.offset, self.nbytes)

    # --- copies ------------------------------------------------------------------------------

    def copy_from_host(self, array: Any) -> None:
        """Copy a host array of the same shape and dtype in, queued on `self.stream` (returns
        once the host array has been read; staged as in `from_numpy`)."""
        host = np.asarray(array, order="C")  # (ascontiguousarray makes 0-d 1-d)
        if host.shape != self.shape or host.dtype != self.dtype:
            raise ValueError(f"host array {host.shape} {host.dtype} does not fit {self}")
        self._upload(host.reshape(-1).view(np.uint8))

    def _upload(self, raw: np.ndarray[Any, Any]) -> None:
        if self.nbytes >= STAGED_UPLOAD_BYTES:
            # HIP copies pageable memory synchronously at a fraction of the bus; several threads
            # through pinned chunks run at memory speed, and the copy stays stream-ordered.
            from hip_runtime.staging import StagedCopier, split_host_copy

            copier = StagedCopier.default(self.device)
            self.stream.keep_until_sync(self)  # copies in flight must not outlive the memory
            chunks = split_host_copy(raw, self.ptr, copier.chunk_bytes)
            copier.run(chunks, ordered_with=self.stream)
        elif self.nbytes:
            self.region().copy_from(raw, stream=self.stream)

    def copy_from(self, source: DeviceTensor) -> None:
        """Copy another tensor of the same shape and dtype in (device to device, on
        `self.stream`; the source must be ready in that stream's order)."""
        if not isinstance(source, DeviceTensor):
            raise TypeError(f"expected a DeviceTensor, not {type(source).__name__}")
        if source.shape != self.shape or source.dtype != self.dtype:
            raise ValueError(f"cannot copy {source} into {self}")
        if self.nbytes:
            self.region().copy_from(source.region(), stream=self.stream)

    def copy_from_device_region(self, source: DeviceBuffer | DeviceTensor, offset: int = 0) -> None:
        """Fill this tensor with `self.nbytes` bytes of `source` starting at byte `offset`
        (e.g. a tensor inside a checkpoint blob already on the device), on `self.stream`."""
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
        """A host copy. Queues the copy on `self.stream` and waits for that stream only."""
        host = np.empty(self.shape, self.dtype)
        if self.nbytes:
            self.region().copy_to(host.reshape(-1).view(np.uint8), stream=self.stream)
            self.stream.sync()
        return host

    # --- views -------------------------------------------------------------------------------

    def _view(self, shape: Shape, offset: int) -> DeviceTensor:
        return DeviceTensor(self.buffer, shape, self.dtype, offset=offset, stream=self.stream)

    def reshape(self, *shape: int | Sequence[int]) -> DeviceTensor:
        """The same storage with another shape of the same size; one dimension may be -1."""
        dims = list(shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape)
        if dims.count(-1) > 1:
            raise ValueError("only one dimension may be -1")
        if -1 in dims:
            known = math.prod(d for d in dims if d != -1)  # type: ignore[misc]
            if known == 0 or self.size % known:
                raise ValueError(f"cannot reshape {self.shape} into {tuple(shape)}")
            dims[dims.index(-1)] = self.size // known
        new = as_shape(dims)  # type: ignore[arg-type]
        if math.prod(new) != self.size:
            raise ValueError(f"cannot reshape {self.shape} ({self.size} elements) into {new}")
        return self._view(new, self.offset)

    def __getitem__(self, index: int | slice) -> DeviceTensor:
        """Rows of the first dimension: `t[i]` (one row, one dimension fewer) or `t[a:b]`
        (step 1). Views share storage and keep it alive."""
        if not self.shape:
            raise IndexError("a 0-d tensor has no rows")
        rows, row_bytes = self.shape[0], math.prod(self.shape[1:]) * self.dtype.itemsize
        if isinstance(index, slice):
            start, stop, step = index.indices(rows)
            if step != 1:
                raise ValueError("row slices must be contiguous (step 1)")
            count = max(stop - start, 0)
            return self._view((count, *self.shape[1:]), self.offset + start * row_bytes)
        if isinstance(index, (int, np.integer)) and not isinstance(index, bool):
            i = int(index) + rows if index < 0 else int(index)
            if not 0 <= i < rows:
                raise IndexError(f"row {index} is outside {rows} rows")
            return self._view(self.shape[1:], self.offset + i * row_bytes)
        raise TypeError(f"tensors take an int or a slice of rows, not {type(index).__name__}")

    # --- interchange -------------------------------------------------------------------------

    def __dlpack__(
        self,
        *,
        stream: int | Any | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> DLPackCapsule:
        """A DLPack capsule over this tensor's memory (no copy); see hip_runtime.dlpack."""
        from hip_runtime.dlpack import export_dlpack

        return export_dlpack(
            self, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy
        )

    def __dlpack_device__(self) -> tuple[int, int]:
        from hip_runtime.dlpack import dlpack_device

        return dlpack_device(self.device)

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """CUDA Array Interface v3 where the platform's traits say CUDA consumers can take the
        memory (nvidia); AttributeError elsewhere."""
        from hip_runtime.dlpack import cuda_array_interface

        return cuda_array_interface(self)

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"0x{self.ptr:x}"
        return (
            f"<DeviceTensor {self.shape} {self.dtype} at {state} on device {self.device.ordinal}>"
        )


def _device_of(device: Device | None, stream: Stream | None) -> Device:
    if device is None:
        return stream.device if stream is not None else Device.current()
    if stream is not None and stream.device != device:
        raise ValueError("the stream is on another device")
    return device


__all__ = ["DeviceTensor", "Shape", "ShapeLike", "as_shape"]
