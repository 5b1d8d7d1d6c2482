"""HipBackend: a device, one stream, a BLAS handle bound to it, the compiled kernels, and ops.

    backend = HipBackend()                       # device 0 (the current device)
    x = backend.from_numpy(array)                # queued on backend.stream
    y = backend.rmsnorm(x, weight, eps=1e-6)     # queued on backend.stream, returns at once
    host = y.to_numpy()                          # waits for backend.stream only

Stream semantics: every op and every tensor the backend makes is ordered on `backend.stream`
(a blocking stream, so the device's null stream orders with it too); a tensor of another stream
(another backend's) is waited for on the device before an op uses it
(hip_runtime.tensors.stream_order). Nothing synchronizes the device; `to_numpy()` and
`synchronize()` wait for this stream alone. Outputs come from a stream-ordered memory pool: dropping
a tensor returns its memory in stream order, no wait.
Bad input (wrong type, device, shape, dtype) raises ValueError before anything is queued; any
method of a closed backend raises hip_core.ClosedError (a ValueError).
"""

from __future__ import annotations

from typing import Any

from hip_core import Device, MemoryPool
from hip_runtime._device_arg import as_device
from hip_runtime.libraries.blas import Blas
from hip_runtime.libraries.dnn import backend_dnn
from hip_runtime.libraries.kernel_cache import KernelCache
from hip_runtime.libraries.small_gemm import SmallGemm, small_gemm_work
from hip_runtime.ops.activations import ActivationOps
from hip_runtime.ops.attention import AttentionOps
from hip_runtime.ops.attention_decode import AttentionDecodeOps
from hip_runtime.ops.base import grid_cap
from hip_runtime.ops.creation import CreationOps
from hip_runtime.ops.elementwise import ElementwiseOps
from hip_runtime.ops.gemv import gemv_row_limit
from hip_runtime.ops.gemv_chain import GemvChainOps
from hip_runtime.ops.indexing import IndexingOps
from hip_runtime.ops.joining import JoiningOps
from hip_runtime.ops.layout import LayoutOps
from hip_runtime.ops.linalg import LinalgOps
from hip_runtime.ops.norms import NormOps
from hip_runtime.ops.pointwise import PointwiseOps
from hip_runtime.ops.quantized_matmul import QuantizedOps
from hip_runtime.ops.reductions import ReductionOps
from hip_runtime.ops.softmax import SoftmaxOps
from hip_runtime.ops.sorting import SortingOps
from hip_runtime.ops.spatial import SpatialOps
from hip_runtime.tensors.dtypes import DTypeLike, float32
from hip_runtime.tensors.tensor import DeviceTensor, ShapeLike


class HipBackend(
    PointwiseOps,
    ElementwiseOps,
    ActivationOps,
    ReductionOps,
    NormOps,
    SoftmaxOps,
    LinalgOps,
    GemvChainOps,
    AttentionOps,
    AttentionDecodeOps,
    QuantizedOps,
    IndexingOps,
    SortingOps,
    CreationOps,
    JoiningOps,
    LayoutOps,
    SpatialOps,
):
    """Ops on one device, ordered on one stream (the families of `hip_runtime.ops`).

    Args:
        device: a Device, an ordinal, or None for this thread's current device.
        preload: compile and load every kernel source now instead of on first use.
        small_gemm: the most multiply-adds (m · n · k · batch) one product call of a matmul,
            linear or mlp_swiglu of depth k <= 128 may have to be queued as hip-runtime's own
            kernel rather than a BLAS call (hip_runtime.libraries.small_gemm: a BLAS call's host
            cost outweighs a small product; a matmul whose batch layout needs several calls is
            judged per call). None: the platform's default, 64³ on amd and nvidia, 0 on cpu;
            0: always BLAS. Convolutions' products always go to BLAS.
        gemv_rows: the most rows of x (1-16; f32 at most 8) that `linear`, `rmsnorm_linear` and
            `rmsnorm_swiglu` send to hip-runtime's GEMV kernel with their fusions
            (hip_runtime.ops.gemv); None: the platform's default, 2 on amd and nvidia (from
            four rows on cuBLAS was faster on the H200), 0 on cpu (its host BLAS is faster
            there); 0: never.

    A hip_core.Resource: `close()` (or `with HipBackend() as backend:`) waits for the stream
    and destroys the BLAS handle; the stream and the pool are released once no tensor of this
    backend is left. A backend collected unclosed destroys its BLAS handle without waiting.
    """

    # the DNN library on this backend's stream, or None (hip_runtime.libraries.dnn)
    _dnn = backend_dnn

    def __init__(
        self,
        device: Device | int | None = None,
        *,
        preload: bool = False,
        small_gemm: int | None = None,
        gemv_rows: int | None = None,
    ) -> None:
        work = small_gemm_work(small_gemm)
        self.gemv_rows = gemv_row_limit(gemv_rows)
        self.device = device = as_device(device)
        self.kernels = KernelCache(device)
        self.stream = device.create_stream()
        self.small_gemm = SmallGemm(self.kernels, self.stream, work)
        self.pool = MemoryPool(device)
        self.blas = Blas(self.stream)
        self._grid_cap = grid_cap(device)
        self._max_block = min(device.properties.max_threads_per_block, 1024)
        self._own(self.blas.close)
        if preload:
            self.kernels.preload()

    # --- lifetime ----------------------------------------------------------------------------

    def close(self) -> None:
        """Wait for the backend's stream, then destroy the BLAS handle. Closing twice is
        harmless. Tensors stay valid (their memory and stream live as long as they do)."""
        if not self.closed:
            self.stream.sync()
            self._plans = None  # (with the outputs they keep for reuse: back to the pool)
            super().close()

    def synchronize(self) -> None:
        """Block until all work queued on the backend's stream is done (this stream only)."""
        self._check_open()
        self.stream.sync()

    # --- tensors on this backend's stream and pool --------------------------------------------

    def empty(self, shape: ShapeLike, dtype: DTypeLike = float32) -> DeviceTensor:
        """Uninitialized tensor from the backend's pool, ordered on its stream."""
        self._check_open()
        return DeviceTensor.empty(
            shape, dtype, device=self.device, stream=self.stream, pool=self.pool
        )

    def zeros(self, shape: ShapeLike, dtype: DTypeLike = float32) -> DeviceTensor:
        """All-zero tensor (memset queued on the backend's stream)."""
        self._check_open()
        return DeviceTensor.zeros(
            shape, dtype, device=self.device, stream=self.stream, pool=self.pool
        )

    def from_numpy(self, array: Any) -> DeviceTensor:
        """A device copy of a host array, queued on the backend's stream (pageable host memory:
        HIP stages it, so the call may return only after the host side has been read)."""
        self._check_open()
        return DeviceTensor.from_numpy(
            array, device=self.device, stream=self.stream, pool=self.pool
        )

    def from_dlpack(self, obj: Any) -> DeviceTensor:
        """A zero-copy tensor over a DLPack producer's memory, ordered on the backend's stream."""
        self._check_open()
        return DeviceTensor.from_dlpack(obj, stream=self.stream)

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<HipBackend {state} on {self.device!r} ({self.device.name})>"


__all__ = ["HipBackend"]
