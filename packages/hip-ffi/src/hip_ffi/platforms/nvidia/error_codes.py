"""Status codes of the CUDA libraries and the HIP codes they become, as data.

Each table lists every code of its CUDA enum (CUDA 13.x headers; older releases use a subset)
with its CUDA name, so a reader can check each line against the header. HIP numbered most of
hipError_t after CUDA, so most lines map a code to the same number; the others (CUDA codes HIP
never adopted, or numbers HIP reused for something else, such as 911 and 912) go to the
nearest HIP meaning. A code missing from a table becomes hipErrorUnknown / the "unknown"
status, which is what HIP's own NVIDIA headers do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

from hip_ffi import constants

#: cudaError_t: (code, CUDA name, hipError_t name).
CUDART_ERRORS = (
    (0, "cudaSuccess", "hipSuccess"),
    (1, "cudaErrorInvalidValue", "hipErrorInvalidValue"),
    (2, "cudaErrorMemoryAllocation", "hipErrorOutOfMemory"),
    (3, "cudaErrorInitializationError", "hipErrorNotInitialized"),
    (4, "cudaErrorCudartUnloading", "hipErrorDeinitialized"),
    (5, "cudaErrorProfilerDisabled", "hipErrorProfilerDisabled"),
    (6, "cudaErrorProfilerNotInitialized", "hipErrorProfilerNotInitialized"),
    (7, "cudaErrorProfilerAlreadyStarted", "hipErrorProfilerAlreadyStarted"),
    (8, "cudaErrorProfilerAlreadyStopped", "hipErrorProfilerAlreadyStopped"),
    (9, "cudaErrorInvalidConfiguration", "hipErrorInvalidConfiguration"),
    (10, "cudaErrorVersionTranslation", "hipErrorNotSupported"),
    (12, "cudaErrorInvalidPitchValue", "hipErrorInvalidPitchValue"),
    (13, "cudaErrorInvalidSymbol", "hipErrorInvalidSymbol"),
    (16, "cudaErrorInvalidHostPointer", "hipErrorInvalidValue"),
    (17, "cudaErrorInvalidDevicePointer", "hipErrorInvalidDevicePointer"),
    (18, "cudaErrorInvalidTexture", "hipErrorInvalidTexture"),
    (19, "cudaErrorInvalidTextureBinding", "hipErrorInvalidTexture"),
    (20, "cudaErrorInvalidChannelDescriptor", "hipErrorInvalidChannelDescriptor"),
    (21, "cudaErrorInvalidMemcpyDirection", "hipErrorInvalidMemcpyDirection"),
    (22, "cudaErrorAddressOfConstant", "hipErrorInvalidValue"),
    (23, "cudaErrorTextureFetchFailed", "hipErrorLaunchFailure"),
    (24, "cudaErrorTextureNotBound", "hipErrorInvalidTexture"),
    (25, "cudaErrorSynchronizationError", "hipErrorUnknown"),
    (26, "cudaErrorInvalidFilterSetting", "hipErrorInvalidValue"),
    (27, "cudaErrorInvalidNormSetting", "hipErrorInvalidValue"),
    (28, "cudaErrorMixedDeviceExecution", "hipErrorNotSupported"),
    (31, "cudaErrorNotYetImplemented", "hipErrorNotSupported"),
    (32, "cudaErrorMemoryValueTooLarge", "hipErrorInvalidValue"),
    (34, "cudaErrorStubLibrary", "hipErrorInsufficientDriver"),
    (35, "cudaErrorInsufficientDriver", "hipErrorInsufficientDriver"),
    (36, "cudaErrorCallRequiresNewerDriver", "hipErrorInsufficientDriver"),
    (37, "cudaErrorInvalidSurface", "hipErrorInvalidValue"),
    (43, "cudaErrorDuplicateVariableName", "hipErrorInvalidSymbol"),
    (44, "cudaErrorDuplicateTextureName", "hipErrorInvalidSymbol"),
    (45, "cudaErrorDuplicateSurfaceName", "hipErrorInvalidSymbol"),
    (46, "cudaErrorDevicesUnavailable", "hipErrorContextAlreadyInUse"),
    (49, "cudaErrorIncompatibleDriverContext", "hipErrorInvalidContext"),
    (52, "cudaErrorMissingConfiguration", "hipErrorMissingConfiguration"),
    (53, "cudaErrorPriorLaunchFailure", "hipErrorPriorLaunchFailure"),
    (65, "cudaErrorLaunchMaxDepthExceeded", "hipErrorLaunchOutOfResources"),
    (66, "cudaErrorLaunchFileScopedTex", "hipErrorNotSupported"),
    (67, "cudaErrorLaunchFileScopedSurf", "hipErrorNotSupported"),
    (68, "cudaErrorSyncDepthExceeded", "hipErrorLaunchOutOfResources"),
    (69, "cudaErrorLaunchPendingCountExceeded", "hipErrorLaunchOutOfResources"),
    (98, "cudaErrorInvalidDeviceFunction", "hipErrorInvalidDeviceFunction"),
    (100, "cudaErrorNoDevice", "hipErrorNoDevice"),
    (101, "cudaErrorInvalidDevice", "hipErrorInvalidDevice"),
    (102, "cudaErrorDeviceNotLicensed", "hipErrorInvalidDevice"),
    (103, "cudaErrorSoftwareValidityNotEstablished", "hipErrorNotInitialized"),
    (127, "cudaErrorStartupFailure", "hipErrorNotInitialized"),
    (200, "cudaErrorInvalidKernelImage", "hipErrorInvalidImage"),
    (201, "cudaErrorDeviceUninitialized", "hipErrorInvalidContext"),
    (205, "cudaErrorMapBufferObjectFailed", "hipErrorMapFailed"),
    (206, "cudaErrorUnmapBufferObjectFailed", "hipErrorUnmapFailed"),
    (207, "cudaErrorArrayIsMapped", "hipErrorArrayIsMapped"),
    (208, "cudaErrorAlreadyMapped", "hipErrorAlreadyMapped"),
    (209, "cudaErrorNoKernelImageForDevice", "hipErrorNoBinaryForGpu"),
    (210, "cudaErrorAlreadyAcquired", "hipErrorAlreadyAcquired"),
    (211, "cudaErrorNotMapped", "hipErrorNotMapped"),
    (212, "cudaErrorNotMappedAsArray", "hipErrorNotMappedAsArray"),
    (213, "cudaErrorNotMappedAsPointer", "hipErrorNotMappedAsPointer"),
    (214, "cudaErrorECCUncorrectable", "hipErrorECCNotCorrectable"),
    (215, "cudaErrorUnsupportedLimit", "hipErrorUnsupportedLimit"),
    (216, "cudaErrorDeviceAlreadyInUse", "hipErrorContextAlreadyInUse"),
    (217, "cudaErrorPeerAccessUnsupported", "hipErrorPeerAccessUnsupported"),
    (218, "cudaErrorInvalidPtx", "hipErrorInvalidKernelFile"),
    (219, "cudaErrorInvalidGraphicsContext", "hipErrorInvalidGraphicsContext"),
    (220, "cudaErrorNvlinkUncorrectable", "hipErrorECCNotCorrectable"),
    (221, "cudaErrorJitCompilerNotFound", "hipErrorInvalidKernelFile"),
    (222, "cudaErrorUnsupportedPtxVersion", "hipErrorInvalidKernelFile"),
    (223, "cudaErrorJitCompilationDisabled", "hipErrorInvalidKernelFile"),
    (224, "cudaErrorUnsupportedExecAffinity", "hipErrorNotSupported"),
    (225, "cudaErrorUnsupportedDevSideSync", "hipErrorNotSupported"),
    (226, "cudaErrorContained", "hipErrorLaunchFailure"),
    (227, "cudaErrorInsufficientLoaderVersion", "hipErrorInsufficientDriver"),
    (300, "cudaErrorInvalidSource", "hipErrorInvalidSource"),
    (301, "cudaErrorFileNotFound", "hipErrorFileNotFound"),
    (302, "cudaErrorSharedObjectSymbolNotFound", "hipErrorSharedObjectSymbolNotFound"),
    (303, "cudaErrorSharedObjectInitFailed", "hipErrorSharedObjectInitFailed"),
    (304, "cudaErrorOperatingSystem", "hipErrorOperatingSystem"),
    (400, "cudaErrorInvalidResourceHandle", "hipErrorInvalidHandle"),
    (401, "cudaErrorIllegalState", "hipErrorIllegalState"),
    (402, "cudaErrorLossyQuery", "hipErrorNotSupported"),
    (500, "cudaErrorSymbolNotFound", "hipErrorNotFound"),
    (600, "cudaErrorNotReady", "hipErrorNotReady"),
    (700, "cudaErrorIllegalAddress", "hipErrorIllegalAddress"),
    (701, "cudaErrorLaunchOutOfResources", "hipErrorLaunchOutOfResources"),
    (702, "cudaErrorLaunchTimeout", "hipErrorLaunchTimeOut"),
    (703, "cudaErrorLaunchIncompatibleTexturing", "hipErrorLaunchFailure"),
    (704, "cudaErrorPeerAccessAlreadyEnabled", "hipErrorPeerAccessAlreadyEnabled"),
    (705, "cudaErrorPeerAccessNotEnabled", "hipErrorPeerAccessNotEnabled"),
    (708, "cudaErrorSetOnActiveProcess", "hipErrorSetOnActiveProcess"),
    (709, "cudaErrorContextIsDestroyed", "hipErrorContextIsDestroyed"),
    (710, "cudaErrorAssert", "hipErrorAssert"),
    (711, "cudaErrorTooManyPeers", "hipErrorPeerAccessUnsupported"),
    (712, "cudaErrorHostMemoryAlreadyRegistered", "hipErrorHostMemoryAlreadyRegistered"),
    (713, "cudaErrorHostMemoryNotRegistered", "hipErrorHostMemoryNotRegistered"),
    (714, "cudaErrorHardwareStackError", "hipErrorLaunchFailure"),
    (715, "cudaErrorIllegalInstruction", "hipErrorLaunchFailure"),
    (716, "cudaErrorMisalignedAddress", "hipErrorIllegalAddress"),
    (717, "cudaErrorInvalidAddressSpace", "hipErrorIllegalAddress"),
    (718, "cudaErrorInvalidPc", "hipErrorLaunchFailure"),
    (719, "cudaErrorLaunchFailure", "hipErrorLaunchFailure"),
    (720, "cudaErrorCooperativeLaunchTooLarge", "hipErrorCooperativeLaunchTooLarge"),
    (721, "cudaErrorTensorMemoryLeak", "hipErrorLaunchFailure"),
    (800, "cudaErrorNotPermitted", "hipErrorNotSupported"),
    (801, "cudaErrorNotSupported", "hipErrorNotSupported"),
    (802, "cudaErrorSystemNotReady", "hipErrorNotInitialized"),
    (803, "cudaErrorSystemDriverMismatch", "hipErrorInsufficientDriver"),
    (804, "cudaErrorCompatNotSupportedOnDevice", "hipErrorNotSupported"),
    (805, "cudaErrorMpsConnectionFailed", "hipErrorNotInitialized"),
    (806, "cudaErrorMpsRpcFailure", "hipErrorNotInitialized"),
    (807, "cudaErrorMpsServerNotReady", "hipErrorNotInitialized"),
    (808, "cudaErrorMpsMaxClientsReached", "hipErrorNotInitialized"),
    (809, "cudaErrorMpsMaxConnectionsReached", "hipErrorNotInitialized"),
    (810, "cudaErrorMpsClientTerminated", "hipErrorLaunchFailure"),
    (811, "cudaErrorCdpNotSupported", "hipErrorNotSupported"),
    (812, "cudaErrorCdpVersionMismatch", "hipErrorNotSupported"),
    (900, "cudaErrorStreamCaptureUnsupported", "hipErrorStreamCaptureUnsupported"),
    (901, "cudaErrorStreamCaptureInvalidated", "hipErrorStreamCaptureInvalidated"),
    (902, "cudaErrorStreamCaptureMerge", "hipErrorStreamCaptureMerge"),
    (903, "cudaErrorStreamCaptureUnmatched", "hipErrorStreamCaptureUnmatched"),
    (904, "cudaErrorStreamCaptureUnjoined", "hipErrorStreamCaptureUnjoined"),
    (905, "cudaErrorStreamCaptureIsolation", "hipErrorStreamCaptureIsolation"),
    (906, "cudaErrorStreamCaptureImplicit", "hipErrorStreamCaptureImplicit"),
    (907, "cudaErrorCapturedEvent", "hipErrorCapturedEvent"),
    (908, "cudaErrorStreamCaptureWrongThread", "hipErrorStreamCaptureWrongThread"),
    (909, "cudaErrorTimeout", "hipErrorLaunchTimeOut"),
    (910, "cudaErrorGraphExecUpdateFailure", "hipErrorGraphExecUpdateFailure"),
    (911, "cudaErrorExternalDevice", "hipErrorLaunchFailure"),
    (912, "cudaErrorInvalidClusterSize", "hipErrorInvalidConfiguration"),
    (913, "cudaErrorFunctionNotLoaded", "hipErrorInvalidDeviceFunction"),
    (914, "cudaErrorInvalidResourceType", "hipErrorInvalidValue"),
    (915, "cudaErrorInvalidResourceConfiguration", "hipErrorInvalidValue"),
    (917, "cudaErrorStreamDetached", "hipErrorIllegalState"),
    (918, "cudaErrorGraphRecaptureFailure", "hipErrorStreamCaptureInvalidated"),
    (919, "cudaErrorFabricNotReady", "hipErrorNotInitialized"),
    (999, "cudaErrorUnknown", "hipErrorUnknown"),
)

#: CUresult (the driver API): (code, CUDA name, hipError_t name).
CURESULT_ERRORS = (
    (0, "CUDA_SUCCESS", "hipSuccess"),
    (1, "CUDA_ERROR_INVALID_VALUE", "hipErrorInvalidValue"),
    (2, "CUDA_ERROR_OUT_OF_MEMORY", "hipErrorOutOfMemory"),
    (3, "CUDA_ERROR_NOT_INITIALIZED", "hipErrorNotInitialized"),
    (4, "CUDA_ERROR_DEINITIALIZED", "hipErrorDeinitialized"),
    (5, "CUDA_ERROR_PROFILER_DISABLED", "hipErrorProfilerDisabled"),
    (6, "CUDA_ERROR_PROFILER_NOT_INITIALIZED", "hipErrorProfilerNotInitialized"),
    (7, "CUDA_ERROR_PROFILER_ALREADY_STARTED", "hipErrorProfilerAlreadyStarted"),
    (8, "CUDA_ERROR_PROFILER_ALREADY_STOPPED", "hipErrorProfilerAlreadyStopped"),
    (34, "CUDA_ERROR_STUB_LIBRARY", "hipErrorInsufficientDriver"),
    (36, "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER", "hipErrorInsufficientDriver"),
    (46, "CUDA_ERROR_DEVICE_UNAVAILABLE", "hipErrorContextAlreadyInUse"),
    (47, "CUDA_ERROR_MULTICAST_RESOURCE_FULL", "hipErrorOutOfMemory"),
    (100, "CUDA_ERROR_NO_DEVICE", "hipErrorNoDevice"),
    (101, "CUDA_ERROR_INVALID_DEVICE", "hipErrorInvalidDevice"),
    (102, "CUDA_ERROR_DEVICE_NOT_LICENSED", "hipErrorInvalidDevice"),
    (200, "CUDA_ERROR_INVALID_IMAGE", "hipErrorInvalidImage"),
    (201, "CUDA_ERROR_INVALID_CONTEXT", "hipErrorInvalidContext"),
    (202, "CUDA_ERROR_CONTEXT_ALREADY_CURRENT", "hipErrorContextAlreadyCurrent"),
    (205, "CUDA_ERROR_MAP_FAILED", "hipErrorMapFailed"),
    (206, "CUDA_ERROR_UNMAP_FAILED", "hipErrorUnmapFailed"),
    (207, "CUDA_ERROR_ARRAY_IS_MAPPED", "hipErrorArrayIsMapped"),
    (208, "CUDA_ERROR_ALREADY_MAPPED", "hipErrorAlreadyMapped"),
    (209, "CUDA_ERROR_NO_BINARY_FOR_GPU", "hipErrorNoBinaryForGpu"),
    (210, "CUDA_ERROR_ALREADY_ACQUIRED", "hipErrorAlreadyAcquired"),
    (211, "CUDA_ERROR_NOT_MAPPED", "hipErrorNotMapped"),
    (212, "CUDA_ERROR_NOT_MAPPED_AS_ARRAY", "hipErrorNotMappedAsArray"),
    (213, "CUDA_ERROR_NOT_MAPPED_AS_POINTER", "hipErrorNotMappedAsPointer"),
    (214, "CUDA_ERROR_ECC_UNCORRECTABLE", "hipErrorECCNotCorrectable"),
    (215, "CUDA_ERROR_UNSUPPORTED_LIMIT", "hipErrorUnsupportedLimit"),
    (216, "CUDA_ERROR_CONTEXT_ALREADY_IN_USE", "hipErrorContextAlreadyInUse"),
    (217, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", "hipErrorPeerAccessUnsupported"),
    (218, "CUDA_ERROR_INVALID_PTX", "hipErrorInvalidKernelFile"),
    (219, "CUDA_ERROR_INVALID_GRAPHICS_CONTEXT", "hipErrorInvalidGraphicsContext"),
    (220, "CUDA_ERROR_NVLINK_UNCORRECTABLE", "hipErrorECCNotCorrectable"),
    (221, "CUDA_ERROR_JIT_COMPILER_NOT_FOUND", "hipErrorInvalidKernelFile"),
    (222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "hipErrorInvalidKernelFile"),
    (223, "CUDA_ERROR_JIT_COMPILATION_DISABLED", "hipErrorInvalidKernelFile"),
    (224, "CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY", "hipErrorNotSupported"),
    (225, "CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC", "hipErrorNotSupported"),
    (226, "CUDA_ERROR_CONTAINED", "hipErrorLaunchFailure"),
    (227, "CUDA_ERROR_INSUFFICIENT_LOADER_VERSION", "hipErrorInsufficientDriver"),
    (300, "CUDA_ERROR_INVALID_SOURCE", "hipErrorInvalidSource"),
    (301, "CUDA_ERROR_FILE_NOT_FOUND", "hipErrorFileNotFound"),
    (302, "CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND", "hipErrorSharedObjectSymbolNotFound"),
    (303, "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED", "hipErrorSharedObjectInitFailed"),
    (304, "CUDA_ERROR_OPERATING_SYSTEM", "hipErrorOperatingSystem"),
    (400, "CUDA_ERROR_INVALID_HANDLE", "hipErrorInvalidHandle"),
    (401, "CUDA_ERROR_ILLEGAL_STATE", "hipErrorIllegalState"),
    (402, "CUDA_ERROR_LOSSY_QUERY", "hipErrorNotSupported"),
    (500, "CUDA_ERROR_NOT_FOUND", "hipErrorNotFound"),
    (600, "CUDA_ERROR_NOT_READY", "hipErrorNotReady"),
    (700, "CUDA_ERROR_ILLEGAL_ADDRESS", "hipErrorIllegalAddress"),
    (701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "hipErrorLaunchOutOfResources"),
    (702, "CUDA_ERROR_LAUNCH_TIMEOUT", "hipErrorLaunchTimeOut"),
    (703, "CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING", "hipErrorLaunchFailure"),
    (704, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", "hipErrorPeerAccessAlreadyEnabled"),
    (705, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", "hipErrorPeerAccessNotEnabled"),
    (708, "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE", "hipErrorSetOnActiveProcess"),
    (709, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "hipErrorContextIsDestroyed"),
    (710, "CUDA_ERROR_ASSERT", "hipErrorAssert"),
    (711, "CUDA_ERROR_TOO_MANY_PEERS", "hipErrorPeerAccessUnsupported"),
    (712, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", "hipErrorHostMemoryAlreadyRegistered"),
    (713, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", "hipErrorHostMemoryNotRegistered"),
    (714, "CUDA_ERROR_HARDWARE_STACK_ERROR", "hipErrorLaunchFailure"),
    (715, "CUDA_ERROR_ILLEGAL_INSTRUCTION", "hipErrorLaunchFailure"),
    (716, "CUDA_ERROR_MISALIGNED_ADDRESS", "hipErrorIllegalAddress"),
    (717, "CUDA_ERROR_INVALID_ADDRESS_SPACE", "hipErrorIllegalAddress"),
    (718, "CUDA_ERROR_INVALID_PC", "hipErrorLaunchFailure"),
    (719, "CUDA_ERROR_LAUNCH_FAILED", "hipErrorLaunchFailure"),
    (720, "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE", "hipErrorCooperativeLaunchTooLarge"),
    (721, "CUDA_ERROR_TENSOR_MEMORY_LEAK", "hipErrorLaunchFailure"),
    (800, "CUDA_ERROR_NOT_PERMITTED", "hipErrorNotSupported"),
    (801, "CUDA_ERROR_NOT_SUPPORTED", "hipErrorNotSupported"),
    (802, "CUDA_ERROR_SYSTEM_NOT_READY", "hipErrorNotInitialized"),
    (803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "hipErrorInsufficientDriver"),
    (804, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", "hipErrorNotSupported"),
    (805, "CUDA_ERROR_MPS_CONNECTION_FAILED", "hipErrorNotInitialized"),
    (806, "CUDA_ERROR_MPS_RPC_FAILURE", "hipErrorNotInitialized"),
    (807, "CUDA_ERROR_MPS_SERVER_NOT_READY", "hipErrorNotInitialized"),
    (808, "CUDA_ERROR_MPS_MAX_CLIENTS_REACHED", "hipErrorNotInitialized"),
    (809, "CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED", "hipErrorNotInitialized"),
    (810, "CUDA_ERROR_MPS_CLIENT_TERMINATED", "hipErrorLaunchFailure"),
    (811, "CUDA_ERROR_CDP_NOT_SUPPORTED", "hipErrorNotSupported"),
    (812, "CUDA_ERROR_CDP_VERSION_MISMATCH", "hipErrorNotSupported"),
    (900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "hipErrorStreamCaptureUnsupported"),
    (901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "hipErrorStreamCaptureInvalidated"),
    (902, "CUDA_ERROR_STREAM_CAPTURE_MERGE", "hipErrorStreamCaptureMerge"),
    (903, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED", "hipErrorStreamCaptureUnmatched"),
    (904, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED", "hipErrorStreamCaptureUnjoined"),
    (905, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION", "hipErrorStreamCaptureIsolation"),
    (906, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT", "hipErrorStreamCaptureImplicit"),
    (907, "CUDA_ERROR_CAPTURED_EVENT", "hipErrorCapturedEvent"),
    (908, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD", "hipErrorStreamCaptureWrongThread"),
    (909, "CUDA_ERROR_TIMEOUT", "hipErrorLaunchTimeOut"),
    (910, "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE", "hipErrorGraphExecUpdateFailure"),
    (911, "CUDA_ERROR_EXTERNAL_DEVICE", "hipErrorLaunchFailure"),
    (912, "CUDA_ERROR_INVALID_CLUSTER_SIZE", "hipErrorInvalidConfiguration"),
    (913, "CUDA_ERROR_FUNCTION_NOT_LOADED", "hipErrorInvalidDeviceFunction"),
    (914, "CUDA_ERROR_INVALID_RESOURCE_TYPE", "hipErrorInvalidValue"),
    (915, "CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION", "hipErrorInvalidValue"),
    (916, "CUDA_ERROR_KEY_ROTATION", "hipErrorUnknown"),
    (917, "CUDA_ERROR_STREAM_DETACHED", "hipErrorIllegalState"),
    (918, "CUDA_ERROR_GRAPH_RECAPTURE_FAILURE", "hipErrorStreamCaptureInvalidated"),
    (919, "CUDA_ERROR_FABRIC_NOT_READY", "hipErrorNotInitialized"),
    (999, "CUDA_ERROR_UNKNOWN", "hipErrorUnknown"),
)

#: nvrtcResult: (code, NVRTC name, hiprtcResult name). hiprtc copied 0..11 from nvrtc.
NVRTC_RESULTS = (
    (0, "NVRTC_SUCCESS", "HIPRTC_SUCCESS"),
    (1, "NVRTC_ERROR_OUT_OF_MEMORY", "HIPRTC_ERROR_OUT_OF_MEMORY"),
    (2, "NVRTC_ERROR_PROGRAM_CREATION_FAILURE", "HIPRTC_ERROR_PROGRAM_CREATION_FAILURE"),
    (3, "NVRTC_ERROR_INVALID_INPUT", "HIPRTC_ERROR_INVALID_INPUT"),
    (4, "NVRTC_ERROR_INVALID_PROGRAM", "HIPRTC_ERROR_INVALID_PROGRAM"),
    (5, "NVRTC_ERROR_INVALID_OPTION", "HIPRTC_ERROR_INVALID_OPTION"),
    (6, "NVRTC_ERROR_COMPILATION", "HIPRTC_ERROR_COMPILATION"),
    (7, "NVRTC_ERROR_BUILTIN_OPERATION_FAILURE", "HIPRTC_ERROR_BUILTIN_OPERATION_FAILURE"),
    (
        8,
        "NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION",
        "HIPRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION",
    ),
    (
        9,
        "NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION",
        "HIPRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION",
    ),
    (10, "NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID", "HIPRTC_ERROR_NAME_EXPRESSION_NOT_VALID"),
    (11, "NVRTC_ERROR_INTERNAL_ERROR", "HIPRTC_ERROR_INTERNAL_ERROR"),
    (12, "NVRTC_ERROR_TIME_FILE_WRITE_FAILED", "HIPRTC_ERROR_INTERNAL_ERROR"),
    (13, "NVRTC_ERROR_NO_PCH_CREATE_ATTEMPTED", "HIPRTC_ERROR_INTERNAL_ERROR"),
    (14, "NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED", "HIPRTC_ERROR_OUT_OF_MEMORY"),
    (15, "NVRTC_ERROR_PCH_CREATE", "HIPRTC_ERROR_INTERNAL_ERROR"),
    (16, "NVRTC_ERROR_CANCELLED", "HIPRTC_ERROR_COMPILATION"),
    (17, "NVRTC_ERROR_TIME_TRACE_FILE_WRITE_FAILED", "HIPRTC_ERROR_INTERNAL_ERROR"),
    (18, "NVRTC_ERROR_BUSY", "HIPRTC_ERROR_INTERNAL_ERROR"),
)

#: cublasStatus_t: (code, cuBLAS name, hipblasStatus_t name). cuBLAS numbers sparsely.
CUBLAS_STATUSES = (
    (0, "CUBLAS_STATUS_SUCCESS", "HIPBLAS_STATUS_SUCCESS"),
    (1, "CUBLAS_STATUS_NOT_INITIALIZED", "HIPBLAS_STATUS_NOT_INITIALIZED"),
    (3, "CUBLAS_STATUS_ALLOC_FAILED", "HIPBLAS_STATUS_ALLOC_FAILED"),
    (7, "CUBLAS_STATUS_INVALID_VALUE", "HIPBLAS_STATUS_INVALID_VALUE"),
    (8, "CUBLAS_STATUS_ARCH_MISMATCH", "HIPBLAS_STATUS_ARCH_MISMATCH"),
    (11, "CUBLAS_STATUS_MAPPING_ERROR", "HIPBLAS_STATUS_MAPPING_ERROR"),
    (13, "CUBLAS_STATUS_EXECUTION_FAILED", "HIPBLAS_STATUS_EXECUTION_FAILED"),
    (14, "CUBLAS_STATUS_INTERNAL_ERROR", "HIPBLAS_STATUS_INTERNAL_ERROR"),
    (15, "CUBLAS_STATUS_NOT_SUPPORTED", "HIPBLAS_STATUS_NOT_SUPPORTED"),
    (16, "CUBLAS_STATUS_LICENSE_ERROR", "HIPBLAS_STATUS_UNKNOWN"),
)

HIP_UNKNOWN = constants.ERROR_CODES["hipErrorUnknown"]
HIPRTC_UNKNOWN = constants.HIPRTC_RESULTS["HIPRTC_ERROR_INTERNAL_ERROR"]
HIPBLAS_UNKNOWN = constants.HIPBLAS_STATUSES["HIPBLAS_STATUS_UNKNOWN"]


def _resolve(rows: Iterable[tuple[int, str, str]], names: Mapping[str, int]) -> dict[int, int]:
    return {code: names[target] for code, _, target in rows}


#: CUDA code -> HIP code, ready for the wrappers (`.get(status, HIP_UNKNOWN)`).
CUDART_TO_HIP = MappingProxyType(_resolve(CUDART_ERRORS, constants.ERROR_CODES))
CURESULT_TO_HIP = MappingProxyType(_resolve(CURESULT_ERRORS, constants.ERROR_CODES))
NVRTC_TO_HIPRTC = MappingProxyType(_resolve(NVRTC_RESULTS, constants.HIPRTC_RESULTS))
CUBLAS_TO_HIPBLAS = MappingProxyType(_resolve(CUBLAS_STATUSES, constants.HIPBLAS_STATUSES))


def _same_meaning(cuda_code: int, cuda_name: str, hip_code: int, hip_name: str) -> bool:
    """Same number (HIP copied CUDA's), or the same name after the prefix (911, 912)."""
    return cuda_code == hip_code or cuda_name[len("cudaError") :] == hip_name[len("hipError") :]


#: HIP code -> the cudaError_t of the same meaning, for hipGetErrorString (CUDA's description
#: of it). HIP codes with no such twin are described by their HIP name.
HIP_TO_CUDART = MappingProxyType(
    {
        constants.ERROR_CODES[hip]: cuda
        for cuda, name, hip in CUDART_ERRORS
        if _same_meaning(cuda, name, constants.ERROR_CODES[hip], hip)
    }
)
#: hiprtcResult -> nvrtcResult of the same meaning, for hiprtcGetErrorString.
HIPRTC_TO_NVRTC = MappingProxyType(
    {hip: nvrtc for nvrtc, hip in NVRTC_TO_HIPRTC.items() if hip == nvrtc}
)
