"""The nvidia platform on a real NVIDIA GPU (run on the H200: `pytest -m gpu`).

Every check compares against a host reference computed independently (numpy, float64 for GEMM);
inputs are random and outputs are poisoned first, so an unwritten result cannot pass.
"""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import hip_ffi
from hip_ffi import _nvidia_libraries, constants
from hip_ffi.api import HipApi

pytestmark = pytest.mark.gpu
E = constants.ERROR_CODES
H2D, D2H = constants.MEMCPY_HOST_TO_DEVICE, constants.MEMCPY_DEVICE_TO_HOST
MIB = 1 << 20

KERNELS = r"""
#include <hip/hip_runtime.h>
extern "C" __global__ void axpy(int n, float a, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" __global__ void spin_then_fill(int* out, int n, int value, long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {}
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        out[i] = value;
}
"""


@pytest.fixture(scope="module")
def hip() -> HipApi:
    api = hip_ffi.load("nvidia")
    count = api.ffi.new("int*")
    assert api.hipGetDeviceCount(count) == 0 and count[0] > 0, "the gpu tests need a GPU"
    check(api, api.hipSetDevice(0))
    return api


def check(hip: HipApi, status: int, call: str = "") -> None:
    """Fail with HIP's name of `status` unless it is hipSuccess."""
    assert status == 0, f"{call}: {hip.ffi.string(hip.hipGetErrorName(status)).decode()}"


def malloc(hip: HipApi, size: int) -> Any:
    pointer = hip.ffi.new("void**")
    check(hip, hip.hipMalloc(pointer, size), "hipMalloc")
    return pointer[0]


def arch(hip: HipApi) -> str:
    props = hip.ffi.new(hip.device_prop_type + "*")
    check(hip, hip.hipGetDeviceProperties(props, 0))
    return hip.ffi.string(props.gcnArchName).decode()


def compile_program(hip: HipApi, source: str, options: list[str]) -> tuple[int, bytes, str]:
    ffi = hip.ffi
    program = ffi.new("hiprtcProgram*")
    assert hip.hiprtcCreateProgram(program, source.encode(), b"k.hip", 0, ffi.NULL, ffi.NULL) == 0
    buffers = [ffi.new("char[]", o.encode()) for o in options]
    status = hip.hiprtcCompileProgram(program[0], len(buffers), ffi.new("const char*[]", buffers))
    size = ffi.new("size_t*")
    assert hip.hiprtcGetProgramLogSize(program[0], size) == 0
    log = ffi.new("char[]", max(size[0], 1))
    assert hip.hiprtcGetProgramLog(program[0], log) == 0
    code = b""
    if status == 0:
        assert hip.hiprtcGetCodeSize(program[0], size) == 0
        buffer = ffi.new("char[]", size[0])
        assert hip.hiprtcGetCode(program[0], buffer) == 0
        code = ffi.buffer(buffer, size[0])[:]
    assert hip.hiprtcDestroyProgram(program) == 0
    return status, code, ffi.string(log).decode(errors="replace")


@pytest.fixture(scope="module")
def module(hip: HipApi) -> Iterator[Any]:
    status, code, log = compile_program(hip, KERNELS, [f"--offload-arch={arch(hip)}"])
    assert status == 0, log
    assert code.startswith(b"\x7fELF"), "a real arch gives a CUBIN"
    handle = hip.ffi.new("hipModule_t*")
    check(hip, hip.hipModuleLoadData(handle, code), "hipModuleLoadData")
    yield handle[0]
    check(hip, hip.hipModuleUnload(handle[0]))


def function(hip: HipApi, module: Any, name: str) -> Any:
    out = hip.ffi.new("hipFunction_t*")
    check(hip, hip.hipModuleGetFunction(out, module, name.encode()), "hipModuleGetFunction")
    return out[0]


def kernel_params(hip: HipApi, *values: Any) -> tuple[Any, list[Any]]:
    """A void*[] of pointers to each argument (typed cdata), and the cdata to keep alive."""
    boxes = list(values)
    return hip.ffi.new("void*[]", [hip.ffi.cast("void*", b) for b in boxes]), boxes


def test_device_count_and_attributes(hip: HipApi) -> None:
    ffi = hip.ffi
    hip.hipGetLastError()
    props = ffi.new(hip.device_prop_type + "*")
    check(hip, hip.hipGetDeviceProperties(props, 0))
    name = ffi.string(props.name).decode()
    assert name.isprintable() and len(name) > 4, name
    assert re.fullmatch(r"sm_\d+", ffi.string(props.gcnArchName).decode())
    assert ffi.string(props.gcnArchName).decode() == f"sm_{props.major}{props.minor}"
    total = ffi.new("size_t*")
    check(hip, hip.hipDeviceTotalMem(total, 0))
    assert props.totalGlobalMem == total[0] > 16 << 30
    value = ffi.new("int*")
    for attribute, expected in (
        ("MultiprocessorCount", props.multiProcessorCount),
        ("WarpSize", 32),
        ("ComputeCapabilityMajor", props.major),
        ("TotalGlobalMem", min(total[0], 2**31 - 1)),
        ("MaxThreadsPerBlock", 1024),
    ):
        check(hip, hip.hipDeviceGetAttribute(value, constants.DEVICE_ATTRIBUTES[attribute], 0))
        assert value[0] == expected, attribute
    assert props.multiProcessorCount > 0 and props.warpSize == 32
    check(hip, hip.hipDeviceGetAttribute(value, constants.DEVICE_ATTRIBUTES["PciChipId"], 0))
    cudart = ffi.dlopen(hip.libraries["cuda runtime"])  # the raw value: device << 16 | vendor
    raw = ffi.new("int*")
    assert cudart.cudaDeviceGetAttribute(raw, 139, 0) == 0
    assert raw[0] & 0xFFFF == 0x10DE and value[0] == (raw[0] >> 16) & 0xFFFF > 0
    unsupported = hip.hipDeviceGetAttribute(value, constants.DEVICE_ATTRIBUTES["MaxThreadsDim"], 0)
    assert unsupported == E["hipErrorInvalidValue"]
    assert hip.hipGetLastError() == E["hipErrorInvalidValue"] and hip.hipGetLastError() == 0
    free, total_info = ffi.new("size_t*"), ffi.new("size_t*")
    check(hip, hip.hipMemGetInfo(free, total_info))
    assert 0 < free[0] <= total_info[0] == total[0]
    print(hip_ffi.describe("nvidia"))


def test_malloc_memcpy_round_trip_256_mib_is_bit_exact(hip: HipApi) -> None:
    ffi, size = hip.ffi, 256 * MIB
    source = np.random.default_rng().integers(0, 256, size, dtype=np.uint8)
    back = np.full(size, 0x5A, dtype=np.uint8)
    device = malloc(hip, size)
    try:
        check(hip, hip.hipMemcpy(device, ffi.from_buffer(source), size, H2D))
        check(hip, hip.hipMemcpy(ffi.from_buffer(back), device, size, D2H))
        assert np.array_equal(source, back)
        back[:] = 0x5A
        check(hip, hip.hipMemcpyHtoD(device, ffi.from_buffer(source), size))  # driver API
        check(hip, hip.hipMemcpyDtoH(ffi.from_buffer(back), device, size))
        assert np.array_equal(source, back)
    finally:
        check(hip, hip.hipFree(device))


def test_memset_d8_and_d32(hip: HipApi) -> None:
    ffi, count = hip.ffi, 1 << 22
    device = malloc(hip, count * 4)
    stream = ffi.new("hipStream_t*")
    check(hip, hip.hipStreamCreateWithFlags(stream, constants.STREAM_NON_BLOCKING))
    try:
        out = np.zeros(count * 4, dtype=np.uint8)
        check(hip, hip.hipMemsetD8(device, 0xAB, count * 4))
        check(hip, hip.hipMemcpy(ffi.from_buffer(out), device, count * 4, D2H))
        assert (out == 0xAB).all()
        check(hip, hip.hipMemsetD32(device, -123456789, count))
        check(hip, hip.hipMemcpy(ffi.from_buffer(out), device, count * 4, D2H))
        assert (out.view(np.int32) == -123456789).all()
        check(hip, hip.hipMemsetD32Async(device, 0x01020304, count // 2, stream[0]))
        check(hip, hip.hipMemsetD8Async(ffi.cast("char*", device) + count * 2, 7, 16, stream[0]))
        check(hip, hip.hipStreamSynchronize(stream[0]))
        check(hip, hip.hipMemcpy(ffi.from_buffer(out), device, count * 4, D2H))
        words = out.view(np.int32)
        assert (words[: count // 2] == 0x01020304).all()
        assert (out[count * 2 : count * 2 + 16] == 7).all()
        assert (words[count // 2 + 4 :] == -123456789).all()
    finally:
        check(hip, hip.hipStreamDestroy(stream[0]))
        check(hip, hip.hipFree(device))


def test_event_timing(hip: HipApi) -> None:
    ffi, size = hip.ffi, 1 << 30
    start, stop = ffi.new("hipEvent_t*"), ffi.new("hipEvent_t*")
    check(hip, hip.hipEventCreateWithFlags(start, constants.EVENT_DEFAULT))
    check(hip, hip.hipEventCreateWithFlags(stop, constants.EVENT_DEFAULT))
    device = malloc(hip, size)
    try:
        check(hip, hip.hipEventRecord(start[0], ffi.NULL))
        for value in range(4):
            check(hip, hip.hipMemsetAsync(device, value, size, ffi.NULL))
        check(hip, hip.hipEventRecord(stop[0], ffi.NULL))
        check(hip, hip.hipEventSynchronize(stop[0]))
        assert hip.hipEventQuery(stop[0]) == 0
        ms = ffi.new("float*")
        check(hip, hip.hipEventElapsedTime(ms, start[0], stop[0]))
        bandwidth = 4 * size / (ms[0] * 1e-3) / 1e9
        assert 0.05 < ms[0] < 1000 and bandwidth > 100, (ms[0], bandwidth)  # GB/s of memset
    finally:
        check(hip, hip.hipFree(device))
        check(hip, hip.hipEventDestroy(start[0]))
        check(hip, hip.hipEventDestroy(stop[0]))


def test_stream_ordering_across_two_streams_with_an_event(hip: HipApi, module: Any) -> None:
    ffi, count = hip.ffi, 1 << 24
    device = malloc(hip, count * 4)
    pinned = ffi.new("void**")
    check(hip, hip.hipHostMalloc(pinned, count * 4, constants.HOST_MALLOC_DEFAULT))
    streams = [ffi.new("hipStream_t*"), ffi.new("hipStream_t*")]
    for stream in streams:
        check(hip, hip.hipStreamCreateWithFlags(stream, constants.STREAM_NON_BLOCKING))
    event = ffi.new("hipEvent_t*")
    check(hip, hip.hipEventCreateWithFlags(event, constants.EVENT_DISABLE_TIMING))
    try:
        check(hip, hip.hipMemsetD32Async(device, 1, count, streams[0][0]))
        fill = function(hip, module, "spin_then_fill")
        out, n = ffi.new("void**", device), ffi.new("int*", count)
        value, cycles = ffi.new("int*", 2), ffi.new("long long*", 50_000_000)  # ~25 ms
        params, _ = kernel_params(hip, out, n, value, cycles)
        check(hip, hip.hipModuleLaunchKernel(
            fill, 264, 1, 1, 256, 1, 1, 0, streams[0][0], params, ffi.NULL
        ))  # fmt: skip
        check(hip, hip.hipEventRecord(event[0], streams[0][0]))
        check(hip, hip.hipStreamWaitEvent(streams[1][0], event[0], 0))
        check(hip, hip.hipMemcpyAsync(pinned[0], device, count * 4, D2H, streams[1][0]))
        assert hip.hipStreamQuery(streams[1][0]) == E["hipErrorNotReady"], "spin still running"
        check(hip, hip.hipStreamSynchronize(streams[1][0]))
        result = np.frombuffer(ffi.buffer(pinned[0], count * 4), dtype=np.int32)
        assert (result == 2).all(), "the copy ran before the kernel it waited for"
    finally:
        check(hip, hip.hipDeviceSynchronize())
        for stream in streams:
            check(hip, hip.hipStreamDestroy(stream[0]))
        check(hip, hip.hipEventDestroy(event[0]))
        check(hip, hip.hipHostFree(pinned[0]))
        check(hip, hip.hipFree(device))


def test_nvrtc_compile_load_and_launch_three_ways(hip: HipApi, module: Any) -> None:
    ffi, n, a = hip.ffi, 100_003, 2.5
    rng = np.random.default_rng()
    x, y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    expected = np.float32(a) * x + y
    dx, dy = malloc(hip, n * 4), malloc(hip, n * 4)
    axpy, blocks = function(hip, module, "axpy"), (n + 255) // 256
    try:
        check(hip, hip.hipMemcpy(dx, ffi.from_buffer(x), n * 4, H2D))
        results = []
        for way in ("params", "config", "extra"):
            check(hip, hip.hipMemcpy(dy, ffi.from_buffer(y), n * 4, H2D))
            args = (ffi.new("int*", n), ffi.new("float*", a), ffi.new("void**", dx))
            params, _ = kernel_params(hip, *args, ffi.new("void**", dy))
            if way == "params":
                status = hip.hipModuleLaunchKernel(
                    axpy, blocks, 1, 1, 256, 1, 1, 0, ffi.NULL, params, ffi.NULL
                )
            elif way == "config":
                config = ffi.new("HIP_LAUNCH_CONFIG*")
                config.gridDimX, config.gridDimY, config.gridDimZ = blocks, 1, 1
                config.blockDimX, config.blockDimY, config.blockDimZ = 256, 1, 1
                status = hip.hipDrvLaunchKernelEx(config, axpy, params, ffi.NULL)
            else:  # arguments packed in one buffer, HIP's HIP_LAUNCH_PARAM_* keys
                packed = struct.pack(
                    "<ifQQ",
                    n,
                    a,
                    int(ffi.cast("uintptr_t", dx)),
                    int(ffi.cast("uintptr_t", dy)),
                )
                buffer, size = ffi.new("char[]", packed), ffi.new("size_t*", len(packed))
                keys = [constants.LAUNCH_PARAM_BUFFER_POINTER, constants.LAUNCH_PARAM_BUFFER_SIZE]
                extra = ffi.new(
                    "void*[]",
                    [
                        ffi.cast("void*", keys[0]),
                        buffer,
                        ffi.cast("void*", keys[1]),
                        size,
                        ffi.cast("void*", constants.LAUNCH_PARAM_END),
                    ],
                )
                status = hip.hipModuleLaunchKernel(
                    axpy, blocks, 1, 1, 256, 1, 1, 0, ffi.NULL, ffi.NULL, extra
                )
            check(hip, status, way)
            out = np.full(n, np.nan, dtype=np.float32)
            check(hip, hip.hipMemcpy(ffi.from_buffer(out), dy, n * 4, D2H))
            results.append(out)
        for way, out in zip(("params", "config", "extra"), results, strict=True):
            np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-6, err_msg=way)
    finally:
        check(hip, hip.hipFree(dx))
        check(hip, hip.hipFree(dy))


def test_nvrtc_targets_and_compile_errors(hip: HipApi) -> None:
    status, code, _ = compile_program(hip, KERNELS, [])  # no target: the current device's
    assert status == 0 and code.startswith(b"\x7fELF")
    virtual = "compute_" + arch(hip).split("_")[1]
    status, ptx, log = compile_program(hip, KERNELS, [f"--offload-arch={virtual}", "-O3"])
    assert status == 0, log
    assert b".entry axpy" in ptx and ptx.endswith(b"\0"), "a virtual arch gives PTX"
    handle = hip.ffi.new("hipModule_t*")
    check(hip, hip.hipModuleLoadData(handle, ptx), "PTX through the driver's JIT")
    check(hip, hip.hipModuleUnload(handle[0]))
    status, _, log = compile_program(hip, 'extern "C" __global__ void k() { nope; }', [])
    assert status == constants.HIPRTC_RESULTS["HIPRTC_ERROR_COMPILATION"]
    assert "nope" in log and "error" in log
    message = hip.ffi.string(hip.hiprtcGetErrorString(status)).decode()
    assert "COMPILATION" in message.upper()


HALF_KERNEL = r"""
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#include <hip/hip_bf16.h>
extern "C" __global__ void narrow(const float* x, __half* h, __hip_bfloat16* b, float* sum, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        h[i] = __float2half(x[i]);
        b[i] = __float2bfloat16(x[i]);
        sum[i] = __half2float(h[i]) + __bfloat162float(b[i]);
    }
}
"""


def test_hip_half_and_bfloat16_headers_compile_with_nvrtc(hip: HipApi) -> None:
    ffi, n = hip.ffi, 4099
    status, code, log = compile_program(hip, HALF_KERNEL, [f"--offload-arch={arch(hip)}"])
    assert status == 0, log
    handle = ffi.new("hipModule_t*")
    check(hip, hip.hipModuleLoadData(handle, code))
    x = np.random.default_rng().standard_normal(n, dtype=np.float32) * 100
    buffers = [malloc(hip, n * 4) for _ in range(4)]
    try:
        check(hip, hip.hipMemcpy(buffers[0], ffi.from_buffer(x), n * 4, H2D))
        boxes = [ffi.new("void**", b) for b in buffers] + [ffi.new("int*", n)]
        params, _ = kernel_params(hip, *boxes)
        narrow = function(hip, handle[0], "narrow")
        check(hip, hip.hipModuleLaunchKernel(
            narrow, (n + 127) // 128, 1, 1, 128, 1, 1, 0, ffi.NULL, params, ffi.NULL
        ))  # fmt: skip
        half, bf16 = np.zeros(n, np.uint16), np.zeros(n, np.uint16)
        total = np.full(n, np.nan, np.float32)
        for out, device, size in (
            (half, buffers[1], 2),
            (bf16, buffers[2], 2),
            (total, buffers[3], 4),
        ):
            check(hip, hip.hipMemcpy(ffi.from_buffer(out), device, n * size, D2H))
        assert np.array_equal(half, x.astype(np.float16).view(np.uint16))
        assert np.array_equal(bf16, _bf16(x))
        assert np.array_equal(total, half.view(np.float16).astype(np.float32) + _from_bf16(bf16))
    finally:
        for device in buffers:
            check(hip, hip.hipFree(device))
        check(hip, hip.hipModuleUnload(handle[0]))


def test_a_driver_call_on_a_fresh_thread_finds_its_context(hip: HipApi) -> None:
    status, code, log = compile_program(hip, KERNELS, [f"--offload-arch={arch(hip)}"])
    assert status == 0, log
    results: list[int] = []

    def load_unload() -> None:  # no runtime call on this thread before the driver call
        handle = hip.ffi.new("hipModule_t*")
        results.append(hip.hipModuleLoadData(handle, code))
        results.append(hip.hipModuleUnload(handle[0]) if results[0] == 0 else -1)

    thread = threading.Thread(target=load_unload)
    thread.start()
    thread.join()
    assert results == [0, 0]


def _bf16(values: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits (round to nearest even)."""
    bits = values.astype(np.float32).view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def _from_bf16(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_hipblas_gemm_against_numpy(hip: HipApi, dtype: str) -> None:
    ffi, (m, n, k) = hip.ffi, (192, 160, 96)
    rng = np.random.default_rng()
    a, b = rng.standard_normal((k, m)), rng.standard_normal((n, k))  # column-major A(m,k), B(k,n)
    encode = {
        "f32": (lambda v: v.astype(np.float32), lambda v: v.astype(np.float64), 0, 1e-5),
        "f16": (lambda v: v.astype(np.float16), lambda v: v.astype(np.float64), 2, 1e-2),
        "bf16": (_bf16, lambda v: _from_bf16(v).astype(np.float64), 14, 2e-2),
    }[dtype]
    to_device, to_host, data_type, tolerance = encode
    ha, hb = to_device(a), to_device(b)
    hc = to_device(np.full((n, m), np.nan))
    reference = (to_host(ha).T @ to_host(hb).T).T  # C(m,n) column-major == (n,m) row-major
    da, db, dc = malloc(hip, ha.nbytes), malloc(hip, hb.nbytes), malloc(hip, hc.nbytes)
    handle, stream = ffi.new("hipblasHandle_t*"), ffi.new("hipStream_t*")
    assert hip.hipblasCreate(handle) == 0
    check(hip, hip.hipStreamCreateWithFlags(stream, constants.STREAM_NON_BLOCKING))
    try:
        assert hip.hipblasSetStream(handle[0], stream[0]) == 0
        got = ffi.new("hipStream_t*")
        assert hip.hipblasGetStream(handle[0], got) == 0 and got[0] == stream[0]
        for device, host in ((da, ha), (db, hb), (dc, hc)):
            check(hip, hip.hipMemcpy(device, ffi.from_buffer(host), host.nbytes, H2D))
        alpha, beta = ffi.new("float*", 1.0), ffi.new("float*", 0.0)
        status = hip.hipblasGemmEx(
            handle[0], constants.HIPBLAS_OP_N, constants.HIPBLAS_OP_N, m, n, k,
            alpha, da, data_type, m, db, data_type, k, beta, dc, data_type, m,
            constants.HIPBLAS_COMPUTE_32F, constants.HIPBLAS_GEMM_DEFAULT,
        )  # fmt: skip
        assert status == 0
        check(hip, hip.hipStreamSynchronize(stream[0]))
        check(hip, hip.hipMemcpy(ffi.from_buffer(hc), dc, hc.nbytes, D2H))
        result = to_host(hc)
        assert np.isfinite(result).all(), "every output element written"
        error = np.linalg.norm(result - reference) / np.linalg.norm(reference)
        assert error < tolerance, (dtype, error)
        if dtype == "f32":  # two of the k-slices as a strided batch
            half = k // 2
            status = hip.hipblasGemmStridedBatchedEx(
                handle[0], constants.HIPBLAS_OP_N, constants.HIPBLAS_OP_N, m, n // 2, half,
                alpha, da, data_type, m, m * half, db, data_type, k, k * (n // 2) + half,
                beta, dc, data_type, m, m * (n // 2), 2,
                constants.HIPBLAS_COMPUTE_32F, constants.HIPBLAS_GEMM_DEFAULT,
            )  # fmt: skip
            assert status == 0
            check(hip, hip.hipStreamSynchronize(stream[0]))
            check(hip, hip.hipMemcpy(ffi.from_buffer(hc), dc, hc.nbytes, D2H))
            a64, b64, c = to_host(ha), to_host(hb), to_host(hc)
            for i in range(2):
                ai = a64[i * half : (i + 1) * half].T  # (m, half)
                bi = b64[i * (n // 2) : (i + 1) * (n // 2), i * half : (i + 1) * half].T
                ci = c[i * (n // 2) : (i + 1) * (n // 2)].T
                ref = ai @ bi
                assert np.linalg.norm(ci - ref) / np.linalg.norm(ref) < tolerance
        bad = hip.hipblasGemmEx(
            handle[0], 0, 0, m, n, k, alpha, da, data_type, m, db, data_type, k,
            beta, dc, data_type, m, constants.HIPBLAS_COMPUTE_32F, constants.HIPBLAS_GEMM_DEFAULT,
        )  # fmt: skip
        assert bad == constants.HIPBLAS_STATUSES["HIPBLAS_STATUS_INVALID_ENUM"]
    finally:
        assert hip.hipblasDestroy(handle[0]) == 0
        check(hip, hip.hipStreamDestroy(stream[0]))
        for device in (da, db, dc):
            check(hip, hip.hipFree(device))


def test_graph_capture_and_replay(hip: HipApi, module: Any) -> None:
    ffi, n = hip.ffi, 4096
    x = np.random.default_rng().standard_normal(n, dtype=np.float32)
    dx, dy = malloc(hip, n * 4), malloc(hip, n * 4)
    stream = ffi.new("hipStream_t*")
    check(hip, hip.hipStreamCreateWithFlags(stream, constants.STREAM_NON_BLOCKING))
    graph, executable = ffi.new("hipGraph_t*"), ffi.new("hipGraphExec_t*")
    try:
        check(hip, hip.hipMemcpy(dx, ffi.from_buffer(x), n * 4, H2D))
        check(hip, hip.hipMemsetD32(dy, 0, n))
        axpy = function(hip, module, "axpy")
        args = (ffi.new("int*", n), ffi.new("float*", 1.0), ffi.new("void**", dx))
        params, _ = kernel_params(hip, *args, ffi.new("void**", dy))
        check(hip, hip.hipStreamBeginCapture(stream[0], constants.CAPTURE_MODE_THREAD_LOCAL))
        capturing = ffi.new("hipStreamCaptureStatus*")
        check(hip, hip.hipStreamIsCapturing(stream[0], capturing))
        assert capturing[0] == constants.CAPTURE_STATUS_ACTIVE
        for _ in range(3):  # y += x, three kernels per replay
            check(hip, hip.hipModuleLaunchKernel(
                axpy, n // 256, 1, 1, 256, 1, 1, 0, stream[0], params, ffi.NULL
            ))  # fmt: skip
        check(hip, hip.hipStreamEndCapture(stream[0], graph))
        node, log = ffi.new("hipGraphNode_t*"), ffi.new("char[64]")
        check(hip, hip.hipGraphInstantiate(executable, graph[0], node, log, 64))
        for _ in range(2):
            check(hip, hip.hipGraphLaunch(executable[0], stream[0]))
        check(hip, hip.hipStreamSynchronize(stream[0]))
        out = np.full(n, np.nan, dtype=np.float32)
        check(hip, hip.hipMemcpy(ffi.from_buffer(out), dy, n * 4, D2H))
        np.testing.assert_allclose(out, 6 * x, rtol=1e-6)
        second = ffi.new("hipGraphExec_t*")
        check(hip, hip.hipGraphInstantiateWithFlags(second, graph[0], 0))
        check(hip, hip.hipGraphExecDestroy(second[0]))
    finally:
        check(hip, hip.hipGraphExecDestroy(executable[0]))
        check(hip, hip.hipGraphDestroy(graph[0]))
        check(hip, hip.hipStreamDestroy(stream[0]))
        check(hip, hip.hipFree(dx))
        check(hip, hip.hipFree(dy))


def test_out_of_memory_is_reported_and_the_process_still_works(hip: HipApi) -> None:
    pointer = hip.ffi.new("void**")
    hip.hipGetLastError()
    assert hip.hipMalloc(pointer, 1 << 50) == E["hipErrorOutOfMemory"]  # 1 PiB
    assert hip.ffi.string(hip.hipGetErrorName(E["hipErrorOutOfMemory"])) == b"hipErrorOutOfMemory"
    assert hip.hipGetLastError() == E["hipErrorOutOfMemory"]
    assert hip.hipGetLastError() == 0
    device = malloc(hip, MIB)
    check(hip, hip.hipMemsetD8(device, 1, MIB))
    check(hip, hip.hipDeviceSynchronize())
    check(hip, hip.hipFree(device))


def test_pointer_attributes_host_callbacks_and_pools(hip: HipApi, module: Any) -> None:
    ffi = hip.ffi
    device, pinned = malloc(hip, MIB), ffi.new("void**")
    check(hip, hip.hipHostMalloc(pinned, MIB, constants.HOST_MALLOC_MAPPED))
    attributes = ffi.new("hipPointerAttribute_t*")
    try:
        check(hip, hip.hipPointerGetAttributes(attributes, device))
        assert attributes.type == constants.MEMORY_TYPES["Device"] and attributes.device == 0
        check(hip, hip.hipPointerGetAttributes(attributes, pinned[0]))
        assert attributes.type == constants.MEMORY_TYPES["Host"]
        assert attributes.allocationFlags & constants.HOST_MALLOC_MAPPED
        plain = np.zeros(16)
        check(hip, hip.hipPointerGetAttributes(attributes, ffi.from_buffer(plain)))
        assert attributes.type == constants.MEMORY_TYPES["Unregistered"]

        called: list[int] = []

        @ffi.callback("void(void*)")
        def on_host(user_data: Any) -> None:
            called.append(int(ffi.cast("intptr_t", user_data)))

        check(hip, hip.hipLaunchHostFunc(ffi.NULL, on_host, ffi.cast("void*", 42)))
        check(hip, hip.hipDeviceSynchronize())
        assert called == [42]

        pool, async_pointer = ffi.new("hipMemPool_t*"), ffi.new("void**")
        check(hip, hip.hipDeviceGetDefaultMemPool(pool, 0))
        threshold = ffi.new("uint64_t*", 64 * MIB)
        release = constants.MEM_POOL_ATTRIBUTES["ReleaseThreshold"]
        check(hip, hip.hipMemPoolSetAttribute(pool[0], release, threshold))
        check(hip, hip.hipMallocAsync(async_pointer, MIB, ffi.NULL))
        check(hip, hip.hipMemsetD32Async(async_pointer[0], 3, MIB // 4, ffi.NULL))
        check(hip, hip.hipFreeAsync(async_pointer[0], ffi.NULL))
        check(hip, hip.hipDeviceSynchronize())

        axpy = function(hip, module, "axpy")
        grid, block, value = ffi.new("int*"), ffi.new("int*"), ffi.new("int*")
        check(hip, hip.hipModuleOccupancyMaxPotentialBlockSize(grid, block, axpy, 0, 0))
        assert grid[0] > 0 and 32 <= block[0] <= 1024
        check(hip, hip.hipFuncGetAttribute(value, constants.FUNC_ATTRIBUTES["NUM_REGS"], axpy))
        assert 0 < value[0] <= 255
    finally:
        check(hip, hip.hipHostFree(pinned[0]))
        check(hip, hip.hipFree(device))


WHEELS_ONLY = r"""
import json, sys
from hip_ffi import _nvidia, _nvidia_libraries as libraries
libraries.SYSTEM_CUDA, libraries.SYSTEM_CUDA_ROOT = (), "/nonexistent"  # hide the system CUDA
libraries.mapped_dirs = lambda names: []
api = _nvidia.load()
ffi, program = api.ffi, api.ffi.new("hiprtcProgram*")
source = sys.argv[1].encode()
assert api.hiprtcCreateProgram(program, source, b"k.hip", 0, ffi.NULL, ffi.NULL) == 0
status = api.hiprtcCompileProgram(program[0], 0, ffi.NULL)
size = ffi.new("size_t*")
api.hiprtcGetProgramLogSize(program[0], size)
log = ffi.new("char[]", max(size[0], 1))
api.hiprtcGetProgramLog(program[0], log)
handle = ffi.new("hipblasHandle_t*")
blas = api.hipblasCreate(handle)
result = {"libraries": api.libraries, "compile": status, "blas": blas}
print(json.dumps({**result, "log": ffi.string(log).decode(errors="replace")}))
"""


def test_nvidia_wheels_alone_are_enough() -> None:
    wheels = [d for d in _nvidia_libraries.wheel_dirs() if any(Path(d).glob("libcudart.so.*"))]
    if not wheels:
        pytest.skip("no NVIDIA CUDA runtime wheel (nvidia/*/lib) on sys.path here")
    environment = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH")}
    out = subprocess.run(
        [sys.executable, "-c", WHEELS_ONLY, HALF_KERNEL],
        capture_output=True, text=True, env=environment, check=True,
    )  # fmt: skip
    result = json.loads(out.stdout.splitlines()[-1])
    for role in ("cuda runtime", "nvrtc", "cublas"):
        assert "/nvidia/" in result["libraries"][role], result["libraries"]
    assert result["compile"] == 0, result["log"]  # hip_fp16/hip_bf16 via the wheel's headers
    assert result["blas"] == 0
