// 2-D upsampling (torch's interpolate, modes "nearest" and "bilinear") over NCHW
// (`channels_last` 0) or NHWC (1) C-contiguous tensors.
//
//   upsample2d_<t>(x, y, nb, C, H, W, Ho, Wo, float scale_h, float scale_w, mode, channels_last)
//       mode 0 nearest: source row min(floor(oh * scale_h), H - 1) (f32 arithmetic, as torch);
//       mode 1 bilinear, align_corners=False: source (oh + 0.5) * scale_h - 0.5, clamped at 0;
//       mode 2 bilinear, align_corners=True: source oh * scale_h.
//       The host passes torch's scales: in / out, or 1 / scale_factor when one was given, and
//       (H - 1) / (Ho - 1) (0 when Ho == 1) for align_corners.
//
// One thread per output, f32 arithmetic, grid-stride over any 1-D grid.
#include "spatial.h"

namespace hipk {

// Where output index `o` reads from along one axis: the first source index, the step to the
// second (0 at the edge) and the second's weight.
HIPK_DEVICE void source(int o, float scale, int size, int mode, int& i0, int& step, float& t) {
    if (mode == 0) {
        const int i = (int)floorf((float)o * scale);
        i0 = i < size - 1 ? i : size - 1;
        step = 0;
        t = 0.0f;
        return;
    }
    float at = mode == 2 ? scale * (float)o : scale * ((float)o + 0.5f) - 0.5f;
    at = at < 0.0f ? 0.0f : at;
    i0 = (int)at;
    step = i0 < size - 1 ? 1 : 0;
    t = at - (float)i0;
}

template <typename I, typename T>
HIPK_DEVICE void upsample2d(const T* x, T* y, long long nb, int C, int H, int W, int Ho, int Wo,
                            float scale_h, float scale_w, int mode, int channels_last) {
    const I n_all = (I)(nb * C * Ho * Wo);
    for (I i = (I)global_thread(); i < n_all; i += (I)grid_threads()) {
        const Pixel<I> o = output_pixel(i, C, Ho, Wo, channels_last);
        const int oh = o.oh, ow = o.ow;
        const Plane in = plane((long long)o.n, o.c, C, H, W, channels_last);
        const long long base = in.base, hstep = in.hstep, wstep = in.wstep;
        int h0, hs, w0, ws;
        float th, tw;
        source(oh, scale_h, H, mode, h0, hs, th);
        source(ow, scale_w, W, mode, w0, ws, tw);
        const T* row0 = x + base + h0 * hstep;
        const T* row1 = row0 + hs * hstep;
        if (mode == 0) {
            y[i] = row0[w0 * wstep];
            continue;
        }
        const long long a = w0 * wstep, b = (w0 + ws) * wstep;
        const float top = (1.0f - tw) * to_float(row0[a]) + tw * to_float(row0[b]);
        const float bottom = (1.0f - tw) * to_float(row1[a]) + tw * to_float(row1[b]);
        y[i] = from_float<T>((1.0f - th) * top + th * bottom);
    }
}

}  // namespace hipk

#define HIPK_UPSAMPLE2D(S_, T)                                                                 \
    extern "C" __global__ void upsample2d_##S_(const T* x, T* y, long long nb, int C, int H,   \
                                               int W, int Ho, int Wo, float scale_h,           \
                                               float scale_w, int mode, int channels_last) {   \
        HIPK_INDEXED(nb * C * Ho * Wo, hipk::upsample2d, x, y, nb, C, H, W, Ho, Wo, scale_h,   \
                     scale_w, mode, channels_last);                                            \
    }
HIPK_F32_AND_16BIT_TYPES(HIPK_UPSAMPLE2D)
