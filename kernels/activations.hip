// swiglu_<t>(gate, up, y, n): y = silu(gate) * up on contiguous tensors (f32 arithmetic for
// every type), the gating of hip_runtime.ops.linalg's `mlp_swiglu` (the seeds had it
// backwards as gate * silu(up)). Every other activation is a pointwise kernel (math.hip,
// binary.hip's swiglu: any layout, broadcasting).
//
// y may alias an input. Launch: any 1-D grid and block (grid-stride, see elementwise.h).
#include "elementwise.h"

namespace hipk {

// x / (1 + e^-x): for very negative x, e^-x = inf and the quotient is -0, never NaN.
HIPK_DEVICE float silu(float x) { return x / (1.0f + expf(-x)); }

struct SwiGlu {
    HIPK_DEVICE float operator()(float gate, float up) const { return silu(gate) * up; }
};

}  // namespace hipk

// --- entry points: one per type (hip-core reads the parameter types from these lines) -------

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
