"""Kernels split at their barriers (the cpu platform's fission.py): which kernels are split and
why the others are not, and that split and unsplit builds of each kernel give numpy's answer:
2D blocks, several variables in one declaration, an array that lives across barriers, a
template helper that waits (inlined, with a default functor argument), threads that return
before the barrier, a loop whose condition each thread evaluates, a while over a kernel
argument, indices read by device functions and lambdas, a failed assert() (it names its
thread), local types on both sides of a barrier in a namespace's helper, HIP's deprecated
spellings with dynamic shared memory, a kernel a macro writes (left to the fibers), and a
barrier in divergent code (a launch failure that says where); programs split in several
threads at once. A split that does not build fails the test (the compiler would quietly build
the program again unsplit)."""

from __future__ import annotations

import concurrent.futures
import contextlib
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hip_ffi_test_kernel_cases as cases  # registered by conftest.py
import numpy as np
import pytest

import hip_ffi
from hip_cpu import fission, toolchain
from hip_ffi import constants
from hip_ffi.rtc import DEPRECATED_SPELLINGS, compile_source

pytestmark = pytest.mark.skipif(not fission.enabled(), reason="needs libclang (hip-cpu[split])")

LAUNCH_FAILURE = constants.ERROR_CODES["hipErrorLaunchFailure"]
SOURCE = rb"""
#include <assert.h>
// A 16 x 16 tile through shared memory, 16 x 4 threads of 4 elements each.
extern "C" __global__ void transpose(const float* in, float* out, int side) {
    __shared__ float tile[16][17];
    int x = blockIdx.x * 16 + threadIdx.x, y = blockIdx.y * 16 + threadIdx.y;
    for (int j = 0; j < 16; j += 4) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * side + x];
    __syncthreads();
    x = blockIdx.y * 16 + threadIdx.x;
    y = blockIdx.x * 16 + threadIdx.y;
    for (int j = 0; j < 16; j += 4) out[(y + j) * side + x] = tile[threadIdx.x][threadIdx.y + j];
}
struct Add { __device__ float operator()(float a, float b) const { return a + b; } };
struct Max { __device__ float operator()(float a, float b) const { return fmaxf(a, b); } };
template <class Op = Add>
__device__ void tree(float* s, unsigned int t, float v, Op op = {}) {
    s[t] = v;
    __syncthreads();
    for (unsigned int half = blockDim.x / 2; half > 0; half /= 2) {
        if (t < half) s[t] = op(s[t], s[t + half]);
        __syncthreads();
    }
}
// Per block: the sum and the max of its row (two inlined trees, a barrier between).
extern "C" __global__ void sum_and_max(const float* x, float* sums, float* maxima) {
    __shared__ float s[256];
    const unsigned int t = threadIdx.x;
    const float v = x[blockIdx.x * blockDim.x + t];
    tree(s, t, v);
    if (t == 0) sums[blockIdx.x] = s[0];
    __syncthreads();
    tree(s, t, v, Max());
    if (t == 0) maxima[blockIdx.x] = s[0];
}
// Threads from `live` on return at once; the others add their values through shared memory.
extern "C" __global__ void live_sum(const float* x, float* sums, int live) {
    __shared__ float s[128];
    const int t = threadIdx.x;
    if (t >= live) return;
    s[t] = x[blockIdx.x * blockDim.x + t];
    __syncthreads();
    if (t == 0) {
        float total = 0.0f;
        for (int i = 0; i < live; ++i) total += s[i];
        sums[blockIdx.x] = total;
    }
}
// Each block sums n values in tiles of blockDim.x, two partial sums a thread in an array;
// the tile count is a variable of every thread (its condition is evaluated per thread).
extern "C" __global__ void tiled_sum(const float* x, float* sums, int n) {
    __shared__ float tile[64];
    const int t = threadIdx.x, tiles = (n + 63) / 64;
    float acc[2] = {0.0f, 0.0f};
    for (int k = 0; k < tiles; ++k) {
        const int i = k * 64 + t;
        tile[t] = i < n ? x[blockIdx.x * n + i] : 0.0f;
        __syncthreads();
        acc[k % 2] += tile[63 - t];
        __syncthreads();
    }
    atomicAdd(&sums[blockIdx.x], acc[0] + acc[1]);
}
// `rounds` rotations of a block's values through shared memory (a while over an argument).
extern "C" __global__ void rotate(const int* x, int* y, int rounds) {
    __shared__ int s[32];
    int v = x[blockIdx.x * 32 + threadIdx.x], r = 0;
    while (r < rounds) {
        s[threadIdx.x] = v;
        __syncthreads();
        v = s[(threadIdx.x + 1) % 32];
        __syncthreads();
        ++r;
    }
    y[blockIdx.x * 32 + threadIdx.x] = v;
}
// A barrier only some threads reach: undefined on a GPU, a launch failure here.
extern "C" __global__ void divergent(int* y) {
    if (threadIdx.x < 5) __syncthreads();
    y[threadIdx.x] = 1;
}
__device__ int flat_index() { return threadIdx.x + blockDim.x * threadIdx.y; }
// Indices read by a device function and by lambdas after barriers, and a __shared__ counter
// that a loop's condition reads between the stretches that change it.
extern "C" __global__ void indices(int* y) {
    __shared__ int s[64];
    __shared__ int rounds;
    if (flat_index() == 0) rounds = 0;
    s[flat_index()] = flat_index();
    __syncthreads();
    while (rounds < 3) {
        const int mine = s[(flat_index() + 1) % 64];
        __syncthreads();
        s[flat_index()] = mine;
        if (flat_index() == 0) ++rounds;
        __syncthreads();
    }
    auto flat = [](uint3 t) { return t.x + 8 * t.y; };
    y[blockIdx.x * 64 + flat(threadIdx)] = s[flat_index()] * 100 + [] { return threadIdx.y; }();
}
// A failed assert() after a barrier names its thread.
extern "C" __global__ void checked(const int* x) {
    __shared__ int s[32];
    s[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    assert(s[(threadIdx.x + 1) % 32] >= 0);
}
// Local types (enum, typedef, using) on both sides of a barrier, in a helper of a namespace
// (inlined into the kernel outside it: its unqualified names still find the namespace's).
namespace util {
constexpr float scale = 32.0f;
template <class Real> __device__ void rotate_half(const Real* x, Real* y) {
    enum { N = 32, HALF = N / 2 };
    typedef Real real;
    __shared__ real s[N];
    s[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    using index = unsigned;
    const index i = (threadIdx.x + HALF) % N;
    y[threadIdx.x] = s[i] * (real)scale;
}
}  // namespace util
extern "C" __global__ void local_types(const float* x, float* y) { util::rotate_half(x, y); }
// HIP's deprecated spellings and dynamic shared memory (split as the compiler sees them).
extern "C" __global__ void old_style_reverse(const int* x, int* y) {
    HIP_DYNAMIC_SHARED(int, s)
    s[hipThreadIdx_x] = x[hipBlockIdx_x * hipBlockDim_x + hipThreadIdx_x];
    __syncthreads();
    y[hipBlockIdx_x * hipBlockDim_x + hipThreadIdx_x] = s[hipBlockDim_x - 1 - hipThreadIdx_x];
}
// A kernel that a macro writes (the program's text holds only the macro's use): fibers.
#define REVERSE_KERNEL(name, type)                                                 \
    extern "C" __global__ void name(const type* x, type* y) {                     \
        __shared__ type s[64];                                                     \
        s[threadIdx.x] = x[blockIdx.x * blockDim.x + threadIdx.x];                 \
        __syncthreads();                                                           \
        y[blockIdx.x * blockDim.x + threadIdx.x] = s[blockDim.x - 1 - threadIdx.x]; \
    }
REVERSE_KERNEL(macro_reverse, int)
// Shuffles: left to the fibers.
extern "C" __global__ void warp_sum(const float* x, float* y) {
    float v = x[threadIdx.x];
    for (int o = warpSize / 2; o > 0; o /= 2) v += __shfl_down(v, o);
    __syncthreads();
    if (threadIdx.x == 0) y[0] = v;
}
"""
SPLIT = ["transpose", "sum_and_max", "live_sum", "tiled_sum", "rotate", "divergent", "indices",
         "checked", "local_types", "old_style_reverse"]  # fmt: skip
KERNELS = [*SPLIT, "macro_reverse", "warp_sum"]


def test_which_kernels_are_split_and_why_not(tmp_path: Path) -> None:
    source = tmp_path / "split.hip"
    source.write_bytes(SOURCE)
    compiler = toolchain.find_compiler()
    assert compiler is not None
    compat = tmp_path / "deprecated.h"
    compat.write_text(DEPRECATED_SPELLINGS)
    text, names, notes = fission.split_program(
        source, "./split.hip", KERNELS, ["-DHIPCPU_WARP_SIZE=32", "-include", str(compat)],
        [str(tmp_path), str(toolchain.INCLUDE_DIR)], toolchain.builtin_include(compiler),
        str(toolchain.INCLUDE_DIR),
    )  # fmt: skip
    assert sorted(names) == sorted(SPLIT)
    assert any(n.startswith("warp_sum: runs unsplit") for n in notes), notes
    assert "macro_reverse: runs unsplit: macro_reverse's body comes from a macro" in notes
    assert "runs_blocks" not in text  # the trait lines are added by the compiler, after it
    assert "fission_begin" in text


@pytest.fixture(scope="module", params=["split", "unsplit"])
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    patch = pytest.MonkeyPatch()
    patch.setenv(fission.ENV, "0" if request.param == "unsplit" else "log")
    patch.setenv("HIP_FFI_CPU_CACHE", str(tmp_path_factory.mktemp("cache")))  # a real build
    runner = cases.Runner(hip_ffi.load("cpu"))
    with contextlib.redirect_stderr(io.StringIO()) as said:
        result = compile_source(runner.hip, SOURCE, name="split.hip")
    assert result.ok, result.log
    assert "did not build" not in said.getvalue(), said.getvalue()  # (else rebuilt unsplit)
    module = runner.ffi.new("hipModule_t*")
    assert runner.hip.hipModuleLoadData(module, result.code) == 0
    runner._modules["split.hip"] = module[0]
    runner.split = request.param == "split"
    yield runner
    runner.close()
    patch.undo()


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(23)


def test_transpose(run: Any, rng: np.random.Generator) -> None:
    side = 64
    x = rng.standard_normal((side, side)).astype(np.float32)
    y = run.output(side * side, np.float32)
    run.launch("split.hip", "transpose", (side // 16, side // 16, 1), (16, 4, 1),
               cases.ptr(run.upload(x)), cases.ptr(y), cases.i32(side))  # fmt: skip
    np.testing.assert_array_equal(run.download(y, (side, side), np.float32), x.T)


def test_sum_and_max_through_inlined_trees(run: Any, rng: np.random.Generator) -> None:
    blocks, threads = 300, 256
    x = rng.standard_normal((blocks, threads)).astype(np.float32)
    sums, maxima = run.output(blocks, np.float32), run.output(blocks, np.float32)
    run.launch("split.hip", "sum_and_max", (blocks, 1, 1), (threads, 1, 1),
               cases.ptr(run.upload(x)), cases.ptr(sums), cases.ptr(maxima))  # fmt: skip
    np.testing.assert_allclose(run.download(sums, blocks, np.float32), x.sum(axis=1), atol=1e-4)
    np.testing.assert_array_equal(run.download(maxima, blocks, np.float32), x.max(axis=1))


@pytest.mark.parametrize("live", [1, 77, 128])
def test_threads_that_return_before_the_barrier(
    run: Any, rng: np.random.Generator, live: int
) -> None:
    blocks = 50
    x = rng.standard_normal((blocks, 128)).astype(np.float32)
    sums = run.output(blocks, np.float32)
    run.launch("split.hip", "live_sum", (blocks, 1, 1), (128, 1, 1),
               cases.ptr(run.upload(x)), cases.ptr(sums), cases.i32(live))  # fmt: skip
    expected = x[:, :live].sum(axis=1)
    np.testing.assert_allclose(run.download(sums, blocks, np.float32), expected, atol=1e-4)


@pytest.mark.parametrize("n", [1, 64, 200])
def test_a_loop_each_thread_decides(run: Any, rng: np.random.Generator, n: int) -> None:
    blocks = 20
    x = rng.standard_normal((blocks, n)).astype(np.float32)
    sums = run.upload(np.zeros(blocks, np.float32))
    run.launch("split.hip", "tiled_sum", (blocks, 1, 1), (64, 1, 1),
               cases.ptr(run.upload(x)), cases.ptr(sums), cases.i32(n))  # fmt: skip
    np.testing.assert_allclose(run.download(sums, blocks, np.float32), x.sum(axis=1), atol=1e-4)


def test_a_while_over_an_argument(run: Any, rng: np.random.Generator) -> None:
    blocks, rounds = 40, 5
    x = rng.integers(-100, 100, (blocks, 32), dtype=np.int32)
    y = run.output(blocks * 32, np.int32)
    run.launch("split.hip", "rotate", (blocks, 1, 1), (32, 1, 1),
               cases.ptr(run.upload(x)), cases.ptr(y), cases.i32(rounds))  # fmt: skip
    np.testing.assert_array_equal(
        run.download(y, (blocks, 32), np.int32), np.roll(x, -rounds, axis=1)
    )


def test_indices_read_by_functions_and_lambdas(run: Any) -> None:
    blocks = 3
    y = run.output(blocks * 64, np.int32)
    run.launch("split.hip", "indices", (blocks, 1, 1), (8, 8, 1), cases.ptr(y))
    i = np.arange(64)
    expected = np.tile((i + 3) % 64 * 100 + i // 8, blocks)
    np.testing.assert_array_equal(run.download(y, blocks * 64, np.int32), expected)


def test_local_types_across_a_barrier_in_a_namespace(run: Any, rng: np.random.Generator) -> None:
    x = rng.standard_normal(32).astype(np.float32)
    y = run.output(32, np.float32)
    run.launch("split.hip", "local_types", (1, 1, 1), (32, 1, 1), cases.ptr(run.upload(x)),
               cases.ptr(y))  # fmt: skip
    np.testing.assert_array_equal(run.download(y, 32, np.float32), np.roll(x, -16) * 32)


@pytest.mark.parametrize("kernel", ["old_style_reverse", "macro_reverse"])
def test_reversed_through_shared_memory(run: Any, rng: np.random.Generator, kernel: str) -> None:
    blocks = 5
    x = rng.integers(-1000, 1000, (blocks, 64), dtype=np.int32)
    y = run.output(blocks * 64, np.int32)
    run.launch("split.hip", kernel, (blocks, 1, 1), (64, 1, 1), cases.ptr(run.upload(x)),
               cases.ptr(y), shared=64 * 4)  # fmt: skip
    np.testing.assert_array_equal(run.download(y, (blocks, 64), np.int32), x[:, ::-1])


def test_a_failed_assert_names_its_thread(run: Any) -> None:
    x = np.zeros(32, np.int32)
    x[8] = -1
    run.launch("split.hip", "checked", (1, 1, 1), (32, 1, 1), cases.ptr(run.upload(x)))
    status = run.hip.hipDeviceSynchronize()
    assert status == constants.ERROR_CODES["hipErrorAssert"]
    assert "thread [7,0,0] Assertion" in run.hip.error_detail(status)


def test_shuffles_beside_split_kernels(run: Any, rng: np.random.Generator) -> None:
    x = rng.standard_normal(32).astype(np.float32)
    y = run.output(1, np.float32)
    run.launch(
        "split.hip", "warp_sum", (1, 1, 1), (32, 1, 1), cases.ptr(run.upload(x)), cases.ptr(y)
    )
    np.testing.assert_allclose(run.download(y, 1, np.float32), [x.sum()], atol=1e-4)


def test_programs_split_in_several_threads_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HIP_FFI_CPU_CACHE", str(tmp_path))
    hip = hip_ffi.load("cpu")
    sources = [SOURCE + f"\n// program {i}\n".encode() for i in range(4)]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda s: compile_source(hip, s, name="split.hip"), sources))
    assert all(result.ok for result in results), [r.log for r in results]


def test_a_barrier_in_divergent_code_fails_the_launch(run: Any) -> None:
    if not run.split:
        pytest.skip("unsplit, the fibers let the threads that skip the barrier end (as they did)")
    y = run.output(32, np.int32)
    run.launch("split.hip", "divergent", (2, 1, 1), (32, 1, 1), cases.ptr(y))
    status = run.hip.hipDeviceSynchronize()
    assert status == LAUNCH_FAILURE
    detail = run.hip.error_detail(status)
    assert "disagree on the condition at ./split.hip:" in detail or "split.hip:" in detail, detail
    assert "divergent" in detail
