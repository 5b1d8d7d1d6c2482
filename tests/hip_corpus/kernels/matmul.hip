// HIP corpus: tiled matrix multiply C = A B in nested namespaces (C++ linkage), the tile size
// from the compile options (-DTILE=16) with a default, both operands staged through shared
// memory.
#include <hip/hip_runtime.h>

#ifndef TILE
#define TILE 16
#endif

namespace blas {
namespace tiled {

__global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty;
    int col = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int t = 0; t < (K + TILE - 1) / TILE; ++t) {
        As[ty][tx] = (row < M && t * TILE + tx < K) ? A[row * K + t * TILE + tx] : 0.0f;
        Bs[ty][tx] = (col < N && t * TILE + ty < K) ? B[(t * TILE + ty) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N) C[row * N + col] = acc;
}

}  // namespace tiled
}  // namespace blas
