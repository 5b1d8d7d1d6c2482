"""hip-core on the current platform beside its anchors: launch, graph replay, objects, copies.

Measures, in one run (numbers from different runs are not comparable on shared machines):
- empty two-argument kernel: `Kernel.launch` vs cuda.core `launch`, CuPy `RawKernel`, and raw C
  (a `<<<>>>` loop built with nvcc) — microseconds per launch, host wall time over many
  back-to-back launches, median of repeats;
- graph replay: microseconds per captured kernel;
- stream and event creation (create + destroy), beside cuda.core;
- 4 KiB and 256 MiB pinned host<->device copies, synchronous, beside cuda.core (or CuPy),
  and at 4 KiB raw C three ways (cudaMemcpy as hip-core's synchronous copy calls it, an async
  copy on the null stream + synchronize, one on a non-blocking stream + synchronize as
  cuda.core's row does).
Anchors that are not importable (no GPU, no nvcc) are reported as skipped, not guessed.
Prints JSON lines, then a table; writes bench_core.jsonl and bench_core.md under --out.

    python bench/bench_core.py [--quick] [--out DIR]
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _harness import ROWS, cuda_core_kernel, emit, median_us, nvcc, parser, run, save

EMPTY = 'extern "C" __global__ void empty(float* p, int n) {}\n'
OBJECT_CALLS = 2000  # creations (+ destructions) per sample


def emit_objects(impl: str, cases: dict[str, Callable[[], Any]], sync: Callable[[], Any]) -> None:
    """One row per (benchmark, create-and-destroy call): µs per object."""
    for bench, create in cases.items():
        emit(bench=bench, impl=impl, us=median_us(create, OBJECT_CALLS, sync))


def emit_copies(
    impl: str, size: int, h2d: Callable[[], Any], d2h: Callable[[], Any], sync: Callable[[], Any]
) -> None:
    """A synchronous host->device and device->host copy of `size` bytes: µs and GB/s."""
    calls = 2000 if size <= 65536 else 10
    for bench, copy in (("h2d", h2d), ("d2h", d2h)):
        us = median_us(copy, calls, sync)
        emit(bench=bench, impl=impl, bytes=size, us=us, gb_s=size / us / 1e3)


def bench_hip_core(calls: int, copy_sizes: list[int]) -> None:
    import hip_core

    device = hip_core.Device(0)
    stream = device.create_stream()
    buffer = device.allocate(1024)
    kernel = hip_core.Program(EMPTY).load(device).get_kernel("empty")
    us = median_us(lambda: kernel.launch(1, 1, buffer, 0, stream=stream), calls, stream.sync)
    emit(bench="launch", impl="hip_core", us=us, platform=hip_core.hip_api().platform)

    per_graph = 1000
    with hip_core.capture(stream) as captured:
        for _ in range(per_graph):
            kernel.launch(1, 1, buffer, 0, stream=stream)
    graph = captured.graph.instantiate()  # type: ignore[union-attr]
    us = median_us(lambda: graph.launch(stream), 20, stream.sync) / per_graph
    emit(bench="graph_replay_per_kernel", impl="hip_core", us=us)

    objects = {
        "stream_create": lambda: device.create_stream().close(),
        "event_create_timing": lambda: device.create_event().close(),
        # timing off, as cuda.core's default event
        "event_create": lambda: device.create_event(timing=False).close(),
    }
    emit_objects("hip_core", objects, stream.sync)
    for size in copy_sizes:
        pinned, dev = device.allocate_pinned(size), device.allocate(size)
        emit_copies("hip_core", size, lambda d=dev, p=pinned: d.copy_from(p),
                    lambda d=dev, p=pinned: d.copy_to(p), stream.sync)  # fmt: skip


def bench_cuda_core(calls: int, copy_sizes: list[int]) -> None:
    cc, device, stream, kernel = cuda_core_kernel(EMPTY, "empty")
    import numpy as np

    buffer = device.allocate(1024, stream=stream)
    config = cc.LaunchConfig(grid=1, block=1)
    n = np.int32(0)
    us = median_us(lambda: cc.launch(stream, config, kernel, buffer, n), calls, stream.sync)
    emit(bench="launch", impl="cuda.core", us=us)
    objects = {
        "stream_create": lambda: device.create_stream().close(),
        "event_create": lambda: device.create_event().close(),
    }
    emit_objects("cuda.core", objects, stream.sync)
    pinned_resource = cc.LegacyPinnedMemoryResource()
    for size in copy_sizes:
        pinned = pinned_resource.allocate(size)
        dev = device.allocate(size, stream=stream)

        def h2d(d: Any = dev, p: Any = pinned) -> None:
            p.copy_to(d, stream=stream)
            stream.sync()

        def d2h(d: Any = dev, p: Any = pinned) -> None:
            d.copy_to(p, stream=stream)
            stream.sync()

        emit_copies("cuda.core", size, h2d, d2h, stream.sync)


def bench_cupy(calls: int) -> None:
    import cupy as cp
    import numpy as np

    kernel = cp.RawKernel(EMPTY, "empty")
    array = cp.empty(256, dtype=cp.float32)
    n = np.int32(0)
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        us = median_us(lambda: kernel((1,), (1,), (array, n)), calls, stream.synchronize)
    emit(bench="launch", impl="cupy", us=us)


RAW_C = r"""
#include <cstdio>
#include <chrono>
#include <algorithm>
#include <vector>
__global__ void empty(float* p, int n) {}
int main(int argc, char** argv) {
    int calls = atoi(argv[1]);
    float* p; cudaMalloc(&p, 1024);
    cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    for (int i = 0; i < calls / 10; ++i) empty<<<1, 1, 0, s>>>(p, 0);
    cudaStreamSynchronize(s);
    std::vector<double> us;
    for (int r = 0; r < 7; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < calls; ++i) empty<<<1, 1, 0, s>>>(p, 0);
        cudaStreamSynchronize(s);
        auto t1 = std::chrono::steady_clock::now();
        us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / calls);
    }
    std::sort(us.begin(), us.end());
    if (cudaGetLastError() != cudaSuccess) return 1;
    printf("%f\n", us[us.size() / 2]);
    return 0;
}
"""


#: 4 KiB pinned copies in C, three ways: what hip-core's synchronous copy calls (cudaMemcpy),
#: an async copy on the null stream and its synchronize, and what cuda.core's bench row does
#: (an async copy on a non-blocking stream and its synchronize). Prints "bench µs" lines.
RAW_COPY = r"""
#include <cstdio>
#include <chrono>
#include <algorithm>
#include <vector>
template <class F> double median_us(int calls, F f) {
    for (int i = 0; i < calls / 10; ++i) f();
    std::vector<double> us;
    for (int r = 0; r < 7; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < calls; ++i) f();
        auto t1 = std::chrono::steady_clock::now();
        us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / calls);
    }
    std::sort(us.begin(), us.end());
    return us[us.size() / 2];
}
int main(int argc, char** argv) {
    int calls = atoi(argv[1]); size_t n = atol(argv[2]);
    void *host, *dev; cudaMallocHost(&host, n); cudaMalloc(&dev, n);
    cudaStream_t s; cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    const char* dirs[2] = {"h2d", "d2h"};
    for (int d = 0; d < 2; ++d) {
        void* dst = d ? host : dev; void* src = d ? dev : host;
        cudaMemcpyKind kind = d ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice;
        printf("%s %f\n", dirs[d], median_us(calls, [&] { cudaMemcpy(dst, src, n, kind); }));
        printf("%s_null_async %f\n", dirs[d], median_us(calls, [&] {
            cudaMemcpyAsync(dst, src, n, kind, 0); cudaStreamSynchronize(0); }));
        printf("%s_stream_async %f\n", dirs[d], median_us(calls, [&] {
            cudaMemcpyAsync(dst, src, n, kind, s); cudaStreamSynchronize(s); }));
    }
    return cudaGetLastError() != cudaSuccess;
}
"""


def bench_raw_c(calls: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        built = {}
        for name, text in (("launch", RAW_C), ("copy", RAW_COPY)):
            source, built[name] = Path(tmp, f"{name}.cu"), Path(tmp, name)
            source.write_text(text)
            command = [nvcc(), "-O2", "-arch=native", str(source), "-o", str(built[name])]
            subprocess.run(command, check=True)
        out = subprocess.run(
            [str(built["launch"]), str(calls)], check=True, capture_output=True, text=True
        )
        emit(bench="launch", impl="raw C", us=float(out.stdout))
        copies = subprocess.run(
            [str(built["copy"]), "2000", "4096"], check=True, capture_output=True, text=True
        )
    for line in copies.stdout.split("\n"):
        if line:
            bench, us = line.split()
            emit(bench=bench, impl="raw C", bytes=4096, us=float(us))


def table() -> str:
    by_key: dict[tuple[Any, ...], dict[str, float]] = {}
    for row in ROWS:
        if "us" in row:
            by_key.setdefault((row["bench"], row.get("bytes")), {})[row["impl"]] = row["us"]
    header = ("benchmark", "hip_core µs", "cuda.core", "cupy", "raw C", "vs cuda.core")
    lines = ["\n{:<26}{:>12}{:>12}{:>12}{:>12}{:>14}".format(*header)]
    for (bench, size), impls in by_key.items():
        name = bench if size is None else f"{bench} {size // 1024} KiB"
        ours, anchor = impls.get("hip_core"), impls.get("cuda.core")
        ratio = f"{ours / anchor:.2f}x" if ours and anchor else "-"
        cells = [impls.get(k) for k in ("hip_core", "cuda.core", "cupy", "raw C")]
        lines.append(
            f"{name:<26}"
            + "".join(f"{c:>11.2f} " if c else f"{'-':>11} " for c in cells)
            + f"{ratio:>12}"
        )
    lines += [f"skipped {r['impl']}: {r['reason']}" for r in ROWS if r["bench"] == "skipped"]
    return "\n".join(lines)


def main() -> None:
    args = parser(__doc__).parse_args()
    calls = 2000 if args.quick else 20000
    sizes = sorted({4096, 4096 if args.quick else 256 << 20})
    run(
        (
            ("hip_core", lambda: bench_hip_core(calls, sizes)),
            ("cuda.core", lambda: bench_cuda_core(calls, sizes)),
            ("cupy", lambda: bench_cupy(calls)),
            ("raw C", lambda: bench_raw_c(calls)),
        )
    )
    save(args.out, "bench_core", table())


if __name__ == "__main__":
    main()
