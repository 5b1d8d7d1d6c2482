"""The cpu platform: a HIP runtime on the host (HIP_PLATFORM=cpu, or when no GPU is found).

One device, the host (device.py); its memory is host memory (memory.py, copies.py); streams
are ordered queues run by worker threads, events carry timestamps (streams.py,
stream_api.py); hiprtc is the host C++ compiler with a prelude that makes HIP kernels plain
C++ (compiler.py, include/hip_cpu_prelude.h); a code object is the shared object it builds
(modules.py); a launch runs the grid's blocks on every core, with GPU barrier semantics
through fibers (launch.py, include/hip_cpu_executor.h); hipBLAS GEMM runs on the host
(blas.py). Warp size 1. Native helpers are compiled on first use and cached on disk
(toolchain.py). Linux only (it relies on /proc, memfd and ELF).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hip_ffi._version import __version__
from hip_ffi.api import HipApi

__all__ = ["load"]


def _packed_version() -> int:
    """hip_ffi's version packed like HIP's (major*10_000_000 + minor*100_000 + patch)."""
    parts = [int(p) if p.isdigit() else 0 for p in __version__.split(".")[:3]] + [0, 0, 0]
    return parts[0] * 10_000_000 + parts[1] * 100_000 + parts[2]


def runtime_version(version: Any) -> int:
    """hipRuntimeGetVersion/hipDriverGetVersion: hip_ffi's own version, HIP-packed."""
    from hip_ffi._cpu import status
    from hip_ffi._ffi import ffi

    if version == ffi.NULL:
        return status.INVALID_VALUE
    version[0] = _packed_version()
    return status.SUCCESS


def load() -> HipApi:
    """The cpu platform's HipApi. Loads nothing native yet: the runtime library is built
    (or taken from the disk cache) at the first launch or hipBLAS handle."""
    from hip_ffi._cpu import (
        blas,
        compiler,
        copies,
        device,
        graphs,
        launch,
        memory,
        modules,
        status,
        stream_api,
        toolchain,
    )
    from hip_ffi._ffi import ffi

    runtime: dict[str, Callable[..., Any]] = {}
    for part in (device, stream_api, memory, copies, modules, launch, graphs):
        runtime.update(part.FUNCTIONS)
    runtime["hipRuntimeGetVersion"] = runtime_version
    runtime["hipDriverGetVersion"] = runtime_version
    functions: dict[str, Callable[..., Any]] = {
        name: status.track_errors(function) for name, function in runtime.items()
    }
    functions.update(
        hipGetErrorName=status.hipGetErrorName,
        hipGetErrorString=status.hipGetErrorString,
        hipGetLastError=status.hipGetLastError,
        hipPeekAtLastError=status.hipPeekAtLastError,
        hiprtcGetErrorString=status.hiprtcGetErrorString,
    )
    functions.update(compiler.FUNCTIONS)
    functions.update(blas.FUNCTIONS)

    cxx = toolchain.find_compiler()
    cores = device.host().cores
    libraries = {"c++ compiler": cxx.path} if cxx else {}
    cache = toolchain.cache_dir()
    if cache is not None:
        libraries["code cache"] = str(cache)
    return HipApi(
        platform="cpu",
        ffi=ffi,
        functions=functions,
        runtime_version=_packed_version(),
        platform_version=f"host runtime: {cxx.name if cxx else 'no C++ compiler'}, {cores} cores",
        libraries=libraries,
        device_prop_type=device.PROP_TYPE,
    )
