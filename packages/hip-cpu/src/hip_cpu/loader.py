"""The cpu platform's `load()`: the HipApi over the modules of this folder."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from hip_cpu._version import __version__
from hip_ffi import surface
from hip_ffi.api import HipApi

__all__ = ["load"]


def _packed_version() -> int:
    """hip-cpu's version (the lockstep one, hip-ffi's too) packed like HIP's
    (major*10_000_000 + minor*100_000 + patch)."""
    parts = [int(p) if p.isdigit() else 0 for p in __version__.split(".")[:3]] + [0, 0, 0]
    return parts[0] * 10_000_000 + parts[1] * 100_000 + parts[2]


def runtime_version(version: Any) -> int:
    """hipRuntimeGetVersion/hipDriverGetVersion: hip-cpu's own version, HIP-packed."""
    from hip_cpu import status
    from hip_ffi._ffi import ffi

    if version == ffi.NULL:
        return status.INVALID_VALUE
    version[0] = _packed_version()
    return status.SUCCESS


def _defined(module: ModuleType) -> dict[str, Callable[..., Any]]:
    """The surface functions `module` defines: each module of this folder implements its HIP
    calls as functions named as in hip_ffi.surface, so the name is written once, at the def."""
    namespace = vars(module)
    return {name: namespace[name] for name in surface.ALL if callable(namespace.get(name))}


def load() -> HipApi:
    """The cpu platform's HipApi. Loads nothing native yet: the runtime library is built
    (or taken from the disk cache) at the first launch or hipBLAS handle."""
    from hip_cpu import (
        blas,
        collective_calls,
        collectives,
        compiler,
        copies,
        device,
        dnn,
        fission,
        graphs,
        images,
        ipc,
        launch,
        memory,
        modules,
        peers,
        pools,
        status,
        stream_api,
        toolchain,
    )
    from hip_ffi._ffi import ffi

    runtime: dict[str, Callable[..., Any]] = {}
    parts = (device, peers, stream_api, memory, pools, ipc, copies, modules, launch, graphs)
    for part in parts:
        runtime.update(_defined(part))
    runtime["hipRuntimeGetVersion"] = runtime_version
    runtime["hipDriverGetVersion"] = runtime_version
    functions: dict[str, Callable[..., Any]] = {
        name: status.track_errors(function) for name, function in runtime.items()
    }
    # The error functions read and reset the error track_errors keeps, so they are not tracked;
    # hiprtc, hipBLAS, MIOpen and the collectives return their own status types, which
    # hipGetLastError does not see.
    for part in (status, compiler, blas, dnn, collectives, collective_calls):
        functions.update(_defined(part))

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
        code_object_check=images.check_code_object,
        error_detail=status.error_detail,
        runtime_version=_packed_version(),
        # The ABI version, the prelude's digest and whether kernels are split at their
        # barriers are in the release string, so caches keyed on it (hip-core's program cache)
        # never hand over an object built another way.
        platform_version=f"host runtime: {cxx.name if cxx else 'no C++ compiler'}, {cores} cores, "
        f"ABI {toolchain.ABI_VERSION}, prelude {toolchain.headers_digest()[:12]}, "
        f"split {'on' if fission.enabled() else 'off'}",
        libraries=libraries,
        device_prop_type=device.PROP_TYPE,
    )
