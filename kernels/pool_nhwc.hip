// NHWC max pooling of a K x K window (K 2 or 3) at stride 2, no dilation, torch's rules (taps
// outside the image skipped; NaN propagates), in 16-byte runs of channels.
//
//   max_pool2d_nhwc_<t>(x, y, N, C, H, W, Ho, Wo, k, ph, pw)
//       x [N, H, W, C], y [N, Ho, Wo, C], C-contiguous; C a multiple of V = 16 bytes' worth of
//       elements and x, y 16-byte aligned (the host checks). Grid-stride over nhwc_threads()
//       threads (one per output pixel and run of V channels, rounded up to whole warps), any
//       1-D grid of blocks of a multiple of 64 threads, at most 256 (its launch bounds).
//
// A thread takes one run of V channels of one output pixel; consecutive threads take the
// pixel's runs, then the next pixel's (coalesced: a warp's loads cover whole pixels). At
// column stride 2 the window of output column ow shares its first column with the last one of
// ow - 1's window (K = 3): each thread loads the last K - 1 columns of its window's rows and
// takes the first from the thread one pixel before it in the warp (`runs` lanes up) by a
// shuffle, so a 3x3 window costs 6 loads a thread instead of 9; a row's first pixel and the
// threads of the warp's first pixel (every thread on the cpu platform, whose warps are one
// lane here) load it themselves, after the shuffle. The window size and the padding of the
// columns are template parameters (four instances): no runtime window loop, 32-bit index
// arithmetic where the launch allows (HIPK_INDEXED).
//
// H200, same process, fraction of the 256 MiB copy rate against pool.hip's one-output kernel
// (9 loads, 78 registers, three blocks a multiprocessor): bf16 [32, 112, 112, 64] 3x3 / 2
// 19.6 µs (0.79) against 21.1 (0.73), 2x2 / 2 0.86 against 0.79; f32 0.86 against 0.82; every
// measured shape faster (C from 24 to 512).
#include "pool_rows.h"

namespace hipk {

// 16 bytes of channels at `at`, all -inf where `inside` is false (a pixel outside the image).
template <typename T, int V> HIPK_DEVICE Vec<T, V> pixel_run(const T* at, bool inside) {
    union {
        Vec<T, V> run;
        unsigned int words[4];
    } out;  // chosen as four words: as a Vec of 16-bit elements, one byte permute an element
    MaxRun<T, V>::init(out.run);
    if (inside) {
        typedef Vec<unsigned int, 4> Words;
        const Words v = *reinterpret_cast<const Words*>(at);
        HIPK_UNROLL
        for (int i = 0; i < 4; ++i) out.words[i] = v.v[i];
    }
    return out.run;
}

// `run` of the thread `delta` lanes up the warp (every lane of the warp calls it; a lane below
// `delta` gets its own back). One lane a warp on the cpu platform: `run` itself.
template <typename T, int V>
HIPK_DEVICE Vec<T, V> lanes_up(const Vec<T, V>& run, int delta) {
    union {
        Vec<T, V> run;
        unsigned int words[4];
    } v;
    v.run = run;
    HIPK_UNROLL
    for (int i = 0; i < 4; ++i) {
#if defined(__CUDA_ARCH__)
        v.words[i] = __shfl_up_sync(0xffffffffu, v.words[i], (unsigned int)delta);
#elif HIPK_GPU
        v.words[i] = (unsigned int)__shfl_up((int)v.words[i], (unsigned int)delta);
#else
        (void)delta;
#endif
    }
    return v.run;
}

// Threads of a launch: output pixels x runs of V channels, in whole warps (the shuffles).
HIPK_DEVICE long long nhwc_threads(long long N, int C, int Ho, int Wo, int V) {
    return whole_warps(N * Ho * Wo * (C / V));
}

// PW: the columns' padding, 0 or 1; ph the rows'.
template <typename I, typename T, int K, int PW>
HIPK_DEVICE void max_pool2d_nhwc(const T* x, T* y, long long N, int C, int H, int W, int Ho,
                                 int Wo, int ph) {
    constexpr int V = Lanes16<T>::value;
    const int runs = C / V;
    const I n_real = (I)(N * Ho * Wo * runs), n_all = (I)nhwc_threads(N, C, Ho, Wo, V);
    const int lane = lane_id();
    for (I i = (I)global_thread(); i < n_all; i += (I)grid_threads()) {
        const bool active = i < n_real;  // (the rest take the warp's shuffles, store nothing)
        const I pixel = i / (I)runs, row = pixel / (I)Wo;
        const int run = (int)(i - pixel * (I)runs), ow = (int)(pixel - row * (I)Wo);
        const I n = row / (I)Ho;
        const int oh = (int)(row - n * (I)Ho);
        const int h0 = 2 * oh - ph, w0 = 2 * ow - PW;  // the window's first row and column
        const long long row_step = (long long)W * C;
        // (the window's first pixel: outside the image at the padding, never dereferenced)
        const T* corner = x + (active ? (long long)n : 0) * H * row_step + h0 * row_step +
                          (long long)w0 * C + run * V;
        bool row_in[K];
        HIPK_UNROLL
        for (int r = 0; r < K; ++r) row_in[r] = h0 + r >= 0 && h0 + r < H;
        // K = 3: columns w0 + 1, w0 + 2 here, w0 (the pixel before's w0 + 2) by the shuffle
        constexpr int OWN = K == 3 ? 2 : K, SKIP = K - OWN;
        Vec<T, V> taps[K][OWN];  // every load issued before the first compare
        HIPK_UNROLL
        for (int r = 0; r < K; ++r) {
            HIPK_UNROLL
            for (int s = 0; s < OWN; ++s) {
                const int w = w0 + SKIP + s;
                taps[r][s] = pixel_run<T, V>(corner + r * row_step + (SKIP + s) * C,
                                             row_in[r] && w >= 0 && w < W);
            }
        }
        Vec<T, V> m;
        MaxRun<T, V>::init(m);
        HIPK_UNROLL
        for (int r = 0; r < K; ++r) {
            HIPK_UNROLL
            for (int s = 0; s < OWN; ++s) MaxRun<T, V>::add(m, taps[r][s]);
        }
        if (K == 3) {
            // The pixel before's last column, its rows' max (what this window's first needs).
            Vec<T, V> last = taps[0][OWN - 1];
            HIPK_UNROLL
            for (int r = 1; r < K; ++r) MaxRun<T, V>::add(last, taps[r][OWN - 1]);
            Vec<T, V> first = lanes_up<T, V>(last, runs);
            if (ow == 0 || lane < runs) {  // a row's first pixel, or the warp's
                MaxRun<T, V>::init(first);
                HIPK_UNROLL
                for (int r = 0; r < K; ++r)
                    MaxRun<T, V>::add(first, pixel_run<T, V>(corner + r * row_step,
                                                             row_in[r] && w0 >= 0));
            }
            MaxRun<T, V>::add(m, first);
        }
        if (active) *reinterpret_cast<Vec<T, V>*>(y + (long long)i * V) = m;
    }
}

template <typename I, typename T>
HIPK_DEVICE void max_pool2d_nhwc_k(const T* x, T* y, long long N, int C, int H, int W, int Ho,
                                   int Wo, int k, int ph, int pw) {
    if (k == 3 && pw > 0)
        max_pool2d_nhwc<I, T, 3, 1>(x, y, N, C, H, W, Ho, Wo, ph);
    else if (k == 3)
        max_pool2d_nhwc<I, T, 3, 0>(x, y, N, C, H, W, Ho, Wo, ph);
    else if (pw > 0)
        max_pool2d_nhwc<I, T, 2, 1>(x, y, N, C, H, W, Ho, Wo, ph);
    else
        max_pool2d_nhwc<I, T, 2, 0>(x, y, N, C, H, W, Ho, Wo, ph);
}

}  // namespace hipk

// __launch_bounds__(256, 5): five blocks of 256 a multiprocessor, 48 registers a thread on
// NVIDIA (no spills; 56 at four blocks).
#define HIPK_MAX_POOL2D_NHWC(S_, T)                                                            \
    extern "C" __global__ void __launch_bounds__(256, 5)                                      \
        max_pool2d_nhwc_##S_(const T* x, T* y, long long N, int C, int H, int W, int Ho,       \
                             int Wo, int k, int ph, int pw) {                                  \
        HIPK_INDEXED(hipk::nhwc_threads(N, C, Ho, Wo, hipk::Lanes16<T>::value),                \
                     hipk::max_pool2d_nhwc_k, x, y, N, C, H, W, Ho, Wo, k, ph, pw);            \
    }
HIPK_F32_AND_16BIT_TYPES(HIPK_MAX_POOL2D_NHWC)
