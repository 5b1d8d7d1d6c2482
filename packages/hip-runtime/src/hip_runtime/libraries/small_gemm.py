"""Small matrix products as one launch of hip-runtime's own kernel (kernels/gemm_small.hip).

Where the platform's BLAS picks a device kernel on the host at every call and launches it
(`PlatformTraits.blas_chooses_on_host`: cuBLAS, rocBLAS or hipBLASLt under hipBLAS), that costs
more host time than a small product takes on the device: a 64³ cublasSgemm spends about 9 µs
on the H200's host, a kernel launch 2-3 µs, and the product itself runs in a few. Eager code of
small shapes then waits on the host. Products of at most `SMALL_GEMM_WORK` multiply-adds
(m · n · k · batch) and a depth k of at most `SMALL_GEMM_DEPTH` are therefore queued as one
launch of a tiled kernel; others go to the library, whose tuned kernels win once the device
time counts. On cpu the runtime library's GEMM is the faster at every size, so the default
there is 0 (everything goes to BLAS).

`SmallGemm` has `Blas`'s calling convention (a `Gemm` spec, device addresses, byte offsets per
call), so a matmul plan is queued through either without translation. Results are those of an
f32 (f64) accumulation, rounded once, as BLAS's, though not bit for bit the library's: the
order of the additions differs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from hip_core import DevicePointer, Kernel, Stream
from hip_core import hip_api as hip
from hip_ffi.constants import HIP_R_16BF, HIP_R_16F, HIP_R_32F, HIP_R_64F
from hip_runtime.libraries.blas import Gemm
from hip_runtime.libraries.kernel_cache import KernelCache

#: The most multiply-adds a product queued as the kernel may have: 64³; and its most depth k.
#: A block walks k in steps of 64, one after another: device µs on the H200 against cuBLAS's,
#: each product captured in a graph 100 times (docs/benchmarks): 64³ 2.3 against 3.1;
#: 128 x 128 x 16 3.5 against 5.9; 16 x 128 x 128 3.5 against 51.8 (cuBLAS's choice there);
#: but 4 x 256 x 256 6.0 against 4.8 and 1 x 512 x 512 11.0 against 2.3, hence k <= 128.
SMALL_GEMM_WORK = 64**3
SMALL_GEMM_DEPTH = 128
_TILE = 16  # kernels/gemm_small.hip's HIPK_GEMM_TILE: a block is one 16 x 16 tile of C
_GRID_YZ = 65535  # the grid's y and z limit: a row of tiles per y, a batch entry per z
_SUFFIXES = {HIP_R_32F: "f32", HIP_R_64F: "f64", HIP_R_16F: "f16", HIP_R_16BF: "bf16"}


def small_gemm_work(setting: int | None) -> int:
    """HipBackend's `small_gemm=` checked: None is the platform's default (`SMALL_GEMM_WORK`
    where the loaded platform's BLAS chooses on the host, else 0); ValueError unless a count
    of multiply-adds >= 0."""
    if setting is None:
        return SMALL_GEMM_WORK if hip().traits.blas_chooses_on_host else 0
    if type(setting) is not int or setting < 0:
        raise ValueError(f"small_gemm must be a count of multiply-adds >= 0, not {setting!r}")
    return setting


class SmallGemm:
    """Queues products of at most `work` multiply-adds (and depth `SMALL_GEMM_DEPTH`) on
    `stream` as gemm_small.hip's kernel.

    `takes(spec)` says whether a product is one of them; `gemm` and `prepare` then do what
    `Blas.gemm` and `Blas.prepare` do. work 0: it takes none (`small_gemm_work` checks it).
    """

    def __init__(self, kernels: KernelCache, stream: Stream, work: int) -> None:
        self.kernels = kernels
        self.stream = stream
        self.work = work

    def takes(self, spec: Gemm) -> bool:
        """Whether `spec` (a validated, non-empty product) is queued here rather than by BLAS."""
        return (
            0 < spec.m * spec.n * spec.k * spec.batch <= self.work
            and spec.k <= SMALL_GEMM_DEPTH
            and spec.m <= _GRID_YZ * _TILE
            and spec.batch <= _GRID_YZ
        )

    def gemm(
        self,
        spec: Gemm,
        a: int,
        b: int,
        c: int,
        data_type: int,
        *,
        alpha: float = 1.0,
        beta: float = 0.0,
        offsets: Sequence[tuple[int, int, int]] = ((0, 0, 0),),
    ) -> None:
        """Queue `spec` on the stream, one launch per entry of `offsets`, as `Blas.gemm` (a, b,
        c: device addresses of row-major data of hipDataType `data_type`)."""
        kernel, grid, scalars = self._launch_of(spec, data_type, alpha, beta)
        for off_a, off_b, off_c in offsets:
            at = (DevicePointer(a + off_a), DevicePointer(b + off_b), DevicePointer(c + off_c))
            kernel.launch(grid, (_TILE, _TILE), *at, *scalars, stream=self.stream)

    def prepare(
        self, spec: Gemm, data_type: int, *, alpha: float = 1.0, beta: float = 0.0
    ) -> Callable[[int, int, int], None]:
        """`gemm(a, b, c)` queueing one call of `spec` with everything but the addresses
        packed once (hip-core's `Kernel.prepare`), as `Blas.prepare`; unlike it, for a batch
        too (one launch covers it), so never None."""
        kernel, grid, scalars = self._launch_of(spec, data_type, alpha, beta)
        stream, block = self.stream, (_TILE, _TILE)
        null = DevicePointer(0)
        prepared = kernel.prepare(grid, block, null, null, null, *scalars, stream=stream)

        def gemm(a: int, b: int, c: int) -> None:
            if not prepared(a, b, c):  # (a capture, a closed module or stream: the checked path)
                pointers = (DevicePointer(a), DevicePointer(b), DevicePointer(c))
                kernel.launch(grid, block, *pointers, *scalars, stream=stream)

        return gemm

    def _launch_of(
        self, spec: Gemm, data_type: int, alpha: float, beta: float
    ) -> tuple[Kernel, tuple[int, int, int], tuple[Any, ...]]:
        """The kernel, grid and non-pointer arguments of `spec`'s launches."""
        kernel = self.kernels.get("gemm_small.hip", f"gemm_small_{_SUFFIXES[data_type]}")
        grid = (-(-spec.n // _TILE), -(-spec.m // _TILE), spec.batch)
        lda, ldb, ldc = spec.leading_dimensions
        scalars = (
            spec.m, spec.n, spec.k, lda, ldb, ldc, int(spec.transpose_a),
            int(spec.transpose_b), spec.stride_a, spec.stride_b, spec.stride_c, float(alpha),
            float(beta),
        )  # fmt: skip
        return kernel, grid, scalars


__all__ = ["SMALL_GEMM_DEPTH", "SMALL_GEMM_WORK", "SmallGemm", "small_gemm_work"]
