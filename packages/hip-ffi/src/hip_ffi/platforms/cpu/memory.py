"""Allocations of the cpu platform: device, pinned and registered host memory, memory pools.

Device memory (hipMalloc, hipMallocAsync) and pinned memory (hipHostMalloc) are both host
memory from aligned_alloc, 256-byte aligned like a GPU allocation, and any code on the host can
dereference them. Both count against the device's size (limits.py: physical memory or the
cgroup limit): an allocation past what is left is hipErrorOutOfMemory, never an overcommit
that the kernel's OOM killer settles later. In checked mode (faults.py) each allocation is its
own mapping between inaccessible pages, so that a kernel's overrun faults.

The registry of allocations is what makes this a HIP runtime rather than malloc: it knows which
pointer is what (hipPointerGetAttributes), refuses to free a pointer it did not hand out
(hipErrorInvalidValue, never a crash), bounds-checks copies that touch known allocations, and
tells pinned from pageable memory for the copy semantics (copies.py).

hipFree and hipHostFree first wait for all work on every stream (HIP's implicit device
synchronize), so no queued kernel or copy can touch freed memory; called where waiting could
deadlock (a garbage-collection finalizer running on a stream's worker thread) they return at
once and the memory is freed when that work has finished. hipFreeAsync frees in stream order.
Stream-ordered allocations are not cached: a pool's reserved memory is its used memory, and
hipMemPoolTrimTo has nothing to release.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass, field
from typing import Any

from hip_ffi._ffi import ffi
from hip_ffi.constants import (
    MEM_ALLOCATION_TYPE_PINNED,
    MEM_LOCATION_TYPE_DEVICE,
    MEM_POOL_ATTRIBUTES,
    MEMORY_TYPES,
)
from hip_ffi.platforms.cpu import faults, limits, status
from hip_ffi.platforms.cpu.device import ALIGNMENT
from hip_ffi.platforms.cpu.handles import Registry, address, takes_handle
from hip_ffi.platforms.cpu.shared_objects import libc
from hip_ffi.platforms.cpu.streams import ENGINE

DEVICE, HOST, REGISTERED = "device", "host", "registered"
_HOST_MALLOC_FLAGS = 0x1 | 0x2 | 0x4 | 0x10000000 | 0x20000000 | 0x40000000  # + coherence/NUMA
_HOST_REGISTER_FLAGS = 0x1 | 0x2 | 0x4 | 0x8


@dataclass
class Pool:
    """A memory pool's attributes and accounting (bytes)."""

    release_threshold: int = 0
    reuse: dict[int, int] = field(default_factory=lambda: {1: 1, 2: 1, 3: 1})
    used: int = 0
    used_high: int = 0


@dataclass
class Allocation:
    base: int
    size: int  # bytes requested
    kind: str  # DEVICE, HOST (pinned) or REGISTERED (caller's memory, pinned by hipHostRegister)
    flags: int = 0
    pool: Pool | None = None
    counted: int = 0  # bytes counted against the device's bound (limits.BUDGET)
    mapping: tuple[int, int] | None = None  # checked mode: its own mapping (start, length)

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
POOLS: Registry[Pool] = Registry("hipMemPool_t")
DEFAULT_POOL = Pool()
_default_pool_handle = POOLS.add(DEFAULT_POOL)
_current_pool = _default_pool_handle
on_pool = takes_handle(POOLS.get, status.INVALID_VALUE)


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


def _allocate(out: Any, size: int, kind: str, flags: int = 0, pool: Pool | None = None) -> int:
    if out == ffi.NULL:
        return status.INVALID_VALUE
    if size == 0:
        out[0] = ffi.NULL  # HIP: a zero-size allocation succeeds with NULL
        return status.SUCCESS
    rounded = -(-size // ALIGNMENT) * ALIGNMENT  # aligned_alloc wants a multiple of the alignment
    if not limits.BUDGET.take(rounded):  # past the device's size: fail like a GPU, never overcommit
        return status.OUT_OF_MEMORY
    mapping = None
    if faults.CHECKED:  # its own mapping, between inaccessible pages
        guarded = faults.map_guarded(rounded)
        base, mapping = (guarded[0], guarded[1:]) if guarded else (0, None)
    else:
        base = int(libc.aligned_alloc(ALIGNMENT, rounded))
    if base == 0:
        limits.BUDGET.give_back(rounded)
        return status.OUT_OF_MEMORY
    ALLOCATIONS.add(Allocation(base, size, kind, flags, pool, rounded, mapping))
    if pool is not None:
        pool.used += size
        pool.used_high = max(pool.used_high, pool.used)
    out[0] = ffi.cast("void*", base)
    return status.SUCCESS


def _unregister(allocation: Allocation) -> None:
    ALLOCATIONS.remove(allocation.base)
    if allocation.pool is not None:
        allocation.pool.used -= allocation.size


def _release(allocation: Allocation) -> None:
    if allocation.mapping is not None:
        faults.unmap(*allocation.mapping)
    else:
        libc.free(allocation.base)
    limits.BUDGET.give_back(allocation.counted)


def _take(pointer: Any, kind: str) -> Allocation | int:
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


def _free(pointer: Any, kind: str) -> int:
    found = _take(pointer, kind)
    if isinstance(found, int):
        return found
    if ENGINE.must_not_wait():  # a finalizer on a worker or inside the engine: free later
        ENGINE.release_later(lambda: _release(found))
    else:
        ENGINE.wait_all()  # no queued work may still use it
        _release(found)
    return status.SUCCESS


def hipMalloc(pointer: Any, size: int) -> int:
    """`size` bytes of device memory (host memory here), 256-byte aligned, uninitialized."""
    return _allocate(pointer, size, DEVICE)


def hipFree(pointer: Any) -> int:
    """Waits for all streams, then frees. A pointer hipMalloc did not return: InvalidValue."""
    return _free(pointer, DEVICE)


def hipHostMalloc(pointer: Any, size: int, flags: int) -> int:
    """Pinned host memory (copies from it are truly asynchronous); 256-byte aligned."""
    if flags & ~_HOST_MALLOC_FLAGS:
        return status.INVALID_VALUE
    return _allocate(pointer, size, HOST, flags)


def hipHostFree(pointer: Any) -> int:
    return _free(pointer, HOST)


def hipHostRegister(pointer: Any, size: int, flags: int) -> int:
    """Treat the caller's [pointer, pointer+size) as pinned until hipHostUnregister."""
    base = address(pointer)
    if base == 0 or size == 0 or flags & ~_HOST_REGISTER_FLAGS:
        return status.INVALID_VALUE
    if ALLOCATIONS.overlapping(base, base + size):
        return status.HOST_MEMORY_ALREADY_REGISTERED
    ALLOCATIONS.add(Allocation(base, size, REGISTERED, flags))
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
    if device_pointer == ffi.NULL or flags != 0 or found is None or found.kind == DEVICE:
        return status.INVALID_VALUE
    device_pointer[0] = ffi.cast("void*", pointer)
    return status.SUCCESS


def hipPointerGetAttributes(attributes: Any, pointer: Any) -> int:
    """What `pointer` points into; pageable memory reports type Unregistered (HIP >= 6)."""
    if attributes == ffi.NULL:
        return status.INVALID_VALUE
    value = address(pointer)
    found = ALLOCATIONS.containing(value)
    attributes.device = 0
    attributes.isManaged = 0
    if found is None:
        attributes.type = MEMORY_TYPES["Unregistered"]
        attributes.devicePointer = ffi.NULL
        attributes.hostPointer = ffi.NULL
        attributes.allocationFlags = 0
        return status.SUCCESS
    attributes.type = MEMORY_TYPES["Device" if found.kind == DEVICE else "Host"]
    attributes.devicePointer = ffi.cast("void*", value)
    attributes.hostPointer = ffi.NULL if found.kind == DEVICE else ffi.cast("void*", value)
    attributes.allocationFlags = found.flags
    return status.SUCCESS


# ---- stream-ordered allocation and pools ------------------------------------------------


def hipMallocAsync(pointer: Any, size: int, stream: Any) -> int:
    """Allocates at once from the device's current pool; usable by work on `stream` from now."""
    if ENGINE.resolve(stream) is None:
        return status.INVALID_HANDLE
    pool = POOLS.get(_current_pool)
    return _allocate(pointer, size, DEVICE, pool=pool)


def hipMallocFromPoolAsync(pointer: Any, size: int, pool: Any, stream: Any) -> int:
    found = POOLS.get(pool)
    if found is None:
        return status.INVALID_VALUE
    if ENGINE.resolve(stream) is None:
        return status.INVALID_HANDLE
    return _allocate(pointer, size, DEVICE, pool=found)


def hipFreeAsync(pointer: Any, stream: Any) -> int:
    """Frees once the work enqueued on `stream` before it has finished."""
    resolved = ENGINE.resolve(stream)
    if resolved is None:
        return status.INVALID_HANDLE
    found = _take(pointer, DEVICE)
    if isinstance(found, int):
        return found

    def free() -> int:
        _release(found)
        return status.SUCCESS

    return ENGINE.submit(resolved, free)


def hipDeviceGetDefaultMemPool(pool: Any, device: int) -> int:
    return _write_pool(pool, device, _default_pool_handle)


def hipDeviceGetMemPool(pool: Any, device: int) -> int:
    return _write_pool(pool, device, _current_pool)


def _write_pool(out: Any, device: int, handle: int) -> int:
    if out == ffi.NULL:
        return status.INVALID_VALUE
    if device != 0:
        return status.INVALID_DEVICE
    out[0] = POOLS.cdata(handle)
    return status.SUCCESS


def hipDeviceSetMemPool(device: int, pool: Any) -> int:
    global _current_pool
    if device != 0:
        return status.INVALID_DEVICE
    if POOLS.get(pool) is None:
        return status.INVALID_VALUE
    _current_pool = address(pool)
    return status.SUCCESS


def hipMemPoolCreate(pool: Any, props: Any) -> int:
    """A pool of pinned device memory on device 0 (the only kind of pool there is here)."""
    if pool == ffi.NULL or props == ffi.NULL:
        return status.INVALID_VALUE
    location = props.location
    if (
        props.allocType != MEM_ALLOCATION_TYPE_PINNED
        or location.type != MEM_LOCATION_TYPE_DEVICE
        or location.id != 0
    ):
        return status.INVALID_VALUE
    pool[0] = POOLS.cdata(POOLS.add(Pool()))
    return status.SUCCESS


def hipMemPoolDestroy(pool: Any) -> int:
    global _current_pool
    value = address(pool)
    if value == _default_pool_handle or POOLS.remove(value) is None:
        return status.INVALID_VALUE
    if _current_pool == value:
        _current_pool = _default_pool_handle
    return status.SUCCESS


_U64_ATTRIBUTES = {MEM_POOL_ATTRIBUTES[n] for n in ("ReleaseThreshold", "ReservedMemCurrent",
                                                     "ReservedMemHigh", "UsedMemCurrent",
                                                     "UsedMemHigh")}  # fmt: skip


_ATTRIBUTE_NAMES = {value: name for name, value in MEM_POOL_ATTRIBUTES.items()}


@on_pool
def hipMemPoolSetAttribute(pool: Pool, attribute: int, value: Any) -> int:
    """ReleaseThreshold (uint64), the Reuse* flags (int); the *High watermarks reset to 0."""
    if address(value) == 0:
        return status.INVALID_VALUE
    name = _ATTRIBUTE_NAMES.get(attribute)
    if name == "ReleaseThreshold":
        pool.release_threshold = int(ffi.cast("uint64_t*", value)[0])
    elif name in ("ReuseFollowEventDependencies", "ReuseAllowOpportunistic",
                  "ReuseAllowInternalDependencies"):  # fmt: skip
        pool.reuse[attribute] = int(ffi.cast("int*", value)[0])
    elif name in ("ReservedMemHigh", "UsedMemHigh") and ffi.cast("uint64_t*", value)[0] == 0:
        pool.used_high = pool.used
    else:
        return status.INVALID_VALUE
    return status.SUCCESS


@on_pool
def hipMemPoolGetAttribute(pool: Pool, attribute: int, value: Any) -> int:
    name = _ATTRIBUTE_NAMES.get(attribute)
    if name is None or address(value) == 0:
        return status.INVALID_VALUE
    if attribute in _U64_ATTRIBUTES:
        result = {
            "ReleaseThreshold": pool.release_threshold,
            "ReservedMemCurrent": pool.used,
            "ReservedMemHigh": pool.used_high,
            "UsedMemCurrent": pool.used,
            "UsedMemHigh": pool.used_high,
        }[name]
        ffi.cast("uint64_t*", value)[0] = result
    else:
        ffi.cast("int*", value)[0] = pool.reuse[attribute]
    return status.SUCCESS


@on_pool
def hipMemPoolTrimTo(pool: Pool, min_bytes_to_hold: int) -> int:
    return status.SUCCESS  # nothing is held back: freed memory goes back to the host at once
