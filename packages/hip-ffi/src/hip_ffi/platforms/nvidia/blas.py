"""hipBLAS over cuBLAS: handles, streams and GEMM with HIP's enum values and status codes.

Arguments keep their order (hipBLAS copied cuBLAS's signatures); only the enums differ:
hipblasOperation_t (111.. -> 0..), hipblasComputeType_t (2 -> CUBLAS_COMPUTE_32F = 68...) and
hipblasGemmAlgo_t (default -> -1). hipDataType values are cudaDataType's and pass unchanged.
A GEMM of f32 (or f64) operands computed in f32 (f64) with the default algorithm goes to
cublasSgemm_v2 (cublasDgemm_v2), the same product through cuBLAS's typed entry, whose own
host cost is below cublasGemmEx's (issue 15: most of a 64³ matmul's host time is cuBLAS's).
An enum value with no cuBLAS counterpart returns HIPBLAS_STATUS_INVALID_ENUM before anything
reaches the GPU. GEMMs are asynchronous on the handle's stream (hipblasSetStream).
"""

from __future__ import annotations

from typing import Any

from hip_ffi import constants
from hip_ffi.platforms.nvidia.error_codes import CUBLAS_TO_HIPBLAS, HIPBLAS_UNKNOWN
from hip_ffi.platforms.nvidia.tables import BLAS_COMPUTE_TYPE, BLAS_GEMM_ALGO, BLAS_OPERATION
from hip_ffi.platforms.nvidia.wrappers import Native, translated

INVALID_ENUM = constants.HIPBLAS_STATUSES["HIPBLAS_STATUS_INVALID_ENUM"]
_CUBLAS_COMPUTE_32F = BLAS_COMPUTE_TYPE[constants.HIPBLAS_COMPUTE_32F]
_CUBLAS_COMPUTE_64F = BLAS_COMPUTE_TYPE[constants.HIPBLAS_COMPUTE_64F]
_CUBLAS_GEMM_DEFAULT = BLAS_GEMM_ALGO[constants.HIPBLAS_GEMM_DEFAULT]


def _cuda_enums(
    trans_a: int, trans_b: int, compute: int, algo: int
) -> tuple[int, int, int, int] | None:
    """The cuBLAS values of a GEMM's HIP enums; None when one has no cuBLAS counterpart."""
    op_a, op_b = BLAS_OPERATION.get(trans_a), BLAS_OPERATION.get(trans_b)
    cu_compute, cu_algo = BLAS_COMPUTE_TYPE.get(compute), BLAS_GEMM_ALGO.get(algo)
    if op_a is None or op_b is None or cu_compute is None or cu_algo is None:
        return None
    return op_a, op_b, cu_compute, cu_algo


def bind(cublas: Any) -> dict[str, Native]:
    """The HIPBLAS surface over an opened libcublas."""
    table = CUBLAS_TO_HIPBLAS.get
    native_gemm = cublas.cublasGemmEx
    native_batched = cublas.cublasGemmStridedBatchedEx
    # (operand type, cuBLAS compute type) -> typed entry, for the default algorithm (-1)
    typed = {
        (constants.HIP_R_32F, _CUBLAS_COMPUTE_32F): cublas.cublasSgemm_v2,
        (constants.HIP_R_64F, _CUBLAS_COMPUTE_64F): cublas.cublasDgemm_v2,
    }

    # The cuBLAS values of each HIP enum combination seen (a few): a GEMM's per-call cost is
    # one look-up (issue 15). Only combinations that translate are kept.
    known: dict[tuple[int, int, int, int], tuple[int, int, int, int]] = {}

    def enums_of(trans_a: int, trans_b: int, compute: int, algo: int) -> Any:
        enums = _cuda_enums(trans_a, trans_b, compute, algo)
        if enums is not None:
            known[(trans_a, trans_b, compute, algo)] = enums
        return enums

    def mapped(native: Native, name: str) -> Native:
        return translated(native, name, CUBLAS_TO_HIPBLAS, HIPBLAS_UNKNOWN)

    def hipblasGemmEx(
        handle: Any, trans_a: int, trans_b: int, m: int, n: int, k: int,
        alpha: Any, a: Any, a_type: int, lda: int, b: Any, b_type: int, ldb: int,
        beta: Any, c: Any, c_type: int, ldc: int, compute: int, algo: int,
    ) -> int:  # fmt: skip
        """C = alpha·op(A)·op(B) + beta·C, column-major; alpha/beta on the host (pointer mode
        host, the default) in the compute type's precision; asynchronous on the handle's
        stream."""
        enums = known.get((trans_a, trans_b, compute, algo)) or enums_of(
            trans_a, trans_b, compute, algo
        )
        if enums is None:
            return INVALID_ENUM
        op_a, op_b, cu_compute, cu_algo = enums
        same_type = a_type == b_type == c_type and cu_algo == _CUBLAS_GEMM_DEFAULT
        typed_gemm = typed.get((a_type, cu_compute)) if same_type else None
        if typed_gemm is not None:
            status = typed_gemm(handle, op_a, op_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
        else:
            status = native_gemm(
                handle, op_a, op_b, m, n, k, alpha, a, a_type, lda, b, b_type, ldb,
                beta, c, c_type, ldc, cu_compute, cu_algo,
            )  # fmt: skip
        return table(status, HIPBLAS_UNKNOWN) if status else 0

    def hipblasGemmStridedBatchedEx(
        handle: Any, trans_a: int, trans_b: int, m: int, n: int, k: int,
        alpha: Any, a: Any, a_type: int, lda: int, stride_a: int,
        b: Any, b_type: int, ldb: int, stride_b: int,
        beta: Any, c: Any, c_type: int, ldc: int, stride_c: int,
        batch: int, compute: int, algo: int,
    ) -> int:  # fmt: skip
        """`batch` GEMMs as hipblasGemmEx, matrix i at A + i·stride_a elements (and B, C)."""
        enums = known.get((trans_a, trans_b, compute, algo)) or enums_of(
            trans_a, trans_b, compute, algo
        )
        if enums is None:
            return INVALID_ENUM
        op_a, op_b, cu_compute, cu_algo = enums
        status = native_batched(
            handle, op_a, op_b, m, n, k, alpha, a, a_type, lda, stride_a,
            b, b_type, ldb, stride_b, beta, c, c_type, ldc, stride_c,
            batch, cu_compute, cu_algo,
        )  # fmt: skip
        return table(status, HIPBLAS_UNKNOWN) if status else 0

    return {
        "hipblasCreate": mapped(cublas.cublasCreate_v2, "hipblasCreate"),
        "hipblasDestroy": mapped(cublas.cublasDestroy_v2, "hipblasDestroy"),
        "hipblasSetStream": mapped(cublas.cublasSetStream_v2, "hipblasSetStream"),
        "hipblasGetStream": mapped(cublas.cublasGetStream_v2, "hipblasGetStream"),
        "hipblasSetWorkspace": mapped(cublas.cublasSetWorkspace_v2, "hipblasSetWorkspace"),
        "hipblasGemmEx": hipblasGemmEx,
        "hipblasGemmStridedBatchedEx": hipblasGemmStridedBatchedEx,
    }
