// Block-wide inclusive prefix sum (Hillis-Steele, double-buffered in shared memory): y[i] is
// the sum of x over the block's elements up to i; totals[b] is block b's sum.
// Launch: 1-D grid of ceil(n / blockDim.x) blocks, 1-D blocks of up to 1024 threads.

extern "C" __global__ void block_scan_i32(const int* x, int* y, int* totals, int n) {
    __shared__ int buffer[2][1024];
    const int t = threadIdx.x, i = blockIdx.x * blockDim.x + threadIdx.x;
    int in = 0;
    buffer[in][t] = i < n ? x[i] : 0;
    __syncthreads();
    for (int offset = 1; offset < (int)blockDim.x; offset *= 2) {
        const int out = 1 - in;
        buffer[out][t] = buffer[in][t] + (t >= offset ? buffer[in][t - offset] : 0);
        __syncthreads();
        in = out;
    }
    if (i < n) y[i] = buffer[in][t];
    if (t == (int)blockDim.x - 1) totals[blockIdx.x] = buffer[in][t];
}
