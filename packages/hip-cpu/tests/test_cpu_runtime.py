"""The cpu platform's runtime: device, memory, copies, memsets, pointers and pools, errors.

Everything goes through the HIP surface (`hip_ffi.load("cpu")`) and is checked against the
host (/proc, os.sched_getaffinity) or numpy.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import hip_ffi
from hip_cpu import toolchain
from hip_ffi import constants

E = constants.ERROR_CODES
H2H, H2D, D2H, D2D, DEFAULT = 0, 1, 2, 3, 4


@pytest.fixture(scope="module")
def hip() -> Any:
    return hip_ffi.load("cpu")


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng()


def malloc(hip: Any, size: int, host: bool = False) -> Any:
    out = hip.ffi.new("void**")
    status = hip.hipHostMalloc(out, size, 0) if host else hip.hipMalloc(out, size)
    assert status == 0
    return out[0]


def address(hip: Any, pointer: Any) -> int:
    return int(hip.ffi.cast("uintptr_t", pointer))


def name(hip: Any, code: int) -> str:
    return str(hip.ffi.string(hip.hipGetErrorName(code)).decode())


# ---- device ----------------------------------------------------------------------------------


def test_one_device_described_by_the_host(hip: Any) -> None:
    ffi = hip.ffi
    count = ffi.new("int*")
    assert hip.hipGetDeviceCount(count) == 0 and count[0] == 1
    props = ffi.new(hip.device_prop_type + "*")
    assert hip.hipGetDeviceProperties(props, 0) == 0
    cpuinfo = Path("/proc/cpuinfo").read_text()
    assert ffi.string(props.name).decode() in cpuinfo
    meminfo = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    assert 0 < props.totalGlobalMem <= int(meminfo["MemTotal"].split()[0]) * 1024
    cores = int(os.environ.get("HIP_FFI_CPU_THREADS") or len(os.sched_getaffinity(0)))
    assert props.multiProcessorCount == cores
    assert props.maxThreadsPerBlock == 1024 and list(props.maxThreadsDim) == [1024, 1024, 64]
    assert props.sharedMemPerBlock >= 64 * 1024
    assert (
        props.warpSize == toolchain.warp_size() == int(os.environ.get("HIP_FFI_CPU_WARP_SIZE", 32))
    )
    assert ffi.string(props.gcnArchName).decode() == os.uname().machine
    assert (
        hip.platform_version.startswith("host runtime: ")
        and f"{cores} cores" in hip.platform_version
    )


def test_attributes_agree_with_properties(hip: Any) -> None:
    ffi = hip.ffi
    props = ffi.new(hip.device_prop_type + "*")
    assert hip.hipGetDeviceProperties(props, 0) == 0
    value = ffi.new("int*")
    for attribute, field in (
        ("WarpSize", "warpSize"),
        ("MaxThreadsPerBlock", "maxThreadsPerBlock"),
        ("MultiprocessorCount", "multiProcessorCount"),
        ("MaxSharedMemoryPerBlock", "sharedMemPerBlock"),
    ):
        assert hip.hipDeviceGetAttribute(value, constants.DEVICE_ATTRIBUTES[attribute], 0) == 0
        assert value[0] == getattr(props, field), attribute
    assert hip.hipDeviceGetAttribute(value, 12345, 0) == E["hipErrorInvalidValue"]
    assert hip.hipDeviceGetAttribute(value, 87, 1) == E["hipErrorInvalidDevice"]
    assert hip.hipGetDeviceProperties(props, 1) == E["hipErrorInvalidDevice"]
    assert hip.hipSetDevice(0) == 0 and hip.hipSetDevice(1) == E["hipErrorInvalidDevice"]


def test_memory_info_reports_real_numbers(hip: Any) -> None:
    free, total, bytes_ = hip.ffi.new("size_t*"), hip.ffi.new("size_t*"), hip.ffi.new("size_t*")
    assert hip.hipMemGetInfo(free, total) == 0
    assert hip.hipDeviceTotalMem(bytes_, 0) == 0
    assert 0 < free[0] <= total[0] == bytes_[0]


def test_versions_and_names(hip: Any) -> None:
    version = hip.ffi.new("int*")
    assert hip.hipRuntimeGetVersion(version) == 0 and version[0] == hip.runtime_version > 0
    name_buffer = hip.ffi.new("char[8]")
    assert hip.hipDeviceGetName(name_buffer, 8, 0) == 0
    assert len(hip.ffi.string(name_buffer)) == 7  # truncated, NUL-terminated


# ---- allocation ------------------------------------------------------------------------------


def test_allocations_are_256_byte_aligned(hip: Any) -> None:
    pointers = [malloc(hip, size) for size in (1, 3, 255, 4097, 1 << 20)]
    pointers += [malloc(hip, size, host=True) for size in (1, 1000)]
    try:
        assert all(address(hip, p) % 256 == 0 for p in pointers)
    finally:
        for p in pointers[:5]:
            assert hip.hipFree(p) == 0
        for p in pointers[5:]:
            assert hip.hipHostFree(p) == 0


def test_bad_frees_return_errors(hip: Any) -> None:
    ffi = hip.ffi
    device, pinned = malloc(hip, 64), malloc(hip, 64, host=True)
    assert hip.hipFree(ffi.NULL) == 0 and hip.hipHostFree(ffi.NULL) == 0
    assert hip.hipFree(ffi.cast("char*", device) + 8) == E["hipErrorInvalidValue"]
    assert hip.hipFree(pinned) == E["hipErrorInvalidValue"]  # pinned: hipHostFree's
    assert hip.hipHostFree(device) == E["hipErrorInvalidValue"]
    assert hip.hipFree(ffi.cast("void*", 0x1234)) == E["hipErrorInvalidValue"]
    assert hip.hipFree(device) == 0 and hip.hipHostFree(pinned) == 0
    assert hip.hipFree(device) == E["hipErrorInvalidValue"]  # twice
    out = ffi.new("void**")
    assert hip.hipMalloc(out, 0) == 0 and out[0] == ffi.NULL
    assert hip.hipMalloc(out, 1 << 62) == E["hipErrorOutOfMemory"]


def test_copies_of_every_kind(hip: Any, rng: np.random.Generator) -> None:
    ffi = hip.ffi
    n = 1000
    x = rng.standard_normal(n).astype(np.float32)
    a, b = malloc(hip, x.nbytes), malloc(hip, x.nbytes)
    try:
        for kind in (H2D, DEFAULT):
            assert hip.hipMemcpy(a, ffi.from_buffer(x), x.nbytes, kind) == 0
            assert hip.hipMemcpy(b, a, x.nbytes, D2D if kind == H2D else DEFAULT) == 0
            out = np.zeros_like(x)
            assert hip.hipMemcpy(ffi.from_buffer(out), b, x.nbytes, D2H) == 0
            np.testing.assert_array_equal(out, x)
        out = np.zeros_like(x)
        assert hip.hipMemcpy(ffi.from_buffer(out), ffi.from_buffer(x), x.nbytes, H2H) == 0
        np.testing.assert_array_equal(out, x)
        assert hip.hipMemcpyDtoD(b, a, 4) == 0 and hip.hipMemcpyHtoD(a, ffi.from_buffer(x), 8) == 0
        assert hip.hipMemcpyDtoH(ffi.from_buffer(out), a, x.nbytes) == 0
        np.testing.assert_array_equal(out, x)
        assert hip.hipMemcpyPeer(b, 0, a, 0, 16) == 0
        assert hip.hipMemcpyPeer(b, 1, a, 0, 16) == E["hipErrorInvalidDevice"]
        # Refused before anything is copied:
        assert hip.hipMemcpy(a, b, x.nbytes + 4, D2D) == E["hipErrorInvalidValue"]  # too long
        assert hip.hipMemcpy(a, b, 4, 7) == E["hipErrorInvalidMemcpyDirection"]
        assert hip.hipMemcpy(ffi.NULL, b, 4, D2D) == E["hipErrorInvalidValue"]
    finally:
        assert hip.hipFree(a) == 0 and hip.hipFree(b) == 0


def test_memsets(hip: Any) -> None:
    ffi = hip.ffi
    n = 1001
    p = malloc(hip, n * 4)
    out = np.empty(n, dtype=np.uint32)
    try:
        assert hip.hipMemset(p, 0x1AB, n * 4) == 0  # the low byte only
        assert hip.hipMemcpy(ffi.from_buffer(out), p, n * 4, D2H) == 0
        assert (out == 0xABABABAB).all()
        assert hip.hipMemsetD32(p, -2, n) == 0
        assert hip.hipMemcpy(ffi.from_buffer(out), p, n * 4, D2H) == 0
        assert (out == 0xFFFFFFFE).all()
        assert hip.hipMemsetD8(ffi.cast("char*", p) + 1, 7, 2) == 0
        assert hip.hipMemcpy(ffi.from_buffer(out), p, 4, D2H) == 0
        assert out[0] == 0xFF0707FE
        assert hip.hipMemsetD32Async(p, 5, n, ffi.NULL) == 0
        assert hip.hipMemsetAsync(p, 0, 4, ffi.NULL) == 0
        assert hip.hipMemsetD8Async(p, 9, 1, ffi.NULL) == 0
        assert hip.hipStreamSynchronize(ffi.NULL) == 0
        assert hip.hipMemcpy(ffi.from_buffer(out), p, n * 4, D2H) == 0
        assert out[0] == 9 and (out[1:] == 5).all()
        assert hip.hipMemset(p, 0, n * 4 + 1) == E["hipErrorInvalidValue"]
    finally:
        assert hip.hipFree(p) == 0


def test_pointer_attributes(hip: Any) -> None:
    ffi = hip.ffi
    attributes = ffi.new("hipPointerAttribute_t*")
    device, pinned = malloc(hip, 256), malloc(hip, 256, host=True)
    pageable = np.zeros(16, dtype=np.uint8)
    types = constants.MEMORY_TYPES
    try:
        inside = ffi.cast("char*", device) + 100
        assert hip.hipPointerGetAttributes(attributes, inside) == 0
        assert attributes.type == types["Device"] and attributes.device == 0
        assert address(hip, attributes.devicePointer) == address(hip, inside)
        assert attributes.hostPointer == ffi.NULL
        assert hip.hipPointerGetAttributes(attributes, pinned) == 0
        assert attributes.type == types["Host"] and attributes.hostPointer == pinned
        assert hip.hipPointerGetAttributes(attributes, ffi.from_buffer(pageable)) == 0
        assert attributes.type == types["Unregistered"]
        mapped = ffi.new("void**")
        assert hip.hipHostGetDevicePointer(mapped, pinned, 0) == 0 and mapped[0] == pinned
        assert hip.hipHostGetDevicePointer(mapped, device, 0) == E["hipErrorInvalidValue"]
    finally:
        assert hip.hipFree(device) == 0 and hip.hipHostFree(pinned) == 0


def test_host_register(hip: Any) -> None:
    ffi = hip.ffi
    buffer = np.zeros(4096, dtype=np.uint8)
    pointer = ffi.from_buffer(buffer)
    attributes = ffi.new("hipPointerAttribute_t*")
    assert hip.hipHostRegister(pointer, buffer.nbytes, 0) == 0
    try:
        assert hip.hipPointerGetAttributes(attributes, pointer + 10) == 0
        assert attributes.type == constants.MEMORY_TYPES["Host"]
        assert hip.hipHostRegister(pointer + 100, 10, 0) == E["hipErrorHostMemoryAlreadyRegistered"]
    finally:
        assert hip.hipHostUnregister(pointer) == 0
    assert hip.hipHostUnregister(pointer) == E["hipErrorHostMemoryNotRegistered"]


def test_stream_ordered_allocation_and_pools(hip: Any) -> None:
    ffi = hip.ffi
    pool, created = ffi.new("hipMemPool_t*"), ffi.new("hipMemPool_t*")
    used = ffi.new("uint64_t*")
    used_current = constants.MEM_POOL_ATTRIBUTES["UsedMemCurrent"]
    assert hip.hipDeviceGetDefaultMemPool(pool, 0) == 0
    assert hip.hipMemPoolGetAttribute(pool[0], used_current, used) == 0
    before = used[0]
    out = ffi.new("void**")
    assert hip.hipMallocAsync(out, 1000, ffi.NULL) == 0
    assert hip.hipMemPoolGetAttribute(pool[0], used_current, used) == 0 and used[0] == before + 1000
    assert hip.hipFreeAsync(out[0], ffi.NULL) == 0
    assert hip.hipFreeAsync(out[0], ffi.NULL) == E["hipErrorInvalidValue"]  # already freed
    assert hip.hipStreamSynchronize(ffi.NULL) == 0
    assert hip.hipMemPoolGetAttribute(pool[0], used_current, used) == 0 and used[0] == before

    props = ffi.new("hipMemPoolProps*")
    assert hip.hipMemPoolCreate(created, props) == E["hipErrorInvalidValue"]  # no location
    props.allocType = constants.MEM_ALLOCATION_TYPE_PINNED
    props.location.type = constants.MEM_LOCATION_TYPE_DEVICE
    assert hip.hipMemPoolCreate(created, props) == 0
    threshold = ffi.new("uint64_t*", 1 << 20)
    release = constants.MEM_POOL_ATTRIBUTES["ReleaseThreshold"]
    assert hip.hipMemPoolSetAttribute(created[0], release, threshold) == 0
    threshold[0] = 0
    assert hip.hipMemPoolGetAttribute(created[0], release, threshold) == 0
    assert threshold[0] == 1 << 20
    assert hip.hipMallocFromPoolAsync(out, 64, created[0], ffi.NULL) == 0
    assert hip.hipMemPoolGetAttribute(created[0], used_current, used) == 0 and used[0] == 64
    assert hip.hipFree(out[0]) == 0  # a stream-ordered allocation may also be freed plainly
    assert hip.hipMemPoolTrimTo(created[0], 0) == 0
    assert hip.hipDeviceSetMemPool(0, created[0]) == 0
    assert hip.hipDeviceGetMemPool(pool, 0) == 0 and pool[0] == created[0]
    assert hip.hipMemPoolDestroy(created[0]) == 0
    assert hip.hipDeviceGetMemPool(pool, 0) == 0 and pool[0] != created[0]  # back to default
    assert hip.hipMemPoolDestroy(pool[0]) == E["hipErrorInvalidValue"]  # not the default one


# ---- errors ----------------------------------------------------------------------------------


def test_error_names_strings_and_last_error(hip: Any) -> None:
    ffi = hip.ffi
    assert name(hip, 0) == "hipSuccess" and name(hip, 1) == "hipErrorInvalidValue"
    assert ffi.string(hip.hipGetErrorString(2)) == b"out of memory"
    assert name(hip, 123456) == "hipErrorUnknown"
    hip.hipGetLastError()
    assert hip.hipSetDevice(5) == E["hipErrorInvalidDevice"]
    assert hip.hipPeekAtLastError() == E["hipErrorInvalidDevice"]  # kept
    assert hip.hipGetLastError() == E["hipErrorInvalidDevice"]  # returned, then reset
    assert hip.hipGetLastError() == 0


def test_unknown_handles_are_errors_not_crashes(hip: Any) -> None:
    ffi = hip.ffi
    bogus = 0x7777_0000
    status = ffi.new("hipStreamCaptureStatus*")
    assert hip.hipStreamSynchronize(ffi.cast("hipStream_t", bogus)) == E["hipErrorInvalidHandle"]
    assert hip.hipStreamIsCapturing(ffi.cast("hipStream_t", bogus), status) == 400
    assert hip.hipEventQuery(ffi.cast("hipEvent_t", bogus)) == E["hipErrorInvalidHandle"]
    assert hip.hipModuleUnload(ffi.cast("hipModule_t", bogus)) == E["hipErrorInvalidHandle"]
    out = ffi.new("hipFunction_t*")
    assert hip.hipModuleGetFunction(out, ffi.cast("hipModule_t", bogus), b"k") == 400
    assert hip.hipGraphLaunch(ffi.cast("hipGraphExec_t", bogus), ffi.NULL) == 400
    assert hip.hipMemPoolTrimTo(ffi.cast("hipMemPool_t", bogus), 0) == E["hipErrorInvalidValue"]
    program = ffi.new("hiprtcProgram*", ffi.cast("hiprtcProgram", bogus))
    assert hip.hiprtcCompileProgram(program[0], 0, ffi.NULL) == 4  # INVALID_PROGRAM
    assert hip.hipblasDestroy(ffi.cast("hipblasHandle_t", bogus)) == 1  # NOT_INITIALIZED
    hip.hipGetLastError()
