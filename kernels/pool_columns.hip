// NCHW max pooling of a K x K window (K 2 or 3) at stride 2, no dilation, torch's rules (taps
// outside the image skipped; NaN propagates): a thread takes a 16-byte column vector through
// two output rows.
//
//   max_pool2d_columns_<t>(x, y, planes, H, W, Ho, Wo, k, ph, pw)
//       x [planes, H, W], y [planes, Ho, Wo], C-contiguous; W a multiple of V = 16 bytes' worth
//       of elements and x 16-byte aligned (the host checks). Grid-stride over column_threads()
//       threads (planes x pairs of output rows x a row's threads, rounded up to whole warps),
//       any 1-D grid of blocks of a multiple of 64 threads, at most 256 (its launch bounds).
//
// A thread takes one aligned 16-byte vector of input columns (c0 .. c0 + V - 1, its V / 2
// outputs of each row, as pool.hip's max_pool2d_rows) through a pair of output rows: the K + 2
// window rows of the pair (the row they share loaded once), every load issued before the
// first compare. Consecutive threads take consecutive vectors of a row, and a row's last
// vector is followed by the next pair's or plane's first (no lane idle between rows: each
// warp's loads are coalesced and every lane loads). The column beside the vector (the left one
// with padding, the right one for K = 3 without) is the neighbour thread's max over the window
// rows, passed by a shuffle within the warp; a row's first and last threads and the warp's
// first and last lanes (every thread on the cpu platform, whose warps are one lane here) load
// it instead. A row's outputs come from its window rows' maxima (pool_rows.h's row_outputs:
// packed pairs for 16-bit types on NVIDIA from sm_80).
//
// The window size and padding are template parameters (max_pool2d_columns_k picks one of four
// instances), and the side columns of the warp's edges are loaded for both rows at once after
// the shuffles: nvrtc's code for one generic loop over runtime K and padding executed 1.7x the
// instructions of this one (ncu, H200).
//
// H200, bf16 [32, 64, 112, 112] 3x3 / 2, against a 256 MiB copy in the same run: 18.9-19.2 µs,
// 0.80-0.82 of the copy rate (0.95-0.97 of a copy of the same bytes; an ideal 4:1 streaming
// max of the same bytes 0.87-0.89), against 22.4 (0.69) for the earlier walk of 8 output rows
// a thread in warp segments of a power of two of threads (14 vectors a row: 2 of every 16
// lanes idle); a stand-alone CUDA kernel of this layout, specialized to the shape, 18.7-18.8.
// Threads walking 4 and 8 rows, the shared row kept in registers, ran slower there (0.77,
// 0.75).
#include "pool_rows.h"

namespace hipk {

// The 16 bytes of input row h at column c0, all -inf where the row is outside the image or
// the vector past its end (`vector` false).
template <typename T, int V>
HIPK_DEVICE Vec<T, V> window_row(const T* in, int h, int H, int W, int c0, bool vector) {
    // Chosen as four words: as a Vec of 16-bit elements the choice took a byte permute for each
    // element (nvrtc, sm_90).
    union {
        Vec<T, V> row;
        unsigned int words[4];
    } out;
    MaxRun<T, V>::init(out.row);
    if (vector && h >= 0 && h < H) {
        typedef Vec<unsigned int, 4> Words;
        const Words v = *reinterpret_cast<const Words*>(in + (long long)h * W + c0);
        HIPK_UNROLL
        for (int i = 0; i < 4; ++i) out.words[i] = v.v[i];
    }
    return out.row;
}

// Input row h's column c as a float, -inf outside the image.
template <typename T>
HIPK_DEVICE float side_column(const T* in, int h, int H, int W, int c) {
    if (h >= 0 && h < H && c >= 0 && c < W) return to_float(in[(long long)h * W + c]);
    return neg_inf();
}

// `v` of the thread one place up the warp (delta 1) or down (-1); every lane of the warp calls
// it. The warp's first / last lane gets its own value back (those load their side column). One
// lane a warp on the cpu platform: `v` itself, unused there.
HIPK_DEVICE float warp_neighbour(float v, int delta) {
#if defined(__CUDA_ARCH__)
    return delta > 0 ? __shfl_up_sync(0xffffffffu, v, 1) : __shfl_down_sync(0xffffffffu, v, 1);
#elif HIPK_GPU
    return delta > 0 ? __shfl_up(v, 1) : __shfl_down(v, 1);
#else
    (void)delta;
    return v;
#endif
}

// Threads of a launch: planes x pairs of output rows x a row's threads (`per` outputs each), in
// whole warps (the shuffles).
HIPK_DEVICE long long column_threads(long long planes, int Ho, int Wo, int per) {
    return whole_warps(planes * ((Ho + 1) / 2) * ((Wo + per - 1) / per));
}

// The max over K window rows of the thread's vector (rows[0 .. K)).
template <typename T, int K>
HIPK_DEVICE Vec<T, Lanes16<T>::value> rows_max(const Vec<T, Lanes16<T>::value>* rows) {
    Vec<T, Lanes16<T>::value> m = rows[0];
    HIPK_UNROLL
    for (int r = 1; r < K; ++r) MaxRun<T, Lanes16<T>::value>::add(m, rows[r]);
    return m;
}

// The NaN-propagating max of sides[0 .. K) (a NaN wins and stays).
template <int K> HIPK_DEVICE float sides_max(const float* sides) {
    float m = sides[0];
    HIPK_UNROLL
    for (int r = 1; r < K; ++r) m = sides[r] > m || sides[r] != sides[r] ? sides[r] : m;
    return m;
}

// PW: the padding, 0 or 1 (the left column beside the vector is the window's with padding,
// the right one for K = 3 without).
template <typename I, typename T, int K, int PW>
HIPK_DEVICE void max_pool2d_columns(const T* x, T* y, long long planes, int H, int W, int Ho,
                                    int Wo, int ph) {
    constexpr int V = Lanes16<T>::value, OW = V / 2;
    constexpr bool SIDE = PW > 0 || K == 3;  // whether the outputs need a column beside
    const int runs = (Wo + OW - 1) / OW, pairs = (Ho + 1) / 2;  // threads a row, row pairs
    const I n_real = (I)(planes * pairs * runs);
    const I n_all = (I)column_threads(planes, Ho, Wo, OW);
    const int lane = lane_id();
    for (I i = (I)global_thread(); i < n_all; i += (I)grid_threads()) {
        const bool active = i < n_real;  // (the rest take the warp's shuffles, store nothing)
        const I row_of = i / (I)runs, plane_of = row_of / (I)pairs;
        const int run = (int)(i - row_of * (I)runs);
        const int oh = 2 * (int)(row_of - plane_of * (I)pairs);
        const long long plane = active ? (long long)plane_of : 0;
        const int ow0 = run * OW, c0 = 2 * ow0, h0 = 2 * oh - ph;
        const bool vector = c0 < W;
        const T* in = x + plane * H * W;
        T* out = y + plane * Ho * Wo + (long long)oh * Wo + ow0;
        const int room = active ? Wo - ow0 : 0;
        Vec<T, V> rows[K + 2];  // rows h0 .. h0 + K + 1: both windows, every load at once
        HIPK_UNROLL
        for (int r = 0; r < K + 2; ++r) rows[r] = window_row<T, V>(in, h0 + r, H, W, c0, vector);
        const Vec<T, V> upper = rows_max<T, K>(rows), lower = rows_max<T, K>(rows + 2);
        // The column beside the vector: the neighbour thread's (every lane takes part in the
        // shuffles), or, at a row's edge or the warp's, loaded, for both rows at once.
        float side_upper = neg_inf(), side_lower = neg_inf();
        if (SIDE) {
            const int delta = PW > 0 ? 1 : -1, at = PW > 0 ? V - 1 : 0;
            side_upper = warp_neighbour(to_float(upper.v[at]), delta);
            side_lower = warp_neighbour(to_float(lower.v[at]), delta);
            const bool own = PW > 0 ? run == 0 || lane == 0
                                    : run == runs - 1 || lane == warp_lanes() - 1;
            if (own) {
                const int side_c = PW > 0 ? c0 - 1 : c0 + V;
                float sides[K + 2];
                HIPK_UNROLL
                for (int r = 0; r < K + 2; ++r)
                    sides[r] = side_column<T>(in, h0 + r, H, W, side_c);
                side_upper = sides_max<K>(sides);
                side_lower = sides_max<K>(sides + 2);
            }
        }
        const float none = neg_inf();
        if (room > 0)
            row_outputs<T, K>(upper, PW > 0 ? side_upper : none, PW > 0 ? none : side_upper,
                              vector, PW, out, room);
        if (room > 0 && oh + 1 < Ho)
            row_outputs<T, K>(lower, PW > 0 ? side_lower : none, PW > 0 ? none : side_lower,
                              vector, PW, out + Wo, room);
    }
}

template <typename I, typename T>
HIPK_DEVICE void max_pool2d_columns_k(const T* x, T* y, long long planes, int H, int W, int Ho,
                                      int Wo, int k, int ph, int pw) {
    if (k == 3 && pw > 0)
        max_pool2d_columns<I, T, 3, 1>(x, y, planes, H, W, Ho, Wo, ph);
    else if (k == 3)
        max_pool2d_columns<I, T, 3, 0>(x, y, planes, H, W, Ho, Wo, ph);
    else if (pw > 0)
        max_pool2d_columns<I, T, 2, 1>(x, y, planes, H, W, Ho, Wo, ph);
    else
        max_pool2d_columns<I, T, 2, 0>(x, y, planes, H, W, Ho, Wo, ph);
}

}  // namespace hipk

// __launch_bounds__(256, 5): the host launches blocks of 256 threads; five of them a
// multiprocessor hold a thread to 48 registers on NVIDIA (no spills; 62 without, four blocks).
// H200, [32, 64, 112, 112] 3x3 / 2, same process: f32 33.9 µs against 36.1 with four blocks.
#define HIPK_MAX_POOL2D_COLUMNS(S_, T)                                                         \
    extern "C" __global__ void __launch_bounds__(256, 5)                                      \
        max_pool2d_columns_##S_(const T* x, T* y, long long planes, int H, int W, int Ho,      \
                                int Wo, int k, int ph, int pw) {                               \
        const int per = hipk::Lanes16<T>::value / 2;                                           \
        HIPK_INDEXED(hipk::column_threads(planes, Ho, Wo, per), hipk::max_pool2d_columns_k, x, \
                     y, planes, H, W, Ho, Wo, k, ph, pw);                                      \
    }
HIPK_F32_AND_16BIT_TYPES(HIPK_MAX_POOL2D_COLUMNS)
