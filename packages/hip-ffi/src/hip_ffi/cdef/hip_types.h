/* Types of the HIP runtime as the C ABI sees them (from hip_runtime_api.h, ROCm 5.2 - 7.x).
 *
 * Enumerations are declared as plain int: their *values* live in Python tables
 * (hip_ffi/constants.py), because some were renumbered between ROCm releases and the nvidia
 * platform translates them. A C enum is an int on every ABI we target.
 */

typedef int hipError_t;
typedef int hipDevice_t;
typedef int hipDeviceAttribute_t;
typedef int hipMemcpyKind;
typedef int hipFunction_attribute;
typedef int hipStreamCaptureMode;
typedef int hipStreamCaptureStatus;
typedef int hipMemPoolAttr;
typedef int hipMemAllocationType;
typedef int hipMemAllocationHandleType;
typedef int hipMemLocationType;
typedef int hipMemoryType;
typedef int hipMemAccessFlags;

typedef struct ihipCtx_t* hipCtx_t;
typedef struct ihipStream_t* hipStream_t;
typedef struct ihipEvent_t* hipEvent_t;
typedef struct ihipModule_t* hipModule_t;
typedef struct ihipModuleSymbol_t* hipFunction_t;
typedef struct ihipMemPoolHandle_t* hipMemPool_t;
typedef struct ihipGraph* hipGraph_t;
typedef struct hipGraphExec* hipGraphExec_t;
typedef struct hipGraphNode* hipGraphNode_t;
typedef void* hipDeviceptr_t;

typedef void (*hipHostFn_t)(void* userData);
typedef void (*hipStreamCallback_t)(hipStream_t stream, hipError_t status, void* userData);

typedef struct {
    unsigned hasGlobalInt32Atomics : 1;
    unsigned hasGlobalFloatAtomicExch : 1;
    unsigned hasSharedInt32Atomics : 1;
    unsigned hasSharedFloatAtomicExch : 1;
    unsigned hasFloatAtomicAdd : 1;
    unsigned hasGlobalInt64Atomics : 1;
    unsigned hasSharedInt64Atomics : 1;
    unsigned hasDoubles : 1;
    unsigned hasWarpVote : 1;
    unsigned hasWarpBallot : 1;
    unsigned hasWarpShuffle : 1;
    unsigned hasFunnelShift : 1;
    unsigned hasThreadFenceSystem : 1;
    unsigned hasSyncThreadsExt : 1;
    unsigned hasSurfaceFuncs : 1;
    unsigned has3dGrid : 1;
    unsigned hasDynamicParallelism : 1;
} hipDeviceArch_t;

typedef struct hipUUID_t {
    char bytes[16];
} hipUUID;

/* The device properties of ROCm 5.x: `hipGetDeviceProperties` there, and the layout that
 * ROCm >= 6 keeps under the name hipDeviceProp_tR0000. */
typedef struct hipDeviceProp_tR0000 {
    char name[256];
    size_t totalGlobalMem;
    size_t sharedMemPerBlock;
    int regsPerBlock;
    int warpSize;
    int maxThreadsPerBlock;
    int maxThreadsDim[3];
    int maxGridSize[3];
    int clockRate;
    int memoryClockRate;
    int memoryBusWidth;
    size_t totalConstMem;
    int major;
    int minor;
    int multiProcessorCount;
    int l2CacheSize;
    int maxThreadsPerMultiProcessor;
    int computeMode;
    int clockInstructionRate;
    hipDeviceArch_t arch;
    int concurrentKernels;
    int pciDomainID;
    int pciBusID;
    int pciDeviceID;
    size_t maxSharedMemoryPerMultiProcessor;
    int isMultiGpuBoard;
    int canMapHostMemory;
    int gcnArch;
    char gcnArchName[256];
    int integrated;
    int cooperativeLaunch;
    int cooperativeMultiDeviceLaunch;
    int maxTexture1DLinear;
    int maxTexture1D;
    int maxTexture2D[2];
    int maxTexture3D[3];
    unsigned int* hdpMemFlushCntl;
    unsigned int* hdpRegFlushCntl;
    size_t memPitch;
    size_t textureAlignment;
    size_t texturePitchAlignment;
    int kernelExecTimeoutEnabled;
    int ECCEnabled;
    int tccDriver;
    int cooperativeMultiDeviceUnmatchedFunc;
    int cooperativeMultiDeviceUnmatchedGridDim;
    int cooperativeMultiDeviceUnmatchedBlockDim;
    int cooperativeMultiDeviceUnmatchedSharedMem;
    int isLargeBar;
    int asicRevision;
    int managedMemory;
    int directManagedMemAccessFromHost;
    int concurrentManagedAccess;
    int pageableMemoryAccess;
    int pageableMemoryAccessUsesHostPageTables;
} hipDeviceProp_tR0000;

/* The device properties of ROCm >= 6.0 (hipGetDevicePropertiesR0600). */
typedef struct hipDeviceProp_tR0600 {
    char name[256];
    hipUUID uuid;
    char luid[8];
    unsigned int luidDeviceNodeMask;
    size_t totalGlobalMem;
    size_t sharedMemPerBlock;
    int regsPerBlock;
    int warpSize;
    size_t memPitch;
    int maxThreadsPerBlock;
    int maxThreadsDim[3];
    int maxGridSize[3];
    int clockRate;
    size_t totalConstMem;
    int major;
    int minor;
    size_t textureAlignment;
    size_t texturePitchAlignment;
    int deviceOverlap;
    int multiProcessorCount;
    int kernelExecTimeoutEnabled;
    int integrated;
    int canMapHostMemory;
    int computeMode;
    int maxTexture1D;
    int maxTexture1DMipmap;
    int maxTexture1DLinear;
    int maxTexture2D[2];
    int maxTexture2DMipmap[2];
    int maxTexture2DLinear[3];
    int maxTexture2DGather[2];
    int maxTexture3D[3];
    int maxTexture3DAlt[3];
    int maxTextureCubemap;
    int maxTexture1DLayered[2];
    int maxTexture2DLayered[3];
    int maxTextureCubemapLayered[2];
    int maxSurface1D;
    int maxSurface2D[2];
    int maxSurface3D[3];
    int maxSurface1DLayered[2];
    int maxSurface2DLayered[3];
    int maxSurfaceCubemap;
    int maxSurfaceCubemapLayered[2];
    size_t surfaceAlignment;
    int concurrentKernels;
    int ECCEnabled;
    int pciBusID;
    int pciDeviceID;
    int pciDomainID;
    int tccDriver;
    int asyncEngineCount;
    int unifiedAddressing;
    int memoryClockRate;
    int memoryBusWidth;
    int l2CacheSize;
    int persistingL2CacheMaxSize;
    int maxThreadsPerMultiProcessor;
    int streamPrioritiesSupported;
    int globalL1CacheSupported;
    int localL1CacheSupported;
    size_t sharedMemPerMultiprocessor;
    int regsPerMultiprocessor;
    int managedMemory;
    int isMultiGpuBoard;
    int multiGpuBoardGroupID;
    int hostNativeAtomicSupported;
    int singleToDoublePrecisionPerfRatio;
    int pageableMemoryAccess;
    int concurrentManagedAccess;
    int computePreemptionSupported;
    int canUseHostPointerForRegisteredMem;
    int cooperativeLaunch;
    int cooperativeMultiDeviceLaunch;
    size_t sharedMemPerBlockOptin;
    int pageableMemoryAccessUsesHostPageTables;
    int directManagedMemAccessFromHost;
    int maxBlocksPerMultiProcessor;
    int accessPolicyMaxWindowSize;
    size_t reservedSharedMemPerBlock;
    int hostRegisterSupported;
    int sparseHipArraySupported;
    int hostRegisterReadOnlySupported;
    int timelineSemaphoreInteropSupported;
    int memoryPoolsSupported;
    int gpuDirectRDMASupported;
    unsigned int gpuDirectRDMAFlushWritesOptions;
    int gpuDirectRDMAWritesOrdering;
    unsigned int memoryPoolSupportedHandleTypes;
    int deferredMappingHipArraySupported;
    int ipcEventSupported;
    int clusterLaunch;
    int unifiedFunctionPointers;
    int reserved[63];
    int hipReserved[32];
    char gcnArchName[256];
    size_t maxSharedMemoryPerMultiProcessor;
    int clockInstructionRate;
    hipDeviceArch_t arch;
    unsigned int* hdpMemFlushCntl;
    unsigned int* hdpRegFlushCntl;
    int cooperativeMultiDeviceUnmatchedFunc;
    int cooperativeMultiDeviceUnmatchedGridDim;
    int cooperativeMultiDeviceUnmatchedBlockDim;
    int cooperativeMultiDeviceUnmatchedSharedMem;
    int isLargeBar;
    int asicRevision;
} hipDeviceProp_tR0600;

/* Pointer attributes. ROCm 5.x names the first field memoryType and numbers hipMemoryType
 * Host=0, Device=1; ROCm >= 6 names it type and numbers Unregistered=0, Host=1, Device=2.
 * The layout is the same; hip_ffi translates the value to the ROCm 6 numbering. */
typedef struct hipPointerAttribute_t {
    hipMemoryType type;
    int device;
    void* devicePointer;
    void* hostPointer;
    int isManaged;
    unsigned allocationFlags;
} hipPointerAttribute_t;

typedef struct hipMemLocation {
    hipMemLocationType type;
    int id;
} hipMemLocation;

typedef struct hipMemPoolProps {
    hipMemAllocationType allocType;
    hipMemAllocationHandleType handleTypes;
    hipMemLocation location;
    void* win32SecurityAttributes;
    /* ROCm >= 6 and CUDA carve maxSize out of the reserved bytes of ROCm 5.x (same offset,
     * same total size); zero means "no limit" for all of them. */
    size_t maxSize;
    unsigned char reserved[56];
} hipMemPoolProps;

/* hipMemPoolSetAccess's descriptor (CUDA's cudaMemAccessDesc has the same layout). */
typedef struct hipMemAccessDesc {
    hipMemLocation location;
    hipMemAccessFlags flags;
} hipMemAccessDesc;

/* Interprocess handles: 64 opaque bytes (HIP_IPC_HANDLE_SIZE), passed by value to the open
 * calls; CUDA's cudaIpcMemHandle_t / cudaIpcEventHandle_t are the same. */
typedef struct hipIpcMemHandle_st {
    char reserved[64];
} hipIpcMemHandle_t;
typedef struct hipIpcEventHandle_st {
    char reserved[64];
} hipIpcEventHandle_t;
