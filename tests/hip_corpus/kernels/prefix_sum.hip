// HIP corpus: work-efficient (Blelloch) exclusive prefix sum. Each block scans 2 * blockDim
// elements in dynamic shared memory and writes its total; the totals are scanned by a second
// launch of the same kernel, and add_block_offsets adds them back.
#include <hip/hip_runtime.h>

extern "C" __global__ void scan_blocks(const int* in, int* out, int* block_sums, int n) {
    extern __shared__ int temp[];
    int t = threadIdx.x;
    int m = 2 * blockDim.x;
    int base = blockIdx.x * m;
    temp[2 * t] = base + 2 * t < n ? in[base + 2 * t] : 0;
    temp[2 * t + 1] = base + 2 * t + 1 < n ? in[base + 2 * t + 1] : 0;
    int offset = 1;
    for (int d = m >> 1; d > 0; d >>= 1) {  // up-sweep: partial sums in place
        __syncthreads();
        if (t < d) {
            int ai = offset * (2 * t + 1) - 1, bi = offset * (2 * t + 2) - 1;
            temp[bi] += temp[ai];
        }
        offset <<= 1;
    }
    if (t == 0) {
        if (block_sums != nullptr) block_sums[blockIdx.x] = temp[m - 1];
        temp[m - 1] = 0;
    }
    for (int d = 1; d < m; d <<= 1) {  // down-sweep
        offset >>= 1;
        __syncthreads();
        if (t < d) {
            int ai = offset * (2 * t + 1) - 1, bi = offset * (2 * t + 2) - 1;
            int left = temp[ai];
            temp[ai] = temp[bi];
            temp[bi] += left;
        }
    }
    __syncthreads();
    if (base + 2 * t < n) out[base + 2 * t] = temp[2 * t];
    if (base + 2 * t + 1 < n) out[base + 2 * t + 1] = temp[2 * t + 1];
}

extern "C" __global__ void add_block_offsets(int* out, const int* offsets, int n) {
    int base = blockIdx.x * 2 * blockDim.x;
    for (int k = threadIdx.x; k < 2 * (int)blockDim.x; k += blockDim.x) {
        if (base + k < n) out[base + k] += offsets[blockIdx.x];
    }
}
