// NCHW max pooling of a K x K window (K 2 or 3) at stride 2, no dilation, torch's rules (taps
// outside the image skipped; NaN propagates), walking down the image.
//
//   max_pool2d_columns_<t>(x, y, planes, H, W, Ho, Wo, k, ph, pw, band, lanes)
//       x [planes, H, W], y [planes, Ho, Wo], C-contiguous; W a multiple of V = 16 bytes' worth
//       of elements and x 16-byte aligned (the host checks). band: output rows a thread (even);
//       lanes: threads of one row segment, a power of two of at most 32 (the host's: the
//       smallest that holds a row's ceil(Wo / (V / 2)) threads, or 32). Grid-stride, any 1-D
//       grid of blocks of a multiple of 32 threads, at most 256 (its launch bounds).
//
// A thread takes one aligned 16-byte vector of input columns (c0 .. c0 + V - 1, its V / 2
// outputs of each row, as pool.hip's max_pool2d_rows) through `band` output rows, two at a
// time: the window row that two consecutive output rows share is kept in registers, so each
// input row is loaded once where max_pool2d_rows loads it for each window that holds it (1.5
// times at 3x3 / 2), and a thread has four 16-byte loads in flight. The column beside the
// vector (the left one with padding, the right one for K = 3 without) is the neighbour
// thread's max over the window rows, passed by a shuffle within the segment; the segment's
// first and last threads (and every thread on the cpu platform, whose warps are one lane here)
// load it instead. Consecutive threads take consecutive vectors of a row: coalesced. A row's
// outputs come from its window rows' maxima (pool_rows.h's row_outputs: packed pairs for
// 16-bit types on NVIDIA from sm_80, 22 µs against 25 in floats at bench_conv's shape).
#include "pool_rows.h"

namespace hipk {

// The 16 bytes of input row h at column c0, all -inf where the row is outside the image or
// the vector past its end (`vector` false).
template <typename T, int V>
HIPK_DEVICE Vec<T, V> window_row(const T* in, int h, int H, int W, int c0, bool vector) {
    Vec<T, V> row;
    if (vector && h >= 0 && h < H)
        row = *reinterpret_cast<const Vec<T, V>*>(in + (long long)h * W + c0);
    else
        MaxRun<T, V>::init(row);
    return row;
}

// The max over window rows h0 .. h0 + K - 1 of input column c (-inf outside the image).
template <typename T, int K>
HIPK_DEVICE float column_max(const T* in, int h0, int H, int W, int c) {
    float m = neg_inf();
    if (c < 0 || c >= W) return m;
    HIPK_UNROLL
    for (int r = 0; r < K; ++r) {
        const int h = h0 + r;
        if (h < 0 || h >= H) continue;
        const float v = to_float(in[(long long)h * W + c]);
        m = v > m || v != v ? v : m;  // a NaN wins and stays
    }
    return m;
}

// `v` of the segment's thread `delta` places up (delta 1) or down (-1): `lanes` threads a
// segment, aligned in the warp. The first / last thread gets its own value back (the caller
// loads those). One lane a warp on the cpu platform: `v` itself, unused there.
HIPK_DEVICE float segment_neighbour(float v, int delta, int lanes) {
#if defined(__CUDA_ARCH__)
    const int lane = (int)(threadIdx.x % 32u);
    const unsigned int mask =
        lanes >= 32 ? 0xffffffffu : ((1u << lanes) - 1u) << (lane & ~(lanes - 1));
    return delta > 0 ? __shfl_up_sync(mask, v, 1, lanes) : __shfl_down_sync(mask, v, 1, lanes);
#elif HIPK_GPU
    return delta > 0 ? __shfl_up(v, 1, lanes) : __shfl_down(v, 1, lanes);
#else
    (void)delta;
    (void)lanes;
    return v;
#endif
}

// One output row of the thread's V / 2 outputs from its window's K rows `taps` (first row h0).
// Every thread of the segment calls it (the shuffles), `store` says whether the row exists.
template <typename T, int K>
HIPK_DEVICE void columns_output_row(const Vec<T, Lanes16<T>::value> (&taps)[K], const T* in,
                                    int h0, int H, int W, int c0, int pw, int lanes,
                                    bool first, bool last, bool vector, T* dst, int room,
                                    bool store) {
    constexpr int V = Lanes16<T>::value;
    Vec<T, V> rows_max = taps[0];
    HIPK_UNROLL
    for (int r = 1; r < K; ++r) MaxRun<T, V>::add(rows_max, taps[r]);
    float left = neg_inf(), right = neg_inf();
    if (pw > 0) {
        left = segment_neighbour(to_float(rows_max.v[V - 1]), 1, lanes);
        if (first || !HIPK_GPU) left = column_max<T, K>(in, h0, H, W, c0 - 1);
    } else if (K == 3) {
        right = segment_neighbour(to_float(rows_max.v[0]), -1, lanes);
        if (last || !HIPK_GPU) right = column_max<T, K>(in, h0, H, W, c0 + V);
    }
    if (store) row_outputs<T, K>(rows_max, left, right, vector, pw, dst, room);
}

template <typename I, typename T, int K>
HIPK_DEVICE void max_pool2d_columns(const T* x, T* y, long long planes, int H, int W, int Ho,
                                    int Wo, int ph, int pw, int band, int lanes) {
    constexpr int V = Lanes16<T>::value, OW = V / 2;
    const int runs = (Wo + OW - 1) / OW;  // threads a row
    const int segments = (runs + lanes - 1) / lanes, bands = (Ho + band - 1) / band;
    const I n_all = (I)(planes * bands * segments * lanes);
    for (I i = (I)global_thread(); i < n_all; i += (I)grid_threads()) {
        const int lane = (int)(i % (I)lanes);
        I rest = i / (I)lanes;
        const int run = (int)(rest % (I)segments) * lanes + lane;
        rest /= (I)segments;
        const int oh_first = (int)(rest % (I)bands) * band;
        const long long plane = (long long)(rest / (I)bands);
        const int ow0 = run * OW, c0 = 2 * ow0, oh_end = imin(Ho, oh_first + band);
        const bool vector = c0 < W, first = lane == 0, last = lane == lanes - 1;
        const T* in = x + plane * H * W;
        T* out = y + plane * Ho * Wo + ow0;
        const int room = run < runs ? Wo - ow0 : 0;
        // K = 3: the pair's first window row, the last one of the pair before.
        Vec<T, V> kept = window_row<T, V>(in, 2 * oh_first - ph, H, W, c0, vector && K == 3);
        for (int oh = oh_first; oh < oh_end; oh += 2) {
            const int h0 = 2 * oh - ph, from = K == 3 ? h0 + 1 : h0;
            Vec<T, V> loaded[4];  // every load of the pair issued before the first compare
            HIPK_UNROLL
            for (int r = 0; r < 4; ++r)
                loaded[r] = window_row<T, V>(in, from + r, H, W, c0, vector);
            Vec<T, V> upper[K], lower[K];
            HIPK_UNROLL
            for (int r = 0; r < K; ++r) {
                upper[r] = K == 3 ? (r == 0 ? kept : loaded[r - 1]) : loaded[r];
                lower[r] = K == 3 ? loaded[r + 1] : loaded[r + 2];
            }
            kept = loaded[3];
            columns_output_row<T, K>(upper, in, h0, H, W, c0, pw, lanes, first, last, vector,
                                     out + (long long)oh * Wo, room, room > 0);
            columns_output_row<T, K>(lower, in, h0 + 2, H, W, c0, pw, lanes, first, last, vector,
                                     out + (long long)(oh + 1) * Wo, room,
                                     room > 0 && oh + 1 < oh_end);
        }
    }
}

template <typename I, typename T>
HIPK_DEVICE void max_pool2d_columns_k(const T* x, T* y, long long planes, int H, int W, int Ho,
                                      int Wo, int k, int ph, int pw, int band, int lanes) {
    if (k == 3)
        max_pool2d_columns<I, T, 3>(x, y, planes, H, W, Ho, Wo, ph, pw, band, lanes);
    else
        max_pool2d_columns<I, T, 2>(x, y, planes, H, W, Ho, Wo, ph, pw, band, lanes);
}

}  // namespace hipk

// __launch_bounds__(256, 4): the host launches blocks of 256 threads; four of them a
// multiprocessor keeps a thread within 64 registers on NVIDIA (73 without: three blocks, 37.5 %
// occupancy, and 47 % of the DRAM peak by ncu). H200, bf16 3x3 / 2, band 8: 0.612 of the copy
// rate against 0.585 at [32, 64, 112, 112], 0.614 against 0.591 at [8, 64, 224, 224]; bands of
// 2 and 4 rows were slower either way, and so was a grid of only the blocks that fit at once.
#define HIPK_MAX_POOL2D_COLUMNS(S_, T)                                                         \
    extern "C" __global__ void __launch_bounds__(256, 4)                                      \
        max_pool2d_columns_##S_(const T* x, T* y, long long planes, int H, int W, int Ho,      \
                                int Wo, int k, int ph, int pw, int band, int lanes) {          \
        const int per = hipk::Lanes16<T>::value / 2, runs = (Wo + per - 1) / per;              \
        const long long threads = planes * ((Ho + band - 1) / band) *                          \
                                  ((runs + lanes - 1) / lanes) * lanes;                        \
        HIPK_INDEXED(threads, hipk::max_pool2d_columns_k, x, y, planes, H, W, Ho, Wo, k, ph,   \
                     pw, band, lanes);                                                         \
    }
HIPK_F32_AND_16BIT_TYPES(HIPK_MAX_POOL2D_COLUMNS)
