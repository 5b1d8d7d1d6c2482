// 2-D pooling over NCHW (`channels_last` 0) or NHWC (1) C-contiguous tensors, torch's rules.
//
//   pool2d_<t>(x, y, nb, C, H, W, Ho, Wo, kh, kw, sh, sw, ph, pw, dh, dw, mode, channels_last,
//              vec)
//       mode 0: max over the window taps inside the image (NaN propagates; dh, dw dilate);
//       mode 1: average, divided by the window's size clipped to the padded image
//               (count_include_pad: torch's min(start + k, H + p) - start);
//       mode 2: average over the taps inside the image only (count_include_pad=False);
//       mode 3: adaptive average: rows floor(oh * H / Ho) .. ceil((oh + 1) * H / Ho), the same
//               for columns (kh..dw unused).
//       A dilated window with no tap inside the image gives -inf, as torch's; ceil_mode's last
//       window starts inside the image or its left padding (the host's output size).
//       vec: channels per thread, 16 bytes' worth in NHWC where C and the pointers allow, else 1.
//   max_pool2d_pairs_<t>(the same arguments): max over a 2x2 / 3x3 window, two output rows a
//       thread (the host checks sh = 2 and dh = 1).
//   max_pool2d_rows_<t> / max_pool2d_row_pairs_<t>(x, y, planes, H, W, Ho, Wo, k, sh, ph, pw,
//       dh): NCHW max over a k x k window (2 or 3) at column stride 2, several outputs a thread
//       of one / two output rows (pool_columns.hip: the same at stride 2, walking down).
//   Each variant is an entry point of its own: a kernel's register count is its costliest
//   path's, and the two-row variants hold twice the taps (H100: one output row a thread ran
//   30.0 µs alone, 38.1 µs inside the kernel that also held the two-row path).
//
// One thread per output, or per 16-byte run of channels (consecutive threads take consecutive
// outputs: along ow in NCHW, along the channels in NHWC, both coalesced), f32 accumulation,
// grid-stride over any 1-D grid. Max pooling over 2x2 and 3x3 windows has a variant of its own
// whose taps are all loaded before the first is compared: the general loop, with its window
// known only at run time, keeps one load in flight per thread (H100, ResNet's 3x3/2 pool on
// [32, 64, 112, 112] bf16 NHWC: 0.58 of the copy rate).
#include "pool_rows.h"

namespace hipk {

// V channels per thread: 16 bytes' worth in NHWC when C is a multiple of that and the pointers
// are aligned (the host's `vec`), else 1. Output i (of nb * C / V * Ho * Wo) is y[i * V ...].
template <typename I, typename T, int V>
HIPK_DEVICE void pool2d_v(const T* x, T* y, long long nb, int C, int H, int W, int Ho, int Wo,
                          int kh, int kw, int sh, int sw, int ph, int pw, int dh, int dw,
                          int mode, int channels_last) {
    const int runs = C / V;
    const I n_all = (I)(nb * runs * Ho * Wo);
    for (I i = (I)global_thread(); i < n_all; i += (I)grid_threads()) {
        const Pixel<I> o = output_pixel(i, runs, Ho, Wo, channels_last);
        const int oh = o.oh, ow = o.ow;
        const Plane in = plane((long long)o.n, o.c * V, C, H, W, channels_last);
        float acc[V];
        if (mode == 0) {
            HIPK_UNROLL
            for (int j = 0; j < V; ++j) acc[j] = neg_inf();
            for (int r = 0; r < kh; ++r) {
                const int h = oh * sh - ph + r * dh;
                if (h < 0 || h >= H) continue;
                for (int s = 0; s < kw; ++s) {
                    const int w = ow * sw - pw + s * dw;
                    if (w < 0 || w >= W) continue;
                    float v[V];
                    load_floats<T, V>(x + in.base + h * in.hstep + w * in.wstep, v);
                    // A NaN wins (v != v) and stays (nothing compares above it).
                    HIPK_UNROLL
                    for (int j = 0; j < V; ++j)
                        acc[j] = v[j] > acc[j] || v[j] != v[j] ? v[j] : acc[j];
                }
            }
            store_floats<T, V>(y + (long long)i * V, acc);
            continue;
        }
        int h0, h1, w0, w1;
        float count;
        if (mode == 3) {
            h0 = (int)((long long)oh * H / Ho);
            h1 = (int)(((long long)(oh + 1) * H + Ho - 1) / Ho);
            w0 = (int)((long long)ow * W / Wo);
            w1 = (int)(((long long)(ow + 1) * W + Wo - 1) / Wo);
            count = (float)((h1 - h0) * (w1 - w0));
        } else {
            h0 = oh * sh - ph;
            w0 = ow * sw - pw;
            h1 = imin(h0 + kh, H + ph);
            w1 = imin(w0 + kw, W + pw);
            const int padded = (h1 - h0) * (w1 - w0);
            h0 = h0 < 0 ? 0 : h0;
            w0 = w0 < 0 ? 0 : w0;
            h1 = imin(h1, H);
            w1 = imin(w1, W);
            count = mode == 1 ? (float)padded : (float)((h1 - h0) * (w1 - w0));
        }
        HIPK_UNROLL
        for (int j = 0; j < V; ++j) acc[j] = 0.0f;
        for (int h = h0; h < h1; ++h) {
            for (int w = w0; w < w1; ++w) {
                float v[V];
                load_floats<T, V>(x + in.base + h * in.hstep + w * in.wstep, v);
                HIPK_UNROLL
                for (int j = 0; j < V; ++j) acc[j] += v[j];
            }
        }
        HIPK_UNROLL
        for (int j = 0; j < V; ++j) acc[j] = count > 0.0f ? acc[j] / count : 0.0f;
        store_floats<T, V>(y + (long long)i * V, acc);
    }
}

// Max over a KH x KW window (taps outside the image skipped), every tap's load issued first.
// OH output rows a thread (1, or 2 where the host found sh = 2 and dh = 1: rows oh0, oh0 + 1
// share their middle input row, loaded once: KH + 2 rows of taps for two outputs).
template <typename I, typename T, int V, int KH, int KW, int OH>
HIPK_DEVICE void max_pool2d_fixed(const T* x, T* y, long long nb, int C, int H, int W, int Ho,
                                  int Wo, int sh, int sw, int ph, int pw, int dh, int dw,
                                  int channels_last) {
    constexpr int ROWS = KH + 2 * (OH - 1);
    const int runs = C / V, pairs = (Ho + OH - 1) / OH;
    const I n_all = (I)(nb * runs * pairs * Wo);
    for (I i = (I)global_thread(); i < n_all; i += (I)grid_threads()) {
        const Pixel<I> o = output_pixel(i, runs, pairs, Wo, channels_last);
        const int oh0 = o.oh * OH;
        const Plane in = plane((long long)o.n, o.c * V, C, H, W, channels_last);
        Vec<T, V> taps[ROWS * KW];
        bool inside[ROWS * KW];
        HIPK_UNROLL
        for (int r = 0; r < ROWS; ++r) {
            const int h = oh0 * sh - ph + r * dh;
            HIPK_UNROLL
            for (int s = 0; s < KW; ++s) {
                const int w = o.ow * sw - pw + s * dw;
                const int t = r * KW + s;
                inside[t] = h >= 0 && h < H && w >= 0 && w < W;
                if (inside[t])
                    taps[t] = *reinterpret_cast<const Vec<T, V>*>(x + in.base + h * in.hstep +
                                                                   w * in.wstep);
            }
        }
        HIPK_UNROLL
        for (int u = 0; u < OH; ++u) {
            if (oh0 + u >= Ho) continue;  // Ho odd: the last pair's second row
            Vec<T, V> acc;
            MaxRun<T, V>::init(acc);
            HIPK_UNROLL
            for (int t = 2 * u * KW; t < (2 * u + KH) * KW; ++t)
                if (inside[t]) MaxRun<T, V>::add(acc, taps[t]);
            const long long oh = oh0 + u, ow = o.ow, c = (long long)o.c * V, n = (long long)o.n;
            const long long at = OH == 1           ? (long long)i * V
                                 : channels_last ? ((n * Ho + oh) * Wo + ow) * C + c
                                                 : ((n * C + c) * Ho + oh) * Wo + ow;
            *reinterpret_cast<Vec<T, V>*>(y + at) = acc;
        }
    }
}

template <typename I, typename T, int V, int OH>
HIPK_DEVICE bool max_pool2d_small(const T* x, T* y, long long nb, int C, int H, int W, int Ho,
                                  int Wo, int kh, int kw, int sh, int sw, int ph, int pw, int dh,
                                  int dw, int mode, int channels_last) {
    if (mode != 0 || kh != kw || (kh != 2 && kh != 3)) return false;
    if (kh == 3)
        max_pool2d_fixed<I, T, V, 3, 3, OH>(x, y, nb, C, H, W, Ho, Wo, sh, sw, ph, pw, dh, dw,
                                            channels_last);
    else
        max_pool2d_fixed<I, T, V, 2, 2, OH>(x, y, nb, C, H, W, Ho, Wo, sh, sw, ph, pw, dh, dw,
                                            channels_last);
    return true;
}

template <typename I, typename T>
HIPK_DEVICE void pool2d(const T* x, T* y, long long nb, int C, int H, int W, int Ho, int Wo,
                        int kh, int kw, int sh, int sw, int ph, int pw, int dh, int dw, int mode,
                        int channels_last, int vec) {
    constexpr int L = Lanes16<T>::value;
    if (vec == L) {
        if (!max_pool2d_small<I, T, L, 1>(x, y, nb, C, H, W, Ho, Wo, kh, kw, sh, sw, ph, pw, dh,
                                          dw, mode, channels_last))
            pool2d_v<I, T, L>(x, y, nb, C, H, W, Ho, Wo, kh, kw, sh, sw, ph, pw, dh, dw, mode,
                              channels_last);
    } else if (!max_pool2d_small<I, T, 1, 1>(x, y, nb, C, H, W, Ho, Wo, kh, kw, sh, sw, ph, pw,
                                             dh, dw, mode, channels_last)) {
        pool2d_v<I, T, 1>(x, y, nb, C, H, W, Ho, Wo, kh, kw, sh, sw, ph, pw, dh, dw, mode,
                          channels_last);
    }
}

// Two output rows a thread (the host routes only 2x2 / 3x3 max at sh = 2, dh = 1 here).
template <typename I, typename T>
HIPK_DEVICE void max_pool2d_pairs(const T* x, T* y, long long nb, int C, int H, int W, int Ho,
                                  int Wo, int kh, int kw, int sh, int sw, int ph, int pw, int dh,
                                  int dw, int mode, int channels_last, int vec) {
    if (vec == Lanes16<T>::value)
        max_pool2d_small<I, T, Lanes16<T>::value, 2>(x, y, nb, C, H, W, Ho, Wo, kh, kw, sh, sw,
                                                     ph, pw, dh, dw, mode, channels_last);
    else
        max_pool2d_small<I, T, 1, 2>(x, y, nb, C, H, W, Ho, Wo, kh, kw, sh, sw, ph, pw, dh, dw,
                                     mode, channels_last);
}

// NCHW max pooling of a KxK window (K 2 or 3) at column stride 2, no column dilation: each
// thread takes OW = V / 2 adjacent outputs of a row, whose windows span one aligned 16-byte
// vector of the input row (columns c0 .. c0 + V - 1, c0 = 2 * ow0) and one more column (the
// left one with padding 1, the right one for K = 3 without): one vector load a window row
// where the one-output-a-thread loop made K loads of 2 bytes at a 4-byte stride, and the
// thread then has 16 bytes of each row in flight, not 2 (H100, ResNet's 3x3/2 pool, bf16:
// 0.21 of the copy rate that way). The host checks W % V == 0 and x 16-byte aligned.
// OH output rows a thread: 1, or 2 where the host found sh = 2 and dh = 1 (the two windows'
// shared row loaded once: K + 2 rows for two outputs).
template <typename I, typename T, int K, int OH>
HIPK_DEVICE void max_pool2d_rows(const T* x, T* y, long long planes, int H, int W, int Ho,
                                 int Wo, int sh, int ph, int pw, int dh) {
    constexpr int V = Lanes16<T>::value, OW = V / 2, ROWS = K + 2 * (OH - 1);
    const int runs = (Wo + OW - 1) / OW, pairs = (Ho + OH - 1) / OH;  // threads a row, rows
    const I n_all = (I)(planes * pairs * runs);
    for (I i = (I)global_thread(); i < n_all; i += (I)grid_threads()) {
        const int ow0 = (int)(i % (I)runs) * OW, c0 = 2 * ow0;
        const I rest = i / (I)runs;
        const int oh0 = (int)(rest % (I)pairs) * OH;
        const long long plane = (long long)(rest / (I)pairs);
        const T* in = x + plane * H * W;
        const bool vector = c0 < W;
        Vec<T, V> middle[ROWS];
        float left[ROWS], right[ROWS];
        bool inside[ROWS];
        HIPK_UNROLL
        for (int r = 0; r < ROWS; ++r) {  // every row's loads issued before the first compare
            const int h = oh0 * sh - ph + r * dh;
            inside[r] = h >= 0 && h < H;
            const T* row = in + (long long)h * W;
            left[r] = right[r] = neg_inf();
            if (inside[r] && vector) middle[r] = *reinterpret_cast<const Vec<T, V>*>(row + c0);
            if (inside[r] && pw > 0 && c0 >= 1 && c0 <= W) left[r] = to_float(row[c0 - 1]);
            if (inside[r] && K == 3 && pw == 0 && c0 + V < W) right[r] = to_float(row[c0 + V]);
        }
        HIPK_UNROLL
        for (int u = 0; u < OH; ++u) {
            if (oh0 + u >= Ho) continue;  // Ho odd: the last pair's second row
            // The max over the window's rows of the vector (MaxRun: packed where it can be) and
            // of the columns beside it, then the outputs from them (row_outputs).
            Vec<T, V> rows_max;
            MaxRun<T, V>::init(rows_max);
            float side_left = neg_inf(), side_right = neg_inf();
            HIPK_UNROLL
            for (int r = 2 * u; r < 2 * u + K; ++r) {
                if (!inside[r]) continue;
                if (vector) MaxRun<T, V>::add(rows_max, middle[r]);
                const float l = left[r], rr = right[r];  // a NaN wins and stays
                side_left = l > side_left || l != l ? l : side_left;
                side_right = rr > side_right || rr != rr ? rr : side_right;
            }
            row_outputs<T, K>(rows_max, side_left, side_right, vector, pw,
                              y + (plane * Ho + oh0 + u) * Wo + ow0, Wo - ow0);
        }
    }
}

template <typename I, typename T, int OH>
HIPK_DEVICE void max_pool2d_rows_k(const T* x, T* y, long long planes, int H, int W, int Ho,
                                   int Wo, int k, int sh, int ph, int pw, int dh) {
    if (k == 3)
        max_pool2d_rows<I, T, 3, OH>(x, y, planes, H, W, Ho, Wo, sh, ph, pw, dh);
    else
        max_pool2d_rows<I, T, 2, OH>(x, y, planes, H, W, Ho, Wo, sh, ph, pw, dh);
}
template <typename I, typename T>
HIPK_DEVICE void max_pool2d_rows_1(const T* x, T* y, long long planes, int H, int W, int Ho,
                                   int Wo, int k, int sh, int ph, int pw, int dh) {
    max_pool2d_rows_k<I, T, 1>(x, y, planes, H, W, Ho, Wo, k, sh, ph, pw, dh);
}
template <typename I, typename T>
HIPK_DEVICE void max_pool2d_rows_2(const T* x, T* y, long long planes, int H, int W, int Ho,
                                   int Wo, int k, int sh, int ph, int pw, int dh) {
    max_pool2d_rows_k<I, T, 2>(x, y, planes, H, W, Ho, Wo, k, sh, ph, pw, dh);
}

}  // namespace hipk

#define HIPK_POOL2D(S_, T)                                                                     \
    extern "C" __global__ void pool2d_##S_(const T* x, T* y, long long nb, int C, int H,       \
                                           int W, int Ho, int Wo, int kh, int kw, int sh,      \
                                           int sw, int ph, int pw, int dh, int dw, int mode,   \
                                           int channels_last, int vec) {                       \
        HIPK_INDEXED(nb * C * Ho * Wo, hipk::pool2d, x, y, nb, C, H, W, Ho, Wo, kh, kw, sh, sw, \
                     ph, pw, dh, dw, mode, channels_last, vec);                                \
    }
HIPK_F32_AND_16BIT_TYPES(HIPK_POOL2D)

// max_pool2d_pairs_<t>: pool2d_<t>'s arguments, two output rows a thread (above).
#define HIPK_MAX_POOL2D_PAIRS(S_, T)                                                           \
    extern "C" __global__ void max_pool2d_pairs_##S_(                                          \
        const T* x, T* y, long long nb, int C, int H, int W, int Ho, int Wo, int kh, int kw,   \
        int sh, int sw, int ph, int pw, int dh, int dw, int mode, int channels_last, int vec) { \
        HIPK_INDEXED(nb * C * Ho * Wo, hipk::max_pool2d_pairs, x, y, nb, C, H, W, Ho, Wo, kh,  \
                     kw, sh, sw, ph, pw, dh, dw, mode, channels_last, vec);                    \
    }
HIPK_F32_AND_16BIT_TYPES(HIPK_MAX_POOL2D_PAIRS)

// max_pool2d_rows_<t> / max_pool2d_row_pairs_<t>(x, y, planes = N * C, H, W, Ho, Wo, k, sh,
// ph, pw, dh): NCHW max pooling of a k x k window (2 or 3) at column stride 2, V / 2 outputs a
// thread of one / two output rows (two only where sh = 2 and dh = 1), above.
#define HIPK_MAX_POOL2D_ROWS(S_, T)                                                            \
    extern "C" __global__ void max_pool2d_rows_##S_(const T* x, T* y, long long planes, int H, \
                                                    int W, int Ho, int Wo, int k, int sh,      \
                                                    int ph, int pw, int dh) {                  \
        const int per = hipk::Lanes16<T>::value / 2;                                           \
        HIPK_INDEXED(planes * Ho * ((Wo + per - 1) / per), hipk::max_pool2d_rows_1, x, y,      \
                     planes, H, W, Ho, Wo, k, sh, ph, pw, dh);                                 \
    }
#define HIPK_MAX_POOL2D_ROW_PAIRS(S_, T)                                                       \
    extern "C" __global__ void max_pool2d_row_pairs_##S_(const T* x, T* y, long long planes,   \
                                                         int H, int W, int Ho, int Wo, int k,  \
                                                         int sh, int ph, int pw, int dh) {     \
        const int per = hipk::Lanes16<T>::value / 2;                                           \
        HIPK_INDEXED(planes * Ho * ((Wo + per - 1) / per), hipk::max_pool2d_rows_2, x, y,      \
                     planes, H, W, Ho, Wo, k, sh, ph, pw, dh);                                 \
    }
HIPK_F32_AND_16BIT_TYPES(HIPK_MAX_POOL2D_ROWS)
HIPK_F32_AND_16BIT_TYPES(HIPK_MAX_POOL2D_ROW_PAIRS)
