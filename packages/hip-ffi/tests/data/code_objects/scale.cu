extern "C" __global__ void scale(float* p, float a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] *= a; }
