"""Peer access between devices, and copies between their memory.

    a, b = Device(0), Device(1)
    if a.can_access_peer(b):
        a.enable_peer_access(b)      # kernels on a may now read and write b's memory
    on_b = b.allocate(n)
    on_b.copy_from(on_a)             # a peer copy (hipMemcpyPeer): needs no peer access
    on_b.copy_from(on_a, stream=s)   # queued on s (hipMemcpyPeerAsync)

Access is one-way and per pair: `a.enable_peer_access(b)` lets work running on `a` dereference
`b`'s memory; `b` reaching `a` takes `b.enable_peer_access(a)`. Enabling twice is harmless
(HIP's hipErrorPeerAccessAlreadyEnabled is swallowed, and cleared from the thread's last
error), as is disabling what is not enabled. Without it, a kernel on `a` that touches `b`'s
memory fails on a GPU (an illegal address on nvidia, a memory access fault on amd) — except on
the cpu platform, where every device is the host and nothing faults: test such code on a GPU.

Peer copies are what `DeviceBuffer.copy_from` / `copy_to` do between buffers of different
devices, with the same checks before anything reaches a device (both open, the source no
larger than the destination). The first copy between two devices turns peer access on both
ways where the pair supports it (as torch does): without it, CUDA stages a peer copy through
host memory. A pair whose access the program disabled (`disable_peer_access`) is left as it
is: its copies still work, staged.

Without `stream=`, the copy is ordered like the null streams of both devices: after all work
queued before it on either device, before any queued after it on either; as for a copy
between two buffers of one device, the host may go on before the bytes land (on nvidia and
amd), but every later operation of either device, and a later synchronous copy to the host,
sees them. With `stream=` (a stream of either device), it is ordered on that stream only and
returns at once.

Pools: `MemoryPool.enable_peer_access(peer)` makes a pool's allocations, present and future,
accessible to kernels on `peer` (hipMemPoolSetAccess for a HIP pool; the device's own peer
access for the caching allocator, whose blocks are plain hipMalloc memory).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from hip_core._hip import hip
from hip_core.errors import HipError, check, error_for
from hip_ffi.constants import ERROR_CODES

if TYPE_CHECKING:
    from hip_core.device import Device
    from hip_core.memory import DeviceBuffer
    from hip_core.stream import Stream

_ALREADY_ENABLED = ERROR_CODES["hipErrorPeerAccessAlreadyEnabled"]
_NOT_ENABLED = ERROR_CODES["hipErrorPeerAccessNotEnabled"]
_UNSUPPORTED = ERROR_CODES["hipErrorPeerAccessUnsupported"]

#: (id of the HipApi, device, peer) for each pair this process enabled through hip-core.
_enabled: set[tuple[int, int, int]] = set()
#: (id of the HipApi, lower ordinal, higher ordinal): pairs a peer copy already linked.
_linked: set[tuple[int, int, int]] = set()
#: (id of the HipApi, device, peer): access the program disabled; copies never re-enable it.
_declined: set[tuple[int, int, int]] = set()
_lock = threading.Lock()


def checked_peer(device: Device, peer: Any, what: str) -> None:
    """TypeError for a `peer` that is not a Device, ValueError for one of another platform or
    for `device` itself (before any HIP call)."""
    from hip_core.device import Device

    if not isinstance(peer, Device):
        raise TypeError(f"{what} takes a hip_core.Device, not {type(peer).__name__}")
    if peer._api is not device._api:
        raise ValueError(f"{what}: {peer!r} belongs to another platform than {device!r}")
    if peer.ordinal == device.ordinal:
        raise ValueError(f"{what}: device {device.ordinal} is not its own peer")


def can_access_peer(device: Device, peer: Device) -> bool:
    """Whether kernels on `device` can access `peer`'s memory once peer access is enabled
    (hipDeviceCanAccessPeer; False for the device itself)."""
    if peer == device:
        return False  # (HIP answers 0: a device is never its own peer)
    checked_peer(device, peer, "can_access_peer")
    api = device._api
    can = api.ffi.new("int*")
    check(api.hipDeviceCanAccessPeer(can, device.ordinal, peer.ordinal), "hipDeviceCanAccessPeer")
    return bool(can[0])


def enable_peer_access(device: Device, peer: Device) -> None:
    """Let kernels on `device` access `peer`'s memory (hipDeviceEnablePeerAccess); idempotent.
    HipError (hipErrorPeerAccessUnsupported) when the pair cannot be linked."""
    checked_peer(device, peer, "enable_peer_access")
    api = device._api
    with device:
        status = api.hipDeviceEnablePeerAccess(peer.ordinal, 0)
        if status == _ALREADY_ENABLED:
            api.hipGetLastError()  # HIP also made it the thread's last error: not an error here
        elif status:
            check(status, "hipDeviceEnablePeerAccess")
    with _lock:
        _enabled.add((id(api), device.ordinal, peer.ordinal))
        _declined.discard((id(api), device.ordinal, peer.ordinal))


def disable_peer_access(device: Device, peer: Device) -> None:
    """Undo `enable_peer_access` (hipDeviceDisablePeerAccess); idempotent."""
    checked_peer(device, peer, "disable_peer_access")
    api = device._api
    with device:
        status = api.hipDeviceDisablePeerAccess(peer.ordinal)
        if status == _NOT_ENABLED:
            api.hipGetLastError()
        elif status:
            check(status, "hipDeviceDisablePeerAccess")
    with _lock:
        _enabled.discard((id(api), device.ordinal, peer.ordinal))
        _declined.add((id(api), device.ordinal, peer.ordinal))


def enabled(device: Device, peer: Device) -> bool:
    """Whether this process enabled access from `device` to `peer` through hip-core."""
    return (id(device._api), device.ordinal, peer.ordinal) in _enabled


def require_capable(device: Device, peer: Device, what: str) -> None:
    """HipError (hipErrorPeerAccessUnsupported) unless `peer` can access `device`'s memory."""
    if not can_access_peer(peer, device):
        raise error_for(
            _UNSUPPORTED, what, f"device {peer.ordinal} cannot access device {device.ordinal}"
        )


def copy(
    dst: DeviceBuffer, src: DeviceBuffer, nbytes: int, stream: Stream | None, handle: Any
) -> None:
    """`nbytes` from the start of `src` to the start of `dst`, buffers of different devices
    (checked by the caller: DeviceBuffer._copy); `handle` is `stream`'s hipStream_t."""
    api = hip()
    low, high = sorted((dst.device.ordinal, src.device.ordinal))
    pair = (id(api), low, high)
    if pair not in _linked:
        _link(dst.device, src.device, pair)
    to, source = dst._void(), src._void()
    if stream is None:
        status = api.hipMemcpyPeer(to, dst.device.ordinal, source, src.device.ordinal, nbytes)
        check(status, "hipMemcpyPeer")
        return
    status = api.hipMemcpyPeerAsync(
        to, dst.device.ordinal, source, src.device.ordinal, nbytes, handle
    )
    check(status, "hipMemcpyPeerAsync")
    stream.keep_until_sync((dst, src))


def _link(a: Device, b: Device, pair: tuple[int, int, int]) -> None:
    """Peer access between `a` and `b`, both ways where the pair supports it and the program
    has not disabled it: what lets a peer copy run device to device (NVLink / PCIe P2P)
    instead of through host memory. Once per pair; a pair that cannot link copies staged."""
    with _lock:
        if pair in _linked:
            return
        _linked.add(pair)
    for device, peer in ((a, b), (b, a)):
        key = (id(device._api), device.ordinal, peer.ordinal)
        if key in _declined or key in _enabled or not can_access_peer(device, peer):
            continue
        try:
            enable_peer_access(device, peer)
        except HipError:  # (e.g. hipErrorTooManyPeers: the copy still works, through the host)
            device._api.hipGetLastError()
