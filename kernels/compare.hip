// Comparisons with numpy's broadcasting, over any layout, to bool (drivers: pointwise.h).
//
//   compare_<t>(op, a, b, y, rows, cols, ra, rb, ry, ia, ib, scalar, fs, is)     rows path
//   compare_any_<t>(op, a, b, y, n, rank, n0..n7, a0..a7, b0..b7, y0..y7, scalar, fs, is)
//
// y is bool (one byte, 0 or 1). op (hip_runtime/ops/pointwise.py's COMPARE_OPS, in this
// order): 0 eq, 1 ne, 2 lt, 3 le, 4 gt, 5 ge; NaN compares unequal to everything (ne is true).
// `scalar` as in binary.hip. <t>: every dtype (f32 f64 f16 bf16 i8 i16 i32 i64 u8 u32 b8).
#include "pointwise.h"

namespace hipk {

template <typename C> struct Eq {
    HIPK_DEVICE bool operator()(C a, C b) const { return a == b; }
};
template <typename C> struct Ne {
    HIPK_DEVICE bool operator()(C a, C b) const { return a != b; }
};
template <typename C> struct Lt {
    HIPK_DEVICE bool operator()(C a, C b) const { return a < b; }
};
template <typename C> struct Le {
    HIPK_DEVICE bool operator()(C a, C b) const { return a <= b; }
};

template <typename C> struct Gt {
    HIPK_DEVICE bool operator()(C a, C b) const { return a > b; }
};
template <typename C> struct Ge {
    HIPK_DEVICE bool operator()(C a, C b) const { return a >= b; }
};

template <typename T, typename Path>
HIPK_DEVICE void compare(int op, const Path& path, const T* a, const T* b, bool* y, int scalar,
                         double fs, long long is) {
    typedef typename Compute<T>::type C;
    const Run2<T, bool, Path> run = {path, input(a, scalar == 1, fs, is),
                                     input(b, scalar == 2, fs, is), y};
    switch (op) {
        case 0: run(Eq<C>()); break;
        case 1: run(Ne<C>()); break;
        case 2: run(Lt<C>()); break;
        case 3: run(Le<C>()); break;
        case 4: run(Gt<C>()); break;
        case 5: run(Ge<C>()); break;
        default: break;
    }
}

}  // namespace hipk

#define COMPARE(S, T)                                                                          \
    extern "C" __global__ void compare_##S(int op, const T* a, const T* b, bool* y,             \
                                           long long rows, long long cols, long long ra,       \
                                           long long rb, long long ry, int ia, int ib,         \
                                           int scalar, double fs, long long is) {              \
        HIPK_ROWS_ARGS3;                                                                       \
        hipk::compare(op, path, a, b, y, scalar, fs, is);                                      \
    }                                                                                          \
    extern "C" __global__ void compare_any_##S(                                                \
        int op, const T* a, const T* b, bool* y, long long n, int rank, long long n0,          \
        long long n1, long long n2, long long n3, long long n4, long long n5, long long n6,    \
        long long n7, long long a0, long long a1, long long a2, long long a3, long long a4,    \
        long long a5, long long a6, long long a7, long long b0, long long b1, long long b2,    \
        long long b3, long long b4, long long b5, long long b6, long long b7, long long y0,    \
        long long y1, long long y2, long long y3, long long y4, long long y5, long long y6,    \
        long long y7, int scalar, double fs, long long is) {                                   \
        HIPK_ANY_ARGS3;                                                                        \
        hipk::compare(op, path, a, b, y, scalar, fs, is);                                      \
    }

HIPK_ALL_TYPES(COMPARE)
