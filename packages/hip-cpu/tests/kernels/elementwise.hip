// Element-wise kernels without barriers (they run as a plain loop on the cpu platform).

// c = a + b, one element per thread. Launch: ceil(n / blockDim.x) blocks.
extern "C" __global__ void vector_add_f32(const float* a, const float* b, float* c, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

// y = alpha * x + y over a grid-stride loop. Launch: any grid.
extern "C" __global__ void saxpy_grid_stride(float alpha, const float* x, float* y, long long n) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        y[i] = alpha * x[i] + y[i];
}

// y = exp(x) * rsqrt(1 + x^2) + fmaxf(x, 0): device math functions.
extern "C" __global__ void math_f32(const float* x, float* y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = expf(x[i]) * rsqrtf(1.0f + x[i] * x[i]) + fmaxf(x[i], 0.0f);
}
