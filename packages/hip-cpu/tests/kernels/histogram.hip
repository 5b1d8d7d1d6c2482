// Atomics. histogram_256: a 256-bin histogram of bytes, per block in shared memory
// (atomicAdd on __shared__), then merged into the global bins (atomicAdd on global memory).
// Launch: any 1-D grid (grid-stride), 1-D blocks of any size.

extern "C" __global__ void histogram_256(const unsigned char* data, unsigned int* bins, int n) {
    __shared__ unsigned int local[256];
    for (int b = threadIdx.x; b < 256; b += blockDim.x) local[b] = 0u;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&local[data[i]], 1u);
    __syncthreads();
    for (int b = threadIdx.x; b < 256; b += blockDim.x)
        if (local[b] != 0u) atomicAdd(&bins[b], local[b]);
}

// stats = {sum, max, min, number of odd values, or of all bits} of x over the grid, and a float
// sum: integer atomics, atomicCAS (the odd count), and floating-point atomicAdd.
// `stats` starts as {0, INT_MIN, INT_MAX, 0, 0}, `fsum` as 0.
extern "C" __global__ void atomic_stats(const int* x, int n, int* stats, float* fsum) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const int v = x[i];
        atomicAdd(&stats[0], v);
        atomicMax(&stats[1], v);
        atomicMin(&stats[2], v);
        if (v & 1) {
            int seen = stats[3], old;
            do {
                old = seen;
                seen = atomicCAS(&stats[3], old, old + 1);
            } while (seen != old);
        }
        atomicOr(&stats[4], v);
        atomicAdd(fsum, (float)v);
    }
}
