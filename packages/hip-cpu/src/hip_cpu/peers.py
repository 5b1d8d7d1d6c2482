"""Peer access between the cpu platform's devices, with HIP's rules and codes.

Every device is the same host, so any device can reach any other's memory: for two distinct
devices hipDeviceCanAccessPeer answers 1 (a device is never its own peer: 0). Enabling and
disabling follow hipDeviceEnablePeerAccess / hipDeviceDisablePeerAccess to the code: access is
enabled from the calling thread's current device to `peer`; enabling it again is
hipErrorPeerAccessAlreadyEnabled, disabling access that is not enabled
hipErrorPeerAccessNotEnabled, the current device as its own peer hipErrorInvalidDevice, flags
other than 0 hipErrorInvalidValue. Access is per (device, peer) pair and one-way, as in HIP.

What this platform cannot do is refuse: on a GPU, a kernel on device A that dereferences
memory of device B without access from A to B enabled faults (CUDA: hipErrorIllegalAddress, a
sticky error; ROCm: a GPU memory access fault, which aborts the process), because B's memory
is not mapped into A's address space. Here all devices share the host's address space, so the
access simply works: code that forgets hipDeviceEnablePeerAccess passes on the cpu platform
and fails on a GPU. hipMemcpyPeer needs no peer access on any platform (copies.py).
"""

from __future__ import annotations

import threading
from typing import Any

from hip_cpu import ordinals, status
from hip_ffi._ffi import ffi
from hip_ffi.constants import ERROR_CODES

ALREADY_ENABLED = ERROR_CODES["hipErrorPeerAccessAlreadyEnabled"]
NOT_ENABLED = ERROR_CODES["hipErrorPeerAccessNotEnabled"]

_enabled: set[tuple[int, int]] = set()  # (device, peer): kernels on device may access peer's
_lock = threading.Lock()


def hipDeviceCanAccessPeer(can: Any, device: int, peer: int) -> int:
    if can == ffi.NULL:
        return status.INVALID_VALUE
    if not (ordinals.valid(device) and ordinals.valid(peer)):
        return status.INVALID_DEVICE
    can[0] = int(device != peer)  # a device is never its own peer
    return status.SUCCESS


def _pair(peer: int) -> tuple[int, int] | int:
    """(current device, peer), or hipErrorInvalidDevice for a bad or same-device peer."""
    device = ordinals.current()
    if not ordinals.valid(peer) or peer == device:
        return status.INVALID_DEVICE
    return device, peer


def hipDeviceEnablePeerAccess(peer: int, flags: int) -> int:
    """Let kernels on the current device access memory of `peer` (flags must be 0)."""
    pair = _pair(peer)
    if isinstance(pair, int):
        return pair
    if flags != 0:
        return status.INVALID_VALUE
    with _lock:
        if pair in _enabled:
            return ALREADY_ENABLED
        _enabled.add(pair)
    return status.SUCCESS


def hipDeviceDisablePeerAccess(peer: int) -> int:
    pair = _pair(peer)
    if isinstance(pair, int):
        return pair
    with _lock:
        if pair not in _enabled:
            return NOT_ENABLED
        _enabled.discard(pair)
    return status.SUCCESS
