// HIP corpus: SAXPY with C++ linkage (no extern "C"): the GPU compilers mangle the name, and
// get_kernel("saxpy") must still find it. A grid-stride loop, as HIP's samples write it.
#include <hip/hip_runtime.h>

__global__ void saxpy(int n, float a, const float* x, float* y) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        y[i] = a * x[i] + y[i];
    }
}
