"""The nvidia platform's `load()`: open the CUDA libraries and bind the surface under HIP names."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hip_ffi import code_objects, surface
from hip_ffi._ffi import ffi
from hip_ffi._shims import memcpy_with_stream
from hip_ffi.api import HipApi, Unavailable
from hip_ffi.errors import LibraryNotFoundError
from hip_ffi.libraries import LibrarySpec, missing_library, open_library
from hip_ffi.platforms.nvidia.blas import bind as bind_blas
from hip_ffi.platforms.nvidia.device import (
    device_attribute,
    device_prop_type,
    device_properties,
    pointer_attributes,
)
from hip_ffi.platforms.nvidia.dnn import bind_checked as bind_dnn
from hip_ffi.platforms.nvidia.libraries import (
    cublas_spec,
    cuda_include_dir,
    cudart_spec,
    cudnn_spec,
    libcuda_spec,
    nvrtc_spec,
)
from hip_ffi.platforms.nvidia.nccl import bind as bind_nccl
from hip_ffi.platforms.nvidia.rtc import bind as bind_rtc
from hip_ffi.platforms.nvidia.tables import ATTRIBUTE_TO_CUDA
from hip_ffi.platforms.nvidia.wrappers import (
    DriverState,
    Native,
    error_name,
    error_string,
    event_create,
    graph_instantiate,
    host_malloc,
    host_memcpy_native,
    last_error,
    launch_kernel_ex,
    module_launch_kernel,
    occupancy_max_potential_block_size,
    runtime,
)

MIN_CUDA_VERSION = 12000
#: Binds the surface functions of an opened optional library (library, its path) -> functions.
Binder = Callable[[Any, str], dict[str, Native]]

#: HIP function -> the runtime-API function with the same arguments and enum values.
RUNTIME_CALLS = {
    "hipRuntimeGetVersion": "cudaRuntimeGetVersion",
    "hipDriverGetVersion": "cudaDriverGetVersion",
    "hipGetDeviceCount": "cudaGetDeviceCount",
    "hipGetDevice": "cudaGetDevice",
    "hipSetDevice": "cudaSetDevice",
    "hipDeviceGetPCIBusId": "cudaDeviceGetPCIBusId",
    "hipMemGetInfo": "cudaMemGetInfo",
    "hipDeviceSynchronize": "cudaDeviceSynchronize",
    "hipDeviceCanAccessPeer": "cudaDeviceCanAccessPeer",
    "hipDeviceEnablePeerAccess": "cudaDeviceEnablePeerAccess",
    "hipDeviceDisablePeerAccess": "cudaDeviceDisablePeerAccess",
    "hipStreamCreateWithFlags": "cudaStreamCreateWithFlags",
    "hipStreamCreateWithPriority": "cudaStreamCreateWithPriority",
    "hipDeviceGetStreamPriorityRange": "cudaDeviceGetStreamPriorityRange",
    "hipStreamGetFlags": "cudaStreamGetFlags",
    "hipStreamGetPriority": "cudaStreamGetPriority",
    "hipStreamDestroy": "cudaStreamDestroy",
    "hipStreamSynchronize": "cudaStreamSynchronize",
    "hipStreamQuery": "cudaStreamQuery",
    "hipStreamWaitEvent": "cudaStreamWaitEvent",
    "hipLaunchHostFunc": "cudaLaunchHostFunc",
    "hipEventRecord": "cudaEventRecord",
    "hipEventSynchronize": "cudaEventSynchronize",
    "hipEventQuery": "cudaEventQuery",
    "hipEventElapsedTime": "cudaEventElapsedTime",
    "hipEventDestroy": "cudaEventDestroy",
    "hipMalloc": "cudaMalloc",
    "hipFree": "cudaFree",
    "hipMallocAsync": "cudaMallocAsync",
    "hipFreeAsync": "cudaFreeAsync",
    "hipMallocFromPoolAsync": "cudaMallocFromPoolAsync",
    "hipDeviceGetDefaultMemPool": "cudaDeviceGetDefaultMemPool",
    "hipDeviceGetMemPool": "cudaDeviceGetMemPool",
    "hipDeviceSetMemPool": "cudaDeviceSetMemPool",
    "hipMemPoolCreate": "cudaMemPoolCreate",
    "hipMemPoolDestroy": "cudaMemPoolDestroy",
    "hipMemPoolSetAttribute": "cudaMemPoolSetAttribute",
    "hipMemPoolGetAttribute": "cudaMemPoolGetAttribute",
    "hipMemPoolTrimTo": "cudaMemPoolTrimTo",
    "hipMemPoolSetAccess": "cudaMemPoolSetAccess",
    "hipMemPoolGetAccess": "cudaMemPoolGetAccess",
    "hipHostFree": "cudaFreeHost",
    "hipHostRegister": "cudaHostRegister",
    "hipHostUnregister": "cudaHostUnregister",
    "hipHostGetDevicePointer": "cudaHostGetDevicePointer",
    "hipMemcpy": "cudaMemcpy",
    "hipMemcpyAsync": "cudaMemcpyAsync",
    "hipMemcpyPeer": "cudaMemcpyPeer",
    "hipMemcpyPeerAsync": "cudaMemcpyPeerAsync",
    "hipIpcGetMemHandle": "cudaIpcGetMemHandle",
    "hipIpcOpenMemHandle": "cudaIpcOpenMemHandle",  # hipIpcMemLazyEnablePeerAccess is CUDA's 1
    "hipIpcCloseMemHandle": "cudaIpcCloseMemHandle",
    "hipIpcGetEventHandle": "cudaIpcGetEventHandle",
    "hipIpcOpenEventHandle": "cudaIpcOpenEventHandle",
    "hipMemset": "cudaMemset",
    "hipMemsetAsync": "cudaMemsetAsync",
    "hipStreamBeginCapture": "cudaStreamBeginCapture",
    "hipStreamEndCapture": "cudaStreamEndCapture",
    "hipStreamIsCapturing": "cudaStreamIsCapturing",
    "hipGraphInstantiateWithFlags": "cudaGraphInstantiateWithFlags",
    "hipGraphLaunch": "cudaGraphLaunch",
    "hipGraphExecDestroy": "cudaGraphExecDestroy",
    "hipGraphDestroy": "cudaGraphDestroy",
}

#: HIP function -> the driver-API function with the same arguments (CUdeviceptr declared as a
#: pointer: cdef/cuda.h says why). These need a current context, recovered on first need.
DRIVER_CALLS = {
    "hipModuleLoad": "cuModuleLoad",
    "hipModuleLoadData": "cuModuleLoadData",
    "hipModuleUnload": "cuModuleUnload",
    "hipModuleGetFunction": "cuModuleGetFunction",
    "hipModuleGetGlobal": "cuModuleGetGlobal_v2",
    "hipModuleLaunchCooperativeKernel": "cuLaunchCooperativeKernel",
    "hipFuncGetAttribute": "cuFuncGetAttribute",
    "hipFuncSetAttribute": "cuFuncSetAttribute",
    "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor": (
        "cuOccupancyMaxActiveBlocksPerMultiprocessor"
    ),
    "hipMemsetD8": "cuMemsetD8_v2",
    "hipMemsetD8Async": "cuMemsetD8Async",
    "hipMemsetD32": "cuMemsetD32_v2",
    "hipMemsetD32Async": "cuMemsetD32Async",
    "hipMemcpyHtoD": "cuMemcpyHtoD_v2",
    "hipMemcpyDtoH": "cuMemcpyDtoH_v2",
    "hipMemcpyDtoD": "cuMemcpyDtoD_v2",
    "hipMemcpyHtoDAsync": "cuMemcpyHtoDAsync_v2",
    "hipMemcpyDtoHAsync": "cuMemcpyDtoHAsync_v2",
    "hipMemcpyDtoDAsync": "cuMemcpyDtoDAsync_v2",
}
#: Driver calls that need only an initialized driver, no context.
DEVICE_CALLS = {
    "hipInit": "cuInit",
    "hipDeviceGet": "cuDeviceGet",
    "hipDeviceGetName": "cuDeviceGetName",
    "hipDeviceTotalMem": "cuDeviceTotalMem_v2",
}


def load() -> HipApi:
    """Open the CUDA libraries and bind the HIP surface over them (no GPU work, no context)."""
    cudart, cudart_path = open_library(ffi, cudart_spec())
    runtime_version = _version(cudart.cudaRuntimeGetVersion, cudart_path)
    if runtime_version < MIN_CUDA_VERSION:
        reason = f"CUDA {_release(runtime_version)} runtime; hip_ffi needs CUDA >= 12"
        raise LibraryNotFoundError("CUDA runtime (libcudart)", [(cudart_path, reason)])
    cuda, cuda_path = open_library(ffi, libcuda_spec())
    driver_version = _version(cudart.cudaDriverGetVersion, cudart_path)
    release = f"CUDA {_release(runtime_version)} (driver {_release(driver_version)})"
    libraries = {"cuda runtime": cudart_path, "cuda driver": cuda_path}
    opened: list[Any] = [cudart, cuda]

    state = DriverState(cudart.cudaFree, cuda.cuInit)
    functions: dict[str, Callable[..., Any]] = {}
    for hip_name, cuda_name in RUNTIME_CALLS.items():
        functions[hip_name] = _bind(cudart, cuda_name, hip_name, release, runtime)
    for hip_name, cuda_name in DRIVER_CALLS.items():
        functions[hip_name] = _bind(cuda, cuda_name, hip_name, release, state.context_call)
    for hip_name, cuda_name in DEVICE_CALLS.items():
        functions[hip_name] = _bind(cuda, cuda_name, hip_name, release, state.device_call)
    functions.update(_special(cudart, cuda, state, functions, release))

    prop_type = device_prop_type()
    functions["hipGetDeviceProperties"] = device_properties(
        state.device_call(cuda.cuDeviceGetAttribute, "cuDeviceGetAttribute"),
        cuda.cuDeviceGetAttribute,
        functions["hipDeviceGetName"],
        functions["hipDeviceTotalMem"],
        _uuid_query(cuda, state),
        prop_type,
    )

    # Optional: without one of these, only its functions are unavailable (saying why).
    optional: tuple[tuple[str, str, LibrarySpec, tuple[str, ...], Binder], ...] = (
        ("nvrtc", "NVRTC", nvrtc_spec(), surface.HIPRTC,
         lambda nvrtc, path: _bind_nvrtc(nvrtc, cudart, cuda_include_dir(path))),
        ("cublas", "cuBLAS", cublas_spec(), surface.HIPBLAS, lambda cublas, _: bind_blas(cublas)),
        ("cudnn", "cuDNN", cudnn_spec(), surface.MIOPEN, bind_dnn),
    )  # fmt: skip
    for role, what, spec, names, bind in optional:
        try:
            library, path = open_library(ffi, spec)
        except LibraryNotFoundError as error:
            functions.update(missing_library(names, what, spec, error))
        else:
            libraries[role] = path
            opened.append(library)
            functions.update(bind(library, path))
    functions.update(bind_nccl(ffi))  # libnccl: opened by the first nccl* call

    return HipApi(
        platform="nvidia",
        ffi=ffi,
        functions=functions,
        code_object_check=code_objects.as_status(code_objects.check_nvidia),
        runtime_version=runtime_version,
        platform_version=release,
        libraries=libraries,
        device_prop_type=prop_type,
        keep_alive=(*opened, state),
        natives={
            "hipDrvLaunchKernelEx": cuda.cuLaunchKernelEx,
            # (hip-core's events and synchronous copies through the driver API, whose calls
            # cost less host time than the runtime's; flags as HIP's, which CUDA shares for
            # what hip-core passes. They need the current context that hip-core's device
            # switch makes: without one they fail, and a failure re-runs the surface call)
            "hipEventCreateWithFlags": cuda.cuEventCreate,
            "hipEventDestroy": cuda.cuEventDestroy_v2,
            "hipMemcpy": host_memcpy_native(
                cudart.cudaMemcpy,
                cuda.cuMemcpyHtoDAsync_v2,
                cuda.cuMemcpyDtoHAsync_v2,
                cuda.cuStreamSynchronize,
            ),
        },
    )


def _special(
    cudart: Any, cuda: Any, state: DriverState, bound: dict[str, Callable[..., Any]], release: str
) -> dict[str, Callable[..., Any]]:
    """The functions whose arguments, flags or results need more than a code translation."""
    get_name = error_name()
    return {
        "hipDeviceGetAttribute": device_attribute(
            cudart.cudaDeviceGetAttribute,
            state.device_call(cuda.cuDeviceGetAttribute, "cuDeviceGetAttribute"),
            bound["hipDeviceTotalMem"],
            state,
        ),
        "hipGetErrorName": get_name,
        "hipGetErrorString": error_string(cudart.cudaGetErrorString, get_name),
        "hipGetLastError": last_error(cudart.cudaGetLastError, state, reset=True),
        "hipPeekAtLastError": last_error(cudart.cudaPeekAtLastError, state, reset=False),
        "hipEventCreateWithFlags": event_create(cudart.cudaEventCreateWithFlags),
        "hipHostMalloc": host_malloc(cudart.cudaHostAlloc),
        "hipMemcpyWithStream": memcpy_with_stream(
            bound["hipMemcpyAsync"], bound["hipStreamSynchronize"]
        ),
        "hipPointerGetAttributes": pointer_attributes(
            cudart.cudaPointerGetAttributes, cudart.cudaHostGetFlags
        ),
        "hipModuleLaunchKernel": module_launch_kernel(cuda.cuLaunchKernel, state),
        "hipDrvLaunchKernelEx": _bind(
            cuda,
            "cuLaunchKernelEx",
            "hipDrvLaunchKernelEx",
            release,
            lambda native, _: launch_kernel_ex(native, state),  # keeps its own name
        ),
        "hipModuleOccupancyMaxPotentialBlockSize": occupancy_max_potential_block_size(
            cuda.cuOccupancyMaxPotentialBlockSize, state
        ),
        "hipGraphInstantiate": graph_instantiate(cudart.cudaGraphInstantiate),
    }


def _bind_nvrtc(nvrtc: Any, cudart: Any, include_dir: str | None) -> dict[str, Native]:
    major_attr = ATTRIBUTE_TO_CUDA["ComputeCapabilityMajor"]
    minor_attr = ATTRIBUTE_TO_CUDA["ComputeCapabilityMinor"]

    def current_arch() -> str | None:
        """sm_XY of the current device, or None when there is none (nvrtc's default then)."""
        device, major, minor = ffi.new("int*"), ffi.new("int*"), ffi.new("int*")
        if (
            cudart.cudaGetDevice(device)
            or cudart.cudaDeviceGetAttribute(major, major_attr, device[0])
            or cudart.cudaDeviceGetAttribute(minor, minor_attr, device[0])
        ):
            return None
        return f"sm_{major[0]}{minor[0]}"

    return bind_rtc(nvrtc, current_arch, include_dir)


def _uuid_query(cuda: Any, state: DriverState) -> Native | None:
    try:
        native = cuda.cuDeviceGetUuid_v2
    except (AttributeError, ffi.error):  # a driver older than CUDA 11.4
        return None
    return state.device_call(native, "cuDeviceGetUuid_v2")


def _bind(
    library: Any,
    cuda_name: str,
    hip_name: str,
    release: str,
    wrap: Callable[[Native, str], Callable[..., Any]],
) -> Callable[..., Any]:
    """`wrap(library.cuda_name, hip_name)`, or an Unavailable when the symbol is missing."""
    try:
        native = getattr(library, cuda_name)
    except (AttributeError, ffi.error):  # cffi raises ffi.error for a missing symbol
        return Unavailable(hip_name, f"{cuda_name} is not in {release}'s libraries")
    return wrap(native, hip_name)


def _version(query: Callable[[Any], int], path: str) -> int:
    value = ffi.new("int*")
    if query(value) != 0:
        raise LibraryNotFoundError("CUDA runtime (libcudart)", [(path, "version query failed")])
    return int(value[0])


def _release(version: int) -> str:
    """CUDA's packed version (major*1000 + minor*10) as "13.0"; 0 (no driver) as "none"."""
    return f"{version // 1000}.{version % 1000 // 10}" if version else "none"
