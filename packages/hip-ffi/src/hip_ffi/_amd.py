"""The amd platform: the ROCm libraries (libamdhip64, hiprtc, hipBLAS) of ROCm 5, 6 or 7.

Functions are the cffi function objects themselves wherever the C ABI already matches the
surface; wrappers exist only where a release differs:
- hipGetDeviceProperties binds hipGetDevicePropertiesR0600 from ROCm 6.0 (the plain name keeps
  the old R0000 layout there); on 5.x the plain name is the R0000 layout.
- hipPointerGetAttributes on 5.x renumbers hipMemoryType to the ROCm 6 values.
- hipblasGemmEx / hipblasGemmStridedBatchedEx take hipDataType and hipblasComputeType_t: the
  plain names on hipBLAS 3, the `_v2` names on hipBLAS 2, translated to the older
  hipblasDatatype_t on hipBLAS 0 and 1.
- hipDrvLaunchKernelEx, where the release lacks it, goes through hipModuleLaunchKernel.
ROCm 7 also changed some launch error codes and hipGetLastError (it returns the last error of
any call, not only launches); those are HIP's own codes and reach the caller unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from hip_ffi import constants, surface
from hip_ffi._ffi import ffi
from hip_ffi._shims import launch_host_func, launch_kernel_ex, memcpy_with_stream
from hip_ffi.api import HipApi, Unavailable
from hip_ffi.errors import LibraryNotFoundError
from hip_ffi.libraries import LibrarySpec, env_dirs, open_library

_ROCM_DIRS = (*env_dirs("ROCM_PATH", "HIP_PATH"), "/opt/rocm/lib")

HIP_RUNTIME = LibrarySpec(
    role="HIP runtime (libamdhip64)",
    env="HIP_FFI_AMDHIP64_PATH",
    names=("libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so"),
    dirs=_ROCM_DIRS,
)
HIPRTC = LibrarySpec(
    role="hiprtc (libhiprtc)",
    env="HIP_FFI_HIPRTC_PATH",
    names=("libhiprtc.so.7", "libhiprtc.so.6", "libhiprtc.so"),
    dirs=_ROCM_DIRS,
)
HIPBLAS = LibrarySpec(
    role="hipBLAS (libhipblas)",
    env="HIP_FFI_HIPBLAS_PATH",
    names=(
        "libhipblas.so.3",
        "libhipblas.so.2",
        "libhipblas.so.1",
        "libhipblas.so.0",
        "libhipblas.so",
    ),
    dirs=_ROCM_DIRS,
)

#: Functions that appeared after ROCm 5.0, with the release that brought them (for messages).
_INTRODUCED = {
    "hipLaunchHostFunc": "ROCm 5.3",
    "hipDrvLaunchKernelEx": "ROCm 7.0",
    "hipGetDevicePropertiesR0600": "ROCm 6.0",
}

#: hipDataType -> hipblasDatatype_t, for the gemm-ex ABI of hipBLAS 0 and 1.
_HIPBLAS_V1_DATATYPE = {
    constants.HIP_R_16F: 150,
    constants.HIP_R_32F: 151,
    constants.HIP_R_64F: 152,
    constants.HIP_R_16BF: 168,
}
#: hipblasComputeType_t -> the hipblasDatatype_t that ABI takes as compute type.
_HIPBLAS_V1_COMPUTE = {
    constants.HIPBLAS_COMPUTE_32F: 151,
    constants.HIPBLAS_COMPUTE_32F_FAST_TF32: 151,
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
        functions["hipPointerGetAttributes"] = _rocm5_pointer_attributes(
            hip.hipPointerGetAttributes
        )
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

    try:
        blas, blas_path = open_library(ffi, HIPBLAS)
    except LibraryNotFoundError as error:
        tried = ", ".join(path for path, _ in error.tried)
        reason = f"no hipBLAS library (tried {tried}; {HIPBLAS.env} picks one)"
        functions.update({name: Unavailable(name, reason) for name in surface.HIPBLAS})
    else:
        libraries["hipblas"] = blas_path
        opened.append(blas)
        _bind(functions, blas, surface.HIPBLAS, release)
        _bind_gemm(functions, blas, _hipblas_major(blas_path, major))

    return HipApi(
        platform="amd",
        ffi=ffi,
        functions=functions,
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


def _hipblas_major(path: str, rocm_major: int) -> int:
    """hipBLAS's major version from its soname (libhipblas.so.N), else from the ROCm release."""
    match = re.search(r"libhipblas\.so\.(\d+)", path)
    if match:
        return int(match.group(1))
    return {5: 1, 6: 2}.get(rocm_major, 3)


def _bind_gemm(functions: dict[str, Callable[..., Any]], blas: Any, hipblas_major: int) -> None:
    """gemm-ex with hipDataType / hipblasComputeType_t arguments, whatever the hipBLAS release.

    hipBLAS 3 takes them under the plain names; hipBLAS 2 exports them as `*_v2` (its plain
    names keep the hipblasDatatype_t ABI); hipBLAS 0 and 1 only have the older ABI, so their
    arguments are translated.
    """
    for name, datatype_args, compute_arg in (
        ("hipblasGemmEx", (8, 11, 15), 17),
        ("hipblasGemmStridedBatchedEx", (8, 12, 17), 21),
    ):
        if hipblas_major >= 3:
            continue  # already bound under the plain name
        try:
            functions[name] = getattr(blas, name + "_v2")
        except (AttributeError, ffi.error):
            functions[name] = _hipblas_v1_gemm(getattr(blas, name), datatype_args, compute_arg)


def _rocm5_pointer_attributes(native: Callable[..., int]) -> Callable[..., int]:
    renumber = {
        old: constants.MEMORY_TYPES[name] for old, name in constants.MEMORY_TYPES_ROCM5.items()
    }

    def hipPointerGetAttributes(attributes: Any, pointer: Any) -> int:
        status = native(attributes, pointer)
        if status == 0:
            attributes.type = renumber.get(attributes.type, attributes.type)
        return status

    return hipPointerGetAttributes


def _hipblas_v1_gemm(
    native: Callable[..., int], datatype_args: tuple[int, ...], compute_arg: int
) -> Callable[..., int]:
    """Wrap a hipblasDatatype_t-ABI gemm-ex so it takes hipDataType / hipblasComputeType_t."""

    def gemm(*args: Any) -> int:
        converted = list(args)
        try:
            for index in datatype_args:
                converted[index] = _HIPBLAS_V1_DATATYPE[args[index]]
            converted[compute_arg] = _HIPBLAS_V1_COMPUTE[args[compute_arg]]
        except KeyError:
            return constants.HIPBLAS_STATUSES["HIPBLAS_STATUS_INVALID_ENUM"]
        return native(*converted)

    return gemm
