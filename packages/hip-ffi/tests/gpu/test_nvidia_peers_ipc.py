"""Peer access, peer copies, pool access and IPC of the nvidia platform on real GPUs, at the
HIP surface (run on two H200s: `pytest -m gpu`). The peer tests skip, saying so, with fewer
than two devices; the IPC ones need one. The same calls run on the cpu platform in CI
(hip-cpu's test_cpu_devices.py, test_cpu_ipc.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

import hip_ffi
from hip_ffi import constants

pytestmark = pytest.mark.gpu
E = constants.ERROR_CODES
H2D, D2H = constants.MEMCPY_HOST_TO_DEVICE, constants.MEMCPY_DEVICE_TO_HOST
LAZY = constants.IPC_MEM_LAZY_ENABLE_PEER_ACCESS

CHILD = r"""
import sys
import hip_ffi
hip = hip_ffi.load("nvidia")
ffi = hip.ffi
assert hip.hipSetDevice(0) == 0
handle = ffi.new("hipIpcMemHandle_t*")
ffi.memmove(handle.reserved, bytes.fromhex(sys.argv[1]), 64)
out = ffi.new("void**")
status = hip.hipIpcOpenMemHandle(out, handle[0], 1)
assert status == 0, status
seen = bytearray(8)
assert hip.hipMemcpy(ffi.from_buffer(seen), out[0], 8, 2) == 0
assert hip.hipMemcpy(out[0], b"child!!!", 8, 1) == 0
assert hip.hipIpcCloseMemHandle(out[0]) == 0
print(bytes(seen).hex())
"""


@pytest.fixture
def pair(hip: Any) -> Any:
    count, _ = hip_ffi.device_count(hip)
    if count < 2:
        pytest.skip(f"peer tests need two GPUs; this machine has {count}")
    return hip


def allocations(hip: Any, size: int, *devices: int) -> list[Any]:
    """`size` bytes on each of `devices`; device 0 is current after."""
    pointers = []
    for device in devices:
        out = hip.ffi.new("void**")
        assert hip.hipSetDevice(device) == 0 and hip.hipMalloc(out, size) == 0
        pointers.append(out[0])
    assert hip.hipSetDevice(0) == 0
    return pointers


def test_peer_access_codes(pair: Any) -> None:
    hip = pair
    can = hip.ffi.new("int*")
    assert hip.hipDeviceCanAccessPeer(can, 0, 0) == 0 and can[0] == 0
    assert hip.hipDeviceCanAccessPeer(can, 0, 1) == 0
    if not can[0]:
        pytest.skip("devices 0 and 1 cannot access each other")
    assert hip.hipSetDevice(0) == 0
    first = hip.hipDeviceEnablePeerAccess(1, 0)  # (hip-core's tests may have enabled it)
    assert first in (0, E["hipErrorPeerAccessAlreadyEnabled"])
    assert hip.hipDeviceEnablePeerAccess(1, 0) == E["hipErrorPeerAccessAlreadyEnabled"]
    assert hip.hipGetLastError() == E["hipErrorPeerAccessAlreadyEnabled"]
    assert hip.hipDeviceDisablePeerAccess(1) == 0
    assert hip.hipDeviceDisablePeerAccess(1) == E["hipErrorPeerAccessNotEnabled"]
    assert hip.hipDeviceEnablePeerAccess(0, 0) != 0  # a device is not its own peer
    hip.hipGetLastError()
    assert hip.hipDeviceEnablePeerAccess(1, 0) == 0  # left enabled, as found or more


def test_peer_copies(pair: Any) -> None:
    hip, ffi = pair, pair.ffi
    data = np.random.default_rng().integers(0, 255, 1 << 22, dtype=np.uint8)
    a, b = allocations(hip, data.nbytes, 0, 1)
    stream = ffi.new("hipStream_t*")
    out = np.zeros_like(data)
    try:
        assert hip.hipSetDevice(0) == 0
        assert hip.hipMemcpy(a, ffi.from_buffer(data), data.nbytes, H2D) == 0
        assert hip.hipMemcpyPeer(b, 1, a, 0, data.nbytes) == 0
        assert hip.hipSetDevice(1) == 0 and hip.hipDeviceSynchronize() == 0
        assert hip.hipMemcpy(ffi.from_buffer(out), b, data.nbytes, D2H) == 0
        np.testing.assert_array_equal(out, data)
        assert hip.hipStreamCreateWithFlags(stream, constants.STREAM_NON_BLOCKING) == 0
        assert hip.hipMemset(b, 0, data.nbytes) == 0
        assert hip.hipMemcpyPeerAsync(b, 1, a, 0, data.nbytes, stream[0]) == 0
        assert hip.hipStreamSynchronize(stream[0]) == 0
        assert hip.hipMemcpy(ffi.from_buffer(out), b, data.nbytes, D2H) == 0
        np.testing.assert_array_equal(out, data)
    finally:
        if stream[0] != ffi.NULL:
            assert hip.hipStreamDestroy(stream[0]) == 0
        assert hip.hipSetDevice(0) == 0 and hip.hipFree(a) == 0 and hip.hipFree(b) == 0


def test_pool_access(pair: Any) -> None:
    hip, ffi = pair, pair.ffi
    can = ffi.new("int*")
    assert hip.hipDeviceCanAccessPeer(can, 1, 0) == 0
    if not can[0]:
        pytest.skip("device 1 cannot access device 0")
    pool, flags = ffi.new("hipMemPool_t*"), ffi.new("hipMemAccessFlags*")
    assert hip.hipDeviceGetDefaultMemPool(pool, 0) == 0
    location = ffi.new("hipMemLocation*", (constants.MEM_LOCATION_TYPE_DEVICE, 0))
    assert hip.hipMemPoolGetAccess(flags, pool[0], location) == 0
    assert flags[0] == constants.MEM_ACCESS_FLAGS["ProtReadWrite"]  # its own device
    desc = ffi.new("hipMemAccessDesc*")
    desc.location.type, desc.location.id = constants.MEM_LOCATION_TYPE_DEVICE, 1
    desc.flags = constants.MEM_ACCESS_FLAGS["ProtReadWrite"]
    assert hip.hipMemPoolSetAccess(pool[0], desc, 1) == 0
    location.id = 1
    assert hip.hipMemPoolGetAccess(flags, pool[0], location) == 0
    assert flags[0] == constants.MEM_ACCESS_FLAGS["ProtReadWrite"]


def test_ipc_memory_crosses_processes(hip: Any) -> None:
    ffi = hip.ffi
    (pointer,) = allocations(hip, 1 << 20, 0)
    handle, opened = ffi.new("hipIpcMemHandle_t*"), ffi.new("void**")
    try:
        assert hip.hipMemcpy(pointer, b"parent!!", 8, H2D) == 0
        assert hip.hipIpcGetMemHandle(handle, pointer) == 0
        # HIP's code for its own process's handle (CUDA's invalid device context):
        assert hip.hipIpcOpenMemHandle(opened, handle[0], LAZY) == E["hipErrorInvalidContext"]
        hip.hipGetLastError()
        env = {**os.environ, "HIP_PLATFORM": "nvidia"}
        raw = bytes(ffi.buffer(handle.reserved)).hex()
        done = subprocess.run([sys.executable, "-c", CHILD, raw], capture_output=True, text=True,
                              timeout=300, env=env)  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        assert bytes.fromhex(done.stdout.strip()) == b"parent!!"
        seen = bytearray(8)
        assert hip.hipMemcpy(ffi.from_buffer(seen), pointer, 8, D2H) == 0
        assert seen == b"child!!!"
    finally:
        assert hip.hipFree(pointer) == 0


def test_ipc_event_handles(hip: Any) -> None:
    ffi = hip.ffi
    assert hip.hipSetDevice(0) == 0
    event, opened = ffi.new("hipEvent_t*"), ffi.new("hipEvent_t*")
    handle = ffi.new("hipIpcEventHandle_t*")
    flags = constants.EVENT_INTERPROCESS | constants.EVENT_DISABLE_TIMING
    assert hip.hipEventCreateWithFlags(event, flags) == 0
    try:
        assert hip.hipIpcGetEventHandle(handle, event[0]) == 0
        assert hip.hipIpcOpenEventHandle(opened, handle[0]) != 0  # its own process
    finally:
        assert hip.hipEventDestroy(event[0]) == 0
    assert hip.hipEventCreateWithFlags(event, constants.EVENT_DISABLE_TIMING) == 0
    try:  # not an interprocess event: refused (CUDA: invalid resource handle)
        assert hip.hipIpcGetEventHandle(handle, event[0]) != 0
    finally:
        assert hip.hipEventDestroy(event[0]) == 0
    hip.hipGetLastError()
