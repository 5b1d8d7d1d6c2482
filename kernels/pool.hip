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
//
// One thread per output, or per 16-byte run of channels (consecutive threads take consecutive
// outputs: along ow in NCHW, along the channels in NHWC, both coalesced), f32 accumulation,
// grid-stride over any 1-D grid. Max pooling over 2x2 and 3x3 windows has a variant of its own
// whose taps are all loaded before the first is compared: the general loop, with its window
// known only at run time, keeps one load in flight per thread (H100, ResNet's 3x3/2 pool on
// [32, 64, 112, 112] bf16 NHWC: 0.58 of the copy rate).
#include "spatial.h"

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
template <typename I, typename T, int V, int KH, int KW>
HIPK_DEVICE void max_pool2d_fixed(const T* x, T* y, long long nb, int C, int H, int W, int Ho,
                                  int Wo, int sh, int sw, int ph, int pw, int dh, int dw,
                                  int channels_last) {
    const int runs = C / V;
    const I n_all = (I)(nb * runs * Ho * Wo);
    for (I i = (I)global_thread(); i < n_all; i += (I)grid_threads()) {
        const Pixel<I> o = output_pixel(i, runs, Ho, Wo, channels_last);
        const Plane in = plane((long long)o.n, o.c * V, C, H, W, channels_last);
        Vec<T, V> taps[KH * KW];
        bool inside[KH * KW];
        HIPK_UNROLL
        for (int r = 0; r < KH; ++r) {
            const int h = o.oh * sh - ph + r * dh;
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
        float acc[V];
        HIPK_UNROLL
        for (int j = 0; j < V; ++j) acc[j] = neg_inf();
        HIPK_UNROLL
        for (int t = 0; t < KH * KW; ++t) {
            if (!inside[t]) continue;
            HIPK_UNROLL
            for (int j = 0; j < V; ++j) {
                const float v = to_float(taps[t].v[j]);
                acc[j] = v > acc[j] || v != v ? v : acc[j];  // a NaN wins and stays
            }
        }
        store_floats<T, V>(y + (long long)i * V, acc);
    }
}

template <typename I, typename T, int V>
HIPK_DEVICE bool max_pool2d_small(const T* x, T* y, long long nb, int C, int H, int W, int Ho,
                                  int Wo, int kh, int kw, int sh, int sw, int ph, int pw, int dh,
                                  int dw, int mode, int channels_last) {
    if (mode != 0 || kh != kw || (kh != 2 && kh != 3)) return false;
    if (kh == 3)
        max_pool2d_fixed<I, T, V, 3, 3>(x, y, nb, C, H, W, Ho, Wo, sh, sw, ph, pw, dh, dw,
                                        channels_last);
    else
        max_pool2d_fixed<I, T, V, 2, 2>(x, y, nb, C, H, W, Ho, Wo, sh, sw, ph, pw, dh, dw,
                                        channels_last);
    return true;
}

template <typename I, typename T>
HIPK_DEVICE void pool2d(const T* x, T* y, long long nb, int C, int H, int W, int Ho, int Wo,
                        int kh, int kw, int sh, int sw, int ph, int pw, int dh, int dw, int mode,
                        int channels_last, int vec) {
    constexpr int L = Lanes16<T>::value;
    if (vec == L) {
        if (!max_pool2d_small<I, T, L>(x, y, nb, C, H, W, Ho, Wo, kh, kw, sh, sw, ph, pw, dh, dw,
                                       mode, channels_last))
            pool2d_v<I, T, L>(x, y, nb, C, H, W, Ho, Wo, kh, kw, sh, sw, ph, pw, dh, dw, mode,
                              channels_last);
    } else if (!max_pool2d_small<I, T, 1>(x, y, nb, C, H, W, Ho, Wo, kh, kw, sh, sw, ph, pw, dh,
                                          dw, mode, channels_last)) {
        pool2d_v<I, T, 1>(x, y, nb, C, H, W, Ho, Wo, kh, kw, sh, sw, ph, pw, dh, dw, mode,
                          channels_last);
    }
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
