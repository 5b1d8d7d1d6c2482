// Conversions among f32, f16 and bf16: cast_<from>_to_<to>(x, y, n).
//
// Every conversion rounds to nearest even, once: a 16-bit value widens to f32 exactly, then
// rounds to the target. Out-of-range values become infinities, NaN stays NaN, subnormals are
// kept. x and y must not overlap (their element sizes may differ).
// Launch: any 1-D grid and block (grid-stride, see elementwise.h).
#include "elementwise.h"

namespace hipk {

struct Identity {
    HIPK_DEVICE float operator()(float x) const { return x; }
};

}  // namespace hipk

extern "C" __global__ void cast_f32_to_f16(const float* x, hipk::f16* y, long long n) {
    hipk::map1(x, y, n, hipk::Identity());
}
extern "C" __global__ void cast_f32_to_bf16(const float* x, hipk::bf16* y, long long n) {
    hipk::map1(x, y, n, hipk::Identity());
}
extern "C" __global__ void cast_f16_to_f32(const hipk::f16* x, float* y, long long n) {
    hipk::map1(x, y, n, hipk::Identity());
}
extern "C" __global__ void cast_f16_to_bf16(const hipk::f16* x, hipk::bf16* y, long long n) {
    hipk::map1(x, y, n, hipk::Identity());
}
extern "C" __global__ void cast_bf16_to_f32(const hipk::bf16* x, float* y, long long n) {
    hipk::map1(x, y, n, hipk::Identity());
}
extern "C" __global__ void cast_bf16_to_f16(const hipk::bf16* x, hipk::f16* y, long long n) {
    hipk::map1(x, y, n, hipk::Identity());
}
