// Small matrix products in one launch, where a BLAS library's host cost per call would be most
// of the op's time (hip_runtime/libraries/small_gemm.py decides which products come here):
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
// Each block makes one 16 x 16 tile of C, walking k in steps of 64 through shared memory: a
// step's 16 x 64 slice of op(A) and 64 x 16 slice of op(B) are four loads a thread each, all
// issued before the first is stored, and every operand layout is read so that consecutive
// threads read consecutive addresses. (Steps of 16 took 0.5 µs each on an H200, one after
// another: 18.5 µs for a 1 x 512 x 512 product against cuBLAS's 2.4.)
#include "dtypes.h"

#define HIPK_GEMM_TILE 16  // C's tile: TILE x TILE, a thread an element
#define HIPK_GEMM_STEP 64  // k per step
#define HIPK_GEMM_LOADS (HIPK_GEMM_TILE * HIPK_GEMM_STEP / (HIPK_GEMM_TILE * HIPK_GEMM_TILE))

namespace hipk {

template <typename T>
HIPK_DEVICE void gemm_small(const T* a, const T* b, T* c, int m, int n, int k, int lda, int ldb,
                            int ldc, int transpose_a, int transpose_b, long long stride_a,
                            long long stride_b, long long stride_c, double alpha, double beta) {
    typedef typename Compute<T>::type Acc;
    // tile_a[i][p]: op(A)'s row row0 + i, column p0 + p; tile_b[p][j]: op(B)'s row p0 + p,
    // column col0 + j. Rows padded by one (odd pitches) so that neither the stores of either
    // layout nor the column reads below hit one bank twice.
    __shared__ Acc tile_a[HIPK_GEMM_TILE][HIPK_GEMM_STEP + 1];
    __shared__ Acc tile_b[HIPK_GEMM_STEP][HIPK_GEMM_TILE + 1];
    const int tx = threadIdx.x, ty = threadIdx.y, t = ty * HIPK_GEMM_TILE + tx;
    const int row0 = blockIdx.y * HIPK_GEMM_TILE, col0 = blockIdx.x * HIPK_GEMM_TILE;
    a += blockIdx.z * stride_a;
    b += blockIdx.z * stride_b;
    c += blockIdx.z * stride_c;
    Acc sum = 0;
    // k is the same for the whole block, so every thread reaches both barriers.
    for (int p0 = 0; p0 < k; p0 += HIPK_GEMM_STEP) {
        // Load s of this thread: element e of the step's slices, at tile_a[ia][pa] and
        // tile_b[pb][jb]. A stored [k, m] (transposed): op(A)(i, p) at p · lda + i, so
        // consecutive threads walk i; stored [m, k]: at i · lda + p, they walk p. B likewise.
        Acc va[HIPK_GEMM_LOADS], vb[HIPK_GEMM_LOADS];
        int ia[HIPK_GEMM_LOADS], pa[HIPK_GEMM_LOADS], pb[HIPK_GEMM_LOADS], jb[HIPK_GEMM_LOADS];
        HIPK_UNROLL
        for (int s = 0; s < HIPK_GEMM_LOADS; ++s) {
            const int e = s * HIPK_GEMM_TILE * HIPK_GEMM_TILE + t;
            ia[s] = transpose_a ? e % HIPK_GEMM_TILE : e / HIPK_GEMM_STEP;
            pa[s] = transpose_a ? e / HIPK_GEMM_TILE : e % HIPK_GEMM_STEP;
            const int i = row0 + ia[s], p = p0 + pa[s];
            va[s] = i < m && p < k
                        ? load_value(a[transpose_a ? (long long)p * lda + i : (long long)i * lda + p])
                        : Acc(0);
            jb[s] = transpose_b ? e / HIPK_GEMM_STEP : e % HIPK_GEMM_TILE;
            pb[s] = transpose_b ? e % HIPK_GEMM_STEP : e / HIPK_GEMM_TILE;
            const int j = col0 + jb[s], pj = p0 + pb[s];
            vb[s] = pj < k && j < n
                        ? load_value(b[transpose_b ? (long long)j * ldb + pj : (long long)pj * ldb + j])
                        : Acc(0);
        }
        HIPK_UNROLL
        for (int s = 0; s < HIPK_GEMM_LOADS; ++s) {  // (every load issued before this store)
            tile_a[ia[s]][pa[s]] = va[s];
            tile_b[pb[s]][jb[s]] = vb[s];
        }
        __syncthreads();
        HIPK_UNROLL
        for (int q = 0; q < HIPK_GEMM_STEP; ++q) sum += tile_a[ty][q] * tile_b[q][tx];
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
