"""hip-ffi's cpu platform beside numpy and plain C loops, in one run, on all cores.

Measures (numbers from different runs are not comparable on shared machines):
- the disk cache: two fresh processes compile and load the same program with an empty cache
  directory; the first builds (runtime library + program), the second must compile nothing;
- vector add of N floats (default 16M; c = a + b, one element per thread, 256-thread blocks)
  beside numpy `np.add(a, b, out=c)` and plain C loops built with the same compiler and
  flags, on one thread and on every core;
- a 256-thread block reduction of N floats (a shared-memory tree with __syncthreads) in three
  launch shapes: one element per thread (N/256 blocks: the classic form, bound by the barrier
  cost), grid-stride with 4 blocks per core (the usual GPU form; here a thread's strided pass
  runs alone, so it cannot share cache lines with its neighbours), and a contiguous 64 Ki-float
  chunk per block — beside numpy `x.sum()` and plain C loops.
Kernel times are host wall time of launch + hipDeviceSynchronize (the hip_ffi call overhead
included), median of repeats after a warm-up. Prints JSON lines, then a table.

    python bench/bench_cpu.py [--quick] [--out DIR]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

KERNELS = r"""
extern "C" __global__ void vector_add_f32(const float* a, const float* b, float* c, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
extern "C" __global__ void block_sum_f32(const float* x, float* partial, int n) {
    __shared__ float s[256];
    const unsigned int t = threadIdx.x;
    float v = 0.0f;
    for (int i = blockIdx.x * blockDim.x + t; i < n; i += gridDim.x * blockDim.x) v += x[i];
    s[t] = v;
    __syncthreads();
    for (unsigned int half = blockDim.x / 2; half > 0; half /= 2) {
        if (t < half) s[t] += s[t + half];
        __syncthreads();
    }
    if (t == 0) partial[blockIdx.x] = s[0];
}
// The same tree over a contiguous chunk per block (threads stride by blockDim.x inside it):
// coalesced on a GPU, and cache-friendly when a block's threads run one after another.
extern "C" __global__ void block_sum_chunk_f32(const float* x, float* partial, int n, int chunk) {
    __shared__ float s[256];
    const unsigned int t = threadIdx.x;
    const int begin = blockIdx.x * chunk, end = min(begin + chunk, n);
    float v = 0.0f;
    for (int i = begin + t; i < end; i += blockDim.x) v += x[i];
    s[t] = v;
    __syncthreads();
    for (unsigned int half = blockDim.x / 2; half > 0; half /= 2) {
        if (t < half) s[t] += s[t + half];
        __syncthreads();
    }
    if (t == 0) partial[blockIdx.x] = s[0];
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

ROWS: list[dict[str, Any]] = []


def emit(**row: Any) -> None:
    ROWS.append(row)
    print(json.dumps(row), flush=True)


def median_ms(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm-up: first touch of pages, thread wake-up
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e3)
    return statistics.median(samples)


# ---- the disk cache: a cold and a warm process ----------------------------------------------

_CACHE_PROBE = textwrap.dedent(
    """
    import json, sys, time
    start = time.perf_counter()
    import hip_ffi
    from hip_ffi._cpu import toolchain
    hip = hip_ffi.load("cpu")
    ffi = hip.ffi
    program = ffi.new("hiprtcProgram*")
    assert hip.hiprtcCreateProgram(program, sys.argv[1].encode(), b"bench.hip", 0, ffi.NULL,
                                   ffi.NULL) == 0
    assert hip.hiprtcCompileProgram(program[0], 0, ffi.NULL) == 0
    size = ffi.new("size_t*")
    hip.hiprtcGetCodeSize(program[0], size)
    code = ffi.new("char[]", size[0])
    hip.hiprtcGetCode(program[0], code)
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
        ffi, hip = self.ffi, self.hip
        program = ffi.new("hiprtcProgram*")
        assert hip.hiprtcCreateProgram(program, KERNELS.encode(), b"bench.hip", 0, ffi.NULL,
                                       ffi.NULL) == 0  # fmt: skip
        assert hip.hiprtcCompileProgram(program[0], 0, ffi.NULL) == 0
        size = ffi.new("size_t*")
        hip.hiprtcGetCodeSize(program[0], size)
        code = ffi.new("char[]", size[0])
        hip.hiprtcGetCode(program[0], code)
        module = ffi.new("hipModule_t*")
        assert hip.hipModuleLoadData(module, code) == 0
        self.module = module[0]
        count = ffi.new("int*")
        hip.hipDeviceGetAttribute(count, 63, 0)  # hipDeviceAttributeMultiprocessorCount
        self.cores = int(count[0])

    def function(self, name: str) -> Any:
        out = self.ffi.new("hipFunction_t*")
        assert self.hip.hipModuleGetFunction(out, self.module, name.encode()) == 0
        return out[0]

    def device_copy(self, array: np.ndarray) -> Any:
        out = self.ffi.new("void**")
        assert self.hip.hipMalloc(out, array.nbytes) == 0
        assert self.hip.hipMemcpy(out[0], self.ffi.from_buffer(array), array.nbytes, 1) == 0
        return out[0]

    def launcher(
        self, name: str, grid: int, block: int, *args: tuple[str, Any]
    ) -> Callable[[], None]:
        ffi, hip = self.ffi, self.hip
        function = self.function(name)
        boxes = [ffi.new(ctype + "*", value) for ctype, value in args]
        params = ffi.new("void*[]", [ffi.cast("void*", box) for box in boxes])

        def launch() -> None:
            status = hip.hipModuleLaunchKernel(function, grid, 1, 1, block, 1, 1, 0, ffi.NULL,
                                               params, ffi.NULL)  # fmt: skip
            assert status == 0 and hip.hipDeviceSynchronize() == 0
            assert boxes  # keeps the argument boxes alive with the closure

        return launch


def plain_c() -> ctypes.CDLL:
    from hip_ffi._cpu import toolchain

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


def bench_kernels(n: int, repeats: int) -> None:
    cpu = Cpu()
    c_lib = plain_c()
    rng = np.random.default_rng()
    a, b = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    c = np.empty_like(a)
    da, db = cpu.device_copy(a), cpu.device_copy(b)
    dc = cpu.device_copy(c)
    threads, size = cpu.cores, ctypes.c_long(n)
    gb = 3 * a.nbytes / 1e9

    def row(bench: str, impl: str, ms: float, traffic_gb: float) -> None:
        emit(bench=bench, impl=impl, n=n, ms=ms, gb_s=traffic_gb / ms * 1e3, cores=threads)

    vector_add = cpu.launcher("vector_add_f32", -(-n // 256), 256,
                              ("void*", da), ("void*", db), ("void*", dc), ("int", n))  # fmt: skip
    row("vector_add", "hip_ffi cpu kernel", median_ms(vector_add, repeats), gb)
    row("vector_add", "numpy np.add", median_ms(lambda: np.add(a, b, out=c), repeats), gb)
    pa, pb, pc = pointer(a), pointer(b), pointer(c)
    row("vector_add", "plain C, 1 thread",
        median_ms(lambda: c_lib.add_range(pa, pb, pc, 0, size), repeats), gb)  # fmt: skip
    row("vector_add", f"plain C, {threads} threads",
        median_ms(lambda: c_lib.add_threads(pa, pb, pc, size, threads), repeats), gb)  # fmt: skip

    gb = a.nbytes / 1e9
    partial = np.empty(-(-n // 256), dtype=np.float32)
    dp = cpu.device_copy(partial)
    one_each = cpu.launcher("block_sum_f32", -(-n // 256), 256,
                            ("void*", da), ("void*", dp), ("int", n))  # fmt: skip
    row("block_reduce_256", f"hip_ffi cpu kernel, {-(-n // 256)} blocks (1 element per thread)",
        median_ms(one_each, max(repeats // 4, 2)), gb)  # fmt: skip
    grid = 4 * threads
    strided = cpu.launcher("block_sum_f32", grid, 256, ("void*", da), ("void*", dp), ("int", n))
    row("block_reduce_256", f"hip_ffi cpu kernel, {grid} blocks (grid-stride)",
        median_ms(strided, repeats), gb)  # fmt: skip
    check_sum(cpu, partial, dp, grid, a)
    chunk = 1 << 16
    chunks = -(-n // chunk)
    chunked = cpu.launcher("block_sum_chunk_f32", chunks, 256,
                           ("void*", da), ("void*", dp), ("int", n), ("int", chunk))  # fmt: skip
    row("block_reduce_256", f"hip_ffi cpu kernel, {chunks} blocks (a {chunk}-float chunk each)",
        median_ms(chunked, repeats), gb)  # fmt: skip
    check_sum(cpu, partial, dp, chunks, a)
    row("block_reduce_256", "numpy x.sum()", median_ms(lambda: a.sum(), repeats), gb)
    row("block_reduce_256", "plain C, 1 thread",
        median_ms(lambda: c_lib.sum_range(pointer(a), 0, size), repeats), gb)  # fmt: skip
    row("block_reduce_256", f"plain C, {threads} threads",
        median_ms(lambda: c_lib.sum_threads(pointer(a), size, threads), repeats), gb)  # fmt: skip


def check_sum(cpu: Cpu, partial: np.ndarray, device: Any, count: int, x: np.ndarray) -> None:
    """The partial sums of the last launch add up to sum(x) (the benchmark measured real work)."""
    assert cpu.hip.hipMemcpy(cpu.ffi.from_buffer(partial), device, count * 4, 2) == 0
    total = partial[:count].astype(np.float64).sum()
    assert abs(total - x.astype(np.float64).sum()) <= 1e-4 * np.abs(x).sum()


def table() -> None:
    print()
    cache = [r for r in ROWS if r["bench"] == "disk_cache"]
    for r in cache:
        print(f"disk cache, {r['run']} process: {r['compiles']} compiler runs, "
              f"{r['cache_hits']} cache hits, {r['seconds']:.2f} s to first launch")  # fmt: skip
    for bench in ("vector_add", "block_reduce_256"):
        rows = [r for r in ROWS if r["bench"] == bench]
        if not rows:
            continue
        numpy_ms = next(r["ms"] for r in rows if r["impl"].startswith("numpy"))
        print(f"\n{bench}, {rows[0]['n']} floats, {rows[0]['cores']} cores")
        print(f"{'implementation':<62} {'ms':>9} {'GB/s':>7} {'/ numpy':>8}")
        for r in rows:
            print(f"{r['impl']:<62} {r['ms']:>9.2f} {r['gb_s']:>7.2f} {r['ms'] / numpy_ms:>8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1M floats, fewer repeats")
    parser.add_argument("--out", default=os.environ.get("OUT"), help="also write JSON lines here")
    args = parser.parse_args()
    bench_cache()
    bench_kernels(1 << 20 if args.quick else 1 << 24, 5 if args.quick else 15)
    table()
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        with open(Path(args.out) / "bench_cpu.jsonl", "w") as file:
            file.writelines(json.dumps(r) + "\n" for r in ROWS)


if __name__ == "__main__":
    main()
