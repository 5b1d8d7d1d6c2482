"""The nvidia platform on a real NVIDIA GPU (run on the H200: `pytest -m gpu`).

Every check compares against a host reference computed independently (numpy, float64 for GEMM);
inputs are random and outputs are poisoned first, so an unwritten result cannot pass.
"""

from __future__ import annotations

import re
import struct
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import hip_ffi
from hip_ffi import constants
from hip_ffi.api import HipApi

pytestmark = pytest.mark.gpu
E = constants.ERROR_CODES
H2D, D2H = constants.MEMCPY_HOST_TO_DEVICE, constants.MEMCPY_DEVICE_TO_HOST
MIB = 1 << 20

KERNELS = r"""
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#include <hip/hip_bf16.h>
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
extern "C" __global__ void narrow(const float* x, __half* h, __hip_bfloat16* b, float* sum, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        h[i] = __float2half(x[i]);
        b[i] = __float2bfloat16(x[i]);
        sum[i] = __half2float(h[i]) + __bfloat162float(b[i]);
    }
}
"""


class Gpu:
    """The platform and what a test created on it, released in reverse order at teardown."""

    def __init__(self, hip: HipApi) -> None:
        self.hip, self.ffi = hip, hip.ffi
        self._release: list[Callable[[], int]] = []
        self._keep: list[Any] = []

    def check(self, status: int, call: str = "") -> None:
        assert status == 0, f"{call}: {self.ffi.string(self.hip.hipGetErrorName(status)).decode()}"

    def create(self, ctype: str, create: Callable[..., int], destroy: Callable[..., int]) -> Any:
        """`create(out)` into a new `ctype`; `destroy(out[0])` at teardown."""
        out = self.ffi.new(ctype)
        self.check(create(out), ctype)
        self._release.append(lambda: destroy(out[0]))
        return out[0]

    def malloc(self, size: int) -> Any:
        return self.create("void**", lambda p: self.hip.hipMalloc(p, size), self.hip.hipFree)

    def pinned(self, size: int, flags: int = 0) -> Any:
        hip = self.hip
        return self.create("void**", lambda p: hip.hipHostMalloc(p, size, flags), hip.hipHostFree)

    def stream(self) -> Any:
        create = lambda p: self.hip.hipStreamCreateWithFlags(p, constants.STREAM_NON_BLOCKING)  # noqa: E731
        return self.create("hipStream_t*", create, self.hip.hipStreamDestroy)

    def event(self, flags: int = 0) -> Any:
        create = lambda p: self.hip.hipEventCreateWithFlags(p, flags)  # noqa: E731
        return self.create("hipEvent_t*", create, self.hip.hipEventDestroy)

    def module(self, code: bytes) -> Any:
        create = lambda p: self.hip.hipModuleLoadData(p, code)  # noqa: E731
        return self.create("hipModule_t*", create, self.hip.hipModuleUnload)

    def function(self, module: Any, name: str) -> Any:
        out = self.ffi.new("hipFunction_t*")
        self.check(self.hip.hipModuleGetFunction(out, module, name.encode()), name)
        return out[0]

    def params(self, *boxes: Any) -> Any:
        """A void*[] pointing at each argument (typed cdata, kept alive with the test)."""
        self._keep += boxes
        return self.ffi.new("void*[]", [self.ffi.cast("void*", b) for b in boxes])

    def upload(self, array: np.ndarray) -> Any:
        device = self.malloc(array.nbytes)
        self.check(self.hip.hipMemcpy(device, self.ffi.from_buffer(array), array.nbytes, H2D))
        return device

    def download(self, device: Any, out: np.ndarray) -> np.ndarray:
        self.check(self.hip.hipMemcpy(self.ffi.from_buffer(out), device, out.nbytes, D2H))
        return out

    def launch(self, f: Any, blocks: int, threads: int, params: Any, stream: Any = None) -> None:
        null = self.ffi.NULL
        args = (f, blocks, 1, 1, threads, 1, 1, 0, stream or null, params, null)
        self.check(self.hip.hipModuleLaunchKernel(*args), "hipModuleLaunchKernel")

    def close(self) -> None:
        self.check(self.hip.hipDeviceSynchronize())
        while self._release:
            self.check(self._release.pop()())


@pytest.fixture(scope="module")
def hip() -> HipApi:
    api = hip_ffi.load("nvidia")
    count = api.ffi.new("int*")
    assert api.hipGetDeviceCount(count) == 0 and count[0] > 0, "the gpu tests need a GPU"
    assert api.hipSetDevice(0) == 0
    return api


@pytest.fixture
def gpu(hip: HipApi) -> Iterator[Gpu]:
    resources = Gpu(hip)
    yield resources
    resources.close()


def arch(hip: HipApi) -> str:
    props = hip.ffi.new(hip.device_prop_type + "*")
    assert hip.hipGetDeviceProperties(props, 0) == 0
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
def cubin(hip: HipApi) -> bytes:
    status, code, log = compile_program(hip, KERNELS, [f"--offload-arch={arch(hip)}"])
    assert status == 0, log
    assert code.startswith(b"\x7fELF"), "a real arch gives a CUBIN"
    return code


def test_device_count_and_attributes(hip: HipApi) -> None:
    ffi = hip.ffi
    hip.hipGetLastError()
    props = ffi.new(hip.device_prop_type + "*")
    assert hip.hipGetDeviceProperties(props, 0) == 0
    name, arch_name = ffi.string(props.name).decode(), ffi.string(props.gcnArchName).decode()
    assert name.isprintable() and len(name) > 4, name
    assert re.fullmatch(r"sm_\d+", arch_name) and arch_name == f"sm_{props.major}{props.minor}"
    total, value = ffi.new("size_t*"), ffi.new("int*")
    assert hip.hipDeviceTotalMem(total, 0) == 0
    assert props.totalGlobalMem == total[0] > 16 << 30
    expected = {"MultiprocessorCount": props.multiProcessorCount, "WarpSize": 32}
    expected |= {"ComputeCapabilityMajor": props.major, "MaxThreadsPerBlock": 1024}
    expected["TotalGlobalMem"] = min(total[0], 2**31 - 1)  # clamped, as ROCm does
    for attribute, answer in expected.items():
        assert hip.hipDeviceGetAttribute(value, constants.DEVICE_ATTRIBUTES[attribute], 0) == 0
        assert value[0] == answer, attribute
    assert props.multiProcessorCount > 0 and props.warpSize == 32
    assert hip.hipDeviceGetAttribute(value, constants.DEVICE_ATTRIBUTES["PciChipId"], 0) == 0
    cudart = ffi.dlopen(hip.libraries["cuda runtime"])  # the raw value: device << 16 | vendor
    raw = ffi.new("int*")
    assert cudart.cudaDeviceGetAttribute(raw, 139, 0) == 0
    assert raw[0] & 0xFFFF == 0x10DE and value[0] == (raw[0] >> 16) & 0xFFFF > 0
    unsupported = hip.hipDeviceGetAttribute(value, constants.DEVICE_ATTRIBUTES["MaxThreadsDim"], 0)
    assert unsupported == E["hipErrorInvalidValue"]
    assert hip.hipGetLastError() == E["hipErrorInvalidValue"] and hip.hipGetLastError() == 0
    free, total_info = ffi.new("size_t*"), ffi.new("size_t*")
    assert hip.hipMemGetInfo(free, total_info) == 0
    assert 0 < free[0] <= total_info[0] == total[0]
    print(hip_ffi.describe("nvidia"))


def test_malloc_memcpy_round_trip_256_mib_is_bit_exact(gpu: Gpu) -> None:
    hip, ffi, size = gpu.hip, gpu.ffi, 256 * MIB
    source = np.random.default_rng().integers(0, 256, size, dtype=np.uint8)
    device = gpu.upload(source)
    assert np.array_equal(source, gpu.download(device, np.full(size, 0x5A, dtype=np.uint8)))
    back = np.full(size, 0x5A, dtype=np.uint8)
    gpu.check(hip.hipMemsetD8(device, 0, size))
    gpu.check(hip.hipMemcpyHtoD(device, ffi.from_buffer(source), size))  # the driver API's
    gpu.check(hip.hipMemcpyDtoH(ffi.from_buffer(back), device, size))
    assert np.array_equal(source, back)


def test_memset_d8_and_d32(gpu: Gpu) -> None:
    hip, count = gpu.hip, 1 << 22
    device, stream, out = gpu.malloc(count * 4), gpu.stream(), np.zeros(count * 4, np.uint8)
    gpu.check(hip.hipMemsetD8(device, 0xAB, count * 4))
    assert (gpu.download(device, out) == 0xAB).all()
    gpu.check(hip.hipMemsetD32(device, -123456789, count))
    assert (gpu.download(device, out).view(np.int32) == -123456789).all()
    gpu.check(hip.hipMemsetD32Async(device, 0x01020304, count // 2, stream))
    gpu.check(hip.hipMemsetD8Async(gpu.ffi.cast("char*", device) + count * 2, 7, 16, stream))
    gpu.check(hip.hipStreamSynchronize(stream))
    words = gpu.download(device, out).view(np.int32)
    assert (words[: count // 2] == 0x01020304).all()
    assert (out[count * 2 : count * 2 + 16] == 7).all()
    assert (words[count // 2 + 4 :] == -123456789).all()


def test_event_timing(gpu: Gpu) -> None:
    hip, size = gpu.hip, 1 << 30
    start, stop, device = gpu.event(), gpu.event(), gpu.malloc(size)
    gpu.check(hip.hipEventRecord(start, gpu.ffi.NULL))
    for value in range(4):
        gpu.check(hip.hipMemsetAsync(device, value, size, gpu.ffi.NULL))
    gpu.check(hip.hipEventRecord(stop, gpu.ffi.NULL))
    gpu.check(hip.hipEventSynchronize(stop))
    assert hip.hipEventQuery(stop) == 0
    ms = gpu.ffi.new("float*")
    gpu.check(hip.hipEventElapsedTime(ms, start, stop))
    bandwidth = 4 * size / (ms[0] * 1e-3) / 1e9
    assert 0.05 < ms[0] < 1000 and bandwidth > 100, (ms[0], bandwidth)  # GB/s of memset


def test_stream_ordering_across_two_streams_with_an_event(gpu: Gpu, cubin: bytes) -> None:
    hip, ffi, count = gpu.hip, gpu.ffi, 1 << 24
    device, pinned = gpu.malloc(count * 4), gpu.pinned(count * 4)
    first, second, event = gpu.stream(), gpu.stream(), gpu.event(constants.EVENT_DISABLE_TIMING)
    gpu.check(hip.hipMemsetD32Async(device, 1, count, first))
    fill = gpu.function(gpu.module(cubin), "spin_then_fill")
    cycles = ffi.new("long long*", 50_000_000)  # ~25 ms at the boost clock
    params = gpu.params(
        ffi.new("void**", device), ffi.new("int*", count), ffi.new("int*", 2), cycles
    )
    gpu.launch(fill, 264, 256, params, first)
    gpu.check(hip.hipEventRecord(event, first))
    gpu.check(hip.hipStreamWaitEvent(second, event, 0))
    gpu.check(hip.hipMemcpyAsync(pinned, device, count * 4, D2H, second))
    assert hip.hipStreamQuery(second) == E["hipErrorNotReady"], "the spin is still running"
    gpu.check(hip.hipStreamSynchronize(second))
    result = np.frombuffer(ffi.buffer(pinned, count * 4), dtype=np.int32)
    assert (result == 2).all(), "the copy ran before the kernel it waited for"


def test_nvrtc_compile_load_and_launch_three_ways(gpu: Gpu, cubin: bytes) -> None:
    hip, ffi, n, a = gpu.hip, gpu.ffi, 100_003, 2.5
    rng = np.random.default_rng()
    x, y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    dx, dy = gpu.upload(x), gpu.malloc(n * 4)
    axpy, blocks = gpu.function(gpu.module(cubin), "axpy"), (n + 255) // 256
    for way in ("params", "config", "extra"):
        gpu.check(hip.hipMemcpy(dy, ffi.from_buffer(y), n * 4, H2D))
        boxes = (ffi.new("int*", n), ffi.new("float*", a))
        params = gpu.params(*boxes, ffi.new("void**", dx), ffi.new("void**", dy))
        if way == "params":
            gpu.launch(axpy, blocks, 256, params)
        elif way == "config":
            config = ffi.new("HIP_LAUNCH_CONFIG*")
            config.gridDimX, config.gridDimY, config.gridDimZ = blocks, 1, 1
            config.blockDimX, config.blockDimY, config.blockDimZ = 256, 1, 1
            gpu.check(hip.hipDrvLaunchKernelEx(config, axpy, params, ffi.NULL), way)
        else:  # the arguments packed in one buffer, with HIP's HIP_LAUNCH_PARAM_* keys
            pointers = [int(ffi.cast("uintptr_t", p)) for p in (dx, dy)]
            packed = struct.pack("<ifQQ", n, a, *pointers)
            buffer, size = ffi.new("char[]", packed), ffi.new("size_t*", len(packed))
            keys = (constants.LAUNCH_PARAM_BUFFER_POINTER, constants.LAUNCH_PARAM_BUFFER_SIZE)
            end = ffi.cast("void*", constants.LAUNCH_PARAM_END)
            cast = [ffi.cast("void*", key) for key in keys]
            extra = ffi.new("void*[]", [cast[0], buffer, cast[1], size, end])
            args = (axpy, blocks, 1, 1, 256, 1, 1, 0, ffi.NULL, ffi.NULL, extra)
            gpu.check(hip.hipModuleLaunchKernel(*args), way)
        out = gpu.download(dy, np.full(n, np.nan, dtype=np.float32))
        np.testing.assert_allclose(out, np.float32(a) * x + y, rtol=1e-6, atol=1e-6, err_msg=way)


def test_nvrtc_targets_and_compile_errors(gpu: Gpu) -> None:
    status, code, _ = compile_program(gpu.hip, KERNELS, [])  # no target: the current device's
    assert status == 0 and code.startswith(b"\x7fELF")
    virtual = "compute_" + arch(gpu.hip).split("_")[1]
    status, ptx, log = compile_program(gpu.hip, KERNELS, [f"--offload-arch={virtual}", "-O3"])
    assert status == 0, log
    assert b".entry axpy" in ptx and ptx.endswith(b"\0"), "a virtual arch gives PTX"
    gpu.module(ptx)  # through the driver's JIT
    status, _, log = compile_program(gpu.hip, 'extern "C" __global__ void k() { nope; }', [])
    assert status == constants.HIPRTC_RESULTS["HIPRTC_ERROR_COMPILATION"]
    assert "nope" in log and "error" in log
    assert "COMPILATION" in gpu.ffi.string(gpu.hip.hiprtcGetErrorString(status)).decode().upper()


def test_hip_half_and_bfloat16_headers_compile_with_nvrtc(gpu: Gpu, cubin: bytes) -> None:
    ffi, n = gpu.ffi, 4099
    x = np.random.default_rng().standard_normal(n, dtype=np.float32) * 100
    buffers = [gpu.upload(x), gpu.malloc(n * 2), gpu.malloc(n * 2), gpu.malloc(n * 4)]
    params = gpu.params(*(ffi.new("void**", b) for b in buffers), ffi.new("int*", n))
    gpu.launch(gpu.function(gpu.module(cubin), "narrow"), (n + 127) // 128, 128, params)
    half = gpu.download(buffers[1], np.zeros(n, np.uint16))
    bf16 = gpu.download(buffers[2], np.zeros(n, np.uint16))
    total = gpu.download(buffers[3], np.full(n, np.nan, np.float32))
    assert np.array_equal(half, x.astype(np.float16).view(np.uint16))
    assert np.array_equal(bf16, _bf16(x))
    assert np.array_equal(total, half.view(np.float16).astype(np.float32) + _from_bf16(bf16))


def test_a_driver_call_on_a_fresh_thread_finds_its_context(hip: HipApi, cubin: bytes) -> None:
    results: list[int] = []

    def load_unload() -> None:  # no runtime call on this thread before the driver call
        handle = hip.ffi.new("hipModule_t*")
        results.append(hip.hipModuleLoadData(handle, cubin))
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


ENCODINGS: dict[str, tuple[Callable[..., Any], Callable[..., Any], int, float]] = {
    # (to the device's type, back to float64, hipDataType, relative-error tolerance)
    "f32": (lambda v: v.astype(np.float32), lambda v: v.astype(np.float64), 0, 1e-5),
    "f16": (lambda v: v.astype(np.float16), lambda v: v.astype(np.float64), 2, 1e-2),
    "bf16": (_bf16, lambda v: _from_bf16(v).astype(np.float64), 14, 2e-2),
}


@pytest.mark.parametrize("dtype", list(ENCODINGS))
def test_hipblas_gemm_against_numpy(gpu: Gpu, dtype: str) -> None:
    hip, ffi, (m, n, k) = gpu.hip, gpu.ffi, (192, 160, 96)
    encode, decode, data_type, tolerance = ENCODINGS[dtype]
    rng = np.random.default_rng()
    ha, hb = encode(rng.standard_normal((k, m))), encode(rng.standard_normal((n, k)))
    hc = encode(np.full((n, m), np.nan))  # column-major A(m,k), B(k,n), C(m,n)
    da, db, dc = gpu.upload(ha), gpu.upload(hb), gpu.upload(hc)
    handle, stream = ffi.new("hipblasHandle_t*"), gpu.stream()
    assert hip.hipblasCreate(handle) == 0
    try:
        got = ffi.new("hipStream_t*")
        assert hip.hipblasSetStream(handle[0], stream) == 0
        assert hip.hipblasGetStream(handle[0], got) == 0 and got[0] == stream
        alpha, beta = ffi.new("float*", 1.0), ffi.new("float*", 0.0)
        op, compute = constants.HIPBLAS_OP_N, constants.HIPBLAS_COMPUTE_32F
        algo = constants.HIPBLAS_GEMM_DEFAULT
        status = hip.hipblasGemmEx(
            handle[0], op, op, m, n, k, alpha, da, data_type, m, db, data_type, k,
            beta, dc, data_type, m, compute, algo,
        )  # fmt: skip
        assert status == 0
        gpu.check(hip.hipStreamSynchronize(stream))
        a64, b64, c = decode(ha), decode(hb), decode(gpu.download(dc, hc))
        assert np.isfinite(c).all(), "every output element written"
        reference = (a64.T @ b64.T).T
        assert np.linalg.norm(c - reference) / np.linalg.norm(reference) < tolerance
        if dtype == "f32":  # two blocks of A and B as a strided batch
            half, cols = k // 2, n // 2
            status = hip.hipblasGemmStridedBatchedEx(
                handle[0], op, op, m, cols, half, alpha, da, data_type, m, m * half,
                db, data_type, k, k * cols + half, beta, dc, data_type, m, m * cols, 2,
                compute, algo,
            )  # fmt: skip
            assert status == 0
            gpu.check(hip.hipStreamSynchronize(stream))
            c = decode(gpu.download(dc, hc))
            for i in range(2):
                ai = a64[i * half : (i + 1) * half].T
                bi = b64[i * cols : (i + 1) * cols, i * half : (i + 1) * half].T
                ci, ref = c[i * cols : (i + 1) * cols].T, ai @ bi
                assert np.linalg.norm(ci - ref) / np.linalg.norm(ref) < tolerance
    finally:
        assert hip.hipblasDestroy(handle[0]) == 0


def test_graph_capture_and_replay(gpu: Gpu, cubin: bytes) -> None:
    hip, ffi, n = gpu.hip, gpu.ffi, 4096
    x = np.random.default_rng().standard_normal(n, dtype=np.float32)
    dx, dy, stream = gpu.upload(x), gpu.malloc(n * 4), gpu.stream()
    gpu.check(hip.hipMemsetD32(dy, 0, n))
    axpy = gpu.function(gpu.module(cubin), "axpy")
    boxes = (ffi.new("int*", n), ffi.new("float*", 1.0))
    params = gpu.params(*boxes, ffi.new("void**", dx), ffi.new("void**", dy))
    gpu.check(hip.hipStreamBeginCapture(stream, constants.CAPTURE_MODE_THREAD_LOCAL))
    capturing = ffi.new("hipStreamCaptureStatus*")
    gpu.check(hip.hipStreamIsCapturing(stream, capturing))
    assert capturing[0] == constants.CAPTURE_STATUS_ACTIVE
    for _ in range(3):  # y += x, three kernels per replay
        gpu.launch(axpy, n // 256, 256, params, stream)
    end = lambda g: hip.hipStreamEndCapture(stream, g)  # noqa: E731
    graph = gpu.create("hipGraph_t*", end, hip.hipGraphDestroy)
    node, log = ffi.new("hipGraphNode_t*"), ffi.new("char[64]")
    instantiate = lambda e: hip.hipGraphInstantiate(e, graph, node, log, 64)  # noqa: E731
    executable = gpu.create("hipGraphExec_t*", instantiate, hip.hipGraphExecDestroy)
    for _ in range(2):
        gpu.check(hip.hipGraphLaunch(executable, stream))
    gpu.check(hip.hipStreamSynchronize(stream))
    out = gpu.download(dy, np.full(n, np.nan, dtype=np.float32))
    np.testing.assert_allclose(out, 6 * x, rtol=1e-6)
    flags = lambda e: hip.hipGraphInstantiateWithFlags(e, graph, 0)  # noqa: E731
    gpu.create("hipGraphExec_t*", flags, hip.hipGraphExecDestroy)


def test_out_of_memory_is_reported_and_the_process_still_works(gpu: Gpu) -> None:
    hip = gpu.hip
    hip.hipGetLastError()
    assert hip.hipMalloc(gpu.ffi.new("void**"), 1 << 50) == E["hipErrorOutOfMemory"]  # 1 PiB
    assert gpu.ffi.string(hip.hipGetErrorName(E["hipErrorOutOfMemory"])) == b"hipErrorOutOfMemory"
    assert hip.hipGetLastError() == E["hipErrorOutOfMemory"]
    assert hip.hipGetLastError() == 0
    gpu.check(hip.hipMemsetD8(gpu.malloc(MIB), 1, MIB))
    gpu.check(hip.hipDeviceSynchronize())


def test_pointer_attributes_host_callbacks_and_pools(gpu: Gpu, cubin: bytes) -> None:
    hip, ffi = gpu.hip, gpu.ffi
    device, pinned = gpu.malloc(MIB), gpu.pinned(MIB, constants.HOST_MALLOC_MAPPED)
    attributes = ffi.new("hipPointerAttribute_t*")
    gpu.check(hip.hipPointerGetAttributes(attributes, device))
    assert attributes.type == constants.MEMORY_TYPES["Device"] and attributes.device == 0
    gpu.check(hip.hipPointerGetAttributes(attributes, pinned))
    assert attributes.type == constants.MEMORY_TYPES["Host"]
    assert attributes.allocationFlags & constants.HOST_MALLOC_MAPPED
    gpu.check(hip.hipPointerGetAttributes(attributes, ffi.from_buffer(np.zeros(16))))
    assert attributes.type == constants.MEMORY_TYPES["Unregistered"]

    called: list[int] = []

    @ffi.callback("void(void*)")
    def on_host(user_data: Any) -> None:
        called.append(int(ffi.cast("intptr_t", user_data)))

    gpu.check(hip.hipLaunchHostFunc(ffi.NULL, on_host, ffi.cast("void*", 42)))
    gpu.check(hip.hipDeviceSynchronize())
    assert called == [42]

    pool, pointer = ffi.new("hipMemPool_t*"), ffi.new("void**")
    gpu.check(hip.hipDeviceGetDefaultMemPool(pool, 0))
    release = constants.MEM_POOL_ATTRIBUTES["ReleaseThreshold"]
    gpu.check(hip.hipMemPoolSetAttribute(pool[0], release, ffi.new("uint64_t*", 64 * MIB)))
    gpu.check(hip.hipMallocAsync(pointer, MIB, ffi.NULL))
    gpu.check(hip.hipMemsetD32Async(pointer[0], 3, MIB // 4, ffi.NULL))
    gpu.check(hip.hipFreeAsync(pointer[0], ffi.NULL))
    gpu.check(hip.hipDeviceSynchronize())

    axpy = gpu.function(gpu.module(cubin), "axpy")
    grid, block, value = ffi.new("int*"), ffi.new("int*"), ffi.new("int*")
    gpu.check(hip.hipModuleOccupancyMaxPotentialBlockSize(grid, block, axpy, 0, 0))
    assert grid[0] > 0 and 32 <= block[0] <= 1024
    gpu.check(hip.hipFuncGetAttribute(value, constants.FUNC_ATTRIBUTES["NUM_REGS"], axpy))
    assert 0 < value[0] <= 255
