"""Device and pinned host buffers: allocation, views, copies and fills.

Copies without `stream=` (or with None) are synchronous: they return when the data has
arrived. With `stream=`, they are queued on that stream and return at once; a host object
involved is kept referenced by the stream until its next `sync()` (by the graph, when the
stream is being captured). Only copies between device memory and
*pinned* host memory (PinnedBuffer) are truly asynchronous: HIP stages pageable host memory
(bytes, numpy arrays) through its own buffers, so such a copy may return only once the host
side has been read (H2D) or may not overlap other work (D2H).

Between buffers of two devices, `copy_from` / `copy_to` are peer copies (hipMemcpyPeer, or
hipMemcpyPeerAsync with `stream=`), ordered as `hip_core.peer` describes. A buffer from
`Device.allocate` can be shared with another process without a copy: `ipc_handle()` and
`DeviceBuffer.from_ipc` (hip_core.ipc).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hip_core import _hip
from hip_core._checks import integer
from hip_core._current import _thread
from hip_core._hip import hip
from hip_core._resource import ClosedError, Resource, nothing
from hip_core.errors import check
from hip_core.peer import copy as peer_copy
from hip_core.stream import checked_handle
from hip_ffi.constants import (
    HOST_MALLOC_DEFAULT,
    MEMCPY_DEVICE_TO_DEVICE,
    MEMCPY_DEVICE_TO_HOST,
    MEMCPY_HOST_TO_DEVICE,
)

if TYPE_CHECKING:
    from hip_core.device import Device
    from hip_core.ipc import IpcHandle
    from hip_core.pool import MemoryPool
    from hip_core.stream import Stream


class _Allocation(Resource):
    """The owner of one allocation; freed exactly once, by whoever closes it first, or once the
    last graph holding it lets go when it is closed while held."""

    __slots__ = ("ptr", "size")

    def __init__(self, ptr: int, size: int, free: Any, *free_args: Any) -> None:
        self.ptr = ptr
        self.size = size
        self._own(_free, free, *free_args)


class _Malloced(_Allocation):
    """An allocation hipMalloc made in this process: the only kind another process can open
    (`DeviceBuffer.ipc_handle`)."""

    __slots__ = ()


def _free(free: Any, *args: Any) -> None:
    free(*args)


class _Itself:
    """The `_owner` of a buffer that owns its allocation (`owning_buffer`): never closed, so
    the buffer's own state says whether the memory is open (`_BufferBase.closed`'s second
    read finds this always open) without a reference cycle to itself."""

    __slots__ = ()
    _releaser = True

    def close(self) -> None:
        """Nothing: the buffer's own `close()` frees the memory."""


_ITSELF: Any = _Itself()


def _checked_range(offset: int, size: int, limit: int, what: str) -> None:
    if offset < 0 or size < 0 or offset + size > limit:
        raise ValueError(
            f"{what} [{offset}, {offset + size}) is outside the buffer's {limit} bytes"
        )


class _BufferBase(Resource):
    """What device and pinned buffers share: an address range inside an `_Allocation`.

    A buffer is the whole allocation or a view of part (or all) of it, as `is_view` says; the
    difference is set when the buffer is made, never inferred from its extent. Closing the
    whole buffer frees the allocation (its views close with it); closing a view only retires
    the view. Neither frees anything when collected: the allocation's own finalizer does that
    once the buffer and every view of it are gone.

    A graph that captured work on a buffer (or a view of it) holds its allocation: closing the
    buffer then retires it and its views at once (ClosedError, launches refuse it) and frees
    the memory when the last such graph is closed or collected.
    """

    __slots__ = ("_address", "_owner", "is_view", "ptr", "size")

    def __init__(self, owner: Resource, ptr: int, size: int, *, is_view: bool) -> None:
        self._owner = owner  # a view holds its parent's allocation: never freed before the view
        self.ptr = ptr  # address (int)
        self.size = size  # bytes
        self.is_view = is_view
        self._address: Any = None  # `ptr` as a void* cdata, made by the first copy
        self._own(nothing)

    def _void(self) -> Any:
        """`ptr` as a `void*` (made once: a cast per copy is a fifth of a small copy's cost)."""
        address = self._address
        if address is None:
            address = self._address = hip().ffi.cast("void*", self.ptr)
        return address

    @property
    def closed(self) -> bool:
        # Both set at construction (`_own`): plain reads, on every launch's pointer check.
        return self._releaser is None or self._owner._releaser is None

    def close(self) -> None:
        """Free the memory now (a view only stops being usable: it never frees its parent)."""
        super().close()
        if not self.is_view:
            self._owner.close()  # (nothing for a buffer that owns its allocation itself)

    def _hold_target(self) -> Resource:
        # A graph holds the memory, whichever view of it it was given.
        owner = self._owner
        return self if owner is _ITSELF else owner

    def __len__(self) -> int:
        return self.size

    def _view_range(self, offset: int, size: int | None) -> tuple[int, int]:
        self._check_open()
        offset = integer(offset, "view offset")
        size = self.size - offset if size is None else integer(size, "view size")
        _checked_range(offset, size, self.size, "view")
        return self.ptr + offset, size


class DeviceBuffer(_BufferBase):
    """A range of device memory. `ptr` is the device address, `size` its length in bytes."""

    __slots__ = ("device",)

    def __init__(
        self, owner: Resource, ptr: int, size: int, device: Device, *, is_view: bool = False
    ) -> None:
        super().__init__(owner, ptr, size, is_view=is_view)
        self.device = device

    @classmethod
    def allocate(cls, device: Device, size: int) -> DeviceBuffer:
        """hipMalloc `size` bytes on `device` (synchronous); HipOutOfMemoryError if none left."""
        size = integer(size, "size")
        if size < 0:
            raise ValueError(f"cannot allocate {size} bytes")
        api = hip()
        out = api.ffi.new("void**")
        with device:
            check(api.hipMalloc(out, size), "hipMalloc")
        ptr = int(api.ffi.cast("uintptr_t", out[0]))
        return cls(_Malloced(ptr, size, _hip_free, api, out[0]), ptr, size, device)

    @classmethod
    def wrap(
        cls,
        ptr: int,
        size: int,
        device: Device,
        release: Callable[..., Any] | None = None,
        *release_args: Any,
    ) -> DeviceBuffer:
        """A DeviceBuffer over device memory allocated elsewhere (DLPack, another library).

        `release(*release_args)` runs exactly once when the buffer is closed or collected
        (e.g. a DLPack deleter); with no `release`, the memory is only borrowed and the caller
        must keep it valid while the buffer is in use.
        """
        if ptr < 0 or size < 0 or (ptr == 0 and size > 0):
            raise ValueError(f"cannot wrap {size} bytes at address {ptr:#x}")
        owner = _Allocation(ptr, size, release or nothing, *release_args)
        return cls(owner, ptr, size, device)

    @classmethod
    def from_allocation(cls, owner: _Allocation, device: Device) -> DeviceBuffer:
        """Wrap an allocation made elsewhere (e.g. a pool) whose owner frees it."""
        return cls(owner, owner.ptr, owner.size, device)

    def view(self, offset: int, size: int | None = None) -> DeviceBuffer:
        """Bytes [offset, offset+size) of this buffer, sharing its memory and keeping it alive."""
        ptr, size = self._view_range(offset, size)
        return DeviceBuffer(self._hold_target(), ptr, size, self.device, is_view=True)

    def ipc_handle(self) -> IpcHandle:
        """A handle another process opens to map this buffer's memory, zero-copy (an
        `IpcHandle`: it pickles, so it crosses `multiprocessing` with any start method).

        Only memory from `Device.allocate` (hipMalloc), or a view of it, can be exported:
        ValueError for pool allocations, wrapped or imported memory; ClosedError for a closed
        buffer. Keep this buffer open while any process uses the memory: closing it frees the
        memory under the importers (undefined on HIP; see hip_core.ipc)."""
        from hip_core.ipc import export_buffer

        return export_buffer(self)

    @classmethod
    def from_ipc(cls, handle: IpcHandle, device: Device | None = None) -> DeviceBuffer:
        """`handle.open(device)`: another process's buffer, mapped here (hip_core.ipc)."""
        return handle.open(device)

    def allocation(self) -> tuple[int, Device | MemoryPool | None]:
        """(start address, maker) of the whole allocation this buffer's memory lies in (a
        view: its parent's). The maker: the Device for `Device.allocate`'s memory (hipMalloc
        in this process); the MemoryPool for a pool's buffer (read from its release, the
        pool's bound method); None for memory made elsewhere (wrapped, DLPack, opened from
        another process). What `ipc_handle` exports from; ClosedError for a closed buffer."""
        self._check_open()
        owner = self._owner
        if isinstance(owner, _Malloced):
            return owner.ptr, self.device
        whole: Any = self if owner is _ITSELF else owner
        maker: Any = getattr(whole._releaser, "__self__", None)  # (a bound method's object)
        if not isinstance(maker, Resource):
            maker = None
        return whole.ptr, maker

    def copy_from(self, source: Any, *, stream: Stream | None = None) -> None:
        """Copy all of `source` into the start of this buffer.

        `source`: a DeviceBuffer, a PinnedBuffer, or any C-contiguous bytes-like object
        (bytes, bytearray, memoryview, numpy array; not one holding Python objects). Its size
        must not exceed this buffer's. `stream`: None copies synchronously.
        """
        self._copy(source, True, stream)

    def copy_to(self, destination: Any, *, stream: Stream | None = None) -> None:
        """Copy the first len(destination) bytes of this buffer into `destination`.

        `destination`: a DeviceBuffer, a PinnedBuffer, or a writable C-contiguous bytes-like
        object. With `stream=`, read it only after `stream.sync()`.
        """
        self._copy(destination, False, stream)

    def _copy(self, other: Any, to_device: bool, stream: Stream | None) -> None:
        # Every check of the general path, in the order it made them, at a few attribute reads
        # each (issue 15: a 4 KiB copy's Python cost is most of its time; positional
        # arguments, the loaded api without a call, a pinned buffer's checks inline).
        if _thread.ordinal != self.device.ordinal:
            # A copy runs with its buffer's device current, whatever this thread's is: on
            # nvidia an async copy on another device's stream is hipErrorInvalidValue, and a
            # synchronous one would run on the wrong device's null stream, unordered with
            # this device's work (issue 20).
            with self.device:
                return self._copy(other, to_device, stream)
        if self._releaser is None or self._owner._releaser is None:
            self._check_open()
        handle = None if stream is None else checked_handle(stream)
        api = _hip._api or hip()
        if type(other) is PinnedBuffer:  # (`host_pointer`'s checks of one, inline)
            if other._releaser is None or other._owner._releaser is None:
                other._check_open()
            pointer, nbytes = other._address or other._void(), other.size
            kind = MEMCPY_HOST_TO_DEVICE if to_device else MEMCPY_DEVICE_TO_HOST
        elif type(other) is DeviceBuffer or isinstance(other, DeviceBuffer):
            if other._releaser is None or other._owner._releaser is None:
                other._check_open()
            pointer, nbytes, kind = other._void(), other.size, MEMCPY_DEVICE_TO_DEVICE
        else:
            pointer, nbytes = host_pointer(other, writable=not to_device)
            kind = MEMCPY_HOST_TO_DEVICE if to_device else MEMCPY_DEVICE_TO_HOST
        if nbytes > self.size:
            direction = "source" if to_device else "destination"
            raise ValueError(f"{direction} holds {nbytes} bytes; this buffer only {self.size}")
        # (`is not` first: the same device is nearly always the same object, `!=` is slower)
        if (
            kind == MEMCPY_DEVICE_TO_DEVICE
            and other.device is not self.device
            and other.device != self.device
        ):
            dst, src = (self, other) if to_device else (other, self)
            peer_copy(dst, src, nbytes, stream, handle)
            return
        mine = self._address or self._void()
        dst, src = (mine, pointer) if to_device else (pointer, mine)
        if stream is None:
            fast = _fast_memcpy
            if fast[0] is not api:
                fast = _fast_memcpy_of(api)
            # The native entry where the platform has one (`HipApi.fast`); a failure there has
            # no effect, so the surface call is made again for HIP's status.
            if fast[1](dst, src, nbytes, kind):
                status = api.hipMemcpy(dst, src, nbytes, kind)
                if status:
                    check(status, "hipMemcpy")
        else:
            check(api.hipMemcpyAsync(dst, src, nbytes, kind, handle), "hipMemcpyAsync")
            stream.keep_until_sync((self, other, pointer))

    def fill(self, byte: int, *, stream: Stream | None = None) -> None:
        """Set every byte to `byte` (0-255); synchronous unless `stream=` is given."""
        self._check_open()
        handle = None if stream is None else checked_handle(stream)
        byte = integer(byte, "fill byte")
        if not 0 <= byte <= 255:
            raise ValueError(f"fill takes a byte value 0-255, not {byte}")
        if _thread.ordinal != self.device.ordinal:
            with self.device:  # (as a copy: on its buffer's device, whatever is current)
                return self.fill(byte, stream=stream)
        api = hip()
        pointer = api.ffi.cast("void*", self.ptr)
        if stream is None:
            check(api.hipMemset(pointer, byte, self.size), "hipMemset")
        else:
            check(api.hipMemsetAsync(pointer, byte, self.size, handle), "hipMemsetAsync")
            stream.keep_until_sync(self)

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"0x{self.ptr:x}"
        return f"<DeviceBuffer {self.size} bytes at {state} on device {self.device.ordinal}>"


class PinnedBuffer(_BufferBase):
    """Page-locked host memory: the fast, truly asynchronous side of host-device copies.

    `memoryview()` and `numpy()` expose the memory without a copy; they must not be used after
    `close()`.
    """

    __slots__ = ()

    @classmethod
    def allocate(cls, size: int, flags: int = HOST_MALLOC_DEFAULT) -> PinnedBuffer:
        size = integer(size, "size")
        if size < 0:
            raise ValueError(f"cannot allocate {size} bytes")
        api = hip()
        out = api.ffi.new("void**")
        check(api.hipHostMalloc(out, size, flags), "hipHostMalloc")
        ptr = int(api.ffi.cast("uintptr_t", out[0]))
        return cls(_Allocation(ptr, size, _hip_host_free, api, out[0]), ptr, size, is_view=False)

    def view(self, offset: int, size: int | None = None) -> PinnedBuffer:
        ptr, size = self._view_range(offset, size)
        return PinnedBuffer(self._hold_target(), ptr, size, is_view=True)

    def memoryview(self) -> memoryview:
        """The bytes as a writable memoryview (no copy)."""
        self._check_open()
        ffi = hip().ffi
        return memoryview(ffi.buffer(ffi.cast("char*", self.ptr), self.size))

    def numpy(self, dtype: Any = "uint8", shape: Any = None) -> Any:
        """A numpy array over this memory (no copy); imports numpy on first use."""
        import numpy as np

        array = np.frombuffer(self.memoryview(), dtype=dtype)
        return array if shape is None else array.reshape(shape)

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"0x{self.ptr:x}"
        return f"<PinnedBuffer {self.size} bytes at {state}>"


def host_pointer(obj: Any, *, writable: bool) -> tuple[Any, int]:
    """(pointer cdata, nbytes) for a PinnedBuffer or a C-contiguous buffer-protocol object."""
    ffi = hip().ffi
    kind = type(obj)
    if kind is bytearray or (kind is bytes and not writable):  # contiguous bytes: no checks
        return ffi.from_buffer(obj), len(obj)
    if isinstance(obj, PinnedBuffer):
        if obj._releaser is None or obj._owner._releaser is None:
            obj._check_open()
        return obj._void(), obj.size
    try:
        view = memoryview(obj)
    except TypeError:
        raise TypeError(
            f"expected a DeviceBuffer, PinnedBuffer or bytes-like object, not {type(obj).__name__}"
        ) from None
    with view:  # released at once: only the cdata below holds the object's buffer
        if not view.c_contiguous:
            raise ValueError("host memory must be C-contiguous")
        form = view.format
        # Raw PyObject pointers are never device data. An "O" may only be in a field's name.
        if "O" in form and "O" in _FIELD_NAMES.sub("", form):
            raise TypeError(
                f"cannot copy Python objects ({type(obj).__name__} of format {view.format!r})"
            )
        if writable and view.readonly:
            raise ValueError(f"the destination {type(obj).__name__} is read-only")
        nbytes = view.nbytes
    # The from_buffer cdata keeps the exporting object alive as long as it is referenced. It is
    # taken from the object itself, not from a memoryview: a memoryview with an export, left in
    # a reference cycle (a stream's kept copies inside a dropped backend), cannot be cleared by
    # the garbage collector and crashed the interpreter (tests/reliability/test_shutdown.py).
    return ffi.from_buffer(obj, require_writable=writable), nbytes


#: The `:name:` parts of a struct format (a structured numpy dtype's field names).
_FIELD_NAMES = re.compile(r":[^:]*:")


_fast_memcpy: tuple[Any, Any] = (None, None)  # (api, api.fast("hipMemcpy"))


def _fast_memcpy_of(api: Any) -> tuple[Any, Any]:
    global _fast_memcpy
    _fast_memcpy = (api, api.fast("hipMemcpy"))
    return _fast_memcpy


def owning_buffer(
    ptr: int, size: int, device: Device, release: Callable[..., Any], args: tuple[Any, ...]
) -> DeviceBuffer:
    """A whole DeviceBuffer that owns its allocation itself: `release(*args)` frees it, exactly
    once, at `close()`, `with` exit or collection (a graph holding it defers that as for any
    Resource); its views hold it as they would an `_Allocation`.

    One object instead of a buffer and an `_Allocation`, made without the general
    constructor's calls, and a plain function (not a classmethod taking `*args`: issue 15, a
    pool's op outputs are made and dropped at every call). Every slot is set here as
    `__init__` and `_own` set them."""
    buffer = _new(DeviceBuffer)
    buffer._owner = _ITSELF
    buffer.ptr = ptr
    buffer.size = size
    buffer.is_view = False
    buffer._address = None
    buffer.device = device
    buffer._releaser_args = args
    buffer._releaser = release
    buffer._holders = 0
    buffer._deferred = None
    return buffer


_new = object.__new__


def _hip_free(api: Any, pointer: Any) -> None:
    check(api.hipFree(pointer), "hipFree")


def _hip_host_free(api: Any, pointer: Any) -> None:
    check(api.hipHostFree(pointer), "hipHostFree")


__all__ = ["ClosedError", "DeviceBuffer", "PinnedBuffer", "host_pointer"]
