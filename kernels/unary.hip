// Unary arithmetic over any layout (drivers: pointwise.h); math.hip has the transcendentals.
//
//   unary_<t>(op, x, y, rows, cols, ra, ry, ia, p0, p1, q0, q1)                   rows path
//   unary_any_<t>(op, x, y, n, rank, n0..n7, a0..a7, y0..y7, p0, p1, q0, q1)
//
// op (hip_runtime/ops/pointwise.py's UNARY_OPS, in this order):
//   every type: 0 abs, 1 neg, 2 sign, 3 sqr, 4 relu, 5 clamp (to [lo, hi]: p0/p1 for floats,
//   q0/q1 for integers; numpy's clip: min(max(x, lo), hi), NaN stays NaN)
//   floats: 6 recip, 7 floor, 8 ceil, 9 round (half to even), 10 affine (x * p0 + p1)
// Parameters are rounded to the compute type (f32 for 16-bit floats). Integers wrap as numpy
// (neg and abs of the most negative value give it back). <t>: f32 f64 f16 bf16 i8 i16 i32
// i64 u8 u32 (integers: ops 0-5).
#include "pointwise.h"

namespace hipk {

template <typename C, int F = IsFloat<C>::value> struct Neg {
    HIPK_DEVICE C operator()(C x) const { return -x; }
};
template <typename C> struct Neg<C, 0> {
    HIPK_DEVICE C operator()(C x) const {
        typedef typename Wrap<C>::type U;
        return (C)((U)0 - (U)x);
    }
};
template <typename C> struct Abs {
    HIPK_DEVICE C operator()(C x) const { return x < 0 ? Neg<C>()(x) : x; }
};
template <typename C> struct Sign {  // NaN stays NaN; 0 stays 0
    HIPK_DEVICE C operator()(C x) const { return x > 0 ? C(1) : (x < 0 ? C(-1) : x); }
};
template <typename C> struct Sqr {
    HIPK_DEVICE C operator()(C x) const { return wrap_mul(x, x); }
};
template <typename C> struct Relu {  // NaN stays NaN
    HIPK_DEVICE C operator()(C x) const { return x < 0 ? C(0) : x; }
};
template <typename C> struct Clamp {
    C lo, hi;
    HIPK_DEVICE C operator()(C x) const {
        const C v = x < lo ? lo : x;
        return v > hi ? hi : v;
    }
};

template <typename C> struct Recip {
    HIPK_DEVICE C operator()(C x) const { return C(1) / x; }
};
template <typename C> struct Floor {
    HIPK_DEVICE C operator()(C x) const { return m_floor(x); }
};
template <typename C> struct Ceil {
    HIPK_DEVICE C operator()(C x) const { return m_ceil(x); }
};
template <typename C> struct Round {  // rint: the current rounding mode, nearest even
    HIPK_DEVICE C operator()(C x) const { return m_rint(x); }
};
template <typename C> struct Affine {
    C a, b;
    HIPK_DEVICE C operator()(C x) const { return x * a + b; }
};

// The float-only ops; integers never ask for them, so they are not instantiated.
template <typename C, int F = IsFloat<C>::value> struct FloatUnary {
    template <typename Run> static HIPK_DEVICE void run(int op, const Run& run, C p0, C p1) {
        switch (op) {
            case 6: run(Recip<C>()); break;
            case 7: run(Floor<C>()); break;
            case 8: run(Ceil<C>()); break;
            case 9: run(Round<C>()); break;
            case 10: { const Affine<C> f = {p0, p1}; run(f); break; }
            default: break;
        }
    }
};
template <typename C> struct FloatUnary<C, 0> {
    template <typename Run> static HIPK_DEVICE void run(int, const Run&, C, C) {}
};

template <typename T, typename Path>
HIPK_DEVICE void unary(int op, const Path& path, const T* x, T* y, double p0, double p1,
                       long long q0, long long q1) {
    typedef typename Compute<T>::type C;
    const Run1<T, T, Path> run = {path, input(x, 0, 0.0, 0), y};
    switch (op) {
        case 0: run(Abs<C>()); break;
        case 1: run(Neg<C>()); break;
        case 2: run(Sign<C>()); break;
        case 3: run(Sqr<C>()); break;
        case 4: run(Relu<C>()); break;
        case 5: {
            const Clamp<C> f = {scalar_value<C>(p0, q0), scalar_value<C>(p1, q1)};
            run(f);
            break;
        }
        default: FloatUnary<C>::run(op, run, (C)p0, (C)p1);
    }
}

}  // namespace hipk

#define UNARY(S, T)                                                                            \
    extern "C" __global__ void unary_##S(int op, const T* x, T* y, long long rows,              \
                                         long long cols, long long ra, long long ry, int ia,   \
                                         double p0, double p1, long long q0, long long q1) {   \
        HIPK_ROWS_ARGS2;                                                                       \
        hipk::unary(op, path, x, y, p0, p1, q0, q1);                                           \
    }                                                                                          \
    extern "C" __global__ void unary_any_##S(                                                  \
        int op, const T* x, T* y, long long n, int rank, long long n0, long long n1,           \
        long long n2, long long n3, long long n4, long long n5, long long n6, long long n7,    \
        long long a0, long long a1, long long a2, long long a3, long long a4, long long a5,    \
        long long a6, long long a7, long long y0, long long y1, long long y2, long long y3,    \
        long long y4, long long y5, long long y6, long long y7, double p0, double p1,          \
        long long q0, long long q1) {                                                          \
        HIPK_ANY_ARGS2;                                                                        \
        hipk::unary(op, path, x, y, p0, p1, q0, q1);                                           \
    }

HIPK_FLOAT_TYPES(UNARY)
HIPK_INT_TYPES(UNARY)
