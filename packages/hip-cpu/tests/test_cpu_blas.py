"""hipBLAS on the cpu platform: GEMM results against a float64 numpy reference.

Column-major like hipBLAS: a matrix with leading dimension ld is stored as an (columns, ld)
C-order array, i.e. numpy's `.T` of the Fortran view.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import hip_ffi
from hip_ffi import constants

S = constants.HIPBLAS_STATUSES
N, T = constants.HIPBLAS_OP_N, constants.HIPBLAS_OP_T
COMPUTE_32F, COMPUTE_64F = constants.HIPBLAS_COMPUTE_32F, 7
ALGO = constants.HIPBLAS_GEMM_DEFAULT


def bf16(values: np.ndarray) -> np.ndarray:
    """float -> bfloat16 bits (round to nearest even), as uint16."""
    u = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    return (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF).astype(np.uint16)


def from_bf16(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def wide(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float64)


def wide_bf16(bits: np.ndarray) -> np.ndarray:
    return from_bf16(bits).astype(np.float64)


#: name -> (hipDataType, to storage, storage to float64, relative tolerance of the result)
TYPES: dict[str, tuple[int, Any, Any, float]] = {
    "f32": (constants.HIP_R_32F, lambda x: x.astype(np.float32), wide, 1e-5),
    "f64": (constants.HIP_R_64F, lambda x: x, wide, 1e-12),
    "f16": (constants.HIP_R_16F, lambda x: x.astype(np.float16), wide, 2e-3),
    "bf16": (constants.HIP_R_16BF, bf16, wide_bf16, 1.6e-2),
}
COMBINATIONS = [  # (A and B, C, compute)
    ("f32", "f32", COMPUTE_32F),
    ("f64", "f64", COMPUTE_64F),
    ("f16", "f16", COMPUTE_32F),
    ("f16", "f32", COMPUTE_32F),
    ("bf16", "bf16", COMPUTE_32F),
    ("bf16", "f32", COMPUTE_32F),
]


@pytest.fixture(scope="module")
def hip() -> Any:
    return hip_ffi.load("cpu")


@pytest.fixture
def handle(hip: Any) -> Iterator[Any]:
    out = hip.ffi.new("hipblasHandle_t*")
    assert hip.hipblasCreate(out) == 0
    yield out[0]
    assert hip.hipblasDestroy(out[0]) == 0


class Matrices:
    """Device copies of host arrays, freed on close."""

    def __init__(self, hip: Any) -> None:
        self.hip, self.pointers = hip, []

    def upload(self, array: np.ndarray) -> Any:
        out = self.hip.ffi.new("void**")
        assert self.hip.hipMalloc(out, array.nbytes) == 0
        assert self.hip.hipMemcpy(out[0], self.hip.ffi.from_buffer(array), array.nbytes, 1) == 0
        self.pointers.append(out[0])
        return out[0]

    def download(self, pointer: Any, like: np.ndarray) -> np.ndarray:
        out = np.empty_like(like)
        assert self.hip.hipMemcpy(self.hip.ffi.from_buffer(out), pointer, out.nbytes, 2) == 0
        return out

    def close(self) -> None:
        for pointer in self.pointers:
            assert self.hip.hipFree(pointer) == 0


def scalars(hip: Any, compute: int, alpha: float, beta: float) -> tuple[Any, Any]:
    kind = "double*" if compute == COMPUTE_64F else "float*"
    return hip.ffi.new(kind, alpha), hip.ffi.new(kind, beta)


@pytest.mark.parametrize("ab, c, compute", COMBINATIONS, ids=lambda v: str(v))
@pytest.mark.parametrize("trans_a, trans_b", [(N, N), (T, N), (N, T), (T, T)])
def test_gemm_ex(hip: Any, handle: Any, ab: str, c: str, compute: int, trans_a: int,
                 trans_b: int) -> None:  # fmt: skip
    rng = np.random.default_rng()
    m, n, k = (int(v) for v in rng.integers(5, 40, 3))
    type_ab, to_ab, wide_ab, tol_ab = TYPES[ab]
    type_c, to_c, wide_c, tol_c = TYPES[c]
    rows_a, cols_a = (m, k) if trans_a == N else (k, m)
    rows_b, cols_b = (k, n) if trans_b == N else (n, k)
    lda, ldb, ldc = rows_a + 3, rows_b + 1, m + 2  # padded leading dimensions
    a = to_ab(rng.standard_normal((cols_a, lda)))  # column j of A is a[j, :rows_a]
    b = to_ab(rng.standard_normal((cols_b, ldb)))
    c0 = to_c(rng.standard_normal((n, ldc)))
    alpha, beta = float(rng.uniform(0.5, 2)), float(rng.uniform(-1, 1))
    mats = Matrices(hip)
    try:
        da, db, dc = mats.upload(a), mats.upload(b), mats.upload(c0)
        pa, pb = scalars(hip, compute, alpha, beta)
        status = hip.hipblasGemmEx(
            handle, trans_a, trans_b, m, n, k, pa, da, type_ab, lda, db, type_ab, ldb,
            pb, dc, type_c, ldc, compute, ALGO,
        )  # fmt: skip
        assert status == 0
        assert hip.hipDeviceSynchronize() == 0
        got = wide_c(mats.download(dc, c0))
    finally:
        mats.close()
    A = wide_ab(a)[:, :rows_a].T  # (rows_a, cols_a)
    B = wide_ab(b)[:, :rows_b].T
    op_a = A if trans_a == N else A.T
    op_b = B if trans_b == N else B.T
    expected = alpha * op_a @ op_b + beta * wide_c(c0)[:, :m].T
    scale = np.abs(alpha * np.abs(op_a) @ np.abs(op_b)) + np.abs(beta * wide_c(c0)[:, :m].T)
    assert (np.abs(got[:, :m].T - expected) <= max(tol_ab, tol_c) * (scale + 1e-30)).all()
    np.testing.assert_array_equal(got[:, m:], wide_c(c0)[:, m:])  # padding rows untouched


def test_strided_batched_on_the_handles_stream(hip: Any, handle: Any) -> None:
    ffi = hip.ffi
    rng = np.random.default_rng()
    batches, m, n, k = 3, 17, 9, 33
    a = rng.standard_normal((batches, k, m)).astype(np.float32)  # column-major m x k each
    b = rng.standard_normal((batches, n, k)).astype(np.float32)
    c = np.full((batches, n, m), np.nan, dtype=np.float32)  # beta = 0: C is never read
    stream = ffi.new("hipStream_t*")
    assert hip.hipStreamCreateWithFlags(stream, constants.STREAM_NON_BLOCKING) == 0
    assert hip.hipblasSetStream(handle, stream[0]) == 0
    got_stream = ffi.new("hipStream_t*")
    assert hip.hipblasGetStream(handle, got_stream) == 0 and got_stream[0] == stream[0]
    mats = Matrices(hip)
    try:
        da, db, dc = mats.upload(a), mats.upload(b), mats.upload(c)
        pa, pb = scalars(hip, COMPUTE_32F, 1.0, 0.0)
        f32 = constants.HIP_R_32F
        status = hip.hipblasGemmStridedBatchedEx(
            handle, N, N, m, n, k, pa, da, f32, m, m * k, db, f32, k, k * n, pb, dc, f32, m,
            m * n, batches, COMPUTE_32F, ALGO,
        )  # fmt: skip
        assert status == 0
        assert hip.hipStreamSynchronize(stream[0]) == 0  # the GEMM ran on the handle's stream
        got = mats.download(dc, c)
    finally:
        mats.close()
        assert hip.hipStreamDestroy(stream[0]) == 0
    expected = np.einsum("bkm,bnk->bnm", a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-4)


def test_gemm_argument_errors(hip: Any, handle: Any) -> None:
    ffi = hip.ffi
    pa, pb = scalars(hip, COMPUTE_32F, 1.0, 0.0)
    buffer = ffi.new("float[64]")
    f32, f16 = constants.HIP_R_32F, constants.HIP_R_16F

    def gemm(trans: int = N, lda: int = 4, a_type: int = f32, c_type: int = f32,
             compute: int = COMPUTE_32F, on: Any = handle) -> int:  # fmt: skip
        return int(hip.hipblasGemmEx(on, trans, N, 4, 4, 4, pa, buffer, a_type, lda, buffer,
                                     a_type, 4, pb, buffer, c_type, 4, compute, ALGO))  # fmt: skip

    assert gemm() == 0
    assert gemm(trans=999) == S["HIPBLAS_STATUS_INVALID_ENUM"]
    assert gemm(lda=3) == S["HIPBLAS_STATUS_INVALID_VALUE"]
    assert gemm(a_type=f16, c_type=constants.HIP_R_64F) == S["HIPBLAS_STATUS_NOT_SUPPORTED"]
    assert gemm(compute=COMPUTE_64F) == S["HIPBLAS_STATUS_NOT_SUPPORTED"]
    assert gemm(on=ffi.cast("hipblasHandle_t", 0x5550)) == S["HIPBLAS_STATUS_NOT_INITIALIZED"]
    assert hip.hipblasSetStream(handle, ffi.cast("hipStream_t", 0x5550)) == 3  # INVALID_VALUE
    assert hip.hipDeviceSynchronize() == 0


def test_a_workspace_is_accepted_and_checked(hip: Any, handle: Any) -> None:
    """hipblasSetWorkspace: any device range (the host GEMM needs none); a null address with
    a size is INVALID_VALUE, an unknown handle NOT_INITIALIZED, as hipBLAS answers."""
    statuses = constants.HIPBLAS_STATUSES
    memory = hip.ffi.new("void**")
    assert hip.hipMalloc(memory, 1 << 20) == 0
    try:
        assert hip.hipblasSetWorkspace(handle, memory[0], 1 << 20) == 0
        assert hip.hipblasSetWorkspace(handle, hip.ffi.NULL, 0) == 0
        invalid = statuses["HIPBLAS_STATUS_INVALID_VALUE"]
        assert hip.hipblasSetWorkspace(handle, hip.ffi.NULL, 64) == invalid
        unknown = hip.ffi.cast("hipblasHandle_t", 12345)
        assert (
            hip.hipblasSetWorkspace(unknown, memory[0], 64)
            == statuses["HIPBLAS_STATUS_NOT_INITIALIZED"]
        )
    finally:
        assert hip.hipFree(memory[0]) == 0
