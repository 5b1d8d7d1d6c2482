"""hipBLAS on the cpu platform: GEMM on the host, over the host memory, in stream order.

hipblasGemmEx / hipblasGemmStridedBatchedEx follow hipBLAS (column-major, op(A) is m x k,
op(B) k x n, C m x n; strides in elements; alpha and beta read from host memory at the call,
as float for HIPBLAS_COMPUTE_32F(_FAST_TF32) and as double for HIPBLAS_COMPUTE_64F). The
product runs on the handle's stream, its rows and columns spread over every core by the
runtime library's GEMM (native/hip_cpu_runtime.cpp), which accumulates in float (double for
f64) and rounds once into C.

Type combinations (A = B, C, compute): f32 f32 32F/TF32; f16 f16|f32 32F; bf16 bf16|f32 32F;
f64 f64 64F. Others: HIPBLAS_STATUS_NOT_SUPPORTED. hipblasOperation_t C is T (real types).
"""

from __future__ import annotations

from typing import Any

from hip_cpu import shared_objects
from hip_cpu.stream_state import Stream
from hip_cpu.streams import ENGINE
from hip_ffi._ffi import ffi
from hip_ffi.constants import (
    HIP_R_16BF,
    HIP_R_16F,
    HIP_R_32F,
    HIP_R_64F,
    HIPBLAS_COMPUTE_32F,
    HIPBLAS_COMPUTE_32F_FAST_TF32,
    HIPBLAS_COMPUTE_64F,
    HIPBLAS_OP_C,
    HIPBLAS_OP_N,
    HIPBLAS_OP_T,
    HIPBLAS_STATUSES,
)
from hip_ffi.handles import Registry, address, takes_handle

SUCCESS = HIPBLAS_STATUSES["HIPBLAS_STATUS_SUCCESS"]
NOT_INITIALIZED = HIPBLAS_STATUSES["HIPBLAS_STATUS_NOT_INITIALIZED"]
INVALID_VALUE = HIPBLAS_STATUSES["HIPBLAS_STATUS_INVALID_VALUE"]
NOT_SUPPORTED = HIPBLAS_STATUSES["HIPBLAS_STATUS_NOT_SUPPORTED"]
HANDLE_IS_NULLPTR = HIPBLAS_STATUSES["HIPBLAS_STATUS_HANDLE_IS_NULLPTR"]
INVALID_ENUM = HIPBLAS_STATUSES["HIPBLAS_STATUS_INVALID_ENUM"]

_FLOAT_COMPUTE = (HIPBLAS_COMPUTE_32F, HIPBLAS_COMPUTE_32F_FAST_TF32)
_SUPPORTED = {
    (HIP_R_32F, HIP_R_32F): _FLOAT_COMPUTE,
    (HIP_R_16F, HIP_R_16F): _FLOAT_COMPUTE,
    (HIP_R_16F, HIP_R_32F): _FLOAT_COMPUTE,
    (HIP_R_16BF, HIP_R_16BF): _FLOAT_COMPUTE,
    (HIP_R_16BF, HIP_R_32F): _FLOAT_COMPUTE,
    (HIP_R_64F, HIP_R_64F): (HIPBLAS_COMPUTE_64F,),
}
_OPERATIONS = (HIPBLAS_OP_N, HIPBLAS_OP_T, HIPBLAS_OP_C)


class Handle:
    def __init__(self) -> None:
        self.stream: Stream = ENGINE.null
        self.stream_value = 0  # the hipStream_t it was given


HANDLES: Registry[Handle] = Registry("hipblasHandle_t")
on_handle = takes_handle(HANDLES.get, NOT_INITIALIZED)


def hipblasCreate(handle: Any) -> int:
    """A handle on the null stream; NOT_INITIALIZED when the runtime library cannot be built."""
    if handle == ffi.NULL:
        return HANDLE_IS_NULLPTR
    try:
        shared_objects.runtime()
    except RuntimeError:
        return NOT_INITIALIZED
    handle[0] = HANDLES.cdata(HANDLES.add(Handle()))
    return SUCCESS


def hipblasDestroy(handle: Any) -> int:
    return SUCCESS if HANDLES.remove(handle) is not None else NOT_INITIALIZED


@on_handle
def hipblasSetStream(handle: Handle, stream: Any) -> int:
    resolved = ENGINE.resolve(stream)
    if resolved is None:
        return INVALID_VALUE
    handle.stream, handle.stream_value = resolved, address(stream)
    return SUCCESS


@on_handle
def hipblasGetStream(handle: Handle, stream: Any) -> int:
    if stream == ffi.NULL:
        return INVALID_VALUE
    stream[0] = ffi.cast("hipStream_t", handle.stream_value)
    return SUCCESS


@on_handle
def hipblasSetWorkspace(handle: Handle, addr: Any, size: int) -> int:
    """Accepted and unused: the host GEMM needs no device workspace (as hipBLAS, a null
    address with a non-zero size is INVALID_VALUE)."""
    return INVALID_VALUE if addr == ffi.NULL and size else SUCCESS


def _gemm(
    handle: Any, trans_a: int, trans_b: int, m: int, n: int, k: int, alpha: Any,
    a: Any, a_type: int, lda: int, stride_a: int, b: Any, b_type: int, ldb: int, stride_b: int,
    beta: Any, c: Any, c_type: int, ldc: int, stride_c: int, batches: int, compute: int,
) -> int:  # fmt: skip
    found = HANDLES.get(handle)
    if found is None:
        return NOT_INITIALIZED
    if trans_a not in _OPERATIONS or trans_b not in _OPERATIONS:
        return INVALID_ENUM
    if a_type != b_type or compute not in _SUPPORTED.get((a_type, c_type), ()):
        return NOT_SUPPORTED
    rows_a = m if trans_a == HIPBLAS_OP_N else k
    rows_b = k if trans_b == HIPBLAS_OP_N else n
    if min(m, n, k, batches) < 0 or lda < max(1, rows_a) or ldb < max(1, rows_b):
        return INVALID_VALUE
    if ldc < max(1, m) or address(alpha) == 0 or address(beta) == 0:
        return INVALID_VALUE
    if m and n and batches and (address(c) == 0 or (k and (address(a) == 0 or address(b) == 0))):
        return INVALID_VALUE
    scalar = "double*" if compute == HIPBLAS_COMPUTE_64F else "float*"
    alpha_value = float(ffi.cast(scalar, alpha)[0])  # host pointer mode: read at the call
    beta_value = float(ffi.cast(scalar, beta)[0])
    runtime = shared_objects.runtime()
    pointers = address(a), address(b), address(c)

    def run() -> int:
        runtime.gemm(
            trans_a, trans_b, m, n, k, alpha_value, pointers[0], a_type, lda, stride_a,
            pointers[1], b_type, ldb, stride_b, beta_value, pointers[2], c_type, ldc, stride_c,
            batches,
        )  # fmt: skip
        return 0

    ENGINE.submit(found.stream, run)
    return SUCCESS


def hipblasGemmEx(
    handle: Any, trans_a: int, trans_b: int, m: int, n: int, k: int, alpha: Any,
    a: Any, a_type: int, lda: int, b: Any, b_type: int, ldb: int,
    beta: Any, c: Any, c_type: int, ldc: int, compute: int, algo: int,
) -> int:  # fmt: skip
    """C = alpha op(A) op(B) + beta C on the handle's stream (asynchronous)."""
    return _gemm(
        handle, trans_a, trans_b, m, n, k, alpha, a, a_type, lda, 0, b, b_type, ldb, 0,
        beta, c, c_type, ldc, 0, 1, compute,
    )  # fmt: skip


def hipblasGemmStridedBatchedEx(
    handle: Any, trans_a: int, trans_b: int, m: int, n: int, k: int, alpha: Any,
    a: Any, a_type: int, lda: int, stride_a: int, b: Any, b_type: int, ldb: int, stride_b: int,
    beta: Any, c: Any, c_type: int, ldc: int, stride_c: int, batches: int, compute: int,
    algo: int,
) -> int:  # fmt: skip
    """`batches` GEMMs, matrix i at A + i*stride_a (elements), and so on; asynchronous."""
    return _gemm(
        handle, trans_a, trans_b, m, n, k, alpha, a, a_type, lda, stride_a, b, b_type, ldb,
        stride_b, beta, c, c_type, ldc, stride_c, batches, compute,
    )  # fmt: skip
