// HIP corpus: tiled matrix transpose templated on the tile size. A block of TILE x 8 threads
// moves one TILE x TILE tile through shared memory (padded by one column against bank
// conflicts), reading and writing along rows so that both sides are coalesced.
// name_expressions: matrix_transpose_kernel<16> matrix_transpose_kernel<32>
#include <hip/hip_runtime.h>

template <int TILE>
__global__ void matrix_transpose_kernel(float* out, const float* in, int rows, int cols) {
    __shared__ float tile[TILE][TILE + 1];
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += blockDim.y) {
        if (x < cols && y + j < rows) {
            tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(y + j) * cols + x];
        }
    }
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += blockDim.y) {
        if (x < rows && y + j < cols) {
            out[(size_t)(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
        }
    }
}
