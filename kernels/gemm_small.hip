// Small matrix products in one launch, where a BLAS library's host cost per call would be most
// of the op's time (hip_runtime/small_gemm.py decides which products come here):
//
//   gemm_small_<t>(const T* a, const T* b, T* c, int m, int n, int k, int lda, int ldb, int ldc,
//                  int transpose_a, int transpose_b, long long stride_a, long long stride_b,
//                  long long stride_c, double alpha, double beta)
//
// computes, row-major, for every batch entry z = blockIdx.z,
//   C[z] = alpha · op(A[z]) @ op(B[z]) + beta · C[z],   C [m, n], op(A) [m, k], op(B) [k, n],
// where A[z] starts at a + z · stride_a (elements; 0 broadcasts one matrix), A is stored [m, k]
// with rows lda elements apart, or [k, m] when transpose_a (B likewise: [k, n], or [n, k] when
// transpose_b). The products accumulate in Compute<T> (f32 for f16/bf16, f64 for f64) and C is
// rounded once. beta == 0 does not read C (it may hold anything, NaN included), as BLAS.
//
// Launch: block (16, 16), grid (ceil(n / 16), ceil(m / 16), batch); any k >= 0.
//
// Each block makes one 16 x 16 tile of C, walking k in steps of 16 through shared memory. Both
// layouts of each operand are loaded so that consecutive threads read consecutive addresses.
#include "dtypes.h"

#define HIPK_GEMM_TILE 16

namespace hipk {

template <typename T>
HIPK_DEVICE void gemm_small(const T* a, const T* b, T* c, int m, int n, int k, int lda, int ldb,
                            int ldc, int transpose_a, int transpose_b, long long stride_a,
                            long long stride_b, long long stride_c, double alpha, double beta) {
    typedef typename Compute<T>::type Acc;
    // tile_a[i][p]: op(A)'s row row0 + i, column p0 + p; tile_b[p][j]: op(B)'s row p0 + p,
    // column col0 + j. Rows padded by one so that a column read hits 16 different banks.
    __shared__ Acc tile_a[HIPK_GEMM_TILE][HIPK_GEMM_TILE + 1];
    __shared__ Acc tile_b[HIPK_GEMM_TILE][HIPK_GEMM_TILE + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row0 = blockIdx.y * HIPK_GEMM_TILE, col0 = blockIdx.x * HIPK_GEMM_TILE;
    a += blockIdx.z * stride_a;
    b += blockIdx.z * stride_b;
    c += blockIdx.z * stride_c;
    Acc sum = 0;
    // k is the same for the whole block, so every thread reaches both barriers.
    for (int p0 = 0; p0 < k; p0 += HIPK_GEMM_TILE) {
        if (transpose_a) {  // A stored [k, m]: op(A)(i, p) at p · lda + i; tx walks i
            const int i = row0 + tx, p = p0 + ty;
            tile_a[tx][ty] = i < m && p < k ? load_value(a[(long long)p * lda + i]) : Acc(0);
        } else {  // stored [m, k]: tx walks p
            const int i = row0 + ty, p = p0 + tx;
            tile_a[ty][tx] = i < m && p < k ? load_value(a[(long long)i * lda + p]) : Acc(0);
        }
        if (transpose_b) {  // B stored [n, k]: op(B)(p, j) at j · ldb + p; tx walks p
            const int p = p0 + tx, j = col0 + ty;
            tile_b[tx][ty] = p < k && j < n ? load_value(b[(long long)j * ldb + p]) : Acc(0);
        } else {  // stored [k, n]: tx walks j
            const int p = p0 + ty, j = col0 + tx;
            tile_b[ty][tx] = p < k && j < n ? load_value(b[(long long)p * ldb + j]) : Acc(0);
        }
        __syncthreads();
        for (int q = 0; q < HIPK_GEMM_TILE; ++q) sum += tile_a[ty][q] * tile_b[q][tx];
        __syncthreads();  // the tiles are read before the next step overwrites them
    }
    const int i = row0 + ty, j = col0 + tx;
    if (i < m && j < n) {
        T* out = c + (long long)i * ldc + j;
        Acc value = (Acc)alpha * sum;
        if (beta != 0) value += (Acc)beta * load_value(*out);
        *out = store_value<T>(value);
    }
}

}  // namespace hipk

// --- entry points: one per type (hip-core reads the parameter types from these lines) -------

#define GEMM_SMALL(S, T)                                                                       \
    extern "C" __global__ void gemm_small_##S(                                                 \
        const T* a, const T* b, T* c, int m, int n, int k, int lda, int ldb, int ldc,          \
        int transpose_a, int transpose_b, long long stride_a, long long stride_b,              \
        long long stride_c, double alpha, double beta) {                                       \
        hipk::gemm_small(a, b, c, m, n, k, lda, ldb, ldc, transpose_a, transpose_b, stride_a,  \
                         stride_b, stride_c, alpha, beta);                                     \
    }
HIPK_FLOAT_TYPES(GEMM_SMALL)
