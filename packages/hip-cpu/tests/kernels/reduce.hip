// Block-wide sums: a shared-memory tree with __syncthreads, and a warp-shuffle variant that
// uses warpSize (32 on NVIDIA, 64 on AMD, 1 on the cpu platform) without assuming it.
// Launch: 1-D grid of any size, 1-D blocks of a power of two up to 1024 threads.
// Portable as written: HIP's own header, which gives __shfl_down on every platform (on NVIDIA
// it maps to __shfl_down_sync over the full warp, as HIP-on-NVIDIA does).

#include <hip/hip_runtime.h>

// partial[b] = sum of x over the elements that block b's threads visit (grid-stride).
extern "C" __global__ void block_sum_f32(const float* x, float* partial, int n) {
    __shared__ float s[1024];
    const unsigned int t = threadIdx.x;
    float v = 0.0f;
    for (int i = blockIdx.x * blockDim.x + t; i < n; i += gridDim.x * blockDim.x) v += x[i];
    s[t] = v;
    __syncthreads();
    for (unsigned int half = blockDim.x / 2; half > 0; half /= 2) {
        if (t < half) s[t] += s[t + half];
        __syncthreads();
    }
    if (t == 0) partial[blockIdx.x] = s[0];
}

// The same sums through warp shuffles, then one partial per warp in shared memory.
extern "C" __global__ void block_sum_warp_f32(const float* x, float* partial, int n) {
    __shared__ float warp_sums[1024];  // one per warp: 1024 warps when a warp is one thread
    const int lane = threadIdx.x % warpSize, warp = threadIdx.x / warpSize;
    const int warps = (blockDim.x + warpSize - 1) / warpSize;
    float v = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        v += x[i];
    for (int offset = warpSize / 2; offset > 0; offset /= 2) v += __shfl_down(v, offset);
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        float total = 0.0f;
        for (int w = 0; w < warps; ++w) total += warp_sums[w];
        partial[blockIdx.x] = total;
    }
}

// counts[b] = how many of block b's threads see a positive x (one element per thread),
// through __syncthreads_count; any[b] / all[b] through __syncthreads_or / __syncthreads_and.
extern "C" __global__ void block_votes(const float* x, int* counts, int* any, int* all, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int positive = i < n && x[i] > 0.0f;
    const int count = __syncthreads_count(positive);
    const int some = __syncthreads_or(positive);
    const int every = __syncthreads_and(positive);
    if (threadIdx.x == 0) {
        counts[blockIdx.x] = count;
        any[blockIdx.x] = some;
        all[blockIdx.x] = every;
    }
}
