// Transcendental functions of floats over any layout (drivers: pointwise.h).
//
//   math_<t>(op, x, y, rows, cols, ra, ry, ia, p0, p1, q0, q1)                    rows path
//   math_any_<t>(op, x, y, n, rank, n0..n7, a0..a7, y0..y7, p0, p1, q0, q1)
//
// op (hip_runtime/ops/pointwise.py's MATH_OPS, in this order): 0 exp, 1 log, 2 tanh, 3 sqrt,
// 4 rsqrt, 5 sigmoid, 6 silu, 7 gelu_erf, 8 gelu_tanh, 9 elu (alpha p0), 10 erf, 11 sin,
// 12 cos (x ** p is binary.hip's power)
// f32 math for the 16-bit floats (loads widen, stores round once), f64 math for f64; p0 is
// rounded to the compute type; q0 and q1 are unused. <t>: f32 f64 f16 bf16.
#include "gelu.h"
#include "pointwise.h"

namespace hipk {

template <typename C> struct Exp {
    HIPK_DEVICE C operator()(C x) const { return m_exp(x); }
};
template <typename C> struct Log {
    HIPK_DEVICE C operator()(C x) const { return m_log(x); }
};
template <typename C> struct Tanh {
    HIPK_DEVICE C operator()(C x) const { return m_tanh(x); }
};
template <typename C> struct Sqrt {
    HIPK_DEVICE C operator()(C x) const { return m_sqrt(x); }
};
template <typename C> struct Rsqrt {
    HIPK_DEVICE C operator()(C x) const { return C(1) / m_sqrt(x); }
};
// 1 / (1 + e^-x): for very negative x, e^-x = inf and the result is 0, never NaN.
template <typename C> struct Sigmoid {
    HIPK_DEVICE C operator()(C x) const { return C(1) / (C(1) + m_exp(-x)); }
};
template <typename C> struct Silu {
    HIPK_DEVICE C operator()(C x) const { return x / (C(1) + m_exp(-x)); }
};
template <typename C> struct Elu {
    C alpha;
    HIPK_DEVICE C operator()(C x) const { return x > 0 ? x : alpha * m_expm1(x); }
};
template <typename C> struct Erf {
    HIPK_DEVICE C operator()(C x) const { return m_erf(x); }
};
template <typename C> struct Sin {
    HIPK_DEVICE C operator()(C x) const { return m_sin(x); }
};
template <typename C> struct Cos {
    HIPK_DEVICE C operator()(C x) const { return m_cos(x); }
};

template <typename T, typename Path>
HIPK_DEVICE void math(int op, const Path& path, const T* x, T* y, double p0) {
    typedef typename Compute<T>::type C;
    const Run1<T, T, Path> run = {path, input(x, 0, 0.0, 0), y};
    switch (op) {
        case 0: run(Exp<C>()); break;
        case 1: run(Log<C>()); break;
        case 2: run(Tanh<C>()); break;
        case 3: run(Sqrt<C>()); break;
        case 4: run(Rsqrt<C>()); break;
        case 5: run(Sigmoid<C>()); break;
        case 6: run(Silu<C>()); break;
        case 7: run(GeluErf<C>()); break;
        case 8: run(GeluTanh<C>()); break;
        case 9: { const Elu<C> f = {(C)p0}; run(f); break; }
        case 10: run(Erf<C>()); break;
        case 11: run(Sin<C>()); break;
        case 12: run(Cos<C>()); break;
        default: break;
    }
}

}  // namespace hipk

#define MATH(S, T)                                                                             \
    extern "C" __global__ void math_##S(int op, const T* x, T* y, long long rows,              \
                                              long long cols, long long ra, long long ry,      \
                                              int ia, double p0, double p1, long long q0,      \
                                              long long q1) {                                  \
        HIPK_ROWS_ARGS2;                                                                       \
        (void)p1, (void)q0, (void)q1;                                                          \
        hipk::math(op, path, x, y, p0);                                                        \
    }                                                                                          \
    extern "C" __global__ void math_any_##S(                                                   \
        int op, const T* x, T* y, long long n, int rank, long long n0, long long n1,           \
        long long n2, long long n3, long long n4, long long n5, long long n6, long long n7,    \
        long long a0, long long a1, long long a2, long long a3, long long a4, long long a5,    \
        long long a6, long long a7, long long y0, long long y1, long long y2, long long y3,    \
        long long y4, long long y5, long long y6, long long y7, double p0, double p1,          \
        long long q0, long long q1) {                                                          \
        HIPK_ANY_ARGS2;                                                                        \
        (void)p1, (void)q0, (void)q1;                                                          \
        hipk::math(op, path, x, y, p0);                                                        \
    }

HIPK_FLOAT_TYPES(MATH)
