"""HIP enumeration values, as data: the numbering every hip_ffi function takes and returns.

These are HIP's own values (hip_runtime_api.h, hiprtc.h, hipblas.h), in the numbering of the
newest HIP where a value was renumbered (hipMemoryType, hipBLAS data types). Platforms whose
native values differ (ROCm 5.x for those two, CUDA for nearly everything) translate in
hip_ffi; code above hip_ffi only ever sees these numbers.
"""

from __future__ import annotations

from types import MappingProxyType

#: hipError_t, name -> value, as of ROCm 7 (5.2 lacks only 911 and 912). Several names share a
#: value (hipErrorOutOfMemory and its older alias hipErrorMemoryAllocation); ERROR_NAMES keeps
#: the first, canonical one.
_ERROR_CODES = {
    "hipSuccess": 0,
    "hipErrorInvalidValue": 1,
    "hipErrorOutOfMemory": 2,
    "hipErrorMemoryAllocation": 2,
    "hipErrorNotInitialized": 3,
    "hipErrorInitializationError": 3,
    "hipErrorDeinitialized": 4,
    "hipErrorProfilerDisabled": 5,
    "hipErrorProfilerNotInitialized": 6,
    "hipErrorProfilerAlreadyStarted": 7,
    "hipErrorProfilerAlreadyStopped": 8,
    "hipErrorInvalidConfiguration": 9,
    "hipErrorInvalidPitchValue": 12,
    "hipErrorInvalidSymbol": 13,
    "hipErrorInvalidDevicePointer": 17,
    "hipErrorInvalidMemcpyDirection": 21,
    "hipErrorInsufficientDriver": 35,
    "hipErrorMissingConfiguration": 52,
    "hipErrorPriorLaunchFailure": 53,
    "hipErrorInvalidDeviceFunction": 98,
    "hipErrorNoDevice": 100,
    "hipErrorInvalidDevice": 101,
    "hipErrorInvalidImage": 200,
    "hipErrorInvalidContext": 201,
    "hipErrorContextAlreadyCurrent": 202,
    "hipErrorMapFailed": 205,
    "hipErrorMapBufferObjectFailed": 205,
    "hipErrorUnmapFailed": 206,
    "hipErrorArrayIsMapped": 207,
    "hipErrorAlreadyMapped": 208,
    "hipErrorNoBinaryForGpu": 209,
    "hipErrorAlreadyAcquired": 210,
    "hipErrorNotMapped": 211,
    "hipErrorNotMappedAsArray": 212,
    "hipErrorNotMappedAsPointer": 213,
    "hipErrorECCNotCorrectable": 214,
    "hipErrorUnsupportedLimit": 215,
    "hipErrorContextAlreadyInUse": 216,
    "hipErrorPeerAccessUnsupported": 217,
    "hipErrorInvalidKernelFile": 218,
    "hipErrorInvalidGraphicsContext": 219,
    "hipErrorInvalidSource": 300,
    "hipErrorFileNotFound": 301,
    "hipErrorSharedObjectSymbolNotFound": 302,
    "hipErrorSharedObjectInitFailed": 303,
    "hipErrorOperatingSystem": 304,
    "hipErrorInvalidHandle": 400,
    "hipErrorInvalidResourceHandle": 400,
    "hipErrorIllegalState": 401,
    "hipErrorNotFound": 500,
    "hipErrorNotReady": 600,
    "hipErrorIllegalAddress": 700,
    "hipErrorLaunchOutOfResources": 701,
    "hipErrorLaunchTimeOut": 702,
    "hipErrorPeerAccessAlreadyEnabled": 704,
    "hipErrorPeerAccessNotEnabled": 705,
    "hipErrorSetOnActiveProcess": 708,
    "hipErrorContextIsDestroyed": 709,
    "hipErrorAssert": 710,
    "hipErrorHostMemoryAlreadyRegistered": 712,
    "hipErrorHostMemoryNotRegistered": 713,
    "hipErrorLaunchFailure": 719,
    "hipErrorCooperativeLaunchTooLarge": 720,
    "hipErrorNotSupported": 801,
    "hipErrorStreamCaptureUnsupported": 900,
    "hipErrorStreamCaptureInvalidated": 901,
    "hipErrorStreamCaptureMerge": 902,
    "hipErrorStreamCaptureUnmatched": 903,
    "hipErrorStreamCaptureUnjoined": 904,
    "hipErrorStreamCaptureIsolation": 905,
    "hipErrorStreamCaptureImplicit": 906,
    "hipErrorCapturedEvent": 907,
    "hipErrorStreamCaptureWrongThread": 908,
    "hipErrorGraphExecUpdateFailure": 910,
    "hipErrorInvalidChannelDescriptor": 911,
    "hipErrorInvalidTexture": 912,
    "hipErrorUnknown": 999,
    "hipErrorRuntimeMemory": 1052,
    "hipErrorRuntimeOther": 1053,
    "hipErrorTbd": 1054,
}
_DEVICE_ATTRIBUTES = {
    "EccEnabled": 0,
    "AccessPolicyMaxWindowSize": 1,
    "AsyncEngineCount": 2,
    "CanMapHostMemory": 3,
    "CanUseHostPointerForRegisteredMem": 4,
    "ClockRate": 5,
    "ComputeMode": 6,
    "ComputePreemptionSupported": 7,
    "ConcurrentKernels": 8,
    "ConcurrentManagedAccess": 9,
    "CooperativeLaunch": 10,
    "CooperativeMultiDeviceLaunch": 11,
    "DeviceOverlap": 12,
    "DirectManagedMemAccessFromHost": 13,
    "GlobalL1CacheSupported": 14,
    "HostNativeAtomicSupported": 15,
    "Integrated": 16,
    "IsMultiGpuBoard": 17,
    "KernelExecTimeout": 18,
    "L2CacheSize": 19,
    "LocalL1CacheSupported": 20,
    "Luid": 21,
    "LuidDeviceNodeMask": 22,
    "ComputeCapabilityMajor": 23,
    "ManagedMemory": 24,
    "MaxBlocksPerMultiProcessor": 25,
    "MaxBlockDimX": 26,
    "MaxBlockDimY": 27,
    "MaxBlockDimZ": 28,
    "MaxGridDimX": 29,
    "MaxGridDimY": 30,
    "MaxGridDimZ": 31,
    "MaxSurface1D": 32,
    "MaxSurface1DLayered": 33,
    "MaxSurface2D": 34,
    "MaxSurface2DLayered": 35,
    "MaxSurface3D": 36,
    "MaxSurfaceCubemap": 37,
    "MaxSurfaceCubemapLayered": 38,
    "MaxTexture1DWidth": 39,
    "MaxTexture1DLayered": 40,
    "MaxTexture1DLinear": 41,
    "MaxTexture1DMipmap": 42,
    "MaxTexture2DWidth": 43,
    "MaxTexture2DHeight": 44,
    "MaxTexture2DGather": 45,
    "MaxTexture2DLayered": 46,
    "MaxTexture2DLinear": 47,
    "MaxTexture2DMipmap": 48,
    "MaxTexture3DWidth": 49,
    "MaxTexture3DHeight": 50,
    "MaxTexture3DDepth": 51,
    "MaxTexture3DAlt": 52,
    "MaxTextureCubemap": 53,
    "MaxTextureCubemapLayered": 54,
    "MaxThreadsDim": 55,
    "MaxThreadsPerBlock": 56,
    "MaxThreadsPerMultiProcessor": 57,
    "MaxPitch": 58,
    "MemoryBusWidth": 59,
    "MemoryClockRate": 60,
    "ComputeCapabilityMinor": 61,
    "MultiGpuBoardGroupID": 62,
    "MultiprocessorCount": 63,
    "PageableMemoryAccess": 65,
    "PageableMemoryAccessUsesHostPageTables": 66,
    "PciBusId": 67,
    "PciDeviceId": 68,
    "PciDomainId": 69,
    "PciDomainID": 69,
    "PersistingL2CacheMaxSize": 70,
    "MaxRegistersPerBlock": 71,
    "MaxRegistersPerMultiprocessor": 72,
    "ReservedSharedMemPerBlock": 73,
    "MaxSharedMemoryPerBlock": 74,
    "SharedMemPerBlockOptin": 75,
    "SharedMemPerMultiprocessor": 76,
    "SingleToDoublePrecisionPerfRatio": 77,
    "StreamPrioritiesSupported": 78,
    "SurfaceAlignment": 79,
    "TccDriver": 80,
    "TextureAlignment": 81,
    "TexturePitchAlignment": 82,
    "TotalConstantMemory": 83,
    "TotalGlobalMem": 84,
    "UnifiedAddressing": 85,
    "WarpSize": 87,
    "MemoryPoolsSupported": 88,
    "VirtualMemoryManagementSupported": 89,
    "HostRegisterSupported": 90,
    "MemoryPoolSupportedHandleTypes": 91,
    "HostNumaId": 92,
    "ClockInstructionRate": 10000,
    "MaxSharedMemoryPerMultiprocessor": 10002,
    "HdpMemFlushCntl": 10005,
    "HdpRegFlushCntl": 10006,
    "CooperativeMultiDeviceUnmatchedFunc": 10007,
    "CooperativeMultiDeviceUnmatchedGridDim": 10008,
    "CooperativeMultiDeviceUnmatchedBlockDim": 10009,
    "CooperativeMultiDeviceUnmatchedSharedMem": 10010,
    "IsLargeBar": 10011,
    "AsicRevision": 10012,
    "CanUseStreamWaitValue": 10013,
    "ImageSupport": 10014,
    "PhysicalMultiProcessorCount": 10015,
    "FineGrainSupport": 10016,
    "WallClockRate": 10017,
    "NumberOfXccs": 10018,
    "MaxAvailableVgprsPerThread": 10019,
    "PciChipId": 10020,
}
ERROR_CODES = MappingProxyType(_ERROR_CODES)
ERROR_NAMES: MappingProxyType[int, str] = MappingProxyType(
    {code: name for name, code in reversed(_ERROR_CODES.items())}
)
#: hipDeviceAttribute_t without its prefix ("WarpSize" -> 87), as of ROCm 7. The CUDA-compatible
#: block is 0..9999, the AMD-specific one from 10000. The numbering is the same in ROCm 5.2, 6.x
#: and 7.x; 6.0 retired Name (64), Uuid (86), Arch, GcnArch and GcnArchName (10001, 10003,
#: 10004) — read those from the device properties — and later releases added values
#: (89-92, 10017-10020) that older runtimes answer with hipErrorInvalidValue.
DEVICE_ATTRIBUTES = MappingProxyType(_DEVICE_ATTRIBUTES)

#: hipMemcpyKind
MEMCPY_HOST_TO_HOST = 0
MEMCPY_HOST_TO_DEVICE = 1
MEMCPY_DEVICE_TO_HOST = 2
MEMCPY_DEVICE_TO_DEVICE = 3
MEMCPY_DEFAULT = 4  # direction inferred from the pointers (unified addressing)

#: hipStreamCreateWithFlags flags
STREAM_DEFAULT = 0
STREAM_NON_BLOCKING = 1  # does not synchronize with the null stream

#: hipEventCreateWithFlags flags
EVENT_DEFAULT = 0
EVENT_BLOCKING_SYNC = 1
EVENT_DISABLE_TIMING = 2
EVENT_INTERPROCESS = 4

#: hipHostMalloc flags
HOST_MALLOC_DEFAULT = 0
HOST_MALLOC_PORTABLE = 1
HOST_MALLOC_MAPPED = 2
HOST_MALLOC_WRITE_COMBINED = 4

#: hipHostRegister flags
HOST_REGISTER_DEFAULT = 0
HOST_REGISTER_PORTABLE = 1
HOST_REGISTER_MAPPED = 2

#: hipFunction_attribute (same numbering as CUDA's CUfunction_attribute)
FUNC_ATTRIBUTES = MappingProxyType(
    {
        "MAX_THREADS_PER_BLOCK": 0,
        "SHARED_SIZE_BYTES": 1,
        "CONST_SIZE_BYTES": 2,
        "LOCAL_SIZE_BYTES": 3,
        "NUM_REGS": 4,
        "PTX_VERSION": 5,
        "BINARY_VERSION": 6,
        "CACHE_MODE_CA": 7,
        "MAX_DYNAMIC_SHARED_SIZE_BYTES": 8,
        "PREFERRED_SHARED_MEMORY_CARVEOUT": 9,
    }
)

#: hipStreamCaptureMode and hipStreamCaptureStatus
CAPTURE_MODE_GLOBAL = 0
CAPTURE_MODE_THREAD_LOCAL = 1
CAPTURE_MODE_RELAXED = 2
CAPTURE_STATUS_NONE = 0
CAPTURE_STATUS_ACTIVE = 1
CAPTURE_STATUS_INVALIDATED = 2

#: hipMemPoolAttr
MEM_POOL_ATTRIBUTES = MappingProxyType(
    {
        "ReuseFollowEventDependencies": 1,
        "ReuseAllowOpportunistic": 2,
        "ReuseAllowInternalDependencies": 3,
        "ReleaseThreshold": 4,  # uint64: bytes the pool keeps cached at a synchronize
        "ReservedMemCurrent": 5,
        "ReservedMemHigh": 6,
        "UsedMemCurrent": 7,
        "UsedMemHigh": 8,
    }
)
MEM_ALLOCATION_TYPE_PINNED = 1
MEM_HANDLE_TYPE_NONE = 0
MEM_LOCATION_TYPE_DEVICE = 1
#: hipMemAccessFlags (hipMemPoolSetAccess / hipMemPoolGetAccess; CUDA's cudaMemAccessFlags)
MEM_ACCESS_FLAGS = MappingProxyType({"ProtNone": 0, "ProtRead": 1, "ProtReadWrite": 3})

#: Interprocess handles: hipIpcMemHandle_t and hipIpcEventHandle_t are 64 opaque bytes on every
#: platform (HIP_IPC_HANDLE_SIZE, CUDA's CU_IPC_HANDLE_SIZE).
IPC_HANDLE_SIZE = 64
#: hipIpcOpenMemHandle flag: enable peer access when the handle is opened on another device.
IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1

#: hipMemoryType, ROCm >= 6.0 numbering (also CUDA's cudaMemoryType).
MEMORY_TYPES = MappingProxyType(
    {"Unregistered": 0, "Host": 1, "Device": 2, "Managed": 3, "Array": 10, "Unified": 11}
)
#: ROCm 5.x numbered hipMemoryType differently; its values mapped to the names above.
MEMORY_TYPES_ROCM5 = MappingProxyType(
    {0: "Host", 1: "Device", 2: "Array", 3: "Unified", 4: "Managed"}
)

#: Launch attribute ids of hipDrvLaunchKernelEx's configuration. PROGRAMMATIC_STREAM_SERIALIZATION
#: is CUDA's (CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION): HIP (through 7.2) has no
#: such attribute, so only a device whose `DeviceProperties.early_start` is True is given it.
LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6

#: Values of the `extra` launch array (hipModuleLaunchKernel). CUDA's END is 0x00.
LAUNCH_PARAM_BUFFER_POINTER = 0x01
LAUNCH_PARAM_BUFFER_SIZE = 0x02
LAUNCH_PARAM_END = 0x03

#: hiprtcResult
HIPRTC_RESULTS = MappingProxyType(
    {
        "HIPRTC_SUCCESS": 0,
        "HIPRTC_ERROR_OUT_OF_MEMORY": 1,
        "HIPRTC_ERROR_PROGRAM_CREATION_FAILURE": 2,
        "HIPRTC_ERROR_INVALID_INPUT": 3,
        "HIPRTC_ERROR_INVALID_PROGRAM": 4,
        "HIPRTC_ERROR_INVALID_OPTION": 5,
        "HIPRTC_ERROR_COMPILATION": 6,
        "HIPRTC_ERROR_BUILTIN_OPERATION_FAILURE": 7,
        "HIPRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION": 8,
        "HIPRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION": 9,
        "HIPRTC_ERROR_NAME_EXPRESSION_NOT_VALID": 10,
        "HIPRTC_ERROR_INTERNAL_ERROR": 11,
        "HIPRTC_ERROR_LINKING": 100,
    }
)

#: hipblasStatus_t
HIPBLAS_STATUSES = MappingProxyType(
    {
        "HIPBLAS_STATUS_SUCCESS": 0,
        "HIPBLAS_STATUS_NOT_INITIALIZED": 1,
        "HIPBLAS_STATUS_ALLOC_FAILED": 2,
        "HIPBLAS_STATUS_INVALID_VALUE": 3,
        "HIPBLAS_STATUS_MAPPING_ERROR": 4,
        "HIPBLAS_STATUS_EXECUTION_FAILED": 5,
        "HIPBLAS_STATUS_INTERNAL_ERROR": 6,
        "HIPBLAS_STATUS_NOT_SUPPORTED": 7,
        "HIPBLAS_STATUS_ARCH_MISMATCH": 8,
        "HIPBLAS_STATUS_HANDLE_IS_NULLPTR": 9,
        "HIPBLAS_STATUS_INVALID_ENUM": 10,
        "HIPBLAS_STATUS_UNKNOWN": 11,
    }
)
#: hipblasOperation_t
HIPBLAS_OP_N = 111
HIPBLAS_OP_T = 112
HIPBLAS_OP_C = 113
#: hipDataType (hipBLAS >= 2.0 takes these for gemm-ex; they equal CUDA's cudaDataType)
HIP_R_32F = 0
HIP_R_64F = 1
HIP_R_16F = 2
HIP_R_16BF = 14
#: hipblasComputeType_t (hipBLAS >= 2.0)
HIPBLAS_COMPUTE_32F = 2
HIPBLAS_COMPUTE_32F_FAST_TF32 = 6
HIPBLAS_COMPUTE_64F = 7
#: hipblasGemmAlgo_t
HIPBLAS_GEMM_DEFAULT = 160
