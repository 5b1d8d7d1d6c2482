// NHWC max pooling of a K x K window (2 or 3) at stride 2 without dilation through shared
// memory, torch's rules (taps outside the image skipped; NaN propagates).
//
//   max_pool2d_tiled_nhwc_<t>(x, y, nb, C, H, W, Ho, Wo, k, ph, pw, runs)
//       x [nb, H, W, C], y [nb, Ho, Wo, C], C-contiguous, C a multiple of V = 16 bytes' worth
//       of elements and x, y 16-byte aligned (the host checks); runs: 16-byte runs of channels
//       a block takes (8, 4, 2 or 1, a divisor of C / V). Blocks of HIPK_POOL_TILE_THREADS
//       (256), any grid (grid-stride over the tiles).
//
// A block takes `runs` runs of channels of a tile of 8 output columns x 32 / runs rows: it
// loads the tile's input ((2 * rows + K - 2) x (2 * 8 + K - 2) pixels of those channels,
// consecutive threads on consecutive 16 bytes, -inf outside the image) once, then each thread
// computes one output's run from shared memory. pool.hip's 2x2 / 3x3 variant loads each tap
// for each of the (up to four) windows that hold it, through L1 and L2: 2.25 times the input
// for a 3x3 window at stride 2, where the tile loads 1.2 times (its halo). The taps are
// compared row by row, as there: the same bits. The next tile's loads are issued before the
// barrier that lets them into shared memory.
#include "spatial.h"

#define HIPK_POOL_TILE_THREADS 256

namespace hipk {

template <typename T, int K, int RUNS> struct NhwcTile {
    enum { V = Lanes16<T>::value, TW = 8, TH = HIPK_POOL_TILE_THREADS / (TW * RUNS) };
    enum { ROWS = 2 * TH + K - 2, COLS = 2 * TW + K - 2, ALL = ROWS * COLS * RUNS };
    enum { LOADS = (ALL + HIPK_POOL_TILE_THREADS - 1) / HIPK_POOL_TILE_THREADS };
};

template <typename T, int K, int RUNS>
HIPK_DEVICE void max_pool2d_tiled_nhwc(const T* x, T* y, long long nb, int C, int H, int W,
                                       int Ho, int Wo, int ph, int pw,
                                       Vec<T, Lanes16<T>::value>* tile) {
    typedef NhwcTile<T, K, RUNS> S;
    constexpr int V = S::V, TW = S::TW, TH = S::TH, IC = S::COLS;
    const int tid = (int)threadIdx.x, run = tid % RUNS, p = tid / RUNS;
    const int chunks = C / V / RUNS, across = (Wo + TW - 1) / TW, down = (Ho + TH - 1) / TH;
    const long long tiles = nb * down * across * chunks;
    Vec<T, V> empty;
    HIPK_UNROLL
    for (int j = 0; j < V; ++j) empty.v[j] = from_float<T>(neg_inf());
    for (long long b = blockIdx.x; b < tiles; b += gridDim.x) {
        const int c0 = (int)(b % chunks) * RUNS * V;  // the tile's first channel
        const long long rest = b / chunks;
        const int ow_t = (int)(rest % across) * TW, oh_t = (int)(rest / across % down) * TH;
        const long long n = rest / across / down;
        const int h0 = 2 * oh_t - ph, w0 = 2 * ow_t - pw;  // the tile's first input pixel
        Vec<T, V> loaded[S::LOADS];
        HIPK_UNROLL
        for (int l = 0; l < S::LOADS; ++l) {
            const int e = tid + l * HIPK_POOL_TILE_THREADS, pixel = e / RUNS;
            const int h = h0 + pixel / IC, w = w0 + pixel % IC;
            loaded[l] = empty;
            if (e < S::ALL && h >= 0 && h < H && w >= 0 && w < W)
                loaded[l] = *reinterpret_cast<const Vec<T, V>*>(
                    x + ((n * H + h) * W + w) * C + c0 + e % RUNS * V);
        }
        __syncthreads();  // every thread is done with the previous tile
        HIPK_UNROLL
        for (int l = 0; l < S::LOADS; ++l)
            if (tid + l * HIPK_POOL_TILE_THREADS < S::ALL)
                tile[tid + l * HIPK_POOL_TILE_THREADS] = loaded[l];
        __syncthreads();
        const int oh = oh_t + p / TW, ow = ow_t + p % TW;
        if (oh >= Ho || ow >= Wo) continue;
        const Vec<T, V>* window = tile + ((2 * (p / TW)) * IC + 2 * (p % TW)) * RUNS + run;
        float acc[V];
        HIPK_UNROLL
        for (int j = 0; j < V; ++j) acc[j] = neg_inf();
        HIPK_UNROLL
        for (int r = 0; r < K; ++r) {
            HIPK_UNROLL
            for (int s = 0; s < K; ++s) {
                const Vec<T, V> tap = window[(r * IC + s) * RUNS];
                HIPK_UNROLL
                for (int j = 0; j < V; ++j) {
                    const float v = to_float(tap.v[j]);
                    acc[j] = v > acc[j] || v != v ? v : acc[j];  // a NaN wins and stays
                }
            }
        }
        store_floats<T, V>(y + ((n * Ho + oh) * Wo + ow) * C + c0 + run * V, acc);
    }
}

template <typename T, int K>
HIPK_DEVICE void max_pool2d_tiled_nhwc_runs(const T* x, T* y, long long nb, int C, int H, int W,
                                            int Ho, int Wo, int ph, int pw, int runs,
                                            Vec<T, Lanes16<T>::value>* tile) {
    if (runs == 8)
        max_pool2d_tiled_nhwc<T, K, 8>(x, y, nb, C, H, W, Ho, Wo, ph, pw, tile);
    else if (runs == 4)
        max_pool2d_tiled_nhwc<T, K, 4>(x, y, nb, C, H, W, Ho, Wo, ph, pw, tile);
    else if (runs == 2)
        max_pool2d_tiled_nhwc<T, K, 2>(x, y, nb, C, H, W, Ho, Wo, ph, pw, tile);
    else
        max_pool2d_tiled_nhwc<T, K, 1>(x, y, nb, C, H, W, Ho, Wo, ph, pw, tile);
}

// The largest tile of any `runs` (3x3 window): the shared array every variant uses.
template <typename T> struct NhwcTileSize {
    enum { A = NhwcTile<T, 3, 8>::ALL, B = NhwcTile<T, 3, 4>::ALL };
    enum { C = NhwcTile<T, 3, 2>::ALL, D = NhwcTile<T, 3, 1>::ALL };
    enum { AB = A > B ? A : B, CD = C > D ? C : D, value = AB > CD ? AB : CD };
};

}  // namespace hipk

#define HIPK_MAX_POOL2D_TILED_NHWC(S_, T)                                                      \
    extern "C" __global__ void max_pool2d_tiled_nhwc_##S_(const T* x, T* y, long long nb, int C, \
                                                          int H, int W, int Ho, int Wo, int k,  \
                                                          int ph, int pw, int runs) {           \
        __shared__ hipk::Vec<T, hipk::Lanes16<T>::value> tile[hipk::NhwcTileSize<T>::value];  \
        if (k == 3)                                                                            \
            hipk::max_pool2d_tiled_nhwc_runs<T, 3>(x, y, nb, C, H, W, Ho, Wo, ph, pw, runs,    \
                                                   tile);                                      \
        else                                                                                   \
            hipk::max_pool2d_tiled_nhwc_runs<T, 2>(x, y, nb, C, H, W, Ho, Wo, ph, pw, runs,    \
                                                   tile);                                      \
    }
HIPK_F32_AND_16BIT_TYPES(HIPK_MAX_POOL2D_TILED_NHWC)
