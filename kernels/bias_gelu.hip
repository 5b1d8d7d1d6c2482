// gelu(x + bias) over rows of whole 16-byte vectors: a linear layer's bias added where its GELU
// reads the product, in one pass.
//
//   bias_gelu_<t>(x, bias, y, int vectors, int per_row, int tanh):
//       y = gelu(x + bias) over `vectors` 16-byte vectors of x, bias a row of `per_row`
//       vectors repeated along x; the exact (erf) GELU, or the tanh approximation when `tanh`
//       is non-zero; the sum and the GELU in f32 for the 16-bit types (gelu.h).
//
// x, bias and y 16-byte aligned and C-contiguous, rows of whole vectors, vectors < 2^31 (the
// host checks: ops/activations.py; other layouts take binary.hip's bias_gelu ops). y may be x.
// Launch: 1-D blocks of B threads, grid ceil(vectors / (2 B)): a thread loads its two
// vectors, B apart, before it computes either.
//
// Why not binary.hip's rows path: its per-vector 64-bit offsets, runtime operand kinds and op
// switch cost as much as the GELU on an H200, which is instruction-bound here ([16384, 1536]
// bf16 from an L2-warm graph: 51.7 us there, 37.0 here, torch's GELU without the bias 34.6).
#include "gelu.h"

namespace hipk {

template <typename T, typename Gelu>
HIPK_DEVICE void bias_gelu(const T* x, const T* bias, T* y, int vectors, int per_row) {
    enum { N = 16 / sizeof(T) };
    typedef Vec<T, N> V;
    const unsigned int first = blockIdx.x * 2u * blockDim.x + threadIdx.x;
    const unsigned int at[2] = {first, first + blockDim.x};
    V xs[2] = {}, bs[2] = {};
    HIPK_UNROLL
    for (int j = 0; j < 2; ++j) {  // both vectors' loads in flight before any arithmetic
        if (at[j] < (unsigned int)vectors) {
            xs[j] = reinterpret_cast<const V*>(x)[at[j]];
            bs[j] = reinterpret_cast<const V*>(bias)[at[j] % (unsigned int)per_row];
        }
    }
    HIPK_UNROLL
    for (int j = 0; j < 2; ++j) {
        if (at[j] < (unsigned int)vectors) {
            V out;
            HIPK_UNROLL
            for (int k = 0; k < N; ++k)
                out.v[k] = store_value<T>(Gelu()(load_value<T>(xs[j].v[k]) +
                                                 load_value<T>(bs[j].v[k])));
            reinterpret_cast<V*>(y)[at[j]] = out;
        }
    }
}

}  // namespace hipk

#define BIAS_GELU(S, T)                                                                        \
    extern "C" __global__ void bias_gelu_##S(const T* x, const T* bias, T* y, int vectors,    \
                                             int per_row, int tanh) {                          \
        if (tanh)                                                                              \
            hipk::bias_gelu<T, hipk::GeluTanh<float> >(x, bias, y, vectors, per_row);          \
        else                                                                                   \
            hipk::bias_gelu<T, hipk::GeluErf<float> >(x, bias, y, vectors, per_row);           \
    }

HIPK_F32_AND_16BIT_TYPES(BIAS_GELU)
