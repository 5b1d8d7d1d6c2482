// Convolutions' portable kernels: im2col / col2im around the backend's GEMM (hipBLAS), and a
// direct kernel for depthwise convolutions (one input channel per group), where a GEMM of one
// row per output channel would waste the matrix units.
//
// Layouts: NCHW (`channels_last` 0) or NHWC (1), both C-contiguous in that order. Weights of a
// forward convolution: [K, Cg, R, S] (NCHW) or [K, R, S, Cg] (NHWC), Cg = C / groups.
//
//   im2col_nchw_<t>(x, col, nb, C, H, W, G, R, S, Ho, Wo, sh, sw, ph, pw, dh, dw, vec)
//       col[(n * G + g) * Cg*R*S + (c * R + r) * S + s][oh * Wo + ow]
//           = x[n, g * Cg + c, oh * sh - ph + r * dh, ow * sw - pw + s * dw]   (0 outside)
//       for n < nb (x points at the chunk's first image): per (n, g) a [Cg*R*S, Ho*Wo] matrix,
//       the B of Y[n, g] = W[g] @ col[n, g]. vec: pixels per thread (16 bytes' worth when
//       Ho * Wo is a multiple of that, else 1).
//   im2col_nhwc_<t>(x, col, nb, C, H, W, G, R, S, Ho, Wo, sh, sw, ph, pw, dh, dw, vec)
//       col[g][(n * Ho + oh) * Wo + ow][(r * S + s) * Cg + c] = x[n, ih, iw, g * Cg + c]
//       per g a [nb*Ho*Wo, R*S*Cg] matrix, the A of Y[:, g*Kg:(g+1)*Kg] = col[g] @ W[g]ᵀ.
//       vec: elements moved per thread (1, or 16 bytes' worth when Cg and the pointers allow).
//   col2im_<t>(col, bias, y, nb, K, Ho, Wo, G, R, S, H, W, sh, sw, ph, pw, dh, dw, channels_last)
//       the transposed convolution's gather: y[n, k, oh, ow] (NHWC: y[n, oh, ow, k]) = bias[k] +
//       the col entries of every (ih, iw, r, s) with ih * sh - ph + r * dh == oh (and for w),
//       col laid out as im2col's output for a convolution of a [nb, K, Ho, Wo] image by
//       [.., R, S] windows over an [H, W] input grid (NCHW: [(n, g)][(k, r, s)][(ih, iw)],
//       NHWC: [g][(n, ih, iw)][(r, s, k)]). Deterministic: each output sums its own terms.
//   conv_depthwise_<t>(x, w, bias, y, nb, C, H, W, K, R, S, Ho, Wo, sh, sw, ph, pw, dh, dw,
//                      channels_last)
//       groups == C: output channel k reads input channel k / (K / C); w [K, R, S] (both
//       layouts store a one-channel group's weights alike); bias may be null.
//
// f32 accumulation; every entry point is a grid-stride loop over its outputs (any 1-D grid).
#include "spatial.h"

namespace hipk {

// I: the index type (unsigned int where the count fits in 31 bits, else long long; see
// spatial.h's HIPK_INDEXED). Addresses are computed in 64 bits.
// V consecutive output pixels of one column row per thread (one 16-byte store when the host
// found Ho * Wo a multiple of V: the index arithmetic once per vector, V loads in flight).
template <typename I, typename T, int V>
HIPK_DEVICE void im2col_nchw_v(const T* x, T* col, long long nb, int C, int H, int W, int R,
                               int S, int Ho, int Wo, int sh, int sw, int ph, int pw, int dh,
                               int dw) {
    const I runs = (I)Ho * (I)Wo / (I)V;  // vectors per column row
    const I n_all = (I)(nb * C * R * S) * runs;  // rows (n, g, c, r, s): G * Cg == C
    for (I i = (I)global_thread(); i < n_all; i += (I)grid_threads()) {
        const int p0 = (int)(i % runs) * V;
        I row = i / runs;
        const int s = (int)(row % (I)S);
        row /= (I)S;
        const int r = (int)(row % (I)R);
        row /= (I)R;  // n * C + channel (channel = g * Cg + c)
        const T* plane = x + (long long)row * H * W;
        Vec<T, V> v;
        HIPK_UNROLL
        for (int j = 0; j < V; ++j) {
            const int oh = (p0 + j) / Wo, ow = (p0 + j) % Wo;
            const int ih = oh * sh - ph + r * dh, iw = ow * sw - pw + s * dw;
            const bool inside = ih >= 0 && ih < H && iw >= 0 && iw < W;
            v.v[j] = inside ? plane[(long long)ih * W + iw] : from_float<T>(0.0f);
        }
        *reinterpret_cast<Vec<T, V>*>(col + (long long)i * V) = v;
    }
}

template <typename I, typename T>
HIPK_DEVICE void im2col_nchw(const T* x, T* col, long long nb, int C, int H, int W, int G, int R,
                             int S, int Ho, int Wo, int sh, int sw, int ph, int pw, int dh, int dw,
                             int vec) {
    // (the channels of all groups are consecutive: (g, c) is one channel index, G unused)
    (void)G;
    if (vec == Lanes16<T>::value)
        im2col_nchw_v<I, T, Lanes16<T>::value>(x, col, nb, C, H, W, R, S, Ho, Wo, sh, sw, ph, pw,
                                               dh, dw);
    else
        im2col_nchw_v<I, T, 1>(x, col, nb, C, H, W, R, S, Ho, Wo, sh, sw, ph, pw, dh, dw);
}

template <typename I, typename T, int V>
HIPK_DEVICE void im2col_nhwc_v(const T* x, T* col, long long nb, int C, int H, int W, int G,
                               int R, int S, int Ho, int Wo, int sh, int sw, int ph, int pw,
                               int dh, int dw) {
    const int Cg = C / G, runs = Cg / V;
    const I pixels = (I)(nb * Ho * Wo);
    const I n_all = (I)G * pixels * (I)(R * S * runs);
    for (I i = (I)global_thread(); i < n_all; i += (I)grid_threads()) {
        I rest = i;
        const int c = (int)(rest % (I)runs) * V;
        rest /= (I)runs;
        const int s = (int)(rest % (I)S);
        rest /= (I)S;
        const int r = (int)(rest % (I)R);
        rest /= (I)R;
        const I pixel = rest % pixels;
        const int g = (int)(rest / pixels);
        const int ow = (int)(pixel % (I)Wo);
        const I nh = pixel / (I)Wo;
        const int oh = (int)(nh % (I)Ho);
        const long long n = (long long)(nh / (I)Ho);
        const int ih = oh * sh - ph + r * dh, iw = ow * sw - pw + s * dw;
        Vec<T, V> v;
        if (ih < 0 || ih >= H || iw < 0 || iw >= W) {
            HIPK_UNROLL
            for (int j = 0; j < V; ++j) v.v[j] = from_float<T>(0.0f);
        } else {
            v = *reinterpret_cast<const Vec<T, V>*>(x + ((n * H + ih) * W + iw) * C + g * Cg + c);
        }
        *reinterpret_cast<Vec<T, V>*>(col + (long long)i * V) = v;
    }
}

template <typename I, typename T>
HIPK_DEVICE void im2col_nhwc(const T* x, T* col, long long nb, int C, int H, int W, int G, int R,
                             int S, int Ho, int Wo, int sh, int sw, int ph, int pw, int dh, int dw,
                             int vec) {
    if (vec == Lanes16<T>::value)
        im2col_nhwc_v<I, T, Lanes16<T>::value>(x, col, nb, C, H, W, G, R, S, Ho, Wo, sh, sw, ph,
                                               pw, dh, dw);
    else
        im2col_nhwc_v<I, T, 1>(x, col, nb, C, H, W, G, R, S, Ho, Wo, sh, sw, ph, pw, dh, dw);
}

// The sum over window taps that land on output (oh, ow): tap (r, s) comes from input pixel
// ((oh + ph - r * dh) / sh, ...) when that divides exactly and lies inside [H, W).
template <typename I, typename T>
HIPK_DEVICE void col2im(const T* col, const T* bias, T* y, long long nb, int K, int Ho, int Wo,
                        int G, int R, int S, int H, int W, int sh, int sw, int ph, int pw, int dh,
                        int dw, int channels_last) {
    const int Kg = K / G;
    const long long HW = (long long)H * W;
    const I n_all = (I)(nb * K * Ho * Wo);
    for (I i = (I)global_thread(); i < n_all; i += (I)grid_threads()) {
        const Pixel<I> o = output_pixel(i, K, Ho, Wo, channels_last);
        const long long n = (long long)o.n;
        const int g = o.c / Kg, kg = o.c % Kg;
        float acc = bias ? to_float(bias[o.c]) : 0.0f;
        for (int r = 0; r < R; ++r) {
            const int th = o.oh + ph - r * dh;
            if (th < 0 || th % sh) continue;
            const int ih = th / sh;
            if (ih >= H) continue;
            for (int s = 0; s < S; ++s) {
                const int tw = o.ow + pw - s * dw;
                if (tw < 0 || tw % sw) continue;
                const int iw = tw / sw;
                if (iw >= W) continue;
                long long at;
                if (channels_last) {  // [g][(n, ih, iw)][(r, s, kg)]
                    at = ((g * nb + n) * HW + (long long)ih * W + iw) * R * S * Kg +
                         ((long long)r * S + s) * Kg + kg;
                } else {  // [(n, g)][(kg, r, s)][(ih, iw)]
                    at = (((n * G + g) * Kg + kg) * R * S + (long long)r * S + s) * HW +
                         (long long)ih * W + iw;
                }
                acc += to_float(col[at]);
            }
        }
        y[i] = from_float<T>(acc);
    }
}

template <typename I, typename T>
HIPK_DEVICE void conv_depthwise(const T* x, const T* w, const T* bias, T* y, long long nb, int C,
                                int H, int W, int K, int R, int S, int Ho, int Wo, int sh, int sw,
                                int ph, int pw, int dh, int dw, int channels_last) {
    const int multiplier = K / C;
    const I n_all = (I)(nb * K * Ho * Wo);
    for (I i = (I)global_thread(); i < n_all; i += (I)grid_threads()) {
        const Pixel<I> o = output_pixel(i, K, Ho, Wo, channels_last);
        const Plane in = plane((long long)o.n, o.c / multiplier, C, H, W, channels_last);
        const T* wk = w + (long long)o.c * R * S;
        float acc = bias ? to_float(bias[o.c]) : 0.0f;
        for (int r = 0; r < R; ++r) {
            const int ih = o.oh * sh - ph + r * dh;
            if (ih < 0 || ih >= H) continue;
            for (int s = 0; s < S; ++s) {
                const int iw = o.ow * sw - pw + s * dw;
                if (iw < 0 || iw >= W) continue;
                acc += to_float(x[in.base + ih * in.hstep + iw * in.wstep]) *
                       to_float(wk[r * S + s]);
            }
        }
        y[i] = from_float<T>(acc);
    }
}

}  // namespace hipk

#define HIPK_IM2COL_NCHW(S_, T)                                                                \
    extern "C" __global__ void im2col_nchw_##S_(                                               \
        const T* x, T* col, long long nb, int C, int H, int W, int G, int R, int S, int Ho,    \
        int Wo, int sh, int sw, int ph, int pw, int dh, int dw, int vec) {                     \
        HIPK_INDEXED(nb * C * R * S * Ho * Wo, hipk::im2col_nchw, x, col, nb, C, H, W, G, R,   \
                     S, Ho, Wo, sh, sw, ph, pw, dh, dw, vec);                                  \
    }
HIPK_F32_AND_16BIT_TYPES(HIPK_IM2COL_NCHW)

#define HIPK_IM2COL_NHWC(S_, T)                                                                \
    extern "C" __global__ void im2col_nhwc_##S_(                                               \
        const T* x, T* col, long long nb, int C, int H, int W, int G, int R, int S, int Ho,    \
        int Wo, int sh, int sw, int ph, int pw, int dh, int dw, int vec) {                     \
        HIPK_INDEXED(nb * C * R * S * Ho * Wo, hipk::im2col_nhwc, x, col, nb, C, H, W, G, R,   \
                     S, Ho, Wo, sh, sw, ph, pw, dh, dw, vec);                                  \
    }
HIPK_F32_AND_16BIT_TYPES(HIPK_IM2COL_NHWC)

#define HIPK_COL2IM(S_, T)                                                                     \
    extern "C" __global__ void col2im_##S_(                                                    \
        const T* col, const T* bias, T* y, long long nb, int K, int Ho, int Wo, int G, int R,  \
        int S, int H, int W, int sh, int sw, int ph, int pw, int dh, int dw,                   \
        int channels_last) {                                                                   \
        HIPK_INDEXED(nb * K * Ho * Wo, hipk::col2im, col, bias, y, nb, K, Ho, Wo, G, R, S, H,  \
                     W, sh, sw, ph, pw, dh, dw, channels_last);                                \
    }
HIPK_F32_AND_16BIT_TYPES(HIPK_COL2IM)

#define HIPK_CONV_DEPTHWISE(S_, T)                                                             \
    extern "C" __global__ void conv_depthwise_##S_(                                            \
        const T* x, const T* w, const T* bias, T* y, long long nb, int C, int H, int W, int K, \
        int R, int S, int Ho, int Wo, int sh, int sw, int ph, int pw, int dh, int dw,          \
        int channels_last) {                                                                   \
        HIPK_INDEXED(nb * K * Ho * Wo, hipk::conv_depthwise, x, w, bias, y, nb, C, H, W, K, R, \
                     S, Ho, Wo, sh, sw, ph, pw, dh, dw, channels_last);                        \
    }
HIPK_F32_AND_16BIT_TYPES(HIPK_CONV_DEPTHWISE)
