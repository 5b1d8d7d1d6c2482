"""Stream-ordered memory pools.

`MemoryPool(device)` uses a HIP memory pool (hipMemPoolCreate + hipMallocFromPoolAsync) where
the device supports pools, else a caching allocator over hipMalloc. Either way:

- `allocate(size, stream=)` returns a DeviceBuffer usable by work queued on `stream` (None:
  the device's null stream) after the call; closing the buffer returns its memory *in stream
  order* (after the work queued on that stream so far), without synchronizing. If that stream
  was closed first, the memory is returned once the device has finished its work.
- `stats()` reports bytes in use, cached (held by the pool, free for reuse) and the peak in use.
- `limit` caps the bytes in use; an allocation above it, or one the device cannot satisfy,
  first releases cached memory (`trim()`), retries once, then raises HipOutOfMemoryError —
  after which the pool and the process keep working.
- `enable_peer_access(peer)` lets kernels on another device use the pool's allocations
  (hip_core.peer). Pool allocations cannot be shared with other processes (hip_core.ipc).
"""

from __future__ import annotations

import threading
from collections import defaultdict, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hip_core import _capture, peer
from hip_core._checks import integer
from hip_core._hip import hip
from hip_core._resource import Resource
from hip_core.errors import HipOutOfMemoryError, check, error_for
from hip_core.memory import DeviceBuffer, owning_buffer
from hip_core.stream import Stream, checked_handle
from hip_ffi.constants import (
    ERROR_CODES,
    MEM_ACCESS_FLAGS,
    MEM_ALLOCATION_TYPE_PINNED,
    MEM_LOCATION_TYPE_DEVICE,
    MEM_POOL_ATTRIBUTES,
)

if TYPE_CHECKING:
    from hip_core.device import Device

_OUT_OF_MEMORY = ERROR_CODES["hipErrorOutOfMemory"]
_GRANULE = 512  # the caching allocator rounds sizes up to this many bytes
_READ_WRITE = MEM_ACCESS_FLAGS["ProtReadWrite"]
_REUSE_DEPTH = 8  # blocks of one size the pool keeps itself for same-size reuse


#: Streams whose pool allocations something else serves (`allocations_served_by`), by id.
_served: dict[int, Callable[[int, Stream], DeviceBuffer | None]] = {}


@contextmanager
def allocations_served_by(
    stream: Stream, allocate: Callable[[int, Stream], DeviceBuffer | None]
) -> Iterator[None]:
    """Inside the block, every `MemoryPool.allocate(size, stream=stream)` (any pool) returns
    `allocate(size, stream)` instead, checked as usual first; when that returns None, the
    pool allocates as usual (a function that only records the sizes).

    For a capture: a graph replays its work at the addresses it captured, so the memory a
    captured forward allocates must be the graph's own for as long as the graph lives, never
    a pool's, whose stream-ordered allocations would become graph nodes (CUDA) and whose
    frees would hand the addresses to other work. Not re-entrant for one stream."""
    key = id(stream)
    if key in _served:
        raise RuntimeError("allocations on this stream are served by something else already")
    _served[key] = allocate
    try:
        yield
    finally:
        del _served[key]


@dataclass(frozen=True)
class PoolStats:
    """Bytes in use by live buffers, cached by the pool for reuse, and the peak in use."""

    in_use: int
    cached: int
    peak: int


class MemoryPool(Resource):
    """Stream-ordered allocations on one device, with statistics, `trim()` and a limit.

    Args:
        device: where the memory lives.
        limit: most bytes in use at once, an integer >= 0 (None: only the device's memory
            bounds it).
        backend: "hip" (HIP memory pool), "caching" (caching allocator), or None to use a HIP
            pool when the device supports one.

    Freed memory stays cached for reuse until `trim()` (a HIP pool is told to keep it across
    synchronizations too, so steady-state allocation never goes back to the device).
    Buffers may outlive the pool: closing the pool releases its memory as they are released.

    Same-size reuse (issue 15: an op's output is allocated and dropped at every call): the
    last few blocks of each size released are kept by the pool itself and handed out again
    without calling the device's allocator. A block goes back to work on the stream it was
    released on directly (that stream orders it after its last use, as a stream-ordered free
    would); to another stream, after an event recorded on the first one. While a stream is
    being captured, its releases are all kept this way: a free must not become a graph node.

    Threads: a pool may be shared by threads. Its bookkeeping takes no lock (issue 15: an op's
    output is allocated and released at every call): it relies on the GIL, under which the
    reuse lists' `pop`/`append` are atomic and an int attribute's `+=` of two ints is not
    interrupted (the interpreter switches threads only at calls and backward jumps). The
    backends below lock their own state. A free-threaded build would need the lock back.
    """

    __slots__ = ("_backend", "_give_back", "_in_use", "_peak", "_reuse", "device", "limit")
    _named_by_launches = False  # a pool is never a kernel's argument

    def __init__(
        self, device: Device, *, limit: int | None = None, backend: str | None = None
    ) -> None:
        if backend is None:
            backend = "hip" if device.attribute("MemoryPoolsSupported") else "caching"
        if backend not in ("hip", "caching"):
            raise ValueError(f"backend must be 'hip' or 'caching', not {backend!r}")
        limit = None if limit is None else integer(limit, "limit")
        if limit is not None and limit < 0:
            raise ValueError(f"limit must be a byte count >= 0 or None, not {limit}")
        self.device = device
        self.limit = limit
        self._in_use = 0
        self._peak = 0
        self._backend: _HipPool | _CachingAllocator = (
            _HipPool(device) if backend == "hip" else _CachingAllocator(device)
        )
        # size -> [(address, stream released on)]: the same-size reuse cache. Deques, not
        # lists: a list that goes from one entry to none and back at every call (an op's
        # output allocated and dropped) reallocates its array both ways; a deque keeps its
        # block.
        self._reuse: dict[int, deque[tuple[int, Stream]]] = {}
        self._give_back = self._release
        self._own(self._destroy)

    @property
    def backend(self) -> str:
        return "hip" if isinstance(self._backend, _HipPool) else "caching"

    def allocate(self, size: int, *, stream: Stream | None) -> DeviceBuffer:
        """`size` bytes, usable by work on `stream` (None: the null stream) queued after this
        call."""
        if self._releaser is None:
            self._check_open()
        if stream is None:
            stream = self.device.default_stream
        elif type(stream) is not Stream or stream._releaser is None:
            checked_handle(stream)  # the full check: raises for a non-Stream or a closed one
        if type(size) is not int:
            size = integer(size, "size")
        if size < 0:
            raise ValueError(f"cannot allocate {size} bytes")
        if _served:
            serve = _served.get(id(stream))
            served = None if serve is None else serve(size, stream)
            if served is not None:
                return served
        limit = self.limit
        ptr = None
        if limit is None or self._in_use + size <= limit:
            blocks = self._reuse.get(size)
            if blocks:  # (same-size reuse, inline: issue 15's outputs come this way)
                try:
                    ptr, released_on = blocks.pop()
                except IndexError:  # another thread took the last one
                    ptr = None
                else:
                    if released_on is not stream:
                        ptr = self._reordered(ptr, size, released_on, stream)
        if ptr is None:
            ptr = self._allocate(size, stream)
        # (no lock: see "Threads" in the class doc)
        in_use = self._in_use = self._in_use + size
        if in_use > self._peak:
            self._peak = in_use
        # One object that frees itself (not a buffer and an _Allocation: issue 15), released
        # through the bound method made once (`_give_back`), not one per allocation.
        return owning_buffer(ptr, size, self.device, self._give_back, (ptr, size, stream))

    def _reordered(self, ptr: int, size: int, released_on: Stream, stream: Stream) -> int | None:
        """A reused block released on another stream, ordered for `stream` (an event), or
        None when that stream is closed (the backend's own path then frees the block)."""
        if released_on.closed:  # its handle is gone
            self._backend.free(ptr, size, released_on)
            return None
        event = self.device.create_event(timing=False)
        event.record(released_on)
        stream.wait(event)
        event.close()
        return ptr

    def _allocate(self, size: int, stream: Stream) -> int:
        """From the backend, within the limit: trims and retries once before giving up."""
        over_limit = self.limit is not None and self._in_use + size > self.limit
        if over_limit:
            self.trim()
            if self._in_use + size > self.limit:  # type: ignore[operator]
                raise error_for(
                    _OUT_OF_MEMORY,
                    "MemoryPool.allocate",
                    f"{size} bytes would exceed the pool limit of {self.limit} "
                    f"({self._in_use} in use)",
                )
        try:
            return self._backend.allocate(size, stream)
        except HipOutOfMemoryError:
            self.trim()  # give cached blocks back to the device, then one more try
            return self._backend.allocate(size, stream)

    def _release(self, ptr: int, size: int, stream: Stream) -> None:
        self._in_use -= size  # (no lock: see "Threads" in the class doc)
        if self._releaser is not None and stream._releaser is not None:  # (both open)
            blocks = self._reuse.get(size)
            if blocks is None:
                blocks = self._reuse.setdefault(size, deque())
            if len(blocks) < _REUSE_DEPTH or _capture.kept_for(stream) is not None:
                blocks.append((ptr, stream))
                return
        self._backend.free(ptr, size, stream)

    def _flush(self) -> None:
        """Give every block of the reuse cache back to the backend."""
        reuse, self._reuse = self._reuse, {}
        for size, blocks in reuse.items():
            for ptr, stream in blocks:
                self._backend.free(ptr, size, stream)

    def _destroy(self) -> None:
        self._flush()
        self._backend.destroy()

    def stats(self) -> PoolStats:
        self._check_open()
        kept = sum(size * len(blocks) for size, blocks in list(self._reuse.items()))
        return PoolStats(self._in_use, self._backend.cached() + kept, self._peak)

    def trim(self) -> None:
        """Return cached memory to the device. Waits for the device's pending frees first."""
        self._check_open()
        self._flush()
        self._backend.trim()

    def enable_peer_access(self, peer_device: Device) -> None:
        """Let kernels on `peer_device` read and write this pool's allocations, present and
        future (a HIP pool: hipMemPoolSetAccess; the caching allocator: the peer's access to
        this pool's device, `peer_device.enable_peer_access(pool.device)`). Idempotent;
        HipError (hipErrorPeerAccessUnsupported) where the two devices cannot be linked."""
        self._set_peer_access(peer_device, True)

    def disable_peer_access(self, peer_device: Device) -> None:
        """Undo `enable_peer_access` (idempotent); allocations in use stay valid here."""
        self._set_peer_access(peer_device, False)

    def _set_peer_access(self, peer_device: Device, enabled: bool) -> None:
        self._check_open()
        what = "MemoryPool.enable_peer_access" if enabled else "MemoryPool.disable_peer_access"
        peer.checked_peer(self.device, peer_device, what)
        if enabled:
            peer.require_capable(self.device, peer_device, what)
        self._backend.set_peer_access(peer_device, enabled)

    def peer_access(self, peer_device: Device) -> bool:
        """Whether kernels on `peer_device` may access this pool's allocations (a HIP pool:
        hipMemPoolGetAccess answers read-write; the caching allocator: this process enabled
        the peer's access to the pool's device through hip-core)."""
        self._check_open()
        peer.checked_peer(self.device, peer_device, "MemoryPool.peer_access")
        return self._backend.peer_access(peer_device)

    def __repr__(self) -> str:
        if self.closed:
            return f"<MemoryPool {self.backend} closed>"
        s = self.stats()
        return f"<MemoryPool {self.backend} in_use={s.in_use} cached={s.cached} peak={s.peak}>"


class _HipPool:
    """A HIP memory pool of the device's own (not the default pool other code shares)."""

    def __init__(self, device: Device) -> None:
        self.api = api = hip()
        props = api.ffi.new("hipMemPoolProps*")
        props.allocType = MEM_ALLOCATION_TYPE_PINNED
        props.location.type = MEM_LOCATION_TYPE_DEVICE
        props.location.id = device.ordinal
        out = api.ffi.new("hipMemPool_t*")
        with device:
            check(api.hipMemPoolCreate(out, props), "hipMemPoolCreate")
        self.handle = out[0]
        self.device = device
        # By default a HIP pool returns freed memory to the device at every synchronize; keep it.
        keep_all = api.ffi.new("uint64_t*", 2**64 - 1)
        check(
            api.hipMemPoolSetAttribute(
                self.handle, MEM_POOL_ATTRIBUTES["ReleaseThreshold"], keep_all
            ),
            "hipMemPoolSetAttribute",
        )
        # The pool is destroyed only once it is closed and every allocation is back: a free
        # into a destroyed pool is not something to ask of a driver.
        self.lock = threading.Lock()
        self.live = 0
        self.destroyed = False

    def allocate(self, size: int, stream: Stream) -> int:
        out = self.api.ffi.new("void**")
        status = self.api.hipMallocFromPoolAsync(out, size, self.handle, stream.handle)
        check(status, "hipMallocFromPoolAsync")
        with self.lock:
            self.live += 1
        return int(self.api.ffi.cast("uintptr_t", out[0]))

    def free(self, ptr: int, size: int, stream: Stream) -> None:
        handle = stream.handle
        if stream.closed:  # its handle is gone: free once the device is done with its work
            self.device.synchronize()
            handle = self.api.ffi.NULL
        check(self.api.hipFreeAsync(self.api.ffi.cast("void*", ptr), handle), "hipFreeAsync")
        with self.lock:
            self.live -= 1
            last = self.destroyed and not self.live
        if last:
            self._destroy()

    def cached(self) -> int:
        reserved = self._attribute("ReservedMemCurrent")
        used = self._attribute("UsedMemCurrent")
        return max(reserved - used, 0)

    def _attribute(self, name: str) -> int:
        value = self.api.ffi.new("uint64_t*")
        check(
            self.api.hipMemPoolGetAttribute(self.handle, MEM_POOL_ATTRIBUTES[name], value),
            "hipMemPoolGetAttribute",
        )
        return int(value[0])

    def trim(self) -> None:
        self.device.synchronize()  # frees queued on streams must land before they can be trimmed
        check(self.api.hipMemPoolTrimTo(self.handle, 0), "hipMemPoolTrimTo")

    def set_peer_access(self, device: Device, enabled: bool) -> None:
        ffi = self.api.ffi
        desc = ffi.new("hipMemAccessDesc*")
        desc.location.type, desc.location.id = MEM_LOCATION_TYPE_DEVICE, device.ordinal
        desc.flags = _READ_WRITE if enabled else MEM_ACCESS_FLAGS["ProtNone"]
        check(self.api.hipMemPoolSetAccess(self.handle, desc, 1), "hipMemPoolSetAccess")

    def peer_access(self, device: Device) -> bool:
        ffi = self.api.ffi
        flags = ffi.new("hipMemAccessFlags*")
        location = ffi.new("hipMemLocation*", (MEM_LOCATION_TYPE_DEVICE, device.ordinal))
        check(self.api.hipMemPoolGetAccess(flags, self.handle, location), "hipMemPoolGetAccess")
        return bool(flags[0] == _READ_WRITE)

    def destroy(self) -> None:
        with self.lock:
            self.destroyed = True
            now = not self.live
        if now:  # else the last buffer's release destroys it
            self._destroy()

    def _destroy(self) -> None:
        self.device.synchronize()
        check(self.api.hipMemPoolDestroy(self.handle), "hipMemPoolDestroy")


class _CachingAllocator:
    """hipMalloc'd blocks kept for reuse, by rounded size.

    A freed block remembers the stream it was freed on: reusing it on that same stream is
    ordered by the stream itself; another stream first waits on an event recorded at the free.
    """

    def __init__(self, device: Device) -> None:
        self.api = hip()
        self.device = device
        self.lock = threading.Lock()
        self.free_blocks: dict[int, list[tuple[int, Stream, Any]]] = defaultdict(list)
        self.block_size: dict[int, int] = {}  # ptr -> rounded size, for every live block
        self.destroyed = False  # after destroy(), blocks still in use are freed when released

    def allocate(self, size: int, stream: Stream) -> int:
        rounded = max(_GRANULE, -(-size // _GRANULE) * _GRANULE)
        with self.lock:
            blocks = self.free_blocks.get(rounded)
            entry = blocks.pop() if blocks else None
        if entry is not None:
            ptr, freed_on, event = entry
            if freed_on is not stream and event is not None:
                stream.wait(event)
            if event is not None:
                event.close()
            return ptr
        out = self.api.ffi.new("void**")
        with self.device:
            check(self.api.hipMalloc(out, rounded), "hipMalloc")
        ptr = int(self.api.ffi.cast("uintptr_t", out[0]))
        with self.lock:
            self.block_size[ptr] = rounded
        return ptr

    def free(self, ptr: int, size: int, stream: Stream) -> None:
        if self.destroyed:
            if not stream.closed:
                stream.sync()  # work queued before the free may still read the block
            with self.lock:
                del self.block_size[ptr]
            check(self.api.hipFree(self.api.ffi.cast("void*", ptr)), "hipFree")
            return
        event = None if stream.closed else stream.record()
        with self.lock:
            self.free_blocks[self.block_size[ptr]].append((ptr, stream, event))

    def cached(self) -> int:
        with self.lock:
            return sum(size * len(blocks) for size, blocks in self.free_blocks.items())

    def trim(self) -> None:
        self.device.synchronize()
        with self.lock:
            entries = [entry for blocks in self.free_blocks.values() for entry in blocks]
            self.free_blocks.clear()
            for ptr, _, _ in entries:
                del self.block_size[ptr]
        for ptr, _, event in entries:
            if event is not None:
                event.close()
            check(self.api.hipFree(self.api.ffi.cast("void*", ptr)), "hipFree")

    def destroy(self) -> None:
        self.destroyed = True
        self.trim()

    def set_peer_access(self, device: Device, enabled: bool) -> None:
        """Blocks are plain hipMalloc memory: what `device` reaches is what its own peer
        access to this allocator's device allows."""
        if enabled:
            peer.enable_peer_access(device, self.device)
        else:
            peer.disable_peer_access(device, self.device)

    def peer_access(self, device: Device) -> bool:
        return peer.enabled(device, self.device)
