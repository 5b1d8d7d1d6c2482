"""hip-ffi's cpu platform beside numpy and plain C loops, in one run, on all cores.

Measures (numbers from different runs are not comparable on shared machines):
- the disk cache: two fresh processes compile and load the same program with an empty cache
  directory; the first builds (runtime library + program), the second must compile nothing;
- vector add of N floats (default 16M; c = a + b, one element per thread, 256-thread blocks)
  beside numpy `np.add(a, b, out=c)` and plain C loops built with the same compiler and
  flags, on one thread and on every core;
- a 256-thread block reduction of N floats (a shared-memory tree with __syncthreads) in three
  launch shapes: one element per thread (N/256 blocks: the classic form, bound by the barrier
  cost; also with warps of 64 lanes), grid-stride with 4 blocks per core (the usual GPU form;
  here a thread's strided pass runs alone, so it cannot share cache lines with its
  neighbours), and a contiguous 64 Ki-float chunk per block — beside numpy `x.sum()` and plain
  C loops;
- the other barrier-heavy kernels, one element per thread, each beside numpy: the same sum
  with warp shuffles and one barrier (warps of 32 and 64 lanes), a 32 x 32 tiled transpose of
  a square (one barrier), a softmax over rows of 1024 (one 256-thread block a row: two trees,
  19 barriers); and the cost of a barrier round alone, in CPU ns per GPU thread (the process's
  CPU time, all worker threads together: 33 rounds less 1, over 32);
- the block reduction, the softmax and the barrier round also built with HIP_FFI_CPU_SPLIT=0
  ("as fibers": every barrier a fiber switch) beside the default build, which splits kernels
  at their barriers when libclang is installed (docs/platforms/cpu.md).
Kernel times are host wall time of launch + hipDeviceSynchronize (the hip_ffi call overhead
included), median of repeats after a warm-up; the hip_ffi kernels' rows also give the least CPU
time of a launch (the process's, all worker threads together: on a shared machine the steadier
figure). Prints JSON lines, then a table; writes
bench_cpu.jsonl and bench_cpu.md under --out.

    python bench/bench_cpu.py [--quick] [--out DIR]     # --quick: 1M floats, fewer repeats
"""

from __future__ import annotations

import ctypes
import json
import math
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
from _harness import ROWS, emit, hip_module, parser, run, save, seconds

KERNELS = r"""
extern "C" __global__ void vector_add_f32(const float* a, const float* b, float* c, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
// The shared-memory tree of a block: thread t brings v, s[0] ends with op over the block.
struct Add { __device__ float operator()(float a, float b) const { return a + b; } };
struct Max { __device__ float operator()(float a, float b) const { return fmaxf(a, b); } };
template <class Op = Add>
__device__ void block_tree(float* s, unsigned int t, float v, Op op = {}) {
    s[t] = v;
    __syncthreads();
    for (unsigned int half = blockDim.x / 2; half > 0; half /= 2) {
        if (t < half) s[t] = op(s[t], s[t + half]);
        __syncthreads();
    }
}
extern "C" __global__ void block_sum_f32(const float* x, float* partial, int n) {
    __shared__ float s[256];
    float v = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        v += x[i];
    block_tree(s, threadIdx.x, v);
    if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}
// The same tree over a contiguous chunk per block (threads stride by blockDim.x inside it):
// coalesced on a GPU, and cache-friendly when a block's threads run one after another.
extern "C" __global__ void block_sum_chunk_f32(const float* x, float* partial, int n, int chunk) {
    __shared__ float s[256];
    const int begin = blockIdx.x * chunk, end = min(begin + chunk, n);
    float v = 0.0f;
    for (int i = begin + threadIdx.x; i < end; i += blockDim.x) v += x[i];
    block_tree(s, threadIdx.x, v);
    if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}
// A warp's sum with shuffles, then the warps' sums through shared memory: one barrier.
extern "C" __global__ void shuffle_sum_f32(const float* x, float* partial, int n) {
    __shared__ float warps[32];
    const unsigned int t = threadIdx.x;
    const int i = blockIdx.x * blockDim.x + t;
    float v = i < n ? x[i] : 0.0f;
    for (int o = warpSize / 2; o > 0; o /= 2) v += __shfl_down(v, o);
    if (t % warpSize == 0) warps[t / warpSize] = v;
    __syncthreads();
    if (t < warpSize) {
        v = t < blockDim.x / warpSize ? warps[t] : 0.0f;
        for (int o = warpSize / 2; o > 0; o /= 2) v += __shfl_down(v, o);
        if (t == 0) partial[blockIdx.x] = v;
    }
}
// A 32 x 32 tile through shared memory, 32 x 8 threads of 4 elements each: one barrier.
extern "C" __global__ void transpose_f32(const float* in, float* out, int side) {
    __shared__ float tile[32][33];
    int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
    for (int j = 0; j < 32; j += 8) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * side + x];
    __syncthreads();
    x = blockIdx.y * 32 + threadIdx.x;
    y = blockIdx.x * 32 + threadIdx.y;
    for (int j = 0; j < 32; j += 8) out[(y + j) * side + x] = tile[threadIdx.x][threadIdx.y + j];
}
// One row a block: its max and its sum of exponentials, each through the tree.
extern "C" __global__ void softmax_rows_f32(const float* x, float* y, int cols) {
    __shared__ float s[256];
    const unsigned int t = threadIdx.x;
    const float* row = x + (size_t)blockIdx.x * cols;
    float* out = y + (size_t)blockIdx.x * cols;
    float m = -INFINITY, sum = 0.0f;
    for (int c = t; c < cols; c += blockDim.x) m = fmaxf(m, row[c]);
    block_tree(s, t, m, Max());
    m = s[0];
    __syncthreads();  // s is filled again
    for (int c = t; c < cols; c += blockDim.x) sum += expf(row[c] - m);
    block_tree(s, t, sum);
    const float scale = 1.0f / s[0];
    for (int c = t; c < cols; c += blockDim.x) out[c] = expf(row[c] - m) * scale;
}
// `rounds` barriers and nothing else.
extern "C" __global__ void barrier_rounds(int* out, int rounds) {
    for (int r = 0; r < rounds; ++r) __syncthreads();
    if (threadIdx.x == 0) out[blockIdx.x] = rounds;
}
"""

PLAIN_C = r"""
#include <thread>
#include <vector>
#define EXPORT extern "C" __attribute__((visibility("default")))
EXPORT void add_range(const float* a, const float* b, float* c, long begin, long end) {
    for (long i = begin; i < end; ++i) c[i] = a[i] + b[i];
}
EXPORT double sum_range(const float* x, long begin, long end) {
    float lanes[16] = {0};  // independent partial sums: vectorizes without -ffast-math
    long i = begin;
    for (; i + 16 <= end; i += 16)
        for (int l = 0; l < 16; ++l) lanes[l] += x[i + l];
    double total = 0;
    for (; i < end; ++i) total += x[i];
    for (int l = 0; l < 16; ++l) total += lanes[l];
    return total;
}
EXPORT void add_threads(const float* a, const float* b, float* c, long n, int threads) {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
        pool.emplace_back(add_range, a, b, c, n * t / threads, n * (t + 1) / threads);
    for (auto& th : pool) th.join();
}
EXPORT double sum_threads(const float* x, long n, int threads) {
    std::vector<double> parts(threads);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
            parts[t] = sum_range(x, n * t / threads, n * (t + 1) / threads);
        });
    for (auto& th : pool) th.join();
    double total = 0;
    for (double p : parts) total += p;
    return total;
}
"""


def median_ms(fn: Callable[[], object], repeats: int) -> float:
    """Median ms of one call (it synchronizes), after one warm-up: first touch of pages,
    thread wake-up."""
    return seconds(fn, repeats) * 1e3


# ---- the disk cache: a cold and a warm process ----------------------------------------------
# The probe is its own small program (not this file's helpers) so that the fresh process
# imports hip_ffi alone, as a user's would, before its first launch.

_CACHE_PROBE = textwrap.dedent(
    """
    import json, sys, time
    start = time.perf_counter()
    import hip_ffi
    from hip_cpu import toolchain
    hip = hip_ffi.load("cpu")
    ffi = hip.ffi
    from hip_ffi.rtc import compile_source
    compiled = compile_source(hip, sys.argv[1], name="bench.hip")
    assert compiled.ok, compiled.log
    code = compiled.code
    module, function = ffi.new("hipModule_t*"), ffi.new("hipFunction_t*")
    assert hip.hipModuleLoadData(module, code) == 0
    assert hip.hipModuleGetFunction(function, module[0], b"vector_add_f32") == 0
    out = ffi.new("void**")
    hip.hipMalloc(out, 4)
    args = [ffi.new("void**", out[0]), ffi.new("void**", out[0]), ffi.new("void**", out[0]),
            ffi.new("int*", 1)]
    params = ffi.new("void*[]", [ffi.cast("void*", a) for a in args])
    assert hip.hipModuleLaunchKernel(function[0], 1, 1, 1, 1, 1, 1, 0, ffi.NULL, params,
                                     ffi.NULL) == 0  # builds/loads the runtime library too
    assert hip.hipDeviceSynchronize() == 0
    print(json.dumps(dict(toolchain.stats, seconds=time.perf_counter() - start)))
    """
)


def bench_cache() -> None:
    with tempfile.TemporaryDirectory(prefix="hip-ffi-bench-cache-") as cache:
        env = dict(os.environ, HIP_FFI_CPU_CACHE=cache)
        for run in ("first", "second"):
            done = subprocess.run(
                [sys.executable, "-c", _CACHE_PROBE, KERNELS],
                env=env, capture_output=True, text=True, check=True,
            )  # fmt: skip
            stats = json.loads(done.stdout.strip().splitlines()[-1])
            emit(bench="disk_cache", run=run, **stats)


# ---- the kernels beside numpy and plain C ---------------------------------------------------


class Cpu:
    def __init__(self) -> None:
        import hip_ffi

        self.hip = hip_ffi.load("cpu")
        self.ffi = self.hip.ffi
        self.module = hip_module(self.hip, KERNELS, "bench.hip")
        self.wide = hip_module(self.hip, KERNELS, "bench64.hip", ["-mwavefrontsize64"])
        with mock.patch.dict(os.environ, {"HIP_FFI_CPU_SPLIT": "0"}):  # the same, as fibers
            self.fibers = hip_module(self.hip, KERNELS, "bench_fibers.hip")
        self.cores = hip_ffi.device_properties(self.hip, 0).multiprocessors

    def function(self, name: str, warp: int = 0, fibers: bool = False) -> Any:
        """Kernel `name` of the program built for the device's warp size, or for `warp` (64),
        or unsplit (`fibers`: every barrier a fiber switch)."""
        out = self.ffi.new("hipFunction_t*")
        module = self.fibers if fibers else self.wide if warp == 64 else self.module
        assert self.hip.hipModuleGetFunction(out, module, name.encode()) == 0
        return out[0]

    def device_copy(self, array: np.ndarray) -> Any:
        out = self.ffi.new("void**")
        assert self.hip.hipMalloc(out, array.nbytes) == 0
        assert self.hip.hipMemcpy(out[0], self.ffi.from_buffer(array), array.nbytes, 1) == 0
        return out[0]

    def launcher(
        self, name: str, grid: int | tuple[int, int], block: int | tuple[int, int],
        *args: tuple[str, Any], warp: int = 0, fibers: bool = False,
    ) -> Callable[[], None]:  # fmt: skip
        ffi, hip = self.ffi, self.hip
        function = self.function(name, warp, fibers)
        boxes = [ffi.new(ctype + "*", value) for ctype, value in args]
        params = ffi.new("void*[]", [ffi.cast("void*", box) for box in boxes])
        gx, gy = (grid, 1) if isinstance(grid, int) else grid
        bx, by = (block, 1) if isinstance(block, int) else block

        def launch() -> None:
            status = hip.hipModuleLaunchKernel(function, gx, gy, 1, bx, by, 1, 0, ffi.NULL,
                                               params, ffi.NULL)  # fmt: skip
            assert status == 0 and hip.hipDeviceSynchronize() == 0
            assert boxes  # keeps the argument boxes alive with the closure

        return launch


def plain_c() -> ctypes.CDLL:
    from hip_cpu import toolchain

    compiler = toolchain.find_compiler()
    assert compiler is not None, toolchain.no_compiler_message()
    work = Path(tempfile.mkdtemp(prefix="hip-ffi-bench-c-"))
    (work / "plain.cpp").write_text(PLAIN_C)
    command = [compiler.path, *toolchain.BASE_FLAGS, "plain.cpp", "-o", "plain.so"]
    subprocess.run(command, cwd=work, check=True)
    library = ctypes.CDLL(str(work / "plain.so"))
    library.sum_threads.restype = ctypes.c_double
    library.sum_range.restype = ctypes.c_double
    return library


def pointer(array: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(array.ctypes.data)


def _row(
    bench: str, impl: str, n: int, ms: float, traffic_bytes: int, cores: int,
    cpu: float | None = None,
) -> None:  # fmt: skip
    extra = {} if cpu is None else {"cpu_ms": cpu}
    emit(bench=bench, impl=impl, n=n, ms=ms, gb_s=traffic_bytes / ms / 1e6, cores=cores, **extra)


def kernel_ms(fn: Callable[[], object], repeats: int) -> tuple[float, float]:
    """(median wall ms, least CPU ms) of a launch: on a shared machine the CPU time, all
    worker threads together, is the steadier of the two."""
    return median_ms(fn, repeats), cpu_ms(fn, repeats)


def _inputs(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng()
    a, b = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    return a, b


def bench_hip(n: int, repeats: int) -> None:
    """Both kernels on the cpu platform (launch + hipDeviceSynchronize per sample)."""
    cpu = Cpu()
    a, b = _inputs(n)
    da, db, dc = cpu.device_copy(a), cpu.device_copy(b), cpu.device_copy(np.empty_like(a))
    cores, blocks = cpu.cores, -(-n // 256)
    vector_add = cpu.launcher("vector_add_f32", blocks, 256,
                              ("void*", da), ("void*", db), ("void*", dc), ("int", n))  # fmt: skip
    ms, spent = kernel_ms(vector_add, repeats)
    _row("vector_add", "hip_ffi cpu kernel", n, ms, 3 * a.nbytes, cores, spent)
    partial = np.empty(blocks, dtype=np.float32)
    dp = cpu.device_copy(partial)
    few = max(repeats // 4, 2)
    shapes = [
        (f"{blocks} blocks (1 element per thread)", "block_sum_f32", blocks, (), few, {}),
        (f"{blocks} blocks (1 element per thread), as fibers", "block_sum_f32", blocks, (), few,
         {"fibers": True}),
        (f"{blocks} blocks (1 element per thread), warps of 64", "block_sum_f32", blocks, (),
         few, {"warp": 64}),
        (f"{4 * cores} blocks (grid-stride)", "block_sum_f32", 4 * cores, (), repeats, {}),
        (f"{-(-n // 65536)} blocks (a 65536-float chunk each)", "block_sum_chunk_f32",
         -(-n // 65536), (("int", 65536),), repeats, {}),
    ]  # fmt: skip
    for label, kernel, grid, extra, samples, build in shapes:
        reduce = cpu.launcher(kernel, grid, 256, ("void*", da), ("void*", dp), ("int", n), *extra,
                              **build)  # fmt: skip
        ms, spent = kernel_ms(reduce, samples)
        check_sum(cpu, partial, dp, grid, a)
        _row("block_reduce_256", f"hip_ffi cpu kernel, {label}", n, ms, a.nbytes, cores, spent)


def cpu_ms(fn: Callable[[], object], repeats: int) -> float:
    """The least CPU time of one call, all of the process's threads together, in ms."""
    fn()
    spent = []
    for _ in range(repeats):
        start = time.process_time()
        fn()
        spent.append(time.process_time() - start)
    return min(spent) * 1e3


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    e /= e.sum(axis=1, keepdims=True)
    return e


def bench_barriers(n: int, repeats: int) -> None:
    """The other barrier-heavy kernels, one element per thread, each checked and beside numpy;
    and the CPU cost of a barrier round alone."""
    cpu, x = Cpu(), _inputs(n)[0]
    dx, blocks, cores, few = cpu.device_copy(x), n // 256, cpu.cores, max(repeats // 4, 2)
    partial = np.empty(blocks, np.float32)
    dp = cpu.device_copy(partial)
    for warp in (32, 64):
        shuffle = cpu.launcher("shuffle_sum_f32", blocks, 256, ("void*", dx), ("void*", dp),
                               ("int", n), warp=warp)  # fmt: skip
        ms, spent = kernel_ms(shuffle, few)
        check_sum(cpu, partial, dp, blocks, x[: blocks * 256])
        label = f"hip_ffi cpu kernel, warps of {warp}, {blocks} blocks"
        _row("shuffle_reduce_256", label, n, ms, x.nbytes, cores, spent)
    _row("shuffle_reduce_256", "numpy x.sum()", n, median_ms(x.sum, repeats), x.nbytes, cores)
    side = math.isqrt(n) // 32 * 32
    square, out = x[: side * side].reshape(side, side), np.empty((side, side), np.float32)
    dy = cpu.device_copy(out)
    transpose = cpu.launcher("transpose_f32", (side // 32, side // 32), (32, 8), ("void*", dx),
                             ("void*", dy), ("int", side))  # fmt: skip
    ms, spent = kernel_ms(transpose, repeats)
    assert np.array_equal(download(cpu, dy, out), square.T)
    label = f"hip_ffi cpu kernel, {side // 32}^2 blocks of 32 x 8"
    _row("transpose_32x32", label, side * side, ms, 2 * square.nbytes, cores, spent)
    ms = median_ms(lambda: np.copyto(out, square.T), repeats)
    _row("transpose_32x32", "numpy copyto(out, x.T)", side * side, ms, 2 * square.nbytes, cores)
    rows = n // 1024
    table = x[: rows * 1024].reshape(rows, 1024)
    for fibers in (False, True):
        rows_kernel = cpu.launcher("softmax_rows_f32", rows, 256, ("void*", dx), ("void*", dy),
                                   ("int", 1024), fibers=fibers)  # fmt: skip
        ms, spent = kernel_ms(rows_kernel, few)
        got = download(cpu, dy, np.empty_like(table))
        np.testing.assert_allclose(got, softmax(table), rtol=1e-4, atol=1e-7)
        label = f"hip_ffi cpu kernel, {rows} blocks of 256 (19 barriers)" + fibers * ", as fibers"
        _row("softmax_rows_1024", label, table.size, ms, 2 * table.nbytes, cores, spent)
    ms = median_ms(lambda: softmax(table), repeats)
    _row("softmax_rows_1024", "numpy exp(x - max) / sum", table.size, ms, 2 * table.nbytes, cores)
    for fibers in (False, True):
        spent = [cpu_ms(cpu.launcher("barrier_rounds", blocks, 256, ("void*", dp), ("int", k),
                                     fibers=fibers), few) for k in (1, 33)]  # fmt: skip
        ns = (spent[1] - spent[0]) / 32 / (blocks * 256) * 1e6
        impl = "as fibers" if fibers else "split at its barriers"
        emit(bench="barrier_round", impl=impl, ns_per_thread=ns, cores=cores)


def download(cpu: Cpu, device: Any, like: np.ndarray) -> np.ndarray:
    """The device buffer `device` as an array shaped as `like` (written into it)."""
    assert cpu.hip.hipMemcpy(cpu.ffi.from_buffer(like), device, like.nbytes, 2) == 0
    return like


def bench_numpy(n: int, repeats: int) -> None:
    a, b = _inputs(n)
    c = np.empty_like(a)
    cores = len(os.sched_getaffinity(0))
    ms = median_ms(lambda: np.add(a, b, out=c), repeats)
    _row("vector_add", "numpy np.add", n, ms, 3 * a.nbytes, cores)
    _row("block_reduce_256", "numpy x.sum()", n, median_ms(a.sum, repeats), a.nbytes, cores)


def bench_plain_c(n: int, repeats: int) -> None:
    """The same loops in C++, built with the cpu platform's compiler and flags."""
    c_lib = plain_c()
    a, b = _inputs(n)
    c = np.empty_like(a)
    threads = int(os.environ.get("HIP_FFI_CPU_THREADS") or len(os.sched_getaffinity(0)))
    size = ctypes.c_long(n)
    pa, pb, pc = pointer(a), pointer(b), pointer(c)
    for label, count in (("1 thread", 1), (f"{threads} threads", threads)):
        ms = median_ms(lambda k=count: c_lib.add_threads(pa, pb, pc, size, k), repeats)
        _row("vector_add", f"plain C, {label}", n, ms, 3 * a.nbytes, threads)
        ms = median_ms(lambda k=count: c_lib.sum_threads(pa, size, k), repeats)
        _row("block_reduce_256", f"plain C, {label}", n, ms, a.nbytes, threads)


def check_sum(cpu: Cpu, partial: np.ndarray, device: Any, count: int, x: np.ndarray) -> None:
    """The partial sums of the last launch add up to sum(x) (the benchmark measured real work)."""
    assert cpu.hip.hipMemcpy(cpu.ffi.from_buffer(partial), device, count * 4, 2) == 0
    total = partial[:count].astype(np.float64).sum()
    assert abs(total - x.astype(np.float64).sum()) <= 1e-4 * np.abs(x).sum()


def table() -> str:
    lines = [""]
    for r in ROWS:
        if r["bench"] == "disk_cache":
            lines.append(
                f"disk cache, {r['run']} process: {r['compiles']} compiler runs, "
                f"{r['cache_hits']} cache hits, {r['seconds']:.2f} s to first launch"
            )
    lines += [f"skipped: {r['impl']}: {r['reason']}" for r in ROWS if r["bench"] == "skipped"]
    benches = ("vector_add", "block_reduce_256", "shuffle_reduce_256", "transpose_32x32",
               "softmax_rows_1024")  # fmt: skip
    for bench in benches:
        rows = [r for r in ROWS if r["bench"] == bench]
        numpy_ms = next((r["ms"] for r in rows if r["impl"].startswith("numpy")), None)
        if not rows or numpy_ms is None:
            continue
        lines.append(f"\n{bench}, {rows[0]['n']} floats, {rows[0]['cores']} cores")
        lines.append(f"{'implementation':<68} {'ms':>9} {'GB/s':>7} {'/ numpy':>8} {'CPU ms':>9}")
        for r in rows:
            cpu = f" {r['cpu_ms']:>9.2f}" if "cpu_ms" in r else ""
            ratio = r["ms"] / numpy_ms
            lines.append(f"{r['impl']:<68} {r['ms']:>9.2f} {r['gb_s']:>7.2f} {ratio:>8.2f}{cpu}")
    rounds = [r for r in ROWS if r["bench"] == "barrier_round"]
    lines += ["\na barrier round alone, CPU ns per GPU thread"] if rounds else []
    lines += [f"{r['impl']:<68} {r['ns_per_thread']:>9.2f}" for r in rounds]
    return "\n".join(lines)


def main() -> None:
    args = parser(__doc__).parse_args()
    n, repeats = (1 << 20, 5) if args.quick else (1 << 24, 15)
    run(
        [
            ("disk cache", bench_cache),
            ("hip_ffi cpu", lambda: bench_hip(n, repeats)),
            ("hip_ffi cpu, barrier-heavy kernels", lambda: bench_barriers(n, repeats)),
            ("numpy", lambda: bench_numpy(n, repeats)),
            ("plain C", lambda: bench_plain_c(n, repeats)),
        ]
    )
    save(args.out, "bench_cpu", table())


if __name__ == "__main__":
    main()
