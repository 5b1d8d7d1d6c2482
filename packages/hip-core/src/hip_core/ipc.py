"""Device memory and events shared with other processes (HIP's IPC), as handles that pickle.

    # process A
    buffer = Device(0).allocate(n)
    queue.put(buffer.ipc_handle())        # an IpcHandle: plain data, pickled by the queue
    # process B (multiprocessing, any start method: spawn included)
    shared = queue.get().open()           # a DeviceBuffer over A's memory: no copy
    shared.copy_from(data); shared.close()

    done = Device(0).create_event(timing=False, interprocess=True)
    queue.put(done.ipc_handle())          # an IpcEventHandle; B: event = handle.open()

Lifetimes. The importer's `close()` (or collection) unmaps its view (hipIpcCloseMemHandle) and
never frees the exporter's memory. The exporter must keep its buffer open for as long as any
importer uses the memory: on HIP, freeing it first is undefined (the importer may read freed
or reused memory, or fault); nothing here can enforce it across processes. The same holds for
events (HIP: operations on an imported event after its exporter destroyed it are undefined).

What can be exported: buffers from `Device.allocate` (hipMalloc), allocations of a
`MemoryPool(backend="caching")` (each block is its own hipMalloc), and views of either; the
handle names the allocation and the view's range in it. A pool buffer's memory goes back to
its pool when the buffer is closed and may then serve another allocation: the importers would
see that one's bytes (keep the buffer open, as for any export). Allocations of a HIP pool
(`backend="hip"`, stream-ordered) cannot be exported (HIP and CUDA share those only from a
pool created with a shareable handle type, which MemoryPool does not create): ValueError,
saying to use a caching pool or a plain buffer. Events must be created with
`interprocess=True` (and `timing=False`, which HIP requires with it).

Checks made before any HIP call: the handle's fields (a digest over them: a handle altered in
transit is a ValueError), the platform (a cpu handle cannot open on nvidia), and the process
(HIP refuses to open a handle in the process that exported it: HipError with
hipErrorInvalidContext, here before the call). Opening the same handle twice in a process is
reference-counted by HIP and CUDA (each `open()` is released by its own close). Which device an
opened buffer or event is on: the `device` passed to `open`, else the calling thread's current
device; on a GPU another device than the exporter's needs peer access between the two (HIP
enables it lazily at the open, hipIpcMemLazyEnablePeerAccess).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hip_core._hip import hip
from hip_core.errors import check, error_for
from hip_ffi.constants import ERROR_CODES, IPC_HANDLE_SIZE, IPC_MEM_LAZY_ENABLE_PEER_ACCESS

if TYPE_CHECKING:
    from hip_core.device import Device
    from hip_core.event import Event
    from hip_core.memory import DeviceBuffer

_INVALID_CONTEXT = ERROR_CODES["hipErrorInvalidContext"]


@dataclass(frozen=True, repr=False)
class _Handle:
    """What both kinds of handle carry: the platform's 64 bytes and where they come from."""

    platform: str
    data: bytes  # HIP's hipIpcMemHandle_t / hipIpcEventHandle_t
    device: int  # the exporter's device ordinal (in its own process's numbering)
    pid: int  # the exporting process
    check: bytes = field(default=b"")  # a digest of the fields above (and below)

    def _digest(self) -> bytes:
        values = [getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "check"]
        return hashlib.blake2b(repr(values).encode(), digest_size=16).digest()

    def _sealed(self) -> Any:
        return dataclasses.replace(self, check=self._digest())

    def _checked(self, call: str, ctype: str) -> tuple[Any, Any]:
        """(HipApi, the handle as a C struct), once the fields are whole, unaltered, of this
        platform and of another process; raises before any HIP call otherwise."""
        if not (
            isinstance(self.data, bytes)
            and len(self.data) == IPC_HANDLE_SIZE
            and isinstance(self.check, bytes)
            and self.check == self._digest()
        ):
            raise ValueError(f"corrupt {type(self).__name__}: its fields do not match its digest")
        api = hip()
        if self.platform != api.platform:
            raise ValueError(
                f"a handle of the {self.platform} platform cannot open on {api.platform}"
            )
        if self.pid == os.getpid():
            raise error_for(
                _INVALID_CONTEXT, call, "this process exported the handle: use the original"
            )
        struct = api.ffi.new(ctype + "*")
        api.ffi.memmove(struct.reserved, self.data, IPC_HANDLE_SIZE)
        return api, struct[0]


@dataclass(frozen=True, repr=False)
class IpcHandle(_Handle):
    """A `DeviceBuffer` of another process, as plain data (`DeviceBuffer.ipc_handle()`).

    Attributes:
        offset: where the buffer starts in the exported allocation, bytes.
        size: its length, bytes.
    """

    offset: int = 0
    size: int = 0

    def open(self, device: Device | None = None) -> DeviceBuffer:
        """Map the exporter's memory here: a DeviceBuffer of `size` bytes over the same memory
        (no copy), on `device` (None: this thread's current device). Synchronous, no stream.
        Closing it unmaps it here only (hipIpcCloseMemHandle)."""
        from hip_core.device import Device
        from hip_core.memory import DeviceBuffer

        api, struct = self._checked("hipIpcOpenMemHandle", "hipIpcMemHandle_t")
        device = Device.current() if device is None else device
        out = api.ffi.new("void**")
        with device:
            status = api.hipIpcOpenMemHandle(out, struct, IPC_MEM_LAZY_ENABLE_PEER_ACCESS)
            check(status, "hipIpcOpenMemHandle")
        base = int(api.ffi.cast("uintptr_t", out[0]))
        return DeviceBuffer.wrap(base + self.offset, self.size, device, _close, api, device, out[0])

    def __repr__(self) -> str:
        return (
            f"<IpcHandle {self.size} bytes at offset {self.offset} on {self.platform} device "
            f"{self.device} of process {self.pid}>"
        )


@dataclass(frozen=True, repr=False)
class IpcEventHandle(_Handle):
    """An interprocess `Event` of another process, as plain data (`Event.ipc_handle()`)."""

    def open(self, device: Device | None = None) -> Event:
        """The exporter's event, usable here (record, wait, sync, done) as one created with
        `timing=False, interprocess=True`; records in either process complete waits in both.
        `device`: None for this thread's current device."""
        from hip_core.device import Device
        from hip_core.event import Event

        api, struct = self._checked("hipIpcOpenEventHandle", "hipIpcEventHandle_t")
        device = Device.current() if device is None else device
        out = api.ffi.new("hipEvent_t*")
        with device:
            check(api.hipIpcOpenEventHandle(out, struct), "hipIpcOpenEventHandle")
        return Event.adopt(out[0], device, timing=False, interprocess=True)

    def __repr__(self) -> str:
        return f"<IpcEventHandle of {self.platform} device {self.device} of process {self.pid}>"


def _close(api: Any, device: Device, pointer: Any) -> None:
    with device:  # (the device current at the open: HIP closes in that context)
        check(api.hipIpcCloseMemHandle(pointer), "hipIpcCloseMemHandle")


def _allocation_base(buffer: DeviceBuffer) -> int:
    """The address hipMalloc returned for the allocation `buffer` lies in: a buffer from
    Device.allocate, a caching-allocator pool's block, or a view of either; ValueError for
    anything else, ClosedError for a closed buffer (before any HIP call)."""
    from hip_core.device import Device
    from hip_core.pool import MemoryPool

    start, maker = buffer.allocation()
    if isinstance(maker, Device):
        return start
    if isinstance(maker, MemoryPool):
        if maker.backend == "caching":
            return start  # the block's own hipMalloc address
        raise ValueError(
            "a buffer of a MemoryPool with the 'hip' backend cannot be exported: HIP and CUDA "
            "share stream-ordered pool memory only from a pool created with a shareable "
            "handle type, which MemoryPool does not create; use MemoryPool(device, "
            "backend='caching') (its blocks are hipMalloc memory) or Device.allocate"
        )
    raise ValueError(
        "only memory from Device.allocate (hipMalloc) or a caching MemoryPool can be "
        "exported; this buffer is memory made elsewhere (wrapped, DLPack, opened from another "
        "process): allocate a plain buffer with Device.allocate for what other processes "
        "should see, and copy into it"
    )


def export_buffer(buffer: DeviceBuffer) -> IpcHandle:
    """`buffer.ipc_handle()` (see there)."""
    base = _allocation_base(buffer)
    api = hip()
    out = api.ffi.new("hipIpcMemHandle_t*")
    with buffer.device:
        check(api.hipIpcGetMemHandle(out, api.ffi.cast("void*", base)), "hipIpcGetMemHandle")
    data = bytes(api.ffi.buffer(out.reserved))
    handle = IpcHandle(api.platform, data, buffer.device.ordinal, os.getpid(),
                       offset=buffer.ptr - base, size=buffer.size)  # fmt: skip
    sealed: IpcHandle = handle._sealed()
    return sealed


def export_event(event: Event) -> IpcEventHandle:
    """`event.ipc_handle()` (see there), for an open event (which that checks first)."""
    if not event.interprocess:
        raise ValueError(
            "only an event created with interprocess=True (and timing=False) can be shared"
        )
    api = hip()
    out = api.ffi.new("hipIpcEventHandle_t*")
    with event.device:
        check(api.hipIpcGetEventHandle(out, event.handle), "hipIpcGetEventHandle")
    data = bytes(api.ffi.buffer(out.reserved))
    sealed: IpcEventHandle = IpcEventHandle(
        api.platform, data, event.device.ordinal, os.getpid()
    )._sealed()
    return sealed
