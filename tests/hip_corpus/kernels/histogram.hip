// HIP corpus: 256-bin byte histogram. Each block counts into shared-memory bins with
// atomicAdd, then merges them into the global bins (one atomic per non-empty bin and block).
// `uint` and `size_t` parameters, as samples write them.
#include <hip/hip_runtime.h>

#define BINS 256

__global__ void histogram256(const unsigned char* data, size_t n, uint* bins) {
    __shared__ uint local[BINS];
    for (uint b = threadIdx.x; b < BINS; b += blockDim.x) local[b] = 0;
    __syncthreads();
    size_t stride = (size_t)blockDim.x * gridDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        atomicAdd(&local[data[i]], 1u);
    }
    __syncthreads();
    for (uint b = threadIdx.x; b < BINS; b += blockDim.x) {
        if (local[b] != 0) atomicAdd(&bins[b], local[b]);
    }
}
