"""The amd platform's `load()`: open the ROCm libraries and bind the surface for the release."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hip_ffi import code_objects, surface
from hip_ffi._ffi import ffi
from hip_ffi._shims import launch_host_func, launch_kernel_ex, memcpy_with_stream
from hip_ffi.api import HipApi, Unavailable
from hip_ffi.errors import LibraryNotFoundError
from hip_ffi.libraries import LibrarySpec, env_dirs, missing_library, open_library
from hip_ffi.platforms.amd.rccl import bind as bind_rccl
from hip_ffi.platforms.amd.rtc import with_prologue
from hip_ffi.platforms.amd.wrappers import bind_gemm, hipblas_major, rocm5_pointer_attributes

_ROCM_DIRS = (*env_dirs("ROCM_PATH", "HIP_PATH"), "/opt/rocm/lib")
#: The newest major tried first. A rule, not a list of releases: every major from here down
#: to the oldest supported is tried (a name that is not there fails to open in microseconds),
#: so ROCm 8, 9... load with no edit here.
_NEWEST_MAJOR = 16


def sonames(stem: str, oldest: int, newest: int = _NEWEST_MAJOR) -> tuple[str, ...]:
    """`stem.so.N` for every major N from `newest` down to `oldest`, then the bare `stem.so`."""
    return (*(f"{stem}.so.{major}" for major in range(newest, oldest - 1, -1)), f"{stem}.so")


HIP_RUNTIME = LibrarySpec(
    role="HIP runtime (libamdhip64)",
    env="HIP_FFI_AMDHIP64_PATH",
    names=sonames("libamdhip64", oldest=5),
    dirs=_ROCM_DIRS,
)
HIPRTC = LibrarySpec(
    role="hiprtc (libhiprtc)",
    env="HIP_FFI_HIPRTC_PATH",
    names=sonames("libhiprtc", oldest=6),
    dirs=_ROCM_DIRS,
)
HIPBLAS = LibrarySpec(
    role="hipBLAS (libhipblas)",
    env="HIP_FFI_HIPBLAS_PATH",
    names=sonames("libhipblas", oldest=0),
    dirs=_ROCM_DIRS,
)
MIOPEN = LibrarySpec(
    role="MIOpen (libMIOpen)",
    env="HIP_FFI_MIOPEN_PATH",
    names=sonames("libMIOpen", oldest=1),
    dirs=_ROCM_DIRS,
)

#: Functions that appeared after ROCm 5.0, with the release that brought them (for messages).
_INTRODUCED = {
    "hipLaunchHostFunc": "ROCm 5.3",
    "hipDrvLaunchKernelEx": "ROCm 7.0",
    "hipGetDevicePropertiesR0600": "ROCm 6.0",
    "hipModuleLaunchCooperativeKernel": "ROCm 6.2",  # no shim: unavailable before
}


def split_version(runtime_version: int) -> tuple[int, int, int]:
    """HIP's packed version (major*10_000_000 + minor*100_000 + patch) as a tuple."""
    return (
        runtime_version // 10_000_000,
        runtime_version // 100_000 % 100,
        runtime_version % 100_000,
    )


def load() -> HipApi:
    """Open the ROCm libraries and bind the surface for the release found."""
    hip, hip_path = open_library(ffi, HIP_RUNTIME)
    version = ffi.new("int*")
    if hip.hipRuntimeGetVersion(version) != 0:
        raise LibraryNotFoundError(HIP_RUNTIME.role, [(hip_path, "hipRuntimeGetVersion failed")])
    major, minor, patch = split_version(version[0])
    libraries = {"hip runtime": hip_path}
    opened = [hip]
    functions: dict[str, Callable[..., Any]] = {}
    release = f"ROCm {major}.{minor}.{patch}"

    _bind(functions, hip, surface.RUNTIME, release)
    if major >= 6:
        functions["hipGetDeviceProperties"] = _symbol(hip, "hipGetDevicePropertiesR0600", release)
        prop_type = "hipDeviceProp_tR0600"
    else:
        functions["hipPointerGetAttributes"] = rocm5_pointer_attributes(hip.hipPointerGetAttributes)
        prop_type = "hipDeviceProp_tR0000"
    if isinstance(functions["hipDrvLaunchKernelEx"], Unavailable):
        functions["hipDrvLaunchKernelEx"] = launch_kernel_ex(hip.hipModuleLaunchKernel)
    if isinstance(functions["hipLaunchHostFunc"], Unavailable):
        functions["hipLaunchHostFunc"] = launch_host_func(hip.hipStreamAddCallback)
    if isinstance(functions["hipMemcpyWithStream"], Unavailable):
        functions["hipMemcpyWithStream"] = memcpy_with_stream(
            hip.hipMemcpyAsync, hip.hipStreamSynchronize
        )

    rtc, rtc_path = _hiprtc_library(hip, hip_path, major)
    libraries["hiprtc"] = rtc_path
    opened.append(rtc)
    _bind(functions, rtc, surface.HIPRTC, release)
    functions["hiprtcCreateProgram"] = with_prologue(functions["hiprtcCreateProgram"])

    try:
        blas, blas_path = open_library(ffi, HIPBLAS)
    except LibraryNotFoundError as error:
        functions.update(missing_library(surface.HIPBLAS, "hipBLAS", HIPBLAS, error))
    else:
        libraries["hipblas"] = blas_path
        opened.append(blas)
        _bind(functions, blas, surface.HIPBLAS, release)
        bind_gemm(functions, blas, hipblas_major(blas_path, major))

    try:  # optional: without it the DNN surface is unavailable, saying what was tried
        dnn, dnn_path = open_library(ffi, MIOPEN)
    except LibraryNotFoundError as error:
        functions.update(missing_library(surface.MIOPEN, "MIOpen", MIOPEN, error))
    else:
        libraries["miopen"] = dnn_path
        opened.append(dnn)
        _bind(functions, dnn, surface.MIOPEN, release)
    functions.update(bind_rccl(ffi))  # librccl: opened by the first nccl* call

    return HipApi(
        platform="amd",
        ffi=ffi,
        functions=functions,
        code_object_check=code_objects.as_status(code_objects.check_amd),
        runtime_version=version[0],
        platform_version=release,
        libraries=libraries,
        device_prop_type=prop_type,
        keep_alive=tuple(opened),
    )


def _symbol(library: Any, name: str, release: str) -> Callable[..., Any]:
    try:
        return getattr(library, name)  # type: ignore[no-any-return]
    except (AttributeError, ffi.error):  # cffi raises ffi.error for a missing symbol
        needs = _INTRODUCED.get(name, "a newer ROCm")
        return Unavailable(name, f"not in {release}'s libraries (needs {needs})")


def _bind(
    into: dict[str, Callable[..., Any]], library: Any, names: tuple[str, ...], release: str
) -> None:
    for name in names:
        into[name] = _symbol(library, name, release)


def _hiprtc_library(hip: Any, hip_path: str, major: int) -> tuple[Any, str]:
    """hiprtc lives inside libamdhip64 up to ROCm 6 and in its own library from ROCm 7."""
    if major < 7:
        try:
            hip.hiprtcCreateProgram  # noqa: B018 - probing for the symbol
            return hip, hip_path
        except (AttributeError, ffi.error):
            pass
    return open_library(ffi, HIPRTC)
