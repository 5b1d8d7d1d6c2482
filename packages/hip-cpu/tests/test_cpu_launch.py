"""Launches on the cpu platform: configuration checks, arguments, the executor's GPU semantics
(barriers, per-block shared memory, dynamic shared memory), kernel failures, and the prelude's
device functions (atomics, warp functions of a one-lane warp, integer intrinsics, f16/bf16).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import hip_ffi_test_kernel_cases as cases  # registered by conftest.py
import numpy as np
import pytest

import hip_ffi
from hip_cpu import device, toolchain
from hip_ffi import constants
from hip_ffi.rtc import compile_source

E = constants.ERROR_CODES
SOURCE = rb"""
#include <assert.h>
// Threads past `active` leave before the barriers (exited threads do not hold them up); the
// others reverse their block's values through shared memory, twice across a barrier.
extern "C" __global__ void early_exit_reverse(const int* x, int* y, int active) {
    __shared__ int s[1024];
    const int t = threadIdx.x, base = blockIdx.x * blockDim.x;
    if (t >= active) return;
    s[t] = x[base + t];
    __syncthreads();
    const int v = s[active - 1 - t];
    __syncthreads();
    s[t] = v * 2;
    __syncthreads();
    y[base + t] = s[t];
}
// Each block fills its own __shared__ array with its id, waits, and checks every slot: blocks
// that run at the same time on different cores must not see each other's shared memory.
extern "C" __global__ void shared_is_per_block(int* bad) {
    __shared__ int mine[256];
    mine[threadIdx.x] = blockIdx.x;
    __syncthreads();
    for (int i = 0; i < (int)blockDim.x; ++i)
        if (mine[i] != (int)blockIdx.x) atomicAdd(bad, 1);
}
// All of the dynamic shared memory the launch asked for is usable.
extern "C" __global__ void dynamic_shared_sum(unsigned int* out, int words) {
    extern __shared__ unsigned int dynamic[];
    for (int i = threadIdx.x; i < words; i += blockDim.x) dynamic[i] = i;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned int total = 0;
        for (int i = 0; i < words; ++i) total += dynamic[i];
        *out = total;
    }
}
extern "C" __global__ void fails_assert(const int* x) { assert(x[threadIdx.x] >= 0); }
extern "C" __global__ void traps(int when) { if ((int)threadIdx.x == when) __trap(); }
struct Pair { int a; double b; };
extern "C" __global__ void mixed_args(char c, Pair p, short s, double* out) {
    out[0] = c; out[1] = p.a; out[2] = p.b; out[3] = s;
}
// Device functions of the prelude, one result slot each.
extern "C" __global__ void prelude_functions(unsigned int* u, float* f, unsigned short* h) {
    u[0] = __popc(0xF0F0u); u[1] = __clz(1); u[2] = __brev(1u); u[3] = __ffs(8);
    u[4] = __umulhi(0x80000000u, 6u); u[5] = __byte_perm(0x33221100u, 0x77665544u, 0x7531u);
    u[6] = min(3u, 9u) + max(-2, 4); u[7] = warpSize; u[8] = __lane_id();
    u[9] = __shfl_xor(41, 1) + __shfl_down(1, 1);
    u[10] = (unsigned int)__ballot(1) + __any(0) + __all(1);
    unsigned int counter = 5;
    u[11] = atomicInc(&counter, 5); u[12] = counter;
    u[13] = atomicExch(&counter, 9u); u[14] = atomicCAS(&counter, 9u, 11u); u[15] = counter;
    __syncwarp();
    f[0] = rsqrtf(4.0f); f[1] = __saturatef(1.5f); f[2] = fdividef(1.0f, 4.0f);
    f[3] = __int_as_float(0x3f800000); f[4] = max(1.5f, 2.5f);
    float4 v = make_float4(1.0f, 2.0f, 3.0f, 4.0f);
    f[5] = v.x + v.y + v.z + v.w;
    __half a = __float2half(1.5f), b = __float2half(2.25f);
    f[6] = __half2float(a * b + a);
    __hip_bfloat16 c = __float2bfloat16(3.0f);
    f[7] = __bfloat162float(c * c);
    h[0] = __half_as_ushort(__float2half(65504.0f)); h[1] = __bfloat16_as_ushort(c);
}
"""


@pytest.fixture(scope="module")
def run() -> Iterator[Any]:
    runner = cases.Runner(hip_ffi.load("cpu"))
    result, code, log = runner.compile(SOURCE, "launch.hip")
    assert result == 0, log
    module = runner.ffi.new("hipModule_t*")
    assert runner.hip.hipModuleLoadData(module, code) == 0
    runner._modules["launch.hip"] = module[0]
    yield runner
    runner.close()


def launch_status(run: Any, name: str, grid: tuple[int, ...], block: tuple[int, ...],
                  shared: int = 0, params: Any = None, extra: Any = None) -> int:  # fmt: skip
    ffi = run.ffi
    return int(run.hip.hipModuleLaunchKernel(
        run.function("launch.hip", name), *grid, *block, shared, ffi.NULL,
        params if params is not None else ffi.NULL, extra if extra is not None else ffi.NULL,
    ))  # fmt: skip


def test_launch_configuration_is_checked_before_anything_runs(run: Any) -> None:
    bad = run.output(1, np.int32)
    params = run.ffi.new("void*[]", [run.ffi.new("void**", bad)])
    ok = (1, 1, 1)
    assert launch_status(run, "traps", ok, (1025, 1, 1)) == E["hipErrorInvalidConfiguration"]
    assert launch_status(run, "traps", ok, (64, 32, 1)) == E["hipErrorInvalidConfiguration"]
    assert launch_status(run, "traps", ok, (1, 1, 65)) == E["hipErrorInvalidConfiguration"]
    assert launch_status(run, "traps", (1, 65536, 1), ok) == E["hipErrorInvalidConfiguration"]
    assert launch_status(run, "traps", (0, 1, 1), ok) == E["hipErrorInvalidValue"]
    too_much = 64 * 1024 + 1
    assert launch_status(run, "dynamic_shared_sum", ok, ok, too_much) == E["hipErrorInvalidValue"]
    assert launch_status(run, "traps", ok, ok) == E["hipErrorInvalidValue"]  # no arguments
    assert launch_status(run, "shared_is_per_block", ok, ok, 0, params, params) == 1  # both
    assert run.hip.hipGetLastError() == E["hipErrorInvalidValue"]
    assert run.hip.hipDeviceSynchronize() == 0  # nothing was queued


def test_exited_threads_do_not_hold_barriers(run: Any, rng: np.random.Generator) -> None:
    for block, active in ((256, 256), (256, 100), (1024, 1)):
        grid = 7
        x = rng.integers(-1000, 1000, grid * block, dtype=np.int32)
        y = run.output(grid * block, np.int32)
        run.launch("launch.hip", "early_exit_reverse", (grid, 1, 1), (block, 1, 1),
                   cases.ptr(run.upload(x)), cases.ptr(y), cases.i32(active))  # fmt: skip
        got = run.download(y, (grid, block), np.int32)
        expected = x.reshape(grid, block)[:, :active][:, ::-1] * 2
        np.testing.assert_array_equal(got[:, :active], expected)
        assert (got[:, active:] == -1).all()  # untouched (poisoned) by the exited threads


def test_shared_memory_is_private_to_each_block(run: Any) -> None:
    bad = run.upload(np.zeros(1, dtype=np.int32))
    run.launch("launch.hip", "shared_is_per_block", (512, 1, 1), (256, 1, 1), cases.ptr(bad))
    assert run.download(bad, 1, np.int32)[0] == 0


def test_dynamic_shared_memory_size_is_honoured(run: Any) -> None:
    out = run.output(1, np.uint32)
    words = 64 * 1024 // 4  # the whole limit
    run.launch("launch.hip", "dynamic_shared_sum", (3, 1, 1), (128, 1, 1),
               cases.ptr(out), cases.i32(words), shared=words * 4)  # fmt: skip
    assert run.download(out, 1, np.uint32)[0] == (words * (words - 1) // 2) % 2**32


def test_kernel_failures_are_reported_at_synchronize(run: Any, capfd: Any) -> None:
    hip = run.hip
    x = np.zeros(64, dtype=np.int32)
    x[37] = -1
    run.launch("launch.hip", "fails_assert", (2, 1, 1), (64, 1, 1), cases.ptr(run.upload(x)))
    assert hip.hipDeviceSynchronize() == E["hipErrorAssert"]
    assert "Assertion `x[threadIdx.x] >= 0' failed" in capfd.readouterr().err
    assert hip.hipDeviceSynchronize() == 0  # reported once; the device keeps working
    run.launch("launch.hip", "traps", (1, 1, 1), (32, 1, 1), cases.i32(5))
    assert hip.hipStreamSynchronize(run.ffi.NULL) == E["hipErrorLaunchFailure"]
    assert "__trap" in capfd.readouterr().err
    run.launch("launch.hip", "traps", (4, 1, 1), (32, 1, 1), cases.i32(-1))  # never traps
    assert hip.hipDeviceSynchronize() == 0


def test_arguments_of_every_layout_and_the_extra_buffer(run: Any) -> None:
    ffi = run.ffi
    out = run.output(4, np.float64)
    pair = bytearray(np.int32(7).tobytes() + bytes(4) + np.float64(2.5).tobytes())  # a Pair
    boxes = [
        ffi.new("char*", b"A"), ffi.from_buffer(pair), ffi.new("short*", -3),
        ffi.new("void**", out),
    ]  # fmt: skip
    params = ffi.new("void*[]", [ffi.cast("void*", box) for box in boxes])
    assert launch_status(run, "mixed_args", (1, 1, 1), (1, 1, 1), params=params) == 0
    np.testing.assert_array_equal(run.download(out, 4, np.float64), [65, 7, 2.5, -3])
    # The same arguments packed by hand (C layout: char @0, Pair @8, short @24, double* @32).
    packed = bytearray(40)
    packed[0] = ord("B")
    packed[8:24] = np.array([9, 0], dtype=np.int32).tobytes() + np.float64(0.5).tobytes()
    packed[24:26] = np.int16(4).tobytes()
    packed[32:40] = int(ffi.cast("uintptr_t", out)).to_bytes(8, "little")
    buffer, size = ffi.from_buffer(packed), ffi.new("size_t*", len(packed))
    extra = ffi.new("void*[]", [
        ffi.cast("void*", constants.LAUNCH_PARAM_BUFFER_POINTER), buffer,
        ffi.cast("void*", constants.LAUNCH_PARAM_BUFFER_SIZE), size,
        ffi.cast("void*", constants.LAUNCH_PARAM_END),
    ])  # fmt: skip
    assert launch_status(run, "mixed_args", (1, 1, 1), (1, 1, 1), extra=extra) == 0
    np.testing.assert_array_equal(run.download(out, 4, np.float64), [66, 9, 0.5, 4])
    size[0] = 39  # smaller than the kernel's parameters
    assert launch_status(run, "mixed_args", (1, 1, 1), (1, 1, 1), extra=extra) == 1
    run.hip.hipGetLastError()
    config = ffi.new("HIP_LAUNCH_CONFIG*", {
        "gridDimX": 1, "gridDimY": 1, "gridDimZ": 1, "blockDimX": 1, "blockDimY": 1,
        "blockDimZ": 1, "sharedMemBytes": 0, "hStream": ffi.NULL, "numAttrs": 0,
    })  # fmt: skip
    function = run.function("launch.hip", "mixed_args")
    assert run.hip.hipDrvLaunchKernelEx(config, function, params, ffi.NULL) == 0
    np.testing.assert_array_equal(run.download(out, 4, np.float64), [65, 7, 2.5, -3])


def test_prelude_device_functions(run: Any) -> None:
    u, f, h = run.output(16, np.uint32), run.output(8, np.float32), run.output(2, np.uint16)
    run.launch("launch.hip", "prelude_functions", (1, 1, 1), (1, 1, 1),
               cases.ptr(u), cases.ptr(f), cases.ptr(h))  # fmt: skip
    np.testing.assert_array_equal(
        run.download(u, 16, np.uint32),
        [8, 31, 0x80000000, 4, 3, 0x77553311, 7, toolchain.warp_size(), 0, 42, 2, 5, 0, 0, 9, 11],
    )
    np.testing.assert_allclose(
        run.download(f, 8, np.float32), [0.5, 1.0, 0.25, 1.0, 2.5, 10.0, 4.875, 9.0]
    )
    np.testing.assert_array_equal(run.download(h, 2, np.uint16), [0x7BFF, 0x4040])


def test_function_attributes_and_occupancy(run: Any) -> None:
    ffi, hip = run.ffi, run.hip
    function = run.function("launch.hip", "dynamic_shared_sum")
    value, grid, block = ffi.new("int*"), ffi.new("int*"), ffi.new("int*")
    attributes = constants.FUNC_ATTRIBUTES
    assert hip.hipFuncGetAttribute(value, attributes["MAX_THREADS_PER_BLOCK"], function) == 0
    assert value[0] == 1024
    assert (
        hip.hipFuncGetAttribute(value, attributes["MAX_DYNAMIC_SHARED_SIZE_BYTES"], function) == 0
    )
    assert value[0] >= 64 * 1024
    assert hip.hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(value, function, 256, 0) == 0
    assert value[0] == 1
    assert hip.hipModuleOccupancyMaxPotentialBlockSize(grid, block, function, 0, 512) == 0
    assert block[0] == 512 and grid[0] == device.host().cores


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng()


def test_barriers_through_the_portable_ucontext_fibers(run: Any, rng: np.random.Generator) -> None:
    """The fallback fiber switch (other architectures) gives the same results on this one."""
    source = (cases.KERNELS / "reduce.hip").read_bytes()
    ffi, hip = run.ffi, run.hip
    result = compile_source(hip, source, name="r.hip", options=["-DHIPCPU_FIBER_UCONTEXT"])
    assert result.ok, result.log
    code = result.code
    module = ffi.new("hipModule_t*")
    assert hip.hipModuleLoadData(module, code) == 0
    run._modules["ucontext reduce"] = module[0]
    n, block, grid = 50_000, 256, 9
    x = rng.standard_normal(n).astype(np.float32)
    partial = run.output(grid, np.float32)
    run.launch("ucontext reduce", "block_sum_f32", (grid, 1, 1), (block, 1, 1),
               cases.ptr(run.upload(x)), cases.ptr(partial), cases.i32(n))  # fmt: skip
    owner = (np.arange(n) // block) % grid
    expected = np.bincount(owner, weights=x.astype(np.float64), minlength=grid)
    np.testing.assert_allclose(
        run.download(partial, grid, np.float32), expected, rtol=1e-4, atol=1e-3
    )
