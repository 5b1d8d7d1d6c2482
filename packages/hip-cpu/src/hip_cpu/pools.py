"""Memory pools and stream-ordered allocation of the cpu platform.

Each device (ordinals.py) has a default pool, which is also its current pool until
hipDeviceSetMemPool; hipMallocAsync allocates from the current pool of its stream's device,
hipMallocFromPoolAsync from the pool given, counted against the pool's device (memory.py).
Stream-ordered allocations are not cached: a pool's reserved memory is its used memory, and
hipMemPoolTrimTo has nothing to release. hipFreeAsync frees in stream order.

Peer access to a pool (hipMemPoolSetAccess / hipMemPoolGetAccess) follows HIP's rules and is
recorded; every device can reach every other's memory here anyway (peers.py says what that
means for code that forgets it). Pool allocations cannot be exported (ipc.py), as on CUDA.
"""

from __future__ import annotations

from typing import Any

from hip_cpu import memory, ordinals, status
from hip_cpu.memory import Pool
from hip_cpu.streams import ENGINE
from hip_ffi._ffi import ffi
from hip_ffi.constants import (
    MEM_ACCESS_FLAGS,
    MEM_ALLOCATION_TYPE_PINNED,
    MEM_LOCATION_TYPE_DEVICE,
    MEM_POOL_ATTRIBUTES,
)
from hip_ffi.handles import Registry, address, takes_handle

POOLS: Registry[Pool] = Registry("hipMemPool_t")
#: Each device's default pool handle, and its current pool handle, by ordinal.
_DEFAULT = [POOLS.add(Pool(device=device)) for device in range(ordinals.count())]
_current = list(_DEFAULT)
on_pool = takes_handle(POOLS.get, status.INVALID_VALUE)
_ACCESS_FLAGS = MEM_ACCESS_FLAGS.values()
_READ_WRITE, _NONE = MEM_ACCESS_FLAGS["ProtReadWrite"], MEM_ACCESS_FLAGS["ProtNone"]


def hipMallocAsync(pointer: Any, size: int, stream: Any) -> int:
    """Allocates at once from the current pool of `stream`'s device; usable by work on
    `stream` from now."""
    resolved = ENGINE.resolve(stream)
    if resolved is None:
        return status.INVALID_HANDLE
    pool = POOLS.get(_current[resolved.device])
    device = resolved.device if pool is None else pool.device
    return memory.allocate(pointer, size, memory.DEVICE, device, pool=pool)


def hipMallocFromPoolAsync(pointer: Any, size: int, pool: Any, stream: Any) -> int:
    found = POOLS.get(pool)
    if found is None:
        return status.INVALID_VALUE
    if ENGINE.resolve(stream) is None:
        return status.INVALID_HANDLE
    return memory.allocate(pointer, size, memory.DEVICE, found.device, pool=found)


def hipFreeAsync(pointer: Any, stream: Any) -> int:
    """Frees once the work enqueued on `stream` before it has finished."""
    resolved = ENGINE.resolve(stream)
    if resolved is None:
        return status.INVALID_HANDLE
    found = memory.take(pointer, memory.DEVICE)
    if isinstance(found, int):
        return found

    def free() -> int:
        memory.release(found)
        return status.SUCCESS

    return ENGINE.submit(resolved, free)


def hipDeviceGetDefaultMemPool(pool: Any, device: int) -> int:
    return _write_pool(pool, device, _DEFAULT)


def hipDeviceGetMemPool(pool: Any, device: int) -> int:
    return _write_pool(pool, device, _current)


def _write_pool(out: Any, device: int, handles: list[int]) -> int:
    if out == ffi.NULL:
        return status.INVALID_VALUE
    if not ordinals.valid(device):
        return status.INVALID_DEVICE
    out[0] = POOLS.cdata(handles[device])
    return status.SUCCESS


def hipDeviceSetMemPool(device: int, pool: Any) -> int:
    """Make `pool` (one of `device`'s) the pool hipMallocAsync takes from on `device`."""
    if not ordinals.valid(device):
        return status.INVALID_DEVICE
    found = POOLS.get(pool)
    if found is None or found.device != device:
        return status.INVALID_VALUE
    _current[device] = address(pool)
    return status.SUCCESS


def hipMemPoolCreate(pool: Any, props: Any) -> int:
    """A pool of pinned device memory on the device `props.location.id` names (the only kind
    of pool there is here)."""
    if pool == ffi.NULL or props == ffi.NULL:
        return status.INVALID_VALUE
    location = props.location
    if (
        props.allocType != MEM_ALLOCATION_TYPE_PINNED
        or location.type != MEM_LOCATION_TYPE_DEVICE
        or not ordinals.valid(location.id)
    ):
        return status.INVALID_VALUE
    pool[0] = POOLS.cdata(POOLS.add(Pool(device=location.id)))
    return status.SUCCESS


def hipMemPoolDestroy(pool: Any) -> int:
    value = address(pool)
    if value in _DEFAULT or POOLS.remove(value) is None:
        return status.INVALID_VALUE
    for device, current in enumerate(_current):
        if current == value:
            _current[device] = _DEFAULT[device]
    return status.SUCCESS


def hipMemPoolSetAccess(pool: Any, descriptors: Any, count: int) -> int:
    """Which devices may access `pool`'s allocations, as HIP checks it: each descriptor names
    a device (hipMemLocationTypeDevice, else hipErrorInvalidValue; a bad ordinal, more
    descriptors than devices, or the pool's own device with anything but read-write:
    hipErrorInvalidDevice) and hipMemAccessFlags (ProtNone, ProtRead, ProtReadWrite). All are
    checked before any is applied. Access is only recorded here (peers.py: every device can
    reach every other's memory)."""
    found = POOLS.get(pool)
    if found is None or (count and address(descriptors) == 0):
        return status.INVALID_VALUE
    if count > ordinals.count():
        return status.INVALID_DEVICE
    wanted: dict[int, int] = {}
    for i in range(count):
        location, flags = descriptors[i].location, descriptors[i].flags
        if location.type != MEM_LOCATION_TYPE_DEVICE or flags not in _ACCESS_FLAGS:
            return status.INVALID_VALUE
        if not ordinals.valid(location.id):
            return status.INVALID_DEVICE
        if location.id == found.device and flags != _READ_WRITE:
            return status.INVALID_DEVICE  # a pool's own device keeps read-write access
        wanted[location.id] = flags
    found.access.update(wanted)
    return status.SUCCESS


def hipMemPoolGetAccess(flags: Any, pool: Any, location: Any) -> int:
    """The hipMemAccessFlags of device `location.id` on `pool` (its own device: read-write;
    others: ProtNone until hipMemPoolSetAccess)."""
    found = POOLS.get(pool)
    if found is None or address(flags) == 0 or address(location) == 0:
        return status.INVALID_VALUE
    if location.type != MEM_LOCATION_TYPE_DEVICE:
        return status.INVALID_VALUE
    if not ordinals.valid(location.id):
        return status.INVALID_DEVICE
    own = location.id == found.device
    flags[0] = _READ_WRITE if own else found.access.get(location.id, _NONE)
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
