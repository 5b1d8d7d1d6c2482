/* CUDA entry points behind the nvidia platform (hip_ffi/platforms/nvidia/), under their CUDA names.
 *
 * HIP on NVIDIA is header-only, so these are what the HIP names resolve to: libcudart,
 * libcuda (the driver API), libnvrtc and libcublas (CUDA >= 12; prototypes from CUDA 13.0).
 * Symbol names are the ones the libraries export: the driver's `_v2` entry points where
 * cuda.h renames a call with a macro (cuMemsetD8 -> cuMemsetD8_v2, ...).
 *
 * Handles reuse the HIP types: on the C ABI, cudaStream_t / CUstream and hipStream_t (and the
 * events, modules, functions, graphs, memory pools) are the same opaque pointers.
 * Status types are plain ints in CUDA's numbering; hip_ffi translates them to HIP's.
 *
 * CUdeviceptr is `unsigned long long` in cuda.h. On every LP64 ABI hip_ffi targets (x86-64
 * System V, AArch64) a 64-bit integer and a pointer travel in the same register class and the
 * same 8-byte slot, so the driver calls below take `hipDeviceptr_t` (void*) there: callers pass
 * the pointer cdata hipMalloc gave them and no conversion is paid per call. Likewise
 * cuMemsetD32's `unsigned int` value is declared `int` (same register, same 32 bits), so the
 * signed value hipMemsetD32 takes passes through without an overflow check.
 */

typedef int cudaError_t;
typedef int CUresult;
typedef int nvrtcResult;
typedef int cublasStatus_t;

/* CUDA >= 11 layout; CUDA 13 appends 64 reserved bytes (a locality-domain union and
 * reserved[7]): the larger size is declared so that every release writes inside it. */
typedef struct cudaPointerAttributes {
    int type;            /* cudaMemoryType: the HIP >= 6 numbering */
    int device;
    void* devicePointer;
    void* hostPointer;
    long reserved[8];
} cudaPointerAttributes;

typedef struct CUuuid_st {
    char bytes[16];
} CUuuid;

/* ---- libcudart: the runtime API ---- */
cudaError_t cudaRuntimeGetVersion(int* runtimeVersion);
cudaError_t cudaDriverGetVersion(int* driverVersion);
cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaDeviceGetAttribute(int* value, int attr, int device);
cudaError_t cudaDeviceGetPCIBusId(char* pciBusId, int len, int device);
cudaError_t cudaMemGetInfo(size_t* free, size_t* total);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaDeviceCanAccessPeer(int* canAccessPeer, int device, int peerDevice);
cudaError_t cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags);
cudaError_t cudaDeviceDisablePeerAccess(int peerDevice);
const char* cudaGetErrorString(cudaError_t error);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);

cudaError_t cudaStreamCreateWithFlags(hipStream_t* pStream, unsigned int flags);
cudaError_t cudaStreamCreateWithPriority(hipStream_t* pStream, unsigned int flags, int priority);
cudaError_t cudaDeviceGetStreamPriorityRange(int* leastPriority, int* greatestPriority);
cudaError_t cudaStreamGetFlags(hipStream_t hStream, unsigned int* flags);
cudaError_t cudaStreamGetPriority(hipStream_t hStream, int* priority);
cudaError_t cudaStreamDestroy(hipStream_t stream);
cudaError_t cudaStreamSynchronize(hipStream_t stream);
cudaError_t cudaStreamQuery(hipStream_t stream);
cudaError_t cudaStreamWaitEvent(hipStream_t stream, hipEvent_t event, unsigned int flags);
cudaError_t cudaLaunchHostFunc(hipStream_t stream, hipHostFn_t fn, void* userData);

cudaError_t cudaEventCreateWithFlags(hipEvent_t* event, unsigned int flags);
cudaError_t cudaEventRecord(hipEvent_t event, hipStream_t stream);
cudaError_t cudaEventSynchronize(hipEvent_t event);
cudaError_t cudaEventQuery(hipEvent_t event);
cudaError_t cudaEventElapsedTime(float* ms, hipEvent_t start, hipEvent_t end);
cudaError_t cudaEventDestroy(hipEvent_t event);

cudaError_t cudaMalloc(void** devPtr, size_t size);
cudaError_t cudaFree(void* devPtr);
cudaError_t cudaMallocAsync(void** devPtr, size_t size, hipStream_t hStream);
cudaError_t cudaFreeAsync(void* devPtr, hipStream_t hStream);
cudaError_t cudaMallocFromPoolAsync(void** ptr, size_t size, hipMemPool_t memPool, hipStream_t stream);
cudaError_t cudaDeviceGetDefaultMemPool(hipMemPool_t* memPool, int device);
cudaError_t cudaDeviceGetMemPool(hipMemPool_t* memPool, int device);
cudaError_t cudaDeviceSetMemPool(int device, hipMemPool_t memPool);
/* cudaMemPoolProps has hipMemPoolProps's size and field order (88 bytes). */
cudaError_t cudaMemPoolCreate(hipMemPool_t* memPool, const hipMemPoolProps* poolProps);
cudaError_t cudaMemPoolDestroy(hipMemPool_t memPool);
cudaError_t cudaMemPoolSetAttribute(hipMemPool_t memPool, int attr, void* value);
cudaError_t cudaMemPoolGetAttribute(hipMemPool_t memPool, int attr, void* value);
cudaError_t cudaMemPoolTrimTo(hipMemPool_t memPool, size_t minBytesToKeep);
/* cudaMemAccessDesc / cudaMemLocation have hipMemAccessDesc's layout and values. */
cudaError_t cudaMemPoolSetAccess(hipMemPool_t memPool, const hipMemAccessDesc* descList, size_t count);
cudaError_t cudaMemPoolGetAccess(hipMemAccessFlags* flags, hipMemPool_t memPool, hipMemLocation* location);
cudaError_t cudaHostAlloc(void** pHost, size_t size, unsigned int flags);
cudaError_t cudaFreeHost(void* ptr);
cudaError_t cudaHostRegister(void* ptr, size_t size, unsigned int flags);
cudaError_t cudaHostUnregister(void* ptr);
cudaError_t cudaHostGetDevicePointer(void** pDevice, void* pHost, unsigned int flags);
cudaError_t cudaHostGetFlags(unsigned int* pFlags, void* pHost);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, int kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, int kind, hipStream_t stream);
cudaError_t cudaMemcpyPeer(void* dst, int dstDevice, const void* src, int srcDevice, size_t count);
cudaError_t cudaMemcpyPeerAsync(void* dst, int dstDevice, const void* src, int srcDevice, size_t count, hipStream_t stream);
/* cudaIpcMemHandle_t / cudaIpcEventHandle_t: the same 64 opaque bytes as HIP's, by value. */
cudaError_t cudaIpcGetMemHandle(hipIpcMemHandle_t* handle, void* devPtr);
cudaError_t cudaIpcOpenMemHandle(void** devPtr, hipIpcMemHandle_t handle, unsigned int flags);
cudaError_t cudaIpcCloseMemHandle(void* devPtr);
cudaError_t cudaIpcGetEventHandle(hipIpcEventHandle_t* handle, hipEvent_t event);
cudaError_t cudaIpcOpenEventHandle(hipEvent_t* event, hipIpcEventHandle_t handle);
cudaError_t cudaMemset(void* devPtr, int value, size_t count);
cudaError_t cudaMemsetAsync(void* devPtr, int value, size_t count, hipStream_t stream);
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* ptr);

cudaError_t cudaStreamBeginCapture(hipStream_t stream, int mode);
cudaError_t cudaStreamEndCapture(hipStream_t stream, hipGraph_t* pGraph);
cudaError_t cudaStreamIsCapturing(hipStream_t stream, int* pCaptureStatus);
/* CUDA >= 12: three arguments (the CUDA 11 five-argument form is gone). */
cudaError_t cudaGraphInstantiate(hipGraphExec_t* pGraphExec, hipGraph_t graph, unsigned long long flags);
cudaError_t cudaGraphInstantiateWithFlags(hipGraphExec_t* pGraphExec, hipGraph_t graph, unsigned long long flags);
cudaError_t cudaGraphLaunch(hipGraphExec_t graphExec, hipStream_t stream);
cudaError_t cudaGraphExecDestroy(hipGraphExec_t graphExec);
cudaError_t cudaGraphDestroy(hipGraph_t graph);

/* ---- libcuda: the driver API (needs a current context, except cuInit / cuDevice*) ---- */
CUresult cuInit(unsigned int flags);
CUresult cuDeviceGet(hipDevice_t* device, int ordinal);
CUresult cuDeviceGetName(char* name, int len, hipDevice_t dev);
CUresult cuDeviceGetAttribute(int* pi, int attrib, hipDevice_t dev);
CUresult cuDeviceTotalMem_v2(size_t* bytes, hipDevice_t dev);
CUresult cuDeviceGetUuid_v2(CUuuid* uuid, hipDevice_t dev);
CUresult cuModuleLoad(hipModule_t* module, const char* fname);
CUresult cuModuleLoadData(hipModule_t* module, const void* image);
CUresult cuModuleUnload(hipModule_t hmod);
CUresult cuModuleGetFunction(hipFunction_t* hfunc, hipModule_t hmod, const char* name);
CUresult cuModuleGetGlobal_v2(hipDeviceptr_t* dptr, size_t* bytes, hipModule_t hmod, const char* name);
CUresult cuFuncGetAttribute(int* pi, int attrib, hipFunction_t hfunc);
CUresult cuFuncSetAttribute(hipFunction_t hfunc, int attrib, int value);
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int* numBlocks, hipFunction_t func, int blockSize, size_t dynamicSMemSize);
/* blockSizeToDynamicSMemSize is a callback pointer; hip_ffi always passes NULL. */
CUresult cuOccupancyMaxPotentialBlockSize(int* minGridSize, int* blockSize, hipFunction_t func, void* blockSizeToDynamicSMemSize, size_t dynamicSMemSize, int blockSizeLimit);
CUresult cuLaunchKernel(hipFunction_t f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes, hipStream_t hStream, void** kernelParams, void** extra);
CUresult cuLaunchCooperativeKernel(hipFunction_t f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes, hipStream_t hStream, void** kernelParams);
/* CUlaunchConfig has HIP_LAUNCH_CONFIG's layout (cdef/hip_runtime.h). */
CUresult cuLaunchKernelEx(const HIP_LAUNCH_CONFIG* config, hipFunction_t f, void** kernelParams, void** extra);
CUresult cuMemsetD8_v2(hipDeviceptr_t dstDevice, unsigned char uc, size_t N);
CUresult cuMemsetD8Async(hipDeviceptr_t dstDevice, unsigned char uc, size_t N, hipStream_t hStream);
CUresult cuMemsetD32_v2(hipDeviceptr_t dstDevice, int ui, size_t N);
CUresult cuMemsetD32Async(hipDeviceptr_t dstDevice, int ui, size_t N, hipStream_t hStream);
CUresult cuMemcpyHtoD_v2(hipDeviceptr_t dstDevice, const void* srcHost, size_t ByteCount);
CUresult cuMemcpyDtoH_v2(void* dstHost, hipDeviceptr_t srcDevice, size_t ByteCount);
CUresult cuMemcpyDtoD_v2(hipDeviceptr_t dstDevice, hipDeviceptr_t srcDevice, size_t ByteCount);
CUresult cuMemcpyHtoDAsync_v2(hipDeviceptr_t dstDevice, const void* srcHost, size_t ByteCount, hipStream_t hStream);
CUresult cuMemcpyDtoHAsync_v2(void* dstHost, hipDeviceptr_t srcDevice, size_t ByteCount, hipStream_t hStream);
CUresult cuMemcpyDtoDAsync_v2(hipDeviceptr_t dstDevice, hipDeviceptr_t srcDevice, size_t ByteCount, hipStream_t hStream);
CUresult cuStreamSynchronize(hipStream_t hStream);
CUresult cuEventCreate(hipEvent_t* phEvent, unsigned int Flags);
CUresult cuEventDestroy_v2(hipEvent_t hEvent);

/* ---- libnvrtc (nvrtcProgram is as opaque a pointer as hiprtcProgram) ---- */
nvrtcResult nvrtcVersion(int* major, int* minor);
const char* nvrtcGetErrorString(nvrtcResult result);
nvrtcResult nvrtcCreateProgram(hiprtcProgram* prog, const char* src, const char* name, int numHeaders, const char** headers, const char** includeNames);
nvrtcResult nvrtcDestroyProgram(hiprtcProgram* prog);
nvrtcResult nvrtcCompileProgram(hiprtcProgram prog, int numOptions, const char** options);
nvrtcResult nvrtcGetProgramLogSize(hiprtcProgram prog, size_t* logSizeRet);
nvrtcResult nvrtcGetProgramLog(hiprtcProgram prog, char* log);
nvrtcResult nvrtcGetPTXSize(hiprtcProgram prog, size_t* ptxSizeRet);
nvrtcResult nvrtcGetPTX(hiprtcProgram prog, char* ptx);
nvrtcResult nvrtcGetCUBINSize(hiprtcProgram prog, size_t* cubinSizeRet);
nvrtcResult nvrtcGetCUBIN(hiprtcProgram prog, char* cubin);
nvrtcResult nvrtcAddNameExpression(hiprtcProgram prog, const char* name_expression);
nvrtcResult nvrtcGetLoweredName(hiprtcProgram prog, const char* name_expression, const char** lowered_name);

/* ---- libcublas (the _v2 API; data and compute types are cudaDataType / cublasComputeType_t) ---- */
cublasStatus_t cublasCreate_v2(hipblasHandle_t* handle);
cublasStatus_t cublasDestroy_v2(hipblasHandle_t handle);
cublasStatus_t cublasSetStream_v2(hipblasHandle_t handle, hipStream_t streamId);
cublasStatus_t cublasGetStream_v2(hipblasHandle_t handle, hipStream_t* streamId);
cublasStatus_t cublasSetWorkspace_v2(hipblasHandle_t handle, void* workspace, size_t workspaceSizeInBytes);
cublasStatus_t cublasGemmEx(hipblasHandle_t handle, int transa, int transb, int m, int n, int k, const void* alpha, const void* A, int Atype, int lda, const void* B, int Btype, int ldb, const void* beta, void* C, int Ctype, int ldc, int computeType, int algo);
/* (f32 / f64 operands as void*, as cublasGemmEx's: the pointers are the same in the ABI) */
cublasStatus_t cublasSgemm_v2(hipblasHandle_t handle, int transa, int transb, int m, int n, int k, const void* alpha, const void* A, int lda, const void* B, int ldb, const void* beta, void* C, int ldc);
cublasStatus_t cublasDgemm_v2(hipblasHandle_t handle, int transa, int transb, int m, int n, int k, const void* alpha, const void* A, int lda, const void* B, int ldb, const void* beta, void* C, int ldc);
cublasStatus_t cublasGemmStridedBatchedEx(hipblasHandle_t handle, int transa, int transb, int m, int n, int k, const void* alpha, const void* A, int Atype, int lda, long long strideA, const void* B, int Btype, int ldb, long long strideB, const void* beta, void* C, int Ctype, int ldc, long long strideC, int batchCount, int computeType, int algo);
