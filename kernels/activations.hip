// Activations on contiguous tensors (f32 arithmetic for every type).
//
//   silu_<t>(x, y, n)             y = x * sigmoid(x)
//   gelu_erf_<t>(x, y, n)         y = x/2 * (1 + erf(x / sqrt(2)))                 (exact GELU)
//   gelu_tanh_<t>(x, y, n)        y = x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))
//   swiglu_<t>(gate, up, y, n)    y = silu(gate) * up    (the Llama MLP; the seeds had it
//                                                          backwards as gate * silu(up))
//
// y may alias an input. Launch: any 1-D grid and block (grid-stride, see elementwise.h).
#include "elementwise.h"

namespace hipk {

// x / (1 + e^-x): for very negative x, e^-x = inf and the quotient is -0, never NaN.
HIPK_DEVICE float silu(float x) { return x / (1.0f + expf(-x)); }

struct Silu {
    HIPK_DEVICE float operator()(float x) const { return silu(x); }
};
struct GeluErf {
    HIPK_DEVICE float operator()(float x) const {
        return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    }
};
struct GeluTanh {
    HIPK_DEVICE float operator()(float x) const {
        const float inner = 0.79788456080286536f * (x + 0.044715f * x * x * x);
        return 0.5f * x * (1.0f + tanhf(inner));
    }
};
struct SwiGlu {
    HIPK_DEVICE float operator()(float gate, float up) const { return silu(gate) * up; }
};

}  // namespace hipk

// --- entry points: one per type (hip-core reads the parameter types from these lines) -------

extern "C" __global__ void silu_f32(const float* x, float* y, long long n) {
    hipk::map1(x, y, n, hipk::Silu());
}
extern "C" __global__ void silu_f16(const hipk::f16* x, hipk::f16* y, long long n) {
    hipk::map1(x, y, n, hipk::Silu());
}
extern "C" __global__ void silu_bf16(const hipk::bf16* x, hipk::bf16* y, long long n) {
    hipk::map1(x, y, n, hipk::Silu());
}

extern "C" __global__ void gelu_erf_f32(const float* x, float* y, long long n) {
    hipk::map1(x, y, n, hipk::GeluErf());
}
extern "C" __global__ void gelu_erf_f16(const hipk::f16* x, hipk::f16* y, long long n) {
    hipk::map1(x, y, n, hipk::GeluErf());
}
extern "C" __global__ void gelu_erf_bf16(const hipk::bf16* x, hipk::bf16* y, long long n) {
    hipk::map1(x, y, n, hipk::GeluErf());
}

extern "C" __global__ void gelu_tanh_f32(const float* x, float* y, long long n) {
    hipk::map1(x, y, n, hipk::GeluTanh());
}
extern "C" __global__ void gelu_tanh_f16(const hipk::f16* x, hipk::f16* y, long long n) {
    hipk::map1(x, y, n, hipk::GeluTanh());
}
extern "C" __global__ void gelu_tanh_bf16(const hipk::bf16* x, hipk::bf16* y, long long n) {
    hipk::map1(x, y, n, hipk::GeluTanh());
}

extern "C" __global__ void swiglu_f32(const float* gate, const float* up, float* y, long long n) {
    hipk::map2(gate, up, y, n, hipk::SwiGlu());
}
extern "C" __global__ void swiglu_f16(const hipk::f16* gate, const hipk::f16* up, hipk::f16* y,
                                      long long n) {
    hipk::map2(gate, up, y, n, hipk::SwiGlu());
}
extern "C" __global__ void swiglu_bf16(const hipk::bf16* gate, const hipk::bf16* up,
                                       hipk::bf16* y, long long n) {
    hipk::map2(gate, up, y, n, hipk::SwiGlu());
}
