// What the spatial kernels (conv.hip, pool.hip, resample.hip) share: 32-bit index arithmetic
// where the count allows, and an output's (n, c, oh, ow) in NCHW or NHWC.
#pragma once

#include "dtypes.h"

// Calls f<unsigned int>(args...) when every index of the launch fits in 31 bits, else
// f<long long>(args...): a 64-bit division is a long software sequence on GPUs, a 32-bit one a
// few instructions, and the kernels divide several times per element. (A grid-stride index
// then stays below 2^31 + the grid's threads < 2^32.)
#define HIPK_INDEXED(count, f, ...)                                                            \
    do {                                                                                       \
        if ((long long)(count) <= 0x7fffffffLL) f<unsigned int>(__VA_ARGS__);                  \
        else f<long long>(__VA_ARGS__);                                                        \
    } while (0)

namespace hipk {

// Output i of an [N, C, Ho, Wo] (NCHW) or [N, Ho, Wo, C] (NHWC) tensor, C-contiguous.
template <typename I> struct Pixel {
    I n;
    int c, oh, ow;
};

template <typename I>
HIPK_DEVICE Pixel<I> output_pixel(I i, int C, int Ho, int Wo, int channels_last) {
    Pixel<I> p;
    if (channels_last) {
        p.c = (int)(i % (I)C);
        const I pixel = i / (I)C;
        p.ow = (int)(pixel % (I)Wo);
        const I nh = pixel / (I)Wo;
        p.oh = (int)(nh % (I)Ho);
        p.n = nh / (I)Ho;
    } else {
        p.ow = (int)(i % (I)Wo);
        const I rest = i / (I)Wo;
        p.oh = (int)(rest % (I)Ho);
        const I nc = rest / (I)Ho;
        p.c = (int)(nc % (I)C);
        p.n = nc / (I)C;
    }
    return p;
}

// Where element (h, w) of plane (n, c) of an [N, C, H, W] / [N, H, W, C] tensor is:
// base + h * hstep + w * wstep.
struct Plane {
    long long base, hstep, wstep;
};

HIPK_DEVICE Plane plane(long long n, int c, int C, int H, int W, int channels_last) {
    Plane p;
    p.base = channels_last ? n * H * W * C + c : (n * C + c) * H * W;
    p.wstep = channels_last ? C : 1;
    p.hstep = p.wstep * W;
    return p;
}

}  // namespace hipk
