"""Allocations of the cpu platform: device, pinned and registered host memory.

Device memory (hipMalloc, hipMallocAsync) and pinned memory (hipHostMalloc) are both host
memory, 256-byte aligned like a GPU allocation, and any code on the host can dereference them.
Device memory comes from the shareable arena (arena.py: one memfd mapping, so that
hipIpcGetMemHandle can export any allocation later; ipc.py), pinned memory from aligned_alloc.
Both count against the current device's size (limits.py: physical memory or the cgroup limit,
split between the devices): an allocation past what is left is hipErrorOutOfMemory, never an
overcommit that the kernel's OOM killer settles later. In checked mode (faults.py) each
allocation is its own private mapping between inaccessible pages, so that a kernel's overrun
faults (and cannot be exported).

The registry of allocations is what makes this a HIP runtime rather than malloc: it knows which
pointer is what (hipPointerGetAttributes), refuses to free a pointer it did not hand out
(hipErrorInvalidValue, never a crash), bounds-checks copies that touch known allocations, and
tells pinned from pageable memory for the copy semantics (copies.py), and knows the device each
allocation belongs to (the device current at the call; a pool's own device).

hipFree and hipHostFree first wait for all work on every stream (HIP's implicit device
synchronize), so no queued kernel or copy can touch freed memory; called where waiting could
deadlock (a garbage-collection finalizer running on a stream's worker thread) they return at
once and the memory is freed when that work has finished. Pools and stream-ordered allocation:
pools.py.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass, field
from typing import Any

from hip_cpu import arena, faults, limits, ordinals, status
from hip_cpu.device import ALIGNMENT
from hip_cpu.shared_objects import libc
from hip_cpu.streams import ENGINE
from hip_ffi._ffi import ffi
from hip_ffi.constants import MEMORY_TYPES
from hip_ffi.handles import address

# HOST: pinned (hipHostMalloc); REGISTERED: the caller's, pinned by hipHostRegister;
# IMPORTED: another process's device memory, mapped by hipIpcOpenMemHandle (ipc.py).
DEVICE, HOST, REGISTERED, IMPORTED = "device", "host", "registered", "imported"
DEVICE_KINDS = (DEVICE, IMPORTED)
_HOST_MALLOC_FLAGS = 0x1 | 0x2 | 0x4 | 0x10000000 | 0x20000000 | 0x40000000  # + coherence/NUMA
_HOST_REGISTER_FLAGS = 0x1 | 0x2 | 0x4 | 0x8


@dataclass
class Pool:
    """A memory pool's device, attributes, access and accounting (bytes)."""

    device: int = 0
    access: dict[int, int] = field(default_factory=dict)  # peer ordinal -> hipMemAccessFlags
    release_threshold: int = 0
    reuse: dict[int, int] = field(default_factory=lambda: {1: 1, 2: 1, 3: 1})
    used: int = 0
    used_high: int = 0


@dataclass
class Allocation:
    base: int
    size: int  # bytes requested
    kind: str  # DEVICE, HOST, REGISTERED or IMPORTED
    flags: int = 0
    pool: Pool | None = None
    counted: int = 0  # bytes counted against its device's bound (limits.BUDGETS)
    mapping: tuple[int, int] | None = None  # its own mapping (start, length): checked, IMPORTED
    device: int = 0
    shared: bool = False  # in the arena (exportable)
    exported: tuple[int, int] | None = None  # (slot, serial) in the arena's export table

    @property
    def end(self) -> int:
        return self.base + self.size


class _Allocations:
    """Allocations by base address, searchable by any address inside them."""

    def __init__(self) -> None:
        self._bases: list[int] = []
        self._by_base: dict[int, Allocation] = {}
        self._lock = threading.Lock()

    def add(self, allocation: Allocation) -> None:
        with self._lock:
            bisect.insort(self._bases, allocation.base)
            self._by_base[allocation.base] = allocation

    def remove(self, base: int) -> None:
        with self._lock:
            del self._by_base[base]
            del self._bases[bisect.bisect_left(self._bases, base)]

    def at(self, base: int) -> Allocation | None:
        """The allocation starting exactly at `base`."""
        return self._by_base.get(base)

    def containing(self, pointer: int) -> Allocation | None:
        """The allocation that `pointer` points into."""
        with self._lock:
            i = bisect.bisect_right(self._bases, pointer) - 1
            if i < 0:
                return None
            found = self._by_base[self._bases[i]]
        return found if pointer < found.end else None

    def overlapping(self, start: int, end: int) -> bool:
        with self._lock:
            i = bisect.bisect_left(self._bases, end) - 1
            return i >= 0 and self._by_base[self._bases[i]].end > start


ALLOCATIONS = _Allocations()


def is_pinned(pointer: int) -> bool:
    """True for device, pinned and registered memory; False for pageable host memory."""
    return ALLOCATIONS.containing(pointer) is not None


def check_range(pointer: int, size: int) -> int:
    """hipErrorInvalidValue when [pointer, pointer+size) runs past a known allocation."""
    if size and pointer == 0:
        return status.INVALID_VALUE
    found = ALLOCATIONS.containing(pointer)
    if found is not None and pointer + size > found.end:
        return status.INVALID_VALUE
    return status.SUCCESS


def allocate(
    out: Any, size: int, kind: str, device: int, flags: int = 0, pool: Pool | None = None
) -> int:
    """`size` bytes of `kind` counted against `device` (and `pool`) into `*out`."""
    if out == ffi.NULL:
        return status.INVALID_VALUE
    if size == 0:
        out[0] = ffi.NULL  # HIP: a zero-size allocation succeeds with NULL
        return status.SUCCESS
    rounded = -(-size // ALIGNMENT) * ALIGNMENT  # aligned_alloc wants a multiple of the alignment
    budget = limits.BUDGETS[device]
    if not budget.take(rounded):  # past the device's size: fail like a GPU, never overcommit
        return status.OUT_OF_MEMORY
    mapping, base, shared = None, 0, False
    if faults.CHECKED:  # its own mapping, between inaccessible pages
        guarded = faults.map_guarded(rounded)
        base, mapping = (guarded[0], guarded[1:]) if guarded else (0, None)
    else:
        if kind == DEVICE and (memory := arena.get()) is not None:
            base = memory.allocate(rounded)
            shared = base != 0
        if base == 0:  # pinned memory, or the arena is unavailable or full
            base = int(libc.aligned_alloc(ALIGNMENT, rounded))
    if base == 0:
        budget.give_back(rounded)
        return status.OUT_OF_MEMORY
    ALLOCATIONS.add(Allocation(base, size, kind, flags, pool, rounded, mapping, device, shared))
    if pool is not None:
        pool.used += size
        pool.used_high = max(pool.used_high, pool.used)
    out[0] = ffi.cast("void*", base)
    return status.SUCCESS


def _unregister(allocation: Allocation) -> None:
    ALLOCATIONS.remove(allocation.base)
    if allocation.pool is not None:
        allocation.pool.used -= allocation.size
    if allocation.exported is not None:  # handles of it stop opening from now on
        shared = arena.get()
        if shared is not None:
            shared.unexport(*allocation.exported)


def release(allocation: Allocation) -> None:
    """Give an allocation's memory back (its table entry is gone already: `take`)."""
    if allocation.mapping is not None:
        faults.unmap(*allocation.mapping)
    elif allocation.shared:
        shared = arena.get()
        if shared is not None:
            shared.free(allocation.base, allocation.counted)
    else:
        libc.free(allocation.base)
    limits.BUDGETS[allocation.device].give_back(allocation.counted)


def take(pointer: Any, kind: str) -> Allocation | int:
    """The `kind` allocation at `pointer`, taken out of the table so that a second free of it
    fails from now on; else a status: hipSuccess for NULL (nothing to free), else
    hipErrorInvalidValue."""
    base = address(pointer)
    if base == 0:
        return status.SUCCESS
    found = ALLOCATIONS.at(base)
    if found is None or found.kind != kind:
        return status.INVALID_VALUE
    _unregister(found)
    return found


def free(pointer: Any, kind: str) -> int:
    """Free the `kind` allocation at `pointer` once no queued work can use it (see the module
    doc); hipErrorInvalidValue for any other pointer."""
    found = take(pointer, kind)
    if isinstance(found, int):
        return found
    if ENGINE.must_not_wait():  # a finalizer on a worker or inside the engine: free later
        ENGINE.release_later(lambda: release(found))
    else:
        ENGINE.wait_all()  # no queued work may still use it
        release(found)
    return status.SUCCESS


def hipMalloc(pointer: Any, size: int) -> int:
    """`size` bytes of the current device's memory (host memory here, in the shareable arena),
    256-byte aligned, uninitialized."""
    return allocate(pointer, size, DEVICE, ordinals.current())


def hipFree(pointer: Any) -> int:
    """Waits for all streams, then frees. A pointer hipMalloc did not return: InvalidValue."""
    return free(pointer, DEVICE)


def hipHostMalloc(pointer: Any, size: int, flags: int) -> int:
    """Pinned host memory (copies from it are truly asynchronous); 256-byte aligned."""
    if flags & ~_HOST_MALLOC_FLAGS:
        return status.INVALID_VALUE
    return allocate(pointer, size, HOST, ordinals.current(), flags)


def hipHostFree(pointer: Any) -> int:
    return free(pointer, HOST)


def hipHostRegister(pointer: Any, size: int, flags: int) -> int:
    """Treat the caller's [pointer, pointer+size) as pinned until hipHostUnregister."""
    base = address(pointer)
    if base == 0 or size == 0 or flags & ~_HOST_REGISTER_FLAGS:
        return status.INVALID_VALUE
    if ALLOCATIONS.overlapping(base, base + size):
        return status.HOST_MEMORY_ALREADY_REGISTERED
    ALLOCATIONS.add(Allocation(base, size, REGISTERED, flags, device=ordinals.current()))
    return status.SUCCESS


def hipHostUnregister(pointer: Any) -> int:
    found = ALLOCATIONS.at(address(pointer))
    if found is None or found.kind != REGISTERED:
        return status.HOST_MEMORY_NOT_REGISTERED
    if not ENGINE.must_not_wait():
        ENGINE.wait_all()  # queued asynchronous copies from it run as from pinned memory
    ALLOCATIONS.remove(found.base)
    return status.SUCCESS


def hipHostGetDevicePointer(device_pointer: Any, host_pointer: Any, flags: int) -> int:
    """The device address of pinned or registered memory: the same address here."""
    pointer = address(host_pointer)
    found = ALLOCATIONS.containing(pointer)
    if device_pointer == ffi.NULL or flags != 0 or found is None or found.kind in DEVICE_KINDS:
        return status.INVALID_VALUE
    device_pointer[0] = ffi.cast("void*", pointer)
    return status.SUCCESS


def hipPointerGetAttributes(attributes: Any, pointer: Any) -> int:
    """What `pointer` points into and the device it belongs to (pinned and registered memory:
    the device current when it was allocated or registered; memory opened by
    hipIpcOpenMemHandle: the device current at the open); pageable memory reports type
    Unregistered (HIP >= 6) on device 0."""
    if attributes == ffi.NULL:
        return status.INVALID_VALUE
    value = address(pointer)
    found = ALLOCATIONS.containing(value)
    attributes.isManaged = 0
    if found is None:
        attributes.device = 0
        attributes.type = MEMORY_TYPES["Unregistered"]
        attributes.devicePointer = ffi.NULL
        attributes.hostPointer = ffi.NULL
        attributes.allocationFlags = 0
        return status.SUCCESS
    on_device = found.kind in DEVICE_KINDS
    attributes.device = found.device
    attributes.type = MEMORY_TYPES["Device" if on_device else "Host"]
    attributes.devicePointer = ffi.cast("void*", value)
    attributes.hostPointer = ffi.NULL if on_device else ffi.cast("void*", value)
    attributes.allocationFlags = found.flags
    return status.SUCCESS
