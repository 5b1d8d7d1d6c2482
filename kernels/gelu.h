// The two GELUs, of one compute type C (f32 for the 16-bit floats, f64 for f64): math.hip's
// gelu ops, and binary.hip's bias_gelu ops (gelu(a + b): a linear layer's output and its
// bias, in one pass instead of two).
#pragma once

#include "pointwise.h"

namespace hipk {

template <typename C> struct GeluErf {  // x/2 * (1 + erf(x / sqrt(2))), the exact GELU
    HIPK_DEVICE C operator()(C x) const {
        return C(0.5) * x * (C(1) + m_erf(x * C(0.70710678118654752440)));
    }
};
template <typename C> struct GeluTanh {  // x/2 * (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    HIPK_DEVICE C operator()(C x) const {
        const C inner = C(0.79788456080286535588) * (x + C(0.044715) * x * x * x);
        return C(0.5) * x * (C(1) + m_tanh(inner));
    }
};

}  // namespace hipk
