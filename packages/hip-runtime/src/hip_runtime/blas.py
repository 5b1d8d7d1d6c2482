"""hipBLAS for row-major tensors: one handle per backend, bound to the backend's stream.

hipBLAS is column-major; a row-major [r, c] array read column-major is its transpose. So a
row-major C = op(A) @ op(B) is computed as the column-major Cᵀ = op(B)ᵀ @ op(A)ᵀ: pass B
first, A second, swap m and n, and express transposed operands through the op flags — no data
moves and nothing returns to the host. Batches use strided-batched gemm-ex (a stride of 0
broadcasts one matrix over the batch). Inputs f32/f16/bf16, output the input type, f32
compute (alpha and beta are host floats read at the call).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from hip_core import Resource, Stream
from hip_core import hip_api as hip  # the raw hipBLAS entry points (hip-core wraps no BLAS yet)
from hip_core.errors import check_hipblas
from hip_ffi.constants import HIPBLAS_COMPUTE_32F, HIPBLAS_GEMM_DEFAULT, HIPBLAS_OP_N, HIPBLAS_OP_T

_INT_MAX = 2**31 - 1


@dataclass(frozen=True)
class Gemm:
    """One row-major (batched) product C[b] = alpha · op(A[b]) @ op(B[b]) + beta · C[b].

    m, n, k: C is [m, n], op(A) [m, k], op(B) [k, n]. Strides between batch entries are in
    elements (0 broadcasts). `transpose_a`: A is stored [k, m]; `transpose_b`: B is [n, k].
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


class Blas(Resource):
    """A hipBLAS handle whose work is queued on `stream` (bound once, at creation).

    `close()` (or `with`) destroys the handle (work already queued still runs); a Blas
    collected unclosed destroys it then. `gemm` on a closed Blas raises hip_core.ClosedError.
    """

    def __init__(self, stream: Stream) -> None:
        api = hip()
        out = api.ffi.new("hipblasHandle_t*")
        with stream.device:
            check_hipblas(api.hipblasCreate(out), "hipblasCreate")
        self._api = api
        self.handle = out[0]
        self.stream = stream
        try:
            check_hipblas(api.hipblasSetStream(self.handle, stream.handle), "hipblasSetStream")
        except BaseException:
            api.hipblasDestroy(self.handle)
            raise
        self._alpha = api.ffi.new("float*")
        self._beta = api.ffi.new("float*")
        self._lock = threading.Lock()  # alpha/beta are read at the call: one call at a time
        self._own(_destroy, api, self.handle)

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
    ) -> None:
        """Queue `spec` on the stream. a, b, c: device addresses (ints) of row-major data of
        hipDataType `data_type`. Shapes must have been validated by the caller."""
        self._check_open()
        m, n, k = spec.m, spec.n, spec.k
        if max(m, n, k, spec.batch) > _INT_MAX:
            raise ValueError(f"gemm dimensions {m, n, k, spec.batch} exceed hipBLAS's int range")
        if m == 0 or n == 0 or spec.batch == 0:
            return
        with self._lock:
            self._gemm(spec, a, b, c, data_type, alpha, beta)

    def _gemm(
        self, spec: Gemm, a: Any, b: Any, c: Any, data_type: int, alpha: float, beta: float
    ) -> None:
        m, n, k = spec.m, spec.n, spec.k
        api, ffi = self._api, self._api.ffi
        self._alpha[0], self._beta[0] = alpha, beta
        # Column-major: first operand op(B)ᵀ (n x k), second op(A)ᵀ (k x m), result n x m.
        op_b, ldb = (HIPBLAS_OP_T, k) if spec.transpose_b else (HIPBLAS_OP_N, n)
        op_a, lda = (HIPBLAS_OP_T, m) if spec.transpose_a else (HIPBLAS_OP_N, k)
        pa, pb, pc = (ffi.cast("void*", p) for p in (a, b, c))
        if spec.batch == 1:
            status = api.hipblasGemmEx(
                self.handle, op_b, op_a, n, m, k, self._alpha, pb, data_type, max(ldb, 1),
                pa, data_type, max(lda, 1), self._beta, pc, data_type, n,
                HIPBLAS_COMPUTE_32F, HIPBLAS_GEMM_DEFAULT,
            )  # fmt: skip
            check_hipblas(status, "hipblasGemmEx")
            return
        status = api.hipblasGemmStridedBatchedEx(
            self.handle, op_b, op_a, n, m, k, self._alpha, pb, data_type, max(ldb, 1),
            spec.stride_b, pa, data_type, max(lda, 1), spec.stride_a, self._beta, pc,
            data_type, n, spec.stride_c, spec.batch, HIPBLAS_COMPUTE_32F, HIPBLAS_GEMM_DEFAULT,
        )  # fmt: skip
        check_hipblas(status, "hipblasGemmStridedBatchedEx")


def _destroy(api: Any, handle: Any) -> None:
    check_hipblas(api.hipblasDestroy(handle), "hipblasDestroy")


__all__ = ["Blas", "Gemm"]
