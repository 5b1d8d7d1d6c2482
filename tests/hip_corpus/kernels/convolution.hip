// HIP corpus: 1-D convolution (correlation) with the mask in `__constant__` memory, which the
// host fills through the module's global (hipModuleGetGlobal).
#include <hip/hip_runtime.h>

#define MASK_WIDTH 9

__constant__ float mask[MASK_WIDTH];

extern "C" __global__ void convolve1d(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float acc = 0.0f;
    int start = i - MASK_WIDTH / 2;
    for (int j = 0; j < MASK_WIDTH; ++j) {
        int k = start + j;
        if (k >= 0 && k < n) acc += in[k] * mask[j];
    }
    out[i] = acc;
}
