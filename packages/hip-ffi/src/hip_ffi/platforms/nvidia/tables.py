"""HIP values and their CUDA counterparts, as data: device attributes, device-properties fields,
hipBLAS enums, flags and hiprtc options. Error codes live in `error_codes`.

Numbers on the CUDA side are from the CUDA 13 headers (cudaDeviceAttr in driver_types.h,
cublasOperation_t / cublasComputeType_t / cublasGemmAlgo_t in cublas_api.h); the HIP side is
named through `hip_ffi.constants`.
"""

from __future__ import annotations

from types import MappingProxyType

from hip_ffi import constants
from hip_ffi.rtc import DEPRECATED_SPELLINGS

# ---- hipDeviceAttribute_t -------------------------------------------------------------------

#: hipDeviceAttribute_t name -> cudaDeviceAttr that answers the same question.
ATTRIBUTE_TO_CUDA = MappingProxyType(
    {
        "EccEnabled": 32,
        "AccessPolicyMaxWindowSize": 109,
        "AsyncEngineCount": 40,
        "CanMapHostMemory": 19,
        "CanUseHostPointerForRegisteredMem": 91,
        "ClockRate": 13,  # kHz
        "ComputeMode": 20,
        "ComputePreemptionSupported": 90,
        "ConcurrentKernels": 31,
        "ConcurrentManagedAccess": 89,
        "CooperativeLaunch": 95,
        "DeviceOverlap": 15,  # cudaDevAttrGpuOverlap
        "DirectManagedMemAccessFromHost": 101,
        "GlobalL1CacheSupported": 79,
        "HostNativeAtomicSupported": 86,
        "Integrated": 18,
        "IsMultiGpuBoard": 84,
        "KernelExecTimeout": 17,
        "L2CacheSize": 38,  # bytes
        "LocalL1CacheSupported": 80,
        "ComputeCapabilityMajor": 75,
        "ManagedMemory": 83,
        "MaxBlocksPerMultiProcessor": 106,
        "MaxBlockDimX": 2,
        "MaxBlockDimY": 3,
        "MaxBlockDimZ": 4,
        "MaxGridDimX": 5,
        "MaxGridDimY": 6,
        "MaxGridDimZ": 7,
        "MaxSurface1D": 55,
        "MaxSurfaceCubemap": 66,
        "MaxTexture1DWidth": 21,
        "MaxTexture1DLinear": 69,
        "MaxTexture1DMipmap": 77,
        "MaxTexture2DWidth": 22,
        "MaxTexture2DHeight": 23,
        "MaxTexture3DWidth": 24,
        "MaxTexture3DHeight": 25,
        "MaxTexture3DDepth": 26,
        "MaxTextureCubemap": 52,
        "MaxThreadsPerBlock": 1,
        "MaxThreadsPerMultiProcessor": 39,
        "MaxPitch": 11,  # bytes
        "MemoryBusWidth": 37,  # bits
        "MemoryClockRate": 36,  # kHz
        "ComputeCapabilityMinor": 76,
        "MultiGpuBoardGroupID": 85,
        "MultiprocessorCount": 16,
        "PageableMemoryAccess": 88,
        "PageableMemoryAccessUsesHostPageTables": 100,
        "PciBusId": 33,
        "PciDeviceId": 34,
        "PciDomainID": 50,
        "PciDomainId": 50,  # ROCm 7's spelling of the same attribute
        "PersistingL2CacheMaxSize": 108,
        "MaxRegistersPerBlock": 12,
        "MaxRegistersPerMultiprocessor": 82,
        "ReservedSharedMemPerBlock": 111,
        "MaxSharedMemoryPerBlock": 8,  # bytes, without opt-in
        "SharedMemPerBlockOptin": 97,
        "SharedMemPerMultiprocessor": 81,
        "SingleToDoublePrecisionPerfRatio": 87,
        "StreamPrioritiesSupported": 78,
        "SurfaceAlignment": 30,
        "TccDriver": 35,
        "TextureAlignment": 14,
        "TexturePitchAlignment": 51,
        "TotalConstantMemory": 9,
        "UnifiedAddressing": 41,
        "WarpSize": 10,
        "MemoryPoolsSupported": 115,
        "HostRegisterSupported": 99,
        "MemoryPoolSupportedHandleTypes": 119,
        "HostNumaId": 134,  # CUDA >= 12.4
        # AMD-specific attributes whose question CUDA answers under another name:
        "ClockInstructionRate": 13,  # the SM clock is the instruction clock
        "MaxSharedMemoryPerMultiprocessor": 81,
        "PhysicalMultiProcessorCount": 16,
    }
)

#: hipDeviceAttribute_t name -> CUdevice_attribute for questions only the driver API answers
#: (cuDeviceGetAttribute; the ordinal is the CUdevice, as cuDeviceGet returns it).
ATTRIBUTE_TO_DRIVER = MappingProxyType(
    {
        "VirtualMemoryManagementSupported": 102,
    }
)

#: Attributes with the same answer on every device CUDA >= 12 supports.
ATTRIBUTE_CONSTANTS = MappingProxyType(
    {
        "CooperativeMultiDeviceLaunch": 0,  # removed in CUDA 13, deprecated since 11.3
        "CooperativeMultiDeviceUnmatchedFunc": 0,  # CUDA never launches unmatched kernels
        "CooperativeMultiDeviceUnmatchedGridDim": 0,
        "CooperativeMultiDeviceUnmatchedBlockDim": 0,
        "CooperativeMultiDeviceUnmatchedSharedMem": 0,
        "ImageSupport": 1,  # every CUDA GPU has texture units
        "LuidDeviceNodeMask": 0,  # Windows only; CUDA reports 0 elsewhere
        "MaxAvailableVgprsPerThread": 255,  # registers a thread may use on every sm_50+
    }
)

#: Attributes computed from other queries (see device.py).
ATTRIBUTE_COMPUTED = (
    "TotalGlobalMem",  # bytes from cuDeviceTotalMem, clamped to INT_MAX as ROCm does
    "PciChipId",  # the PCI device id: the high half of cudaDevAttrGpuPciDeviceId (139)
)

_SEVERAL_VALUES = "several values: read it from hipGetDeviceProperties"
_AMD_ONLY = "an AMD hardware property with no NVIDIA counterpart"
#: No single-int CUDA answer: hipDeviceGetAttribute returns hipErrorInvalidValue (as ROCm does
#: for the multi-valued ones).
ATTRIBUTE_UNSUPPORTED = MappingProxyType(
    {
        "Luid": "8 bytes, Windows only",
        "MaxThreadsDim": _SEVERAL_VALUES,
        "MaxSurface1DLayered": _SEVERAL_VALUES,
        "MaxSurface2D": _SEVERAL_VALUES,
        "MaxSurface2DLayered": _SEVERAL_VALUES,
        "MaxSurface3D": _SEVERAL_VALUES,
        "MaxSurfaceCubemapLayered": _SEVERAL_VALUES,
        "MaxTexture1DLayered": _SEVERAL_VALUES,
        "MaxTexture2DGather": _SEVERAL_VALUES,
        "MaxTexture2DLayered": _SEVERAL_VALUES,
        "MaxTexture2DLinear": _SEVERAL_VALUES,
        "MaxTexture2DMipmap": _SEVERAL_VALUES,
        "MaxTexture3DAlt": _SEVERAL_VALUES,
        "MaxTextureCubemapLayered": _SEVERAL_VALUES,
        "HdpMemFlushCntl": _AMD_ONLY,
        "HdpRegFlushCntl": _AMD_ONLY,
        "IsLargeBar": _AMD_ONLY,
        "AsicRevision": _AMD_ONLY,
        "CanUseStreamWaitValue": "hip_ffi binds no stream wait-value call",
        "FineGrainSupport": _AMD_ONLY,
        "WallClockRate": _AMD_ONLY,
        "NumberOfXccs": _AMD_ONLY,
    }
)

# ---- hipDeviceProp_t --------------------------------------------------------------------------

#: Field of hipDeviceProp_tR0000 / R0600 -> the cudaDeviceAttr (or one per array element) that
#: fills it. Fields absent from the struct in use are skipped; fields of neither list (luid,
#: reserved, the AMD-only ones) stay zero. name, uuid, totalGlobalMem, gcnArchName, gcnArch and
#: arch are filled in code (device.py).
PROPERTY_ATTRIBUTES: MappingProxyType[str, int | tuple[int, ...]] = MappingProxyType(
    {
        "sharedMemPerBlock": 8,
        "regsPerBlock": 12,
        "warpSize": 10,
        "memPitch": 11,
        "maxThreadsPerBlock": 1,
        "maxThreadsDim": (2, 3, 4),
        "maxGridSize": (5, 6, 7),
        "clockRate": 13,
        "totalConstMem": 9,
        "major": 75,
        "minor": 76,
        "textureAlignment": 14,
        "texturePitchAlignment": 51,
        "deviceOverlap": 15,
        "multiProcessorCount": 16,
        "kernelExecTimeoutEnabled": 17,
        "integrated": 18,
        "canMapHostMemory": 19,
        "computeMode": 20,
        "maxTexture1D": 21,
        "maxTexture1DMipmap": 77,
        "maxTexture1DLinear": 69,
        "maxTexture2D": (22, 23),
        "maxTexture2DMipmap": (73, 74),
        "maxTexture2DLinear": (70, 71, 72),
        "maxTexture2DGather": (45, 46),
        "maxTexture3D": (24, 25, 26),
        "maxTexture3DAlt": (47, 48, 49),
        "maxTextureCubemap": 52,
        "maxTexture1DLayered": (42, 43),
        "maxTexture2DLayered": (27, 28, 29),
        "maxTextureCubemapLayered": (53, 54),
        "maxSurface1D": 55,
        "maxSurface2D": (56, 57),
        "maxSurface3D": (58, 59, 60),
        "maxSurface1DLayered": (61, 62),
        "maxSurface2DLayered": (63, 64, 65),
        "maxSurfaceCubemap": 66,
        "maxSurfaceCubemapLayered": (67, 68),
        "surfaceAlignment": 30,
        "concurrentKernels": 31,
        "ECCEnabled": 32,
        "pciBusID": 33,
        "pciDeviceID": 34,
        "pciDomainID": 50,
        "tccDriver": 35,
        "asyncEngineCount": 40,
        "unifiedAddressing": 41,
        "memoryClockRate": 36,
        "memoryBusWidth": 37,
        "l2CacheSize": 38,
        "persistingL2CacheMaxSize": 108,
        "maxThreadsPerMultiProcessor": 39,
        "streamPrioritiesSupported": 78,
        "globalL1CacheSupported": 79,
        "localL1CacheSupported": 80,
        "sharedMemPerMultiprocessor": 81,
        "regsPerMultiprocessor": 82,
        "managedMemory": 83,
        "isMultiGpuBoard": 84,
        "multiGpuBoardGroupID": 85,
        "hostNativeAtomicSupported": 86,
        "singleToDoublePrecisionPerfRatio": 87,
        "pageableMemoryAccess": 88,
        "concurrentManagedAccess": 89,
        "computePreemptionSupported": 90,
        "canUseHostPointerForRegisteredMem": 91,
        "cooperativeLaunch": 95,
        "sharedMemPerBlockOptin": 97,
        "hostRegisterSupported": 99,
        "pageableMemoryAccessUsesHostPageTables": 100,
        "directManagedMemAccessFromHost": 101,
        "maxBlocksPerMultiProcessor": 106,
        "accessPolicyMaxWindowSize": 109,
        "reservedSharedMemPerBlock": 111,
        "sparseHipArraySupported": 112,
        "hostRegisterReadOnlySupported": 113,
        "timelineSemaphoreInteropSupported": 114,
        "memoryPoolsSupported": 115,
        "gpuDirectRDMASupported": 116,
        "gpuDirectRDMAFlushWritesOptions": 117,
        "gpuDirectRDMAWritesOrdering": 118,
        "memoryPoolSupportedHandleTypes": 119,
        "clusterLaunch": 120,
        "deferredMappingHipArraySupported": 121,
        "ipcEventSupported": 125,
        "maxSharedMemoryPerMultiProcessor": 81,  # HIP-only field
        "clockInstructionRate": 13,  # HIP-only field, kHz
    }
)

# ---- hipBLAS -> cuBLAS ----------------------------------------------------------------------

#: hipblasOperation_t -> cublasOperation_t.
BLAS_OPERATION = MappingProxyType(
    {constants.HIPBLAS_OP_N: 0, constants.HIPBLAS_OP_T: 1, constants.HIPBLAS_OP_C: 2}
)
#: hipblasComputeType_t (hipBLAS >= 2.0, hipblas-common.h) -> cublasComputeType_t.
BLAS_COMPUTE_TYPE = MappingProxyType(
    {
        0: 64,  # HIPBLAS_COMPUTE_16F -> CUBLAS_COMPUTE_16F
        1: 65,  # 16F_PEDANTIC
        constants.HIPBLAS_COMPUTE_32F: 68,  # 2 -> CUBLAS_COMPUTE_32F
        3: 69,  # 32F_PEDANTIC
        4: 74,  # 32F_FAST_16F
        5: 75,  # 32F_FAST_16BF
        constants.HIPBLAS_COMPUTE_32F_FAST_TF32: 77,  # 6 -> CUBLAS_COMPUTE_32F_FAST_TF32
        7: 70,  # 64F
        8: 71,  # 64F_PEDANTIC
        9: 72,  # 32I
        10: 73,  # 32I_PEDANTIC
    }
)
#: hipblasGemmAlgo_t -> cublasGemmAlgo_t. hipBLAS's header numbers HIPBLAS_GEMM_DEFAULT 160;
#: hip_ffi.constants has 100. Both mean the default algorithm (CUBLAS_GEMM_DEFAULT = -1).
BLAS_GEMM_ALGO = MappingProxyType({constants.HIPBLAS_GEMM_DEFAULT: -1, 160: -1})
# hipDataType needs no table: its values are cudaDataType's (HIP_R_32F = CUDA_R_32F = 0, ...).

# ---- flags ------------------------------------------------------------------------------------

#: hipHostMalloc bits that only steer AMD memory coherence (Uncached, NumaUser, Coherent,
#: NonCoherent); cudaHostAlloc rejects unknown bits, so they are dropped. The others (Portable,
#: Mapped, WriteCombined) have cudaHostAlloc's values.
HOST_MALLOC_AMD_ONLY = 0x10000000 | 0x20000000 | 0x40000000 | 0x80000000
#: hipEventCreateWithFlags bits that only steer AMD cache release (DisableSystemFence,
#: ReleaseToDevice, ReleaseToSystem); the others have cudaEventCreateWithFlags's values.
EVENT_AMD_ONLY = 0x20000000 | 0x40000000 | 0x80000000

# ---- kernel launch ----------------------------------------------------------------------------

#: Keys of the `extra` launch array: HIP value -> CUDA value. Only the terminator differs.
LAUNCH_PARAM = MappingProxyType(
    {
        constants.LAUNCH_PARAM_BUFFER_POINTER: 0x01,
        constants.LAUNCH_PARAM_BUFFER_SIZE: 0x02,
        constants.LAUNCH_PARAM_END: 0x00,
    }
)

# ---- hiprtc -> nvrtc ----------------------------------------------------------------------------

#: Option prefixes rewritten for nvrtc. By the surface's convention callers name the target as
#: gcnArchName reports it (`--offload-arch=sm_90`); nvrtc spells that `-arch=sm_90`.
RTC_OPTION_PREFIXES = (("--offload-arch=", "-arch="),)
#: Whole options rewritten for nvrtc; None drops the option. nvrtc optimizes fully by default
#: and has no -O levels; the -m options steer AMD code generation only.
RTC_OPTIONS: MappingProxyType[str, str | None] = MappingProxyType(
    {
        "-ffast-math": "--use_fast_math",
        "-fgpu-rdc": "-rdc=true",
        "-O1": None,
        "-O2": None,
        "-O3": None,
        "-mcumode": None,
        "-mno-cumode": None,
        "-mwavefrontsize64": None,
        "-mno-wavefrontsize64": None,
    }
)
#: Option prefixes by which nvrtc names a target; when none is given, hip_ffi adds the current
#: device's (as hiprtc does), so the result is a CUBIN rather than PTX for an old default.
RTC_ARCH_PREFIXES = ("-arch", "--gpu-architecture", "--offload-arch")
#: Headers nvrtc lacks but HIP sources include; a caller's header of the same name wins. The
#: 16-bit float ones forward to CUDA's (found through the toolkit's include folder, which hip_ffi
#: passes to nvrtc), whose type and function names HIP copied, bf16's type name aside.
#: The stand-in every compile pre-includes, as hiprtc pre-includes its runtime header.
PRE_INCLUDE = "hip/hip_runtime.h"
_WARP_MACROS = ("__shfl", "__shfl_up", "__shfl_down", "__shfl_xor", "__any", "__all", "__ballot")
#: CUDA's cooperative groups, with the stand-in's warp macros set aside while it is read (its
#: libcu++ declares a function `__any`).
COOPERATIVE_GROUPS = (
    "#pragma once\n"
    + "".join(f'#pragma push_macro("{m}")\n#undef {m}\n' for m in _WARP_MACROS)
    + "#include <cooperative_groups.h>\n"
    + "".join(f'#pragma pop_macro("{m}")\n' for m in _WARP_MACROS)
)
RTC_HEADERS = MappingProxyType(
    {
        "hip/hip_runtime.h": (
            "#pragma once\n"
            "/* hip_ffi, nvidia platform: CUDA's device built-ins already carry HIP's names\n"
            "   (threadIdx, __syncthreads, atomicAdd, __shfl_xor_sync ...). */\n"
            "#ifndef __HIP_PLATFORM_NVIDIA__\n"
            "#define __HIP_PLATFORM_NVIDIA__ 1\n"
            "#endif\n"
            "/* HIP's shuffles and votes act on the whole warp, as CUDA's *_sync ones do with a\n"
            "   full mask (HIP-on-NVIDIA maps them the same way). */\n"
            "#define __shfl(...) __shfl_sync(0xffffffffu, __VA_ARGS__)\n"
            "#define __shfl_up(...) __shfl_up_sync(0xffffffffu, __VA_ARGS__)\n"
            "#define __shfl_down(...) __shfl_down_sync(0xffffffffu, __VA_ARGS__)\n"
            "#define __shfl_xor(...) __shfl_xor_sync(0xffffffffu, __VA_ARGS__)\n"
            "#define __any(p) __any_sync(0xffffffffu, (p))\n"
            "#define __all(p) __all_sync(0xffffffffu, (p))\n"
            "#define __ballot(p) __ballot_sync(0xffffffffu, (p))\n"
            "/* The integer typedefs hiprtc's pre-included header declares (nvrtc has no\n"
            "   <cstdint>); 64-bit ones are long long, as libcu++ (which cooperative_groups.h\n"
            "   includes) declares them. */\n"
            "typedef signed char int8_t; typedef short int16_t; typedef int int32_t;\n"
            "typedef long long int64_t; typedef unsigned char uint8_t;\n"
            "typedef unsigned short uint16_t; typedef unsigned int uint32_t;\n"
            "typedef unsigned long long uint64_t; typedef long long intptr_t;\n"
            "typedef unsigned long long uintptr_t;\n"
            "typedef unsigned int uint; typedef unsigned short ushort;\n"
            "typedef unsigned char uchar; typedef unsigned long ulong;\n" + DEPRECATED_SPELLINGS
        ),
        "hip/hip_fp16.h": "#pragma once\n#include <cuda_fp16.h>\n",
        "hip/hip_cooperative_groups.h": COOPERATIVE_GROUPS,
        "hip/hip_bf16.h": (
            "#pragma once\n"
            "#include <cuda_bf16.h>\n"
            "typedef __nv_bfloat16 __hip_bfloat16;\n"
            "typedef __nv_bfloat162 __hip_bfloat162;\n"
        ),
    }
)
