// Tiled transpose through dynamic shared memory: out[c][r] = in[r][c] for a rows x cols
// matrix. The tile is (tile + 1) floats wide (no shared-memory bank conflicts); its size is
// given at launch: tile * (tile + 1) * sizeof(float) bytes.
// Launch: 2-D grid (ceil(cols / tile), ceil(rows / tile)), 2-D blocks (tile, any y <= tile).

extern "C" __global__ void transpose_tiled(const float* in, float* out, int rows, int cols,
                                           int tile) {
    extern __shared__ float buffer[];
    const int c0 = blockIdx.x * tile, r0 = blockIdx.y * tile;
    for (int y = threadIdx.y; y < tile; y += blockDim.y) {
        const int r = r0 + y, c = c0 + threadIdx.x;
        if (r < rows && c < cols) buffer[y * (tile + 1) + threadIdx.x] = in[r * cols + c];
    }
    __syncthreads();
    for (int y = threadIdx.y; y < tile; y += blockDim.y) {
        const int c = c0 + y, r = r0 + threadIdx.x;  // out row c, column r
        if (c < cols && r < rows) out[c * rows + r] = buffer[threadIdx.x * (tile + 1) + y];
    }
}
