"""hip-runtime: HipBackend and DeviceTensor on top of hip-core (ModelRuntime and AsyncLoader to
come).

    from hip_runtime import HipBackend

    with HipBackend() as backend:
        x = backend.from_numpy(array)
        y = backend.layernorm(x, weight, bias).to_numpy()   # waits for backend.stream only
"""

from hip_runtime._version import __version__
from hip_runtime.backend import HipBackend
from hip_runtime.blas import Blas, Gemm
from hip_runtime.dtypes import bfloat16, float16, float32
from hip_runtime.kernels import KernelCache
from hip_runtime.tensor import DeviceTensor

__all__ = [
    "Blas",
    "DeviceTensor",
    "Gemm",
    "HipBackend",
    "KernelCache",
    "__version__",
    "bfloat16",
    "float16",
    "float32",
]
