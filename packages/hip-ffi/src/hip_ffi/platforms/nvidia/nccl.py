"""The collectives on the nvidia platform: NCCL's own functions, opened at the first call.

NCCL's signatures, names and enum values are the surface's (cdef/nccl.h), and its stream
argument is a cudaStream_t, which is what a hipStream_t is on this platform: every function is
the library's own, with no translation. libnccl.so.2 is found as `libraries.nccl_spec` says
(HIP_FFI_NCCL_PATH, a copy already mapped, a system CUDA, NVIDIA's wheels, the linker); it is
opened by the first nccl* call, so `load()` neither needs it nor pays for opening it.
Keep NCCL's NVLink multicast off on machines that cannot use it (`NCCL_NVLS_ENABLE=0`): that
is NCCL's environment, read by NCCL itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hip_ffi.lazy_library import lazy_collectives
from hip_ffi.platforms.nvidia.libraries import nccl_spec


def bind(ffi: Any) -> dict[str, Callable[..., Any]]:
    """The collective surface over a libnccl opened at its first use."""
    return lazy_collectives(ffi, "NCCL", nccl_spec)
