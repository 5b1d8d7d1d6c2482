// HIP corpus: sum reduction with warp shuffles, then one partial per warp in shared memory.
// No #include (hiprtc pre-includes its runtime header, so __shfl_down is there), and no
// hard-coded warp size: warpSize is 64 or 32 on AMD, 32 on NVIDIA, 1 on the cpu platform.
extern "C" __global__ void block_sum(const float* in, float* out, int n) {
    __shared__ float partial[1024];
    float v = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        v += in[i];
    }
    for (int offset = warpSize / 2; offset > 0; offset /= 2) v += __shfl_down(v, offset);
    int lane = threadIdx.x % warpSize, warp = threadIdx.x / warpSize;
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        float sum = 0.0f;
        for (int w = 0; w < ((int)blockDim.x + warpSize - 1) / warpSize; ++w) sum += partial[w];
        atomicAdd(out, sum);
    }
}
