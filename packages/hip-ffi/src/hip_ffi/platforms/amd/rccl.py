"""The collectives on the amd platform: RCCL's functions (NCCL's names), opened at first call.

RCCL keeps NCCL's API: names, signatures and enum values are the surface's (cdef/nccl.h), and
its stream argument is a hipStream_t, so every function is the library's own. librccl.so.N is
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
    """librccl.so.N, newest major first, as for every ROCm library (RCCL is .1 up to ROCm 7)."""
    from hip_ffi.platforms.amd.loader import sonames  # (the loader imports this module)

    return LibrarySpec(
        role="RCCL (librccl)",
        env="HIP_FFI_RCCL_PATH",
        names=sonames("librccl", oldest=1),
        dirs=(*env_dirs("ROCM_PATH", "HIP_PATH"), "/opt/rocm/lib"),
    )


def bind(ffi: Any) -> dict[str, Callable[..., Any]]:
    """The collective surface over a librccl opened at its first use."""
    return lazy_collectives(ffi, "RCCL", rccl_spec)
