// HIP corpus: a block sum whose warp step is templated on the warp size, as libraries write it
// for NVIDIA (32) and AMD (64) alike; the host launches the instance matching warpSize.
// name_expressions: warp_sum<32> warp_sum<64>
#include <hip/hip_runtime.h>

template <int WARP> __device__ float warp_reduce_sum(float v) {
    for (int offset = WARP / 2; offset > 0; offset /= 2) v += __shfl_down(v, offset, WARP);
    return v;
}

template <int WARP> __global__ void warp_sum(const float* in, float* block_sums, int n) {
    __shared__ float partial[1024 / WARP];
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    float v = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        v += in[i];
    v = warp_reduce_sum<WARP>(v);
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < (int)blockDim.x / WARP ? partial[lane] : 0.0f;
        v = warp_reduce_sum<WARP>(v);
        if (lane == 0) block_sums[blockIdx.x] = v;
    }
}
