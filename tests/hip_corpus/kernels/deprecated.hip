// HIP corpus: HIP's deprecated spellings, which older samples still use: hipThreadIdx_x ...
// hipGridDim_z, HIP_DYNAMIC_SHARED, HIP_KERNEL_NAME, and the platform macros as the real
// compilers set them. No #include: hiprtc pre-includes its runtime header.
#if defined(__HIP_PLATFORM_AMD__) && defined(__HIP_PLATFORM_NVIDIA__)
#error "both __HIP_PLATFORM_AMD__ and __HIP_PLATFORM_NVIDIA__ are defined"
#endif
#ifndef HIP_KERNEL_NAME
#error "HIP_KERNEL_NAME is not defined"
#endif

#if defined(__HIP_PLATFORM_AMD__)
#define PLATFORM_CODE 1
#elif defined(__HIP_PLATFORM_NVIDIA__)
#define PLATFORM_CODE 2
#elif defined(__HIP_PLATFORM_CPU__)
#define PLATFORM_CODE 3
#else
#define PLATFORM_CODE 0
#endif

__global__ void old_spellings(int* out, int* platform) {
    HIP_DYNAMIC_SHARED(int, scratch)
    int local = (hipThreadIdx_z * hipBlockDim_y + hipThreadIdx_y) * hipBlockDim_x + hipThreadIdx_x;
    int block = (hipBlockIdx_z * hipGridDim_y + hipBlockIdx_y) * hipGridDim_x + hipBlockIdx_x;
    int threads = hipBlockDim_x * hipBlockDim_y * hipBlockDim_z;
    scratch[local] = block * threads + local;
    __syncthreads();
    int mirror = threads - 1 - local;  // read another thread's slot: the barrier is real
    out[block * threads + mirror] = scratch[mirror] + 1 + 0 * hipGridDim_z;
    if (block == 0 && local == 0) *platform = PLATFORM_CODE;
}
