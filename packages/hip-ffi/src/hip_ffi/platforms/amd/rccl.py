"""The collectives on the amd platform: RCCL's functions (NCCL's names), opened at first call.

RCCL keeps NCCL's API: names, signatures and enum values are the surface's (cdef/nccl.h), and
its stream argument is a hipStream_t, so every function is the library's own. librccl.so.1 is
searched like the other ROCm libraries (HIP_FFI_RCCL_PATH, $ROCM_PATH/lib, $HIP_PATH/lib,
/opt/rocm/lib, then the dynamic linker), but only when the first nccl* call is made: a ROCm
without RCCL loads as before, and the call says what was tried.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hip_ffi.lazy_library import lazy_collectives
from hip_ffi.libraries import LibrarySpec, env_dirs


def rccl_spec() -> LibrarySpec:
    return LibrarySpec(
        role="RCCL (librccl)",
        env="HIP_FFI_RCCL_PATH",
        names=("librccl.so.1", "librccl.so"),
        dirs=(*env_dirs("ROCM_PATH", "HIP_PATH"), "/opt/rocm/lib"),
    )


def bind(ffi: Any) -> dict[str, Callable[..., Any]]:
    """The collective surface over a librccl opened at its first use."""
    return lazy_collectives(ffi, "RCCL", rccl_spec)
