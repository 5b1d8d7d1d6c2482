// Binary arithmetic with numpy's broadcasting, over any layout (drivers: pointwise.h).
//
//   binary_<t>(op, a, b, y, rows, cols, ra, rb, ry, ia, ib, scalar, fs, is)     rows path
//   binary_any_<t>(op, a, b, y, n, rank, n0..n7, a0..a7, b0..b7, y0..y7, scalar, fs, is)
//   power_<t>, power_any_<t>: the same for y = a ** b (a kernel of its own: pow's registers
//   would otherwise limit the occupancy of every other op)
//
// op (hip_runtime/ops/pointwise.py's BINARY_OPS, in this order): 0 add, 1 sub, 2 mul, 3 div,
// 4 maximum, 5 minimum, 6 swiglu (silu(a) * b), 7 bias_gelu_erf and 8 bias_gelu_tanh
// (gelu(a + b), the sum in the compute type). div, swiglu and the GELUs are for floats only
// (the host refuses integers). `scalar`: 0 none, 1 a, 2 b is the value fs (floats) / is (integers).
// <t>: f32 f64 f16 bf16 i8 i16 i32 i64 u8 u32. Integers wrap (two's complement, as numpy);
// maximum/minimum propagate NaN (numpy's rule); pow of integers by squaring, and a negative
// exponent gives 1 / a**|b| truncated: 0 unless a is 1 or -1.
#include "gelu.h"
#include "pointwise.h"

namespace hipk {

template <typename C> struct Add {
    HIPK_DEVICE C operator()(C a, C b) const {
        typedef typename Wrap<C>::type U;
        return (C)((U)a + (U)b);
    }
};
template <typename C> struct Sub {
    HIPK_DEVICE C operator()(C a, C b) const {
        typedef typename Wrap<C>::type U;
        return (C)((U)a - (U)b);
    }
};
template <typename C> struct Mul {
    HIPK_DEVICE C operator()(C a, C b) const { return wrap_mul(a, b); }
};
template <typename C> struct Div {
    HIPK_DEVICE C operator()(C a, C b) const { return a / b; }
};
// NaN wins (a != a is true only for NaN), as numpy's maximum and minimum.
template <typename C> struct Maximum {
    HIPK_DEVICE C operator()(C a, C b) const { return a != a ? a : (b != b ? b : (a > b ? a : b)); }
};
template <typename C> struct Minimum {
    HIPK_DEVICE C operator()(C a, C b) const { return a != a ? a : (b != b ? b : (a < b ? a : b)); }
};
template <typename C> struct SwiGlu {  // the Llama MLP's gate: silu on a (the gate), not on b
    HIPK_DEVICE C operator()(C gate, C up) const { return gate / (C(1) + m_exp(-gate)) * up; }
};
template <typename C, typename Gelu> struct BiasGelu {  // gelu(x + bias), in one pass
    HIPK_DEVICE C operator()(C x, C bias) const { return Gelu()(x + bias); }
};

template <typename C, int F = IsFloat<C>::value> struct Power {
    HIPK_DEVICE C operator()(C a, C b) const { return m_pow(a, b); }
};
template <typename C> struct Power<C, 0> {
    HIPK_DEVICE C operator()(C a, C b) const {
        typedef typename Wrap<C>::type U;
        if (b < 0) return a == 1 ? C(1) : (a == C(-1) ? ((b & 1) ? a : C(1)) : C(0));
        U result = 1, base = (U)a;
        for (unsigned long long e = (unsigned long long)b; e; e >>= 1) {
            if (e & 1) result *= base;
            base *= base;
        }
        return (C)result;
    }
};

// Div, swiglu and the GELUs, for floats only: integers never ask for them, so they are not instantiated.
template <typename C, int F = IsFloat<C>::value> struct FloatOnly {
    template <typename Run> static HIPK_DEVICE void run(int op, const Run& run) {
        if (op == 3) run(Div<C>());
        if (op == 6) run(SwiGlu<C>());
        if (op == 7) run(BiasGelu<C, GeluErf<C> >());
        if (op == 8) run(BiasGelu<C, GeluTanh<C> >());
    }
};
template <typename C> struct FloatOnly<C, 0> {
    template <typename Run> static HIPK_DEVICE void run(int, const Run&) {}
};

template <typename C, typename Run> HIPK_DEVICE void binary_ops(int op, const Run& run) {
    switch (op) {
        case 0: run(Add<C>()); break;
        case 1: run(Sub<C>()); break;
        case 2: run(Mul<C>()); break;
        case 4: run(Maximum<C>()); break;
        case 5: run(Minimum<C>()); break;
        default: FloatOnly<C>::run(op, run);
    }
}

template <typename T, typename Path>
HIPK_DEVICE void binary(int op, const Path& path, const T* a, const T* b, T* y, int scalar,
                        double fs, long long is) {
    const Run2<T, T, Path> run = {path, input(a, scalar == 1, fs, is),
                                    input(b, scalar == 2, fs, is), y};
    binary_ops<typename Compute<T>::type>(op, run);
}

template <typename T, typename Path>
HIPK_DEVICE void power(const Path& path, const T* a, const T* b, T* y, int scalar, double fs,
                       long long is) {
    const Run2<T, T, Path> run = {path, input(a, scalar == 1, fs, is),
                                    input(b, scalar == 2, fs, is), y};
    run(Power<typename Compute<T>::type>());
}

}  // namespace hipk

#define BINARY(S, T)                                                                           \
    extern "C" __global__ void binary_##S(int op, const T* a, const T* b, T* y, long long rows,  \
                                          long long cols, long long ra, long long rb,          \
                                          long long ry, int ia, int ib, int scalar, double fs,  \
                                          long long is) {                                      \
        HIPK_ROWS_ARGS3;                                                                       \
        hipk::binary(op, path, a, b, y, scalar, fs, is);                                       \
    }                                                                                          \
    extern "C" __global__ void binary_any_##S(                                                 \
        int op, const T* a, const T* b, T* y, long long n, int rank, long long n0, long long n1, \
        long long n2, long long n3, long long n4, long long n5, long long n6, long long n7,     \
        long long a0, long long a1, long long a2, long long a3, long long a4, long long a5,     \
        long long a6, long long a7, long long b0, long long b1, long long b2, long long b3,     \
        long long b4, long long b5, long long b6, long long b7, long long y0, long long y1,     \
        long long y2, long long y3, long long y4, long long y5, long long y6, long long y7,     \
        int scalar, double fs, long long is) {                                                 \
        HIPK_ANY_ARGS3;                                                                        \
        hipk::binary(op, path, a, b, y, scalar, fs, is);                                       \
    }                                                                                          \
    extern "C" __global__ void power_##S(int op, const T* a, const T* b, T* y, long long rows,   \
                                         long long cols, long long ra, long long rb,           \
                                         long long ry, int ia, int ib, int scalar, double fs,   \
                                         long long is) {                                       \
        HIPK_ROWS_ARGS3;                                                                       \
        (void)op;                                                                              \
        hipk::power(path, a, b, y, scalar, fs, is);                                            \
    }                                                                                          \
    extern "C" __global__ void power_any_##S(                                                  \
        int op, const T* a, const T* b, T* y, long long n, int rank, long long n0, long long n1, \
        long long n2, long long n3, long long n4, long long n5, long long n6, long long n7,     \
        long long a0, long long a1, long long a2, long long a3, long long a4, long long a5,     \
        long long a6, long long a7, long long b0, long long b1, long long b2, long long b3,     \
        long long b4, long long b5, long long b6, long long b7, long long y0, long long y1,     \
        long long y2, long long y3, long long y4, long long y5, long long y6, long long y7,     \
        int scalar, double fs, long long is) {                                                 \
        HIPK_ANY_ARGS3;                                                                        \
        (void)op;                                                                              \
        hipk::power(path, a, b, y, scalar, fs, is);                                            \
    }

HIPK_FLOAT_TYPES(BINARY)
HIPK_INT_TYPES(BINARY)
