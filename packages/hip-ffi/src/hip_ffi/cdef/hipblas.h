/* hipBLAS: the handle, its stream, and GEMM with f32 or f64 compute (hipblas.h).
 *
 * The data-type and compute-type arguments are plain ints on the C ABI. hip_ffi always takes
 * hipDataType / hipblasComputeType_t values and maps them to what the loaded library expects:
 * hipBLAS 3 takes them under the plain names; hipBLAS 2 under the `_v2` names (its plain names
 * keep the older hipblasDatatype_t ABI, as hipBLAS 0 and 1 do); the nvidia platform maps them to
 * cudaDataType and cublasComputeType_t. */

typedef void* hipblasHandle_t;
typedef int hipblasStatus_t;
typedef int hipblasOperation_t;
typedef int hipblasGemmAlgo_t;

hipblasStatus_t hipblasCreate(hipblasHandle_t* handle);
hipblasStatus_t hipblasDestroy(hipblasHandle_t handle);
hipblasStatus_t hipblasSetStream(hipblasHandle_t handle, hipStream_t streamId);
hipblasStatus_t hipblasGetStream(hipblasHandle_t handle, hipStream_t* streamId);
hipblasStatus_t hipblasSetWorkspace(hipblasHandle_t handle, void* addr, size_t workspaceSizeInBytes);
hipblasStatus_t hipblasGemmEx(hipblasHandle_t handle, hipblasOperation_t transA, hipblasOperation_t transB, int m, int n, int k, const void* alpha, const void* A, int aType, int lda, const void* B, int bType, int ldb, const void* beta, void* C, int cType, int ldc, int computeType, hipblasGemmAlgo_t algo);
hipblasStatus_t hipblasGemmStridedBatchedEx(hipblasHandle_t handle, hipblasOperation_t transA, hipblasOperation_t transB, int m, int n, int k, const void* alpha, const void* A, int aType, int lda, long long strideA, const void* B, int bType, int ldb, long long strideB, const void* beta, void* C, int cType, int ldc, long long strideC, int batchCount, int computeType, hipblasGemmAlgo_t algo);
hipblasStatus_t hipblasGemmEx_v2(hipblasHandle_t handle, hipblasOperation_t transA, hipblasOperation_t transB, int m, int n, int k, const void* alpha, const void* A, int aType, int lda, const void* B, int bType, int ldb, const void* beta, void* C, int cType, int ldc, int computeType, hipblasGemmAlgo_t algo);
hipblasStatus_t hipblasGemmStridedBatchedEx_v2(hipblasHandle_t handle, hipblasOperation_t transA, hipblasOperation_t transB, int m, int n, int k, const void* alpha, const void* A, int aType, int lda, long long strideA, const void* B, int bType, int ldb, long long strideB, const void* beta, void* C, int cType, int ldc, long long strideC, int batchCount, int computeType, hipblasGemmAlgo_t algo);
