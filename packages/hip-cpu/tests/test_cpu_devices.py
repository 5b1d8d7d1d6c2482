"""The cpu platform with several devices (HIP_FFI_CPU_DEVICES=2): device count and current
device per thread, memory accounting, pointer attributes, null streams and pools per device,
peer access with HIP's codes, and peer copies.

The device count is read once per process, so `test_in_a_process_with_two_devices` runs this
file again in a subprocess started with HIP_FFI_CPU_DEVICES=2; in a process with one device
the other tests are skipped, saying so.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import hip_ffi
from hip_cpu import limits, ordinals, testing
from hip_ffi import constants

E = constants.ERROR_CODES
D2D = constants.MEMCPY_DEVICE_TO_DEVICE


def _count() -> int:
    return ordinals.count()


@pytest.fixture
def hip() -> Iterator[Any]:
    if _count() < 2:
        pytest.skip("one cpu device here: test_in_a_process_with_two_devices runs these")
    api = hip_ffi.load("cpu")
    yield api
    assert api.hipSetDevice(0) == 0
    api.hipGetLastError()


def malloc(hip: Any, device: int, size: int) -> Any:
    out = hip.ffi.new("void**")
    assert hip.hipSetDevice(device) == 0 and hip.hipMalloc(out, size) == 0
    return out[0]


def test_in_a_process_with_two_devices() -> None:
    if _count() >= 2:
        pytest.skip("this process has several devices: the tests of this file ran in it")
    passed, _ = testing.rerun_with_devices(2, __file__)
    assert passed >= 8


@pytest.mark.parametrize("text", ["0", "-1", "two", "65", "1.5"])
def test_bad_device_counts_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="HIP_FFI_CPU_DEVICES"):
        ordinals.parse(text)
    assert ordinals.parse("") == 1 and ordinals.parse(" 3 ") == 3


def test_a_bad_device_count_fails_the_load_clearly() -> None:
    env = {**os.environ, "HIP_FFI_CPU_DEVICES": "zero"}
    done = subprocess.run([sys.executable, "-c", "import hip_ffi; hip_ffi.load('cpu')"], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode != 0 and "HIP_FFI_CPU_DEVICES must be" in done.stderr


# ---- devices --------------------------------------------------------------------------------


def test_devices_and_the_current_device_of_each_thread(hip: Any) -> None:
    ffi = hip.ffi
    count, current = ffi.new("int*"), ffi.new("int*")
    assert hip.hipGetDeviceCount(count) == 0 and count[0] == 2
    assert hip.hipSetDevice(1) == 0 and hip.hipGetDevice(current) == 0 and current[0] == 1
    assert hip.hipSetDevice(2) == E["hipErrorInvalidDevice"]
    seen: list[int] = []

    def other_thread() -> None:  # a new thread starts on device 0 and keeps its own choice
        value = ffi.new("int*")
        hip.hipGetDevice(value)
        seen.append(value[0])
        hip.hipSetDevice(0)

    worker = threading.Thread(target=other_thread)
    worker.start()
    worker.join()
    assert seen == [0]
    assert hip.hipGetDevice(current) == 0 and current[0] == 1
    buses = []
    for device in range(2):
        bus = ffi.new("char[64]")
        assert hip.hipDeviceGetPCIBusId(bus, 64, device) == 0
        buses.append(ffi.string(bus))
        props = ffi.new(hip.device_prop_type + "*")
        assert hip.hipGetDeviceProperties(props, device) == 0
        assert props.totalGlobalMem == limits.BUDGETS[device].bound == limits.read_bound() // 2
    assert buses == [b"0000:00:00.0", b"0000:01:00.0"]


def test_each_device_counts_its_own_memory(hip: Any) -> None:
    ffi = hip.ffi
    free, total = ffi.new("size_t*"), ffi.new("size_t*")

    def info(device: int) -> tuple[int, int]:
        assert hip.hipSetDevice(device) == 0 and hip.hipMemGetInfo(free, total) == 0
        return int(free[0]), int(total[0])

    before = [info(0), info(1)]
    pointer = malloc(hip, 1, 1 << 20)
    try:
        assert info(1) == (before[1][0] - (1 << 20), before[1][1]) and info(0) == before[0]
        attributes = ffi.new("hipPointerAttribute_t*")
        assert hip.hipSetDevice(0) == 0  # attributes name the owner, whatever is current
        assert hip.hipPointerGetAttributes(attributes, pointer) == 0 and attributes.device == 1
    finally:
        assert hip.hipFree(pointer) == 0
    assert [info(0), info(1)] == before


def test_each_device_has_its_own_null_stream(hip: Any) -> None:
    """Work held on device 0's null stream does not hold device 1's synchronize."""
    ffi, release = hip.ffi, threading.Event()

    @ffi.callback("void(void*)")
    def block(_: Any) -> None:
        release.wait(30)

    assert hip.hipSetDevice(0) == 0 and hip.hipLaunchHostFunc(ffi.NULL, block, ffi.NULL) == 0
    try:
        assert hip.hipSetDevice(1) == 0 and hip.hipDeviceSynchronize() == 0  # returns at once
        assert hip.hipStreamQuery(ffi.NULL) == 0  # device 1's null stream is idle
        assert hip.hipSetDevice(0) == 0 and hip.hipStreamQuery(ffi.NULL) == E["hipErrorNotReady"]
    finally:
        release.set()
    assert hip.hipDeviceSynchronize() == 0


def test_pools_belong_to_their_device(hip: Any) -> None:
    ffi = hip.ffi
    pools = [ffi.new("hipMemPool_t*") for _ in range(2)]
    for device in range(2):
        assert hip.hipDeviceGetDefaultMemPool(pools[device], device) == 0
    assert pools[0][0] != pools[1][0]
    assert hip.hipDeviceSetMemPool(0, pools[1][0]) == E["hipErrorInvalidValue"]  # device 1's
    used, used_attribute = ffi.new("uint64_t*"), constants.MEM_POOL_ATTRIBUTES["UsedMemCurrent"]
    stream, out = ffi.new("hipStream_t*"), ffi.new("void**")
    assert hip.hipSetDevice(1) == 0 and hip.hipStreamCreateWithFlags(stream, 0) == 0
    assert hip.hipSetDevice(0) == 0 and hip.hipMallocAsync(out, 4096, stream[0]) == 0
    try:  # from the pool of the stream's device, not the current one
        assert hip.hipMemPoolGetAttribute(pools[1][0], used_attribute, used) == 0
        assert used[0] == 4096
        attributes = ffi.new("hipPointerAttribute_t*")
        assert hip.hipPointerGetAttributes(attributes, out[0]) == 0 and attributes.device == 1
    finally:
        assert hip.hipFreeAsync(out[0], stream[0]) == 0
        assert hip.hipStreamSynchronize(stream[0]) == 0 and hip.hipStreamDestroy(stream[0]) == 0


def test_pool_access_follows_hip(hip: Any) -> None:
    ffi = hip.ffi
    pool, flags = ffi.new("hipMemPool_t*"), ffi.new("hipMemAccessFlags*")
    access = constants.MEM_ACCESS_FLAGS
    assert hip.hipDeviceGetDefaultMemPool(pool, 0) == 0
    desc = ffi.new("hipMemAccessDesc[3]")
    desc[0].location.type = constants.MEM_LOCATION_TYPE_DEVICE
    desc[0].location.id = 1
    desc[0].flags = access["ProtReadWrite"]
    location = ffi.new("hipMemLocation*", (constants.MEM_LOCATION_TYPE_DEVICE, 1))
    assert hip.hipMemPoolGetAccess(flags, pool[0], location) == 0
    assert flags[0] == access["ProtNone"]
    assert hip.hipMemPoolSetAccess(pool[0], desc, 1) == 0
    assert hip.hipMemPoolGetAccess(flags, pool[0], location) == 0
    assert flags[0] == access["ProtReadWrite"]
    location.id = 0  # the pool's own device: read-write, always
    assert hip.hipMemPoolGetAccess(flags, pool[0], location) == 0
    assert flags[0] == access["ProtReadWrite"]
    assert hip.hipMemPoolSetAccess(pool[0], desc, 3) == E["hipErrorInvalidDevice"]  # > devices
    assert hip.hipMemPoolSetAccess(pool[0], ffi.NULL, 1) == E["hipErrorInvalidValue"]
    assert hip.hipMemPoolSetAccess(ffi.NULL, desc, 1) == E["hipErrorInvalidValue"]
    desc[0].location.id = 2
    assert hip.hipMemPoolSetAccess(pool[0], desc, 1) == E["hipErrorInvalidDevice"]
    desc[0].location.id, desc[0].flags = 0, access["ProtNone"]  # revoking its own device's
    assert hip.hipMemPoolSetAccess(pool[0], desc, 1) == E["hipErrorInvalidDevice"]
    desc[0].location.id, desc[0].flags = 1, 2  # not a hipMemAccessFlags value
    assert hip.hipMemPoolSetAccess(pool[0], desc, 1) == E["hipErrorInvalidValue"]
    desc[0].flags = access["ProtNone"]
    assert hip.hipMemPoolSetAccess(pool[0], desc, 1) == 0


# ---- peers ----------------------------------------------------------------------------------


def test_peer_access_follows_hip(hip: Any) -> None:
    can = hip.ffi.new("int*")
    assert hip.hipDeviceCanAccessPeer(can, 0, 1) == 0 and can[0] == 1
    assert hip.hipDeviceCanAccessPeer(can, 1, 1) == 0 and can[0] == 0  # never its own peer
    assert hip.hipDeviceCanAccessPeer(can, 0, 2) == E["hipErrorInvalidDevice"]
    assert hip.hipSetDevice(0) == 0
    assert hip.hipDeviceEnablePeerAccess(1, 1) == E["hipErrorInvalidValue"]  # flags must be 0
    assert hip.hipDeviceEnablePeerAccess(0, 0) == E["hipErrorInvalidDevice"]  # itself
    assert hip.hipDeviceEnablePeerAccess(2, 0) == E["hipErrorInvalidDevice"]
    assert hip.hipDeviceDisablePeerAccess(1) == E["hipErrorPeerAccessNotEnabled"]
    assert hip.hipDeviceEnablePeerAccess(1, 0) == 0
    assert hip.hipDeviceEnablePeerAccess(1, 0) == E["hipErrorPeerAccessAlreadyEnabled"]
    assert hip.hipGetLastError() == E["hipErrorPeerAccessAlreadyEnabled"]
    assert hip.hipSetDevice(1) == 0  # one way: 1 -> 0 is its own pair
    assert hip.hipDeviceDisablePeerAccess(0) == E["hipErrorPeerAccessNotEnabled"]
    assert hip.hipSetDevice(0) == 0 and hip.hipDeviceDisablePeerAccess(1) == 0
    assert hip.hipDeviceDisablePeerAccess(1) == E["hipErrorPeerAccessNotEnabled"]


def test_peer_copies(hip: Any) -> None:
    ffi, rng = hip.ffi, np.random.default_rng()
    data = rng.integers(0, 255, 1 << 16, dtype=np.uint8)
    a, b = malloc(hip, 0, data.nbytes), malloc(hip, 1, data.nbytes)
    out = np.zeros_like(data)
    stream = ffi.new("hipStream_t*")
    try:
        assert hip.hipMemcpy(a, ffi.from_buffer(data), data.nbytes, 1) == 0
        assert hip.hipMemcpyPeer(b, 1, a, 0, data.nbytes) == 0  # no peer access needed
        assert hip.hipMemcpy(ffi.from_buffer(out), b, data.nbytes, 2) == 0
        np.testing.assert_array_equal(out, data)
        assert hip.hipMemset(a, 0, data.nbytes) == 0
        assert hip.hipSetDevice(1) == 0 and hip.hipStreamCreateWithFlags(stream, 1) == 0
        assert hip.hipMemcpyPeerAsync(a, 0, b, 1, data.nbytes // 2, stream[0]) == 0
        assert hip.hipStreamSynchronize(stream[0]) == 0
        assert hip.hipMemcpy(ffi.from_buffer(out), a, data.nbytes, 2) == 0
        np.testing.assert_array_equal(out[: data.nbytes // 2], data[: data.nbytes // 2])
        assert not out[data.nbytes // 2 :].any()
        # Refused before anything is copied:
        assert hip.hipMemcpyPeer(b, 1, a, 0, data.nbytes + 1) == E["hipErrorInvalidValue"]
        assert hip.hipMemcpyPeer(b, 2, a, 0, 16) == E["hipErrorInvalidDevice"]
        assert hip.hipMemcpyPeerAsync(b, 1, a, -1, 16, stream[0]) == E["hipErrorInvalidDevice"]
        assert (
            hip.hipMemcpyPeerAsync(b, 1, a, 0, 16, ffi.cast("hipStream_t", 0x123))
            == (E["hipErrorInvalidHandle"])
        )
    finally:
        if stream[0] != ffi.NULL:
            assert hip.hipStreamDestroy(stream[0]) == 0
        assert hip.hipFree(a) == 0 and hip.hipFree(b) == 0
