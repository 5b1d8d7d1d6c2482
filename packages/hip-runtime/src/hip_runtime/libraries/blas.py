"""hipBLAS for row-major tensors: one handle per backend, bound to the backend's stream.

hipBLAS is column-major; a row-major [r, c] array read column-major is its transpose. So a
row-major C = op(A) @ op(B) is computed as the column-major Cᵀ = op(B)ᵀ @ op(A)ᵀ: pass B
first, A second, swap m and n, and express transposed operands through the op flags — no data
moves and nothing returns to the host. Batches use strided-batched gemm-ex (a stride of 0
broadcasts one matrix over the batch). Inputs f32/f16/bf16 with f32 compute, or f64 with f64
compute (hipBLAS's Dgemm path; cuBLAS's on nvidia, the host BLAS on the cpu platform); the
output has the input type; alpha and beta are host scalars of the compute type, read at the
call.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from hip_core import Stream
from hip_core.errors import check_hipblas
from hip_ffi.constants import (
    HIP_R_16BF,
    HIP_R_16F,
    HIP_R_32F,
    HIP_R_64F,
    HIPBLAS_COMPUTE_32F,
    HIPBLAS_COMPUTE_64F,
    HIPBLAS_GEMM_DEFAULT,
    HIPBLAS_OP_N,
    HIPBLAS_OP_T,
)
from hip_runtime.libraries.library_handle import LibraryCalls, LibraryHandle

_INT_MAX = 2**31 - 1

#: The hipDataType gemm-ex reads each element type as (the dtypes matmul takes).
DATA_TYPES: dict[np.dtype[Any], int] = {
    np.dtype(np.float32): HIP_R_32F,
    np.dtype(np.float64): HIP_R_64F,
    np.dtype(np.float16): HIP_R_16F,
    np.dtype(ml_dtypes.bfloat16): HIP_R_16BF,
}


@dataclass(frozen=True)
class Gemm:
    """One row-major (batched) product C[b] = alpha · op(A[b]) @ op(B[b]) + beta · C[b].

    m, n, k: C is [m, n], op(A) [m, k], op(B) [k, n]. Strides between batch entries are in
    elements (0 broadcasts). `transpose_a`: A is stored [k, m]; `transpose_b`: B is [n, k].
    lda, ldb, ldc: the elements between rows of A, B and C as stored (0: packed, the stored
    row length), at least that row length: a row-major view with a longer row stride (a slice
    of columns) is read in place.
    """

    m: int
    n: int
    k: int
    batch: int = 1
    transpose_a: bool = False
    transpose_b: bool = False
    stride_a: int = 0
    stride_b: int = 0
    stride_c: int = 0
    lda: int = 0
    ldb: int = 0
    ldc: int = 0

    @functools.cached_property
    def leading_dimensions(self) -> tuple[int, int, int]:
        """(lda, ldb, ldc) as stored: the given ones, 0 standing for the stored row length
        (k or m for A, n or k for B, n for C), at least 1."""
        lda = self.lda or (self.m if self.transpose_a else self.k)
        ldb = self.ldb or (self.k if self.transpose_b else self.n)
        return max(lda, 1), max(ldb, 1), max(self.ldc or self.n, 1)

    @functools.cached_property
    def _column_major(self) -> tuple[int, ...] | None:
        """The column-major call's (op_b, op_a, n, m, k, ldb, lda, ldc), worked out once per
        spec (plans are cached, so a repeated matmul pays nothing here); None when C is
        empty. ValueError beyond hipBLAS's int arguments."""
        m, n, k = self.m, self.n, self.k
        if max(m, n, k, self.batch, self.lda, self.ldb, self.ldc) > _INT_MAX:
            raise ValueError(f"gemm dimensions {m, n, k, self.batch} exceed hipBLAS's int range")
        if m == 0 or n == 0 or self.batch == 0:
            return None
        # Column-major: first operand op(B)ᵀ (n x k), second op(A)ᵀ (k x m), result n x m.
        lda, ldb, ldc = self.leading_dimensions
        return (
            HIPBLAS_OP_T if self.transpose_b else HIPBLAS_OP_N,
            HIPBLAS_OP_T if self.transpose_a else HIPBLAS_OP_N,
            n, m, k, ldb, lda, ldc,
        )  # fmt: skip


class Blas(LibraryHandle):
    """A hipBLAS handle whose work is queued on `stream` (bound once, at creation).

    `close()` (or `with`) destroys the handle (work already queued still runs); a Blas
    collected unclosed destroys it then. `gemm` on a closed Blas raises hip_core.ClosedError.
    (The handle's lifecycle: hip_runtime.libraries.library_handle.)
    """

    calls = LibraryCalls("hipblasHandle_t", "hipblasCreate", "hipblasSetStream", check_hipblas)

    def __init__(self, stream: Stream) -> None:
        super().__init__(stream, _destroy)
        ffi = self._api.ffi
        # Host scalars of each compute type (f32 for 32F, double for 64F), read at the call.
        self._scalars = {
            False: (ffi.new("float*"), ffi.new("float*")),
            True: (ffi.new("double*"), ffi.new("double*")),
        }
        self._lock = threading.Lock()

    def gemm(
        self,
        spec: Gemm,
        a: Any,
        b: Any,
        c: Any,
        data_type: int,
        *,
        alpha: float = 1.0,
        beta: float = 0.0,
        offsets: Sequence[tuple[int, int, int]] = ((0, 0, 0),),
    ) -> None:
        """Queue `spec` on the stream. a, b, c: device addresses (ints) of row-major data of
        hipDataType `data_type` (HIP_R_64F computes in f64, the others in f32). `offsets`:
        one call of `spec` per entry, at a, b and c plus those byte offsets (a batch layout
        that one stride per operand cannot express). Shapes must have been validated by the
        caller."""
        self._check_open()
        call = spec._column_major
        if call is None:
            return
        op_b, op_a, n, m, k, ldb, lda, ldc = call
        api, void = self._api, self._void
        wide = data_type == HIP_R_64F
        compute = HIPBLAS_COMPUTE_64F if wide else HIPBLAS_COMPUTE_32F
        p_alpha, p_beta = self._scalars[wide]
        with self._lock:  # the scalars are read at each call: one caller at a time
            p_alpha[0], p_beta[0] = alpha, beta
            for off_a, off_b, off_c in offsets:
                pa, pb, pc = void(a + off_a), void(b + off_b), void(c + off_c)
                if spec.batch == 1:
                    status = api.hipblasGemmEx(
                        self.handle, op_b, op_a, n, m, k, p_alpha, pb, data_type, ldb,
                        pa, data_type, lda, p_beta, pc, data_type, ldc,
                        compute, HIPBLAS_GEMM_DEFAULT,
                    )  # fmt: skip
                    if status:
                        check_hipblas(status, "hipblasGemmEx")
                    continue
                status = api.hipblasGemmStridedBatchedEx(
                    self.handle, op_b, op_a, n, m, k, p_alpha, pb, data_type, ldb,
                    spec.stride_b, pa, data_type, lda, spec.stride_a, p_beta, pc,
                    data_type, ldc, spec.stride_c, spec.batch, compute, HIPBLAS_GEMM_DEFAULT,
                )  # fmt: skip
                check_hipblas(status, "hipblasGemmStridedBatchedEx")

    def prepare(
        self, spec: Gemm, data_type: int, *, alpha: float = 1.0, beta: float = 0.0
    ) -> Callable[[int, int, int], None] | None:
        """One call of `spec` (batch 1) with everything but the addresses fixed: returns
        `gemm(a, b, c)` (device addresses of A, B, C as for `gemm`, offsets included), which
        queues it on the stream with its own alpha/beta cells (nothing written per call).
        None when `spec` is not one such call (a batch, or an empty C): use `gemm`. Issue 15:
        a repeated matmul's plan holds one."""
        self._check_open()
        call = spec._column_major
        if call is None or spec.batch != 1:
            return None
        op_b, op_a, n, m, k, ldb, lda, ldc = call
        api, void, lock, handle = self._api, self._void, self._lock, self.handle
        wide = data_type == HIP_R_64F
        compute = HIPBLAS_COMPUTE_64F if wide else HIPBLAS_COMPUTE_32F
        cell = "double*" if wide else "float*"
        p_alpha, p_beta = api.ffi.new(cell, alpha), api.ffi.new(cell, beta)
        gemm_ex = api.hipblasGemmEx

        pointers = self._voids

        def gemm(a: int, b: int, c: int) -> None:
            if self._releaser is None:
                self._check_open()
            # (`_void`'s look-ups, inline: the pool hands a repeated call the same addresses)
            pa = pointers.get(a) or void(a)
            pb = pointers.get(b) or void(b)
            pc = pointers.get(c) or void(c)
            with lock:  # (one caller of the handle at a time, as `gemm`)
                status = gemm_ex(
                    handle, op_b, op_a, n, m, k, p_alpha, pb, data_type, ldb,
                    pa, data_type, lda, p_beta, pc, data_type, ldc, compute, HIPBLAS_GEMM_DEFAULT,
                )  # fmt: skip
            if status:
                check_hipblas(status, "hipblasGemmEx")

        gemm.cells = (p_alpha, p_beta)  # type: ignore[attr-defined]  # (kept alive with it)
        return gemm


def _destroy(api: Any, handle: Any) -> None:
    check_hipblas(api.hipblasDestroy(handle), "hipblasDestroy")


__all__ = ["DATA_TYPES", "Blas", "Gemm"]
