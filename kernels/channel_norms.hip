// Normalizations per channel: group_norm and batch_norm (inference), torch's semantics.
//
//   group_norm_<t>(x, weight, bias, y, int C, int G, long long inner, float eps, int vec)
//       x, y [N, C, inner] C-contiguous (inner: the spatial size); block b normalizes group
//       (n, g) = (b / G, b % G), its C / G channels' elements [C / G * inner] in a row:
//       y = (x - mean) / sqrt(var + eps) * weight[c] + bias[c], biased variance over the group.
//       weight, bias [C] may be null (1 and 0). vec: 16 bytes' worth of elements per access
//       when inner is a multiple of that and x, y are 16-byte aligned, else 1.
//   batch_norm_<t>(x, mean, var, weight, bias, y, long long n, int C, long long inner, float eps)
//       y = (x - mean[c]) / sqrt(var[c] + eps) * weight[c] + bias[c], c = (i / inner) % C:
//       NCHW [N, C, inner] (inner = H * W), or channels last with inner = 1; weight, bias may be
//       null. y may be x (in place).
//
// group_norm: one block per group, 1-D blocks of any size (a multiple of the warp size is
// best), three passes over the group's row (mean, then the variance about it: no
// cancellation, then the output as (x - mean) · (rstd · weight) + bias), f32 accumulation;
// the row is read three times, from L2 when it fits. batch_norm: grid-stride over any 1-D grid.
#include "dtypes.h"

namespace hipk {

// V elements per access: 16 bytes when the host found `inner` a multiple of V and the
// pointers aligned (a vector then never straddles two channels), else 1.
template <typename T, int V>
HIPK_DEVICE void group_norm(const T* x, const T* weight, const T* bias, T* y, int C, int G,
                            long long inner, float eps) {
    __shared__ float scratch[HIPK_REDUCER_SCRATCH];
    BlockReducer reduce = {scratch, 0, (int)threadIdx.x, (int)blockDim.x, 0};
    const int Cg = C / G;
    const long long count = (long long)Cg * inner;
    const long long vectors = count / V;
    const long long first = (long long)blockIdx.x * count;
    const Vec<T, V>* row = reinterpret_cast<const Vec<T, V>*>(x + first);
    float sum = 0.0f;
    for (long long j = threadIdx.x; j < vectors; j += blockDim.x) {
        const Vec<T, V> v = row[j];
        HIPK_UNROLL
        for (int i = 0; i < V; ++i) sum += to_float(v.v[i]);
    }
    const float mean = reduce.sum(sum) / (float)count;
    float squares = 0.0f;
    for (long long j = threadIdx.x; j < vectors; j += blockDim.x) {
        const Vec<T, V> v = row[j];
        HIPK_UNROLL
        for (int i = 0; i < V; ++i) {
            const float d = to_float(v.v[i]) - mean;
            squares += d * d;
        }
    }
    const float rstd = 1.0f / sqrtf(reduce.sum(squares) / (float)count + eps);
    const int c0 = (int)(blockIdx.x % G) * Cg;
    Vec<T, V>* out = reinterpret_cast<Vec<T, V>*>(y + first);
    for (long long j = threadIdx.x; j < vectors; j += blockDim.x) {
        const int c = c0 + (int)(j * V / inner);
        // (x - mean) first: x * scale - mean * scale would cancel where the spread is small
        // beside the mean (a one-element group: 0 exactly, not the rounding of x * scale).
        const float scale = (weight ? to_float(weight[c]) : 1.0f) * rstd;
        const float shift = bias ? to_float(bias[c]) : 0.0f;
        const Vec<T, V> v = row[j];
        Vec<T, V> o;
        HIPK_UNROLL
        for (int i = 0; i < V; ++i)
            o.v[i] = from_float<T>((to_float(v.v[i]) - mean) * scale + shift);
        out[j] = o;
    }
}

template <typename T>
HIPK_DEVICE void batch_norm(const T* x, const T* mean, const T* var, const T* weight,
                            const T* bias, T* y, long long n, int C, long long inner, float eps) {
    for (long long i = global_thread(); i < n; i += grid_threads()) {
        const int c = (int)(i / inner % C);
        const float w = weight ? to_float(weight[c]) : 1.0f;
        const float b = bias ? to_float(bias[c]) : 0.0f;
        const float scale = w / sqrtf(to_float(var[c]) + eps);
        y[i] = from_float<T>((to_float(x[i]) - to_float(mean[c])) * scale + b);
    }
}

}  // namespace hipk

#define HIPK_GROUP_NORM(S_, T)                                                                 \
    extern "C" __global__ void group_norm_##S_(const T* x, const T* weight, const T* bias,     \
                                               T* y, int C, int G, long long inner,            \
                                               float eps, int vec) {                           \
        if (vec == hipk::Lanes16<T>::value)                                                    \
            hipk::group_norm<T, hipk::Lanes16<T>::value>(x, weight, bias, y, C, G, inner, eps); \
        else                                                                                   \
            hipk::group_norm<T, 1>(x, weight, bias, y, C, G, inner, eps);                      \
    }
HIPK_F32_AND_16BIT_TYPES(HIPK_GROUP_NORM)

#define HIPK_BATCH_NORM(S_, T)                                                                 \
    extern "C" __global__ void batch_norm_##S_(const T* x, const T* mean, const T* var,        \
                                               const T* weight, const T* bias, T* y,           \
                                               long long n, int C, long long inner,            \
                                               float eps) {                                    \
        hipk::batch_norm<T>(x, mean, var, weight, bias, y, n, C, inner, eps);                  \
    }
HIPK_F32_AND_16BIT_TYPES(HIPK_BATCH_NORM)
