// where(cond, a, b) with numpy's broadcasting, over any layout (drivers: pointwise.h).
//
//   where_<t>(c, a, b, y, rows, cols, rc, ra, rb, ry, ic, ia, ib, scalar, fa, la, fb, lb)
//   where_any_<t>(c, a, b, y, n, rank, n0..n7, c0..c7, a0..a7, b0..b7, y0..y7, scalar, fa,
//                 la, fb, lb)
//
// y = cond ? a : b elementwise; cond is bool. `scalar` is a bit set: 1 when a is the value
// fa (floats) / la (integers), 2 when b is fb / lb. Every value passes unchanged (a 16-bit
// NaN stays a NaN). <t>: every dtype.
#include "pointwise.h"

namespace hipk {

template <typename T> struct Where {
    In<bool> cond;
    In<T> a, b;
    T* y;
    enum { N = LanesOf<sizeof(T)>::value };
    template <int M> HIPK_DEVICE bool vectors_ok(const long long (&row)[4], const int (&in)[4]) const {
        return vector_ok<bool, M>(cond, row[0], in[0]) && vector_ok<T, M>(a, row[1], in[1]) &&
               vector_ok<T, M>(b, row[2], in[2]) && vector_ok<T, M>(y, row[3]);
    }
    template <int M>
    HIPK_DEVICE void apply(const long long (&at)[4], const int (&inner)[4]) const {
        bool c[M];
        typename Compute<T>::type u[M], v[M];
        load_n<bool, M>(cond, at[0], inner[0], c);
        load_n<T, M>(a, at[1], inner[1], u);
        load_n<T, M>(b, at[2], inner[2], v);
        HIPK_UNROLL
        for (int i = 0; i < M; ++i) u[i] = c[i] ? u[i] : v[i];
        store_n<T, M>(y, at[3], u);
    }
};

template <typename T, typename Path>
HIPK_DEVICE void where(const Path& path, const bool* c, const T* a, const T* b, T* y,
                       int scalar, double fa, long long la, double fb, long long lb) {
    const Where<T> body = {input(c, 0, 0.0, 0), input(a, scalar & 1, fa, la),
                           input(b, (scalar >> 1) & 1, fb, lb), y};
    path(body);
}

}  // namespace hipk

#define WHERE(S, T)                                                                            \
    extern "C" __global__ void where_##S(const bool* c, const T* a, const T* b, T* y,           \
                                         long long rows, long long cols, long long rc,         \
                                         long long ra, long long rb, long long ry, int ic,     \
                                         int ia, int ib, int scalar, double fa, long long la,  \
                                         double fb, long long lb) {                            \
        hipk::RowsArgs<4> path = {rows, cols, {rc, ra, rb, ry}, {ic, ia, ib, 1}};              \
        hipk::where(path, c, a, b, y, scalar, fa, la, fb, lb);                                 \
    }                                                                                          \
    extern "C" __global__ void where_any_##S(                                                  \
        const bool* c, const T* a, const T* b, T* y, long long n, int rank, long long n0,      \
        long long n1, long long n2, long long n3, long long n4, long long n5, long long n6,    \
        long long n7, long long c0, long long c1, long long c2, long long c3, long long c4,    \
        long long c5, long long c6, long long c7, long long a0, long long a1, long long a2,    \
        long long a3, long long a4, long long a5, long long a6, long long a7, long long b0,    \
        long long b1, long long b2, long long b3, long long b4, long long b5, long long b6,    \
        long long b7, long long y0, long long y1, long long y2, long long y3, long long y4,    \
        long long y5, long long y6, long long y7, int scalar, double fa, long long la,         \
        double fb, long long lb) {                                                             \
        hipk::AnyArgs<4> path = {n, rank, {HIPK_ANY_SIZES, {HIPK_ANY_STRIDES(c),               \
                                 HIPK_ANY_STRIDES(a), HIPK_ANY_STRIDES(b),                     \
                                 HIPK_ANY_STRIDES(y)}}};                                       \
        hipk::where(path, c, a, b, y, scalar, fa, la, fb, lb);                                 \
    }

HIPK_ALL_TYPES(WHERE)
