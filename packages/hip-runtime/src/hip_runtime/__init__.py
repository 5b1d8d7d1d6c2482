"""hip-runtime: HipBackend, DeviceTensor, ModelRuntime and AsyncLoader on top of hip-core.

    from hip_runtime import HipBackend, testing

    with HipBackend() as backend:
        x = backend.from_numpy(array)
        y = backend.layernorm(x, weight, bias).to_numpy()   # waits for backend.stream only
        testing.assert_close(y, testing.layernorm(array, weight, bias), "f32")

Subpackages and modules: `ops` (HipBackend's op families), `loading` (AsyncLoader, placement,
checksums and the checkpoint `formats`), `testing` (float64 numpy references of every op and
per-dtype tolerances, as numpy.testing; imported on demand: `from hip_runtime import testing`).
Every resource class (HipBackend, Blas, KVCache, ScratchArena, ModelRuntime) is a
hip_core.Resource: `close()`, `with`, `closed`, and hip_core.ClosedError from a closed one.
"""

from hip_runtime._version import __version__
from hip_runtime.backend import HipBackend
from hip_runtime.blas import Blas, Gemm
from hip_runtime.dtypes import bfloat16, float16, float32
from hip_runtime.kernel_cache import KernelCache
from hip_runtime.kv_cache import KVCache
from hip_runtime.loading.formats import (
    Checkpoint,
    FormatError,
    TensorRecord,
    open_checkpoint,
    save_safetensors,
)
from hip_runtime.loading.loader import (
    AsyncLoader,
    ChecksumError,
    LoadCancelledError,
    LoadJob,
    LoadReport,
    LoadResult,
)
from hip_runtime.model_runtime import ModelRuntime
from hip_runtime.scratch import ScratchArena
from hip_runtime.staging import StagedCopier
from hip_runtime.tensor import DeviceTensor

__all__ = [
    "AsyncLoader",
    "Blas",
    "Checkpoint",
    "ChecksumError",
    "DeviceTensor",
    "FormatError",
    "Gemm",
    "HipBackend",
    "KVCache",
    "KernelCache",
    "LoadCancelledError",
    "LoadJob",
    "LoadReport",
    "LoadResult",
    "ModelRuntime",
    "ScratchArena",
    "StagedCopier",
    "TensorRecord",
    "__version__",
    "bfloat16",
    "float16",
    "float32",
    "open_checkpoint",
    "save_safetensors",
]
