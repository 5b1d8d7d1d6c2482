"""Host cost of cuBLAS's GEMM entry points (issue 15's matmul rows): which one a small matmul
should go through.

bench_dispatch's profile puts most of a planned 64³ matmul in `hipblasGemmEx` itself (cuBLAS's
cublasGemmEx), where torch's whole `torch.matmul` costs less. This times, on one non-blocking
stream and one handle, µs per call of back-to-back 64 × 64 × 64 f32 products then one
synchronize (`_harness.median_us`), each entry called through ctypes (the same binding cost
for every row, printed as its own row):

- `cublasGemmEx` with hip-ffi's arguments (compute 32F, the default algorithm);
- `cublasSgemm_v2`, what torch's f32 `mm` calls;
- both again after `cublasSetWorkspace` (4 MiB of the caller's memory, as torch sets one);
- `cublasLtMatmul` with its descriptors, layouts and the heuristic's algorithm made once
  (no workspace, and 4 MiB);
- HipBackend's `matmul` (planned, `out=`) and torch's `matmul` / `mm(out=)`: the anchors.

nvidia platform only (the others are `skipped` rows).

    python bench/bench_gemm_host.py [--quick] [--out DIR]
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

from _harness import ROWS, emit, median_us, parser, run, save

N = 64
WORKSPACE = 4 << 20
COMPUTE_32F = 68  # cublasComputeType_t
R_32F = 0  # cudaDataType
PREF_MAX_WORKSPACE_BYTES = 1  # cublasLtMatmulPreferenceAttributes_t
HEURISTIC_RESULT_BYTES = 96  # cublasLtMatmulHeuristicResult_t: the algorithm (64 bytes) first


def _libraries() -> dict[str, ctypes.CDLL]:
    """cudart, cuBLAS and cuBLASLt as the nvidia platform loaded them (by their paths)."""
    from hip_core import hip_api
    from hip_runtime import HipBackend

    if hip_api().platform != "nvidia":
        raise RuntimeError(f"cuBLAS runs on CUDA only; this platform is {hip_api().platform}")
    HipBackend().close()  # (loads cuBLAS)
    paths: dict[str, str] = {}
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            for name in ("libcublasLt.so", "libcublas.so", "libcudart.so"):
                if f"/{name}" in path:
                    paths.setdefault(name, path)
    return {name: ctypes.CDLL(path) for name, path in paths.items()}


def _ok(status: int, what: str) -> None:
    if status:
        raise RuntimeError(f"{what} returned {status}")


def bench_cublas(calls: int) -> None:
    libs = _libraries()
    rt, blas, lt = libs["libcudart.so"], libs["libcublas.so"], libs["libcublasLt.so"]
    vp = ctypes.c_void_p
    stream = vp()
    _ok(rt.cudaStreamCreateWithFlags(ctypes.byref(stream), 1), "cudaStreamCreateWithFlags")
    a, b, c, work = vp(), vp(), vp(), vp()
    for p, size in ((a, N * N * 4), (b, N * N * 4), (c, N * N * 4), (work, WORKSPACE)):
        _ok(rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(size)), "cudaMalloc")
    handle = vp()
    _ok(blas.cublasCreate_v2(ctypes.byref(handle)), "cublasCreate")
    _ok(blas.cublasSetStream_v2(handle, stream), "cublasSetStream")
    alpha, beta = ctypes.c_float(1.0), ctypes.c_float(0.0)
    pa, pb = ctypes.byref(alpha), ctypes.byref(beta)
    gemm_ex, sgemm = blas.cublasGemmEx, blas.cublasSgemm_v2

    def ex() -> int:
        return gemm_ex(handle, 0, 0, N, N, N, pa, a, R_32F, N, b, R_32F, N, pb, c, R_32F, N,
                       COMPUTE_32F, -1)  # fmt: skip

    def sg() -> int:
        return sgemm(handle, 0, 0, N, N, N, pa, a, N, b, N, pb, c, N)

    def sync() -> None:
        _ok(rt.cudaStreamSynchronize(stream), "cudaStreamSynchronize")

    def row(impl: str, fn: Callable[[], Any]) -> None:
        _ok(fn(), impl)
        sync()
        emit(bench="gemm host", impl=impl, us=median_us(fn, calls, sync))

    row("ctypes call of cudaGetLastError (binding cost)", rt.cudaGetLastError)
    row("cublasGemmEx", ex)
    row("cublasSgemm_v2", sg)
    _ok(blas.cublasSetWorkspace_v2(handle, work, ctypes.c_size_t(WORKSPACE)), "setWorkspace")
    row("cublasGemmEx after cublasSetWorkspace", ex)
    row("cublasSgemm_v2 after cublasSetWorkspace", sg)
    light, desc, layout, pref = vp(), vp(), vp(), vp()
    _ok(lt.cublasLtCreate(ctypes.byref(light)), "cublasLtCreate")
    _ok(lt.cublasLtMatmulDescCreate(ctypes.byref(desc), COMPUTE_32F, R_32F), "DescCreate")
    n = ctypes.c_uint64(N)
    _ok(lt.cublasLtMatrixLayoutCreate(ctypes.byref(layout), R_32F, n, n, ctypes.c_int64(N)),
        "MatrixLayoutCreate")  # fmt: skip
    _ok(lt.cublasLtMatmulPreferenceCreate(ctypes.byref(pref)), "PreferenceCreate")
    for workspace in (0, WORKSPACE):
        size = ctypes.c_size_t(workspace)
        _ok(lt.cublasLtMatmulPreferenceSetAttribute(
            pref, PREF_MAX_WORKSPACE_BYTES, ctypes.byref(size), ctypes.c_size_t(ctypes.sizeof(size))
        ), "PreferenceSetAttribute")  # fmt: skip
        result = (ctypes.c_byte * HEURISTIC_RESULT_BYTES)()
        found = ctypes.c_int()
        _ok(lt.cublasLtMatmulAlgoGetHeuristic(
            light, desc, layout, layout, layout, layout, pref, 1, result, ctypes.byref(found)
        ), "AlgoGetHeuristic")  # fmt: skip
        if found.value < 1:
            raise RuntimeError("cublasLtMatmulAlgoGetHeuristic found no algorithm")
        space = work if workspace else None

        def matmul(space: Any = space, size: Any = size, algo: Any = result) -> int:
            return lt.cublasLtMatmul(light, desc, pa, a, layout, b, layout, pb, c, layout, c,
                                     layout, algo, space, size, stream)  # fmt: skip

        row(f"cublasLtMatmul, cached descriptors ({workspace >> 20} MiB workspace)", matmul)


def _discard(fn: Callable[[], Any]) -> Callable[[], None]:
    """`fn` returning nothing (the timing loop reads a returned value as a status)."""

    def call() -> None:
        fn()

    return call


def bench_hip(calls: int) -> None:
    import numpy as np

    from hip_runtime import HipBackend

    backend = HipBackend()
    x = backend.from_numpy(np.ones((N, N), np.float32))
    out = backend.empty((N, N), np.float32)
    cases: dict[str, Callable[[], Any]] = {
        "HipBackend matmul": lambda: backend.matmul(x, x),
        "HipBackend matmul out=": lambda: backend.matmul(x, x, out=out),
    }
    for impl, fn in cases.items():
        fn()
        backend.synchronize()
        emit(bench="gemm host", impl=impl, us=median_us(_discard(fn), calls, backend.synchronize))


def bench_torch(calls: int) -> None:
    import torch

    x = torch.ones((N, N), device="cuda")
    out = torch.empty_like(x)
    with torch.inference_mode():
        cases: dict[str, Callable[[], Any]] = {
            "torch.matmul": lambda: torch.matmul(x, x),
            "torch.mm out=": lambda: torch.mm(x, x, out=out),
        }
        for impl, fn in cases.items():
            fn()
            torch.cuda.synchronize()
            emit(bench="gemm host", impl=impl,
                 us=median_us(_discard(fn), calls, torch.cuda.synchronize))  # fmt: skip


def table() -> str:
    lines = ["| entry point | µs per 64³ f32 call |", "| --- | ---: |"]
    lines += [f"| {r['impl']} | {r['us']:.2f} |" for r in ROWS if r["bench"] == "gemm host"]
    lines += [f"skipped {r['impl']}: {r['reason']}" for r in ROWS if r["bench"] == "skipped"]
    return "\n".join(lines)


def main() -> None:
    args = parser(__doc__).parse_args()
    calls = 200 if args.quick else 5000
    run(
        (
            ("cuBLAS", lambda: bench_cublas(calls)),
            ("hip_runtime", lambda: bench_hip(calls)),
            ("torch", lambda: bench_torch(calls)),
        )
    )
    save(args.out, "bench_gemm_host", table())


if __name__ == "__main__":
    main()
