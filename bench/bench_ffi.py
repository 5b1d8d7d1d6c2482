"""hip_ffi's nvidia platform beside its anchors: kernel-launch cost and host<->device copies.

Measures, in one run (numbers from different runs are not comparable on shared machines):
- launch: an empty kernel (no arguments, 1 block of 1 thread) on a non-blocking stream, in
  microseconds per launch = host wall time of many back-to-back launches plus one stream
  synchronize, divided by the launches; median of repeats after a warm-up. Through hip_ffi
  (hipDrvLaunchKernelEx with one reused HIP_LAUNCH_CONFIG; hipModuleLaunchKernel), through the
  bare cffi functions underneath (the wrapper's own cost is the difference), and the anchors:
  raw C (cuLaunchKernel, cuLaunchKernelEx and <<<>>>, built with nvcc in this run), cuda.core
  and CuPy's RawKernel;
- copies: 256 MiB host->device and device->host, from pinned (hipHostMalloc) and pageable
  (numpy) memory, synchronous hipMemcpy, in GB/s (median of repeats), beside raw C cudaMemcpy
  and torch's copy_.
Anchors that cannot run here (no nvcc, no CuPy...) are reported as skipped, not guessed.
Prints JSON lines, then a table; writes bench_ffi.jsonl and bench_ffi.md under --out.

    python bench/bench_ffi.py [--quick] [--out DIR]
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _harness import (
    ROWS,
    cuda_core_kernel,
    emit,
    hip_module,
    nvcc,
    parser,
    run,
    save,
    seconds,
    timing,
)

EMPTY = 'extern "C" __global__ void empty() {}\n'
COPY_BYTES = 256 << 20


def copy_gb_s(copy: Callable[[], int], size: int, repeats: int) -> float:
    """GB/s of the median time of a synchronous copy of `size` bytes (one warm-up; `copy`
    returns a status)."""
    return size / seconds(copy, repeats, status=True) / 1e9


def emit_launch(impl: str, launch: Callable[[], Any], calls: int, sync: Callable[[], Any]) -> None:
    """One launch row: µs per launch (median, min, max)."""
    t = timing(launch, calls, sync)
    emit(bench="launch", impl=impl, us=t.median_us, min=t.min_us, max=t.max_us, calls=calls)


def bench_hip_ffi(calls: int, copy_repeats: int) -> None:
    import numpy as np

    import hip_ffi
    from hip_ffi import constants

    hip = hip_ffi.load("nvidia")
    ffi = hip.ffi
    emit(bench="platform", impl="hip_ffi", version=hip.platform_version, libraries=hip.libraries)
    props = ffi.new(hip.device_prop_type + "*")
    assert hip.hipGetDeviceProperties(props, 0) == 0
    arch = ffi.string(props.gcnArchName).decode()
    emit(bench="device", name=ffi.string(props.name).decode(), arch=arch)

    module = hip_module(hip, EMPTY, "e.cu", [f"--offload-arch={arch}"])
    function = ffi.new("hipFunction_t*")
    assert hip.hipModuleGetFunction(function, module, b"empty") == 0
    stream = ffi.new("hipStream_t*")
    assert hip.hipStreamCreateWithFlags(stream, constants.STREAM_NON_BLOCKING) == 0
    f, s, null = function[0], stream[0], ffi.NULL

    def sync() -> None:
        assert hip.hipStreamSynchronize(s) == 0

    config = ffi.new("HIP_LAUNCH_CONFIG*")
    config.gridDimX = config.gridDimY = config.gridDimZ = 1
    config.blockDimX = config.blockDimY = config.blockDimZ = 1
    config.hStream = s
    launch_ex, launch = hip.hipDrvLaunchKernelEx, hip.hipModuleLaunchKernel
    driver = ffi.dlopen(hip.libraries["cuda driver"])  # the same functions, unwrapped
    raw_ex, raw = driver.cuLaunchKernelEx, driver.cuLaunchKernel
    for impl, fn in (
        ("hip_ffi hipDrvLaunchKernelEx", lambda: launch_ex(config, f, null, null)),
        ("hip_ffi hipModuleLaunchKernel", lambda: launch(f, 1, 1, 1, 1, 1, 1, 0, s, null, null)),
        ("cffi cuLaunchKernelEx (no wrapper)", lambda: raw_ex(config, f, null, null)),
        ("cffi cuLaunchKernel (no wrapper)", lambda: raw(f, 1, 1, 1, 1, 1, 1, 0, s, null, null)),
    ):
        emit_launch(impl, fn, calls, sync)

    device, pinned = ffi.new("void**"), ffi.new("void**")
    assert hip.hipMalloc(device, COPY_BYTES) == 0
    assert hip.hipHostMalloc(pinned, COPY_BYTES, 0) == 0
    pageable = np.random.default_rng().integers(0, 256, COPY_BYTES, dtype=np.uint8)
    np.frombuffer(ffi.buffer(pinned[0], COPY_BYTES), dtype=np.uint8)[:] = pageable
    host = {"pinned": pinned[0], "pageable": ffi.from_buffer(pageable)}
    h2d, d2h = constants.MEMCPY_HOST_TO_DEVICE, constants.MEMCPY_DEVICE_TO_HOST
    for memory, pointer in host.items():
        for direction, copy in (
            ("H2D", lambda p=pointer: hip.hipMemcpy(device[0], p, COPY_BYTES, h2d)),
            ("D2H", lambda p=pointer: hip.hipMemcpy(p, device[0], COPY_BYTES, d2h)),
        ):
            gb_s = copy_gb_s(copy, COPY_BYTES, copy_repeats)
            emit(bench="copy", impl="hip_ffi hipMemcpy", direction=direction, memory=memory,
                 bytes=COPY_BYTES, gb_s=gb_s)  # fmt: skip
    assert hip.hipHostFree(pinned[0]) == 0 and hip.hipFree(device[0]) == 0
    assert hip.hipStreamDestroy(s) == 0 and hip.hipModuleUnload(module) == 0


RAW_C = r"""
#include <cuda.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
extern "C" __global__ void empty() {}

static double now_us() {
    return std::chrono::duration<double, std::micro>(
        std::chrono::steady_clock::now().time_since_epoch()).count();
}
template <class F> static void launches(const char* impl, int calls, cudaStream_t s, F launch) {
    int bad = 0;
    for (int i = 0; i < calls / 10 + 100; ++i) bad |= launch();
    cudaStreamSynchronize(s);
    std::vector<double> us;
    for (int r = 0; r < 7; ++r) {
        double t0 = now_us();
        for (int i = 0; i < calls; ++i) bad |= launch();
        cudaStreamSynchronize(s);
        us.push_back((now_us() - t0) / calls);
    }
    std::sort(us.begin(), us.end());
    if (bad || cudaGetLastError() != cudaSuccess) { fprintf(stderr, "%s failed\n", impl); exit(1); }
    printf("{\"bench\": \"launch\", \"impl\": \"%s\", \"us\": %f, \"min\": %f, \"max\": %f}\n",
           impl, us[3], us[0], us[6]);
}
static void copies(const char* memory, void* host, void* dev, size_t bytes, int repeats) {
    const cudaMemcpyKind kinds[2] = {cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost};
    const char* names[2] = {"H2D", "D2H"};
    for (int k = 0; k < 2; ++k) {
        void* dst = k == 0 ? dev : host;
        void* src = k == 0 ? host : dev;
        if (cudaMemcpy(dst, src, bytes, kinds[k]) != cudaSuccess) exit(1);
        std::vector<double> gb;
        for (int r = 0; r < repeats; ++r) {
            double t0 = now_us();
            if (cudaMemcpy(dst, src, bytes, kinds[k]) != cudaSuccess) exit(1);
            gb.push_back(bytes / ((now_us() - t0) * 1e3));
        }
        std::sort(gb.begin(), gb.end());
        printf("{\"bench\": \"copy\", \"impl\": \"raw C cudaMemcpy\", \"direction\": \"%s\", "
               "\"memory\": \"%s\", \"bytes\": %zu, \"gb_s\": %f}\n",
               names[k], memory, bytes, gb[gb.size() / 2]);
    }
}
int main(int argc, char** argv) {
    int calls = atoi(argv[1]), repeats = atoi(argv[2]);
    size_t bytes = strtoull(argv[3], nullptr, 10);
    cudaFree(0);
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    CUfunction f;
    if (cudaGetFuncBySymbol(&f, (const void*)empty) != cudaSuccess) return 1;
    CUlaunchConfig config;
    memset(&config, 0, sizeof config);
    config.gridDimX = config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = config.blockDimY = config.blockDimZ = 1;
    config.hStream = s;
    launches("raw C cuLaunchKernel", calls, s,
             [&] { return (int)cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr); });
    launches("raw C cuLaunchKernelEx", calls, s,
             [&] { return (int)cuLaunchKernelEx(&config, f, nullptr, nullptr); });
    launches("raw C <<<>>>", calls, s, [&] { empty<<<1, 1, 0, s>>>(); return 0; });
    void *dev, *pinned;
    if (cudaMalloc(&dev, bytes) != cudaSuccess || cudaMallocHost(&pinned, bytes) != cudaSuccess)
        return 1;
    void* pageable = malloc(bytes);
    memset(pageable, 1, bytes);  // touch every page before timing
    memset(pinned, 1, bytes);
    copies("pinned", pinned, dev, bytes, repeats);
    copies("pageable", pageable, dev, bytes, repeats);
    return 0;
}
"""


def bench_raw_c(calls: int, copy_repeats: int) -> None:
    compiler = nvcc()
    with tempfile.TemporaryDirectory() as tmp:
        source, binary = Path(tmp, "launch.cu"), Path(tmp, "launch")
        source.write_text(RAW_C)
        stubs = Path(compiler).resolve().parent.parent / "lib64" / "stubs"  # libcuda.so to link to
        build = [
            compiler,
            "-O2",
            "-arch=native",
            str(source),
            "-o",
            str(binary),
            f"-L{stubs}",
            "-lcuda",
        ]
        subprocess.run(build, check=True, capture_output=True)
        arguments = [str(binary), str(calls), str(copy_repeats), str(COPY_BYTES)]
        out = subprocess.run(arguments, check=True, capture_output=True, text=True)
    for line in out.stdout.splitlines():
        emit(**json.loads(line))


def bench_cuda_core(calls: int) -> None:
    cc, _, stream, kernel = cuda_core_kernel(EMPTY, "empty")
    config = cc.LaunchConfig(grid=1, block=1)

    def launch() -> int:
        cc.launch(stream, config, kernel)
        return 0

    emit_launch("cuda.core launch", launch, calls, stream.sync)


def bench_cupy(calls: int) -> None:
    import cupy as cp

    kernel = cp.RawKernel(EMPTY, "empty")
    stream = cp.cuda.Stream(non_blocking=True)

    def launch() -> int:
        kernel((1,), (1,), ())
        return 0

    with stream:
        emit_launch("CuPy RawKernel", launch, calls, stream.synchronize)


def bench_torch_copies(copy_repeats: int) -> None:
    import torch

    device = torch.empty(COPY_BYTES, dtype=torch.uint8, device="cuda")
    hosts = {
        "pinned": torch.ones(COPY_BYTES, dtype=torch.uint8).pin_memory(),
        "pageable": torch.ones(COPY_BYTES, dtype=torch.uint8),
    }
    for memory, host in hosts.items():
        for direction, copy in (
            ("H2D", lambda h=host: device.copy_(h)),
            ("D2H", lambda h=host: h.copy_(device)),
        ):

            def synchronous(c: Callable[[], Any] = copy) -> int:
                c()
                torch.cuda.synchronize()
                return 0

            gb_s = copy_gb_s(synchronous, COPY_BYTES, copy_repeats)
            emit(bench="copy", impl="torch copy_", direction=direction, memory=memory,
                 bytes=COPY_BYTES, gb_s=gb_s)  # fmt: skip


def table() -> str:
    launches = {row["impl"]: row for row in ROWS if row.get("bench") == "launch"}
    anchor = launches.get("raw C cuLaunchKernel")
    lines = [
        "\nempty-kernel launch, µs per launch (lower is better)",
        f"{'implementation':<38}{'median':>8}{'min':>8}{'max':>8}{'vs raw C cuLaunchKernel':>26}",
    ]
    for impl, row in launches.items():
        ratio = f"{row['us'] / anchor['us']:.2f}x" if anchor else "-"
        lines.append(f"{impl:<38}{row['us']:>8.2f}{row['min']:>8.2f}{row['max']:>8.2f}{ratio:>26}")
    copies: dict[tuple[str, str], dict[str, float]] = {}
    for row in ROWS:
        if row.get("bench") == "copy":
            key = (row["direction"], row["memory"])
            copies.setdefault(key, {})[row["impl"].split()[0]] = row["gb_s"]
    lines += [
        f"\n{COPY_BYTES >> 20} MiB synchronous copies, GB/s (higher is better)",
        f"{'copy':<16}{'hip_ffi':>10}{'raw C':>10}{'torch':>10}{'hip_ffi / raw C':>18}",
    ]
    for (direction, memory), impls in copies.items():
        cells = [impls.get(k) for k in ("hip_ffi", "raw", "torch")]
        ratio = f"{cells[0] / cells[1]:.2f}" if cells[0] and cells[1] else "-"
        text = "".join(f"{c:>10.1f}" if c else f"{'-':>10}" for c in cells)
        lines.append(f"{direction + ' ' + memory:<16}{text}{ratio:>18}")
    lines += [f"skipped {r['impl']}: {r['reason']}" for r in ROWS if r.get("bench") == "skipped"]
    return "\n".join(lines)


def main() -> None:
    args = parser(__doc__).parse_args()
    calls, copy_repeats = (2000, 3) if args.quick else (20000, 10)
    run(
        (
            ("hip_ffi", lambda: bench_hip_ffi(calls, copy_repeats)),
            ("raw C", lambda: bench_raw_c(calls, copy_repeats)),
            ("cuda.core", lambda: bench_cuda_core(calls)),
            ("CuPy", lambda: bench_cupy(calls)),
            ("torch", lambda: bench_torch_copies(copy_repeats)),
        )
    )
    save(args.out, "bench_ffi", table())


if __name__ == "__main__":
    main()
