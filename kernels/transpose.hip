// 2-D transpose: transpose_<t>(x, y, rows, cols) writes y[c, r] = x[r, c] for a [rows, cols]
// x into a [cols, rows] y (bit for bit). x and y must not overlap.
//
// Through 32 x 32 tiles in shared memory, so that both the reads of x and the writes of y are
// coalesced along a row; the tile row is padded to 33 elements so that reading a tile column
// does not hit one shared-memory bank 32 times.
// Launch: any 1-D grid (blocks stride over tiles; ceil(rows/32) * ceil(cols/32) is natural) and
// any 2-D block; (32, 8) moves a tile in 4 steps.
#include "common.h"

#define HIPK_TILE 32

namespace hipk {

template <typename T> HIPK_DEVICE void transpose(const T* x, T* y, int rows, int cols) {
    __shared__ T tile[HIPK_TILE][HIPK_TILE + 1];
    const int tile_cols = (cols + HIPK_TILE - 1) / HIPK_TILE;
    const long long tiles = (long long)((rows + HIPK_TILE - 1) / HIPK_TILE) * tile_cols;
    // The loop bounds are the same for every thread of the block, so all reach each barrier.
    for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
        const int r0 = (int)(t / tile_cols) * HIPK_TILE, c0 = (int)(t % tile_cols) * HIPK_TILE;
        for (int i = threadIdx.y; i < HIPK_TILE; i += blockDim.y)
            for (int j = threadIdx.x; j < HIPK_TILE; j += blockDim.x)
                if (r0 + i < rows && c0 + j < cols)
                    tile[i][j] = x[(long long)(r0 + i) * cols + c0 + j];
        __syncthreads();
        // Consecutive threads now walk consecutive rows of x: one row of y.
        for (int i = threadIdx.y; i < HIPK_TILE; i += blockDim.y)
            for (int j = threadIdx.x; j < HIPK_TILE; j += blockDim.x)
                if (c0 + i < cols && r0 + j < rows)
                    y[(long long)(c0 + i) * rows + r0 + j] = tile[j][i];
        __syncthreads();  // the tile is read out before the next one overwrites it
    }
}

}  // namespace hipk

// --- entry points: one per type (hip-core reads the parameter types from these lines) -------

extern "C" __global__ void transpose_f32(const float* x, float* y, int rows, int cols) {
    hipk::transpose(x, y, rows, cols);
}
extern "C" __global__ void transpose_f16(const hipk::f16* x, hipk::f16* y, int rows, int cols) {
    hipk::transpose(x, y, rows, cols);
}
extern "C" __global__ void transpose_bf16(const hipk::bf16* x, hipk::bf16* y, int rows,
                                          int cols) {
    hipk::transpose(x, y, rows, cols);
}
