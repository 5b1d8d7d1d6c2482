"""f64 GEMM (HIP_R_64F with HIPBLAS_COMPUTE_64F, through gemm-ex) on every platform.

The cpu platform computes it (against numpy, strided-batched with a broadcast operand and
padded leading dimensions); the nvidia platform hands cuBLAS CUBLAS_COMPUTE_64F; the amd
platform passes it to hipBLAS 2 and 3 unchanged and translates it to HIPBLAS_R_64F for the
hipblasDatatype_t ABI of hipBLAS 0 and 1 (fakes stand in for the libraries).
"""

from __future__ import annotations

from typing import Any

import numpy as np

import hip_ffi
from hip_ffi import constants
from hip_ffi.platforms.amd.wrappers import bind_gemm
from hip_ffi.platforms.nvidia import blas as nvidia_blas

F64, COMPUTE_64F = constants.HIP_R_64F, constants.HIPBLAS_COMPUTE_64F
N, T = constants.HIPBLAS_OP_N, constants.HIPBLAS_OP_T
ALGO = constants.HIPBLAS_GEMM_DEFAULT


def test_cpu_f64_strided_batched_with_a_broadcast_operand() -> None:
    hip = hip_ffi.load("cpu")
    ffi = hip.ffi
    rng = np.random.default_rng()
    batches, m, n, k, lda = 3, 5, 4, 6, 8
    a = rng.standard_normal((batches, m, lda))  # column-major op(A) = Aᵀ: k x m, ld 8 (T)
    b = rng.standard_normal((n, k))  # column-major k x n, ld k, shared by every batch
    c = np.full((batches, n, m), np.nan)
    handle = ffi.new("hipblasHandle_t*")
    assert hip.hipblasCreate(handle) == 0
    pointers = []
    try:
        for array in (a, b, c):
            out = ffi.new("void**")
            assert hip.hipMalloc(out, array.nbytes) == 0
            assert hip.hipMemcpy(out[0], ffi.from_buffer(array), array.nbytes, 1) == 0
            pointers.append(out[0])
        alpha, beta = ffi.new("double*", 1.0 / 3.0), ffi.new("double*", 0.0)
        status = hip.hipblasGemmStridedBatchedEx(
            handle[0], T, N, m, n, k, alpha, pointers[0], F64, lda, m * lda, pointers[1], F64,
            k, 0, beta, pointers[2], F64, m, n * m, batches, COMPUTE_64F, ALGO,
        )  # fmt: skip
        assert status == 0
        assert hip.hipMemcpy(ffi.from_buffer(c), pointers[2], c.nbytes, 2) == 0
    finally:
        for pointer in pointers:
            assert hip.hipFree(pointer) == 0
        assert hip.hipblasDestroy(handle[0]) == 0
    # C (column-major m x n) stored as [n, m]: C[j, i] = sum_p A[i, p] B[p, j] / 3.
    expected = np.einsum("bip,jp->bji", a[:, :, :k], b) / 3.0
    np.testing.assert_allclose(c, expected, rtol=1e-13, atol=1e-13)


def test_nvidia_passes_f64_to_cublas_as_compute_64f() -> None:
    calls: list[tuple[Any, ...]] = []

    class FakeCublas:
        def cublasGemmEx(self, *args: Any) -> int:
            calls.append(args)
            return 0

        def cublasDgemm_v2(self, *args: Any) -> int:
            calls.append(("Dgemm", *args))
            return 0

        cublasGemmStridedBatchedEx = cublasGemmEx
        cublasCreate_v2 = cublasDestroy_v2 = cublasSetStream_v2 = cublasGetStream_v2 = None
        cublasSetWorkspace_v2 = cublasSgemm_v2 = None

    blas = nvidia_blas.bind(FakeCublas())
    args = (2, 3, 4, "alpha", "A", F64, 2, "B", F64, 4, "beta", "C", F64, 2)
    batched = (*args[:7], 8, "B", F64, 4, 12, "beta", "C", F64, 2, 6, 5)
    assert blas["hipblasGemmStridedBatchedEx"]("h", N, N, *batched, COMPUTE_64F, ALGO) == 0
    assert calls[-1] == ("h", 0, 0, *batched, 70, -1)  # CUDA_R_64F = 1, CUBLAS_COMPUTE_64F = 70
    # One f64 product computed in f64 goes through cuBLAS's typed entry: no type arguments.
    assert blas["hipblasGemmEx"]("h", N, N, *args, COMPUTE_64F, ALGO) == 0
    assert calls[-1] == ("Dgemm", "h", 0, 0, 2, 3, 4, "alpha", "A", 2, "B", 4, "beta", "C", 2)


def test_amd_translates_f64_for_the_old_hipblas_abi() -> None:
    calls: list[tuple[Any, ...]] = []

    class OldHipblas:  # hipBLAS 1: no `_v2` names, hipblasDatatype_t arguments
        def hipblasGemmEx(self, *args: Any) -> int:
            calls.append(args)
            return 0

        hipblasGemmStridedBatchedEx = hipblasGemmEx

    functions: dict[str, Any] = {}
    bind_gemm(functions, OldHipblas(), 1)
    args = ("h", N, N, 2, 3, 4, "alpha", "A", F64, 2, "B", F64, 4, "beta", "C", F64, 2)
    assert functions["hipblasGemmEx"](*args, COMPUTE_64F, ALGO) == 0
    assert calls[-1] == (*args[:8], 152, 2, "B", 152, 4, "beta", "C", 152, 2, 152, ALGO)
    batched = (*args[:10], 8, "B", F64, 4, 12, "beta", "C", F64, 2, 6, 5)
    assert functions["hipblasGemmStridedBatchedEx"](*batched, COMPUTE_64F, ALGO) == 0
    assert [calls[-1][i] for i in (8, 12, 17, 21)] == [152] * 4
