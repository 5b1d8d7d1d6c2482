// Drivers of the pointwise kernels (binary, compare, unary, math, where and cast .hip):
// out = f(in_0, ..., in_{K-2}) elementwise over any layout, numpy's broadcasting included.
//
// The host (hip_runtime/ops/pointwise.py) merges axes first, then launches one of two entry
// points per op family and type:
//
// - `<family>_<t>`, the rows path: the layout is [rows, cols] (rows = 1 for a contiguous
//   tensor) and every operand's innermost stride is 1 (`inner` = 1) or 0 (constant along a row,
//   e.g. a [rows, 1] operand); its row stride is anything (0 for a broadcast row). When cols,
//   every row stride and every address allow it, each thread moves 16 bytes per operand per
//   access (the widest type decides the lane count N; a constant operand is one load, splat).
//   The host takes this path only where such vectors fit (see run_rows). Rows and columns of
//   a vector follow from the vector index by one division per thread, then by additions.
// - `<family>_any_<t>`, the strided path: rank <= 8 (row-major sizes n0..n7), strides in
//   elements per operand (negative, 0 for broadcast), one element per thread per pass; the
//   coordinates come from integer division, 32-bit when n < 2^32 on GPUs (as copy.hip).
//   Also the path of layouts the rows path cannot vectorize (odd columns, unaligned views).
//
// Every operand but the output may instead be one value for every element (a Python scalar:
// `scalar` says which, passed as a double and a long long: floats read the double, integers
// the long long, so an int64 keeps its 64 bits). The output may be an input exactly (each
// element is read before it is written, by the thread that writes it); it must not overlap
// itself or partly overlap an input (the host checks). Arithmetic is in Compute<T>::type: f32
// for the 16-bit floats, the type itself otherwise.
// Launch: any 1-D grid (grid-stride loops); block 256.
#pragma once

#include "dtypes.h"

#define HIPK_PW_RANK 8

namespace hipk {

template <typename T> struct IsFloat { enum { value = 0 }; };
template <> struct IsFloat<float> { enum { value = 1 }; };
template <> struct IsFloat<double> { enum { value = 1 }; };
template <> struct IsFloat<f16> { enum { value = 1 }; };
template <> struct IsFloat<bf16> { enum { value = 1 }; };

// The C math library for float and double alike (f32 math for the 16-bit floats): m_exp(x)
// is expf for a float and exp for a double.
#define HIPK_MATH1(name)                                                                       \
    HIPK_DEVICE float m_##name(float x) { return name##f(x); }                                \
    HIPK_DEVICE double m_##name(double x) { return name(x); }
HIPK_MATH1(exp)
HIPK_MATH1(expm1)
HIPK_MATH1(log)
HIPK_MATH1(sin)
HIPK_MATH1(cos)
HIPK_MATH1(tanh)
HIPK_MATH1(sqrt)
HIPK_MATH1(erf)
HIPK_MATH1(floor)
HIPK_MATH1(ceil)
HIPK_MATH1(rint)
HIPK_MATH1(fabs)
#undef HIPK_MATH1
HIPK_DEVICE float m_pow(float a, float b) { return powf(a, b); }
HIPK_DEVICE double m_pow(double a, double b) { return pow(a, b); }

// A scalar operand's value in compute type C: integers take the 64-bit integer, floats the double.
template <typename C> HIPK_DEVICE C scalar_value(double f, long long i) {
    return IsFloat<C>::value ? (C)f : (C)i;
}

// An input: elements of T at the offsets the driver computes, or `value` everywhere.
template <typename T> struct In {
    typedef typename Compute<T>::type C;
    const T* p;
    int scalar;
    C value;
};

template <typename T>
HIPK_DEVICE In<T> input(const T* p, int is_scalar, double f, long long i) {
    In<T> in = {p, is_scalar, scalar_value<typename Compute<T>::type>(f, i)};
    return in;
}

// N values of `in` at element offset `at`: a vector when the operand runs along the row
// (`inner`), else one element repeated (the offset then excludes the column).
template <typename T, int N>
HIPK_DEVICE void load_n(const In<T>& in, long long at, int inner,
                        typename Compute<T>::type (&v)[N]) {
    if (in.scalar) {
        HIPK_UNROLL
        for (int i = 0; i < N; ++i) v[i] = in.value;
    } else if (N > 1 && inner) {
        const Vec<T, N> packed = *reinterpret_cast<const Vec<T, N>*>(in.p + at);
        HIPK_UNROLL
        for (int i = 0; i < N; ++i) v[i] = load_value<T>(packed.v[i]);
    } else {
        const typename Compute<T>::type x = load_value<T>(in.p[at]);
        HIPK_UNROLL
        for (int i = 0; i < N; ++i) v[i] = x;
    }
}

template <typename T, int N>
HIPK_DEVICE void store_n(T* p, long long at, const typename Compute<T>::type (&v)[N]) {
    if (N > 1) {
        Vec<T, N> packed;
        HIPK_UNROLL
        for (int i = 0; i < N; ++i) packed.v[i] = store_value<T>(v[i]);
        *reinterpret_cast<Vec<T, N>*>(p + at) = packed;
    } else {
        p[at] = store_value<T>(v[0]);
    }
}

// Whether `in` can be read in N-element vectors: a scalar or a row-constant operand always
// can; a row-running one needs its address and row stride aligned to N elements.
template <typename T, int N> HIPK_DEVICE bool vector_ok(const In<T>& in, long long row, int inner) {
    return in.scalar || !inner || (aligned(in.p, sizeof(T) * N) && row % N == 0);
}

template <typename T, int N> HIPK_DEVICE bool vector_ok(const T* out, long long row) {
    return aligned(out, sizeof(T) * N) && row % N == 0;
}

// Elements per 16-byte access of the widest of an op's types.
template <int A, int B> struct MaxSize { enum { value = A > B ? A : B }; };
template <int Bytes> struct LanesOf { enum { value = 16 / Bytes }; };

// The rows path over [rows, cols] in vectors of N (N divides cols): operand k's element of
// (r, vector c) is at r * row[k] + c * N * inner[k]; the output is the last operand.
template <int N, int K, typename Body>
HIPK_DEVICE void rows_loop(long long rows, long long cols, const long long (&row)[K],
                           const int (&inner)[K], const Body& body) {
    const long long per_row = cols / N;
    const long long total = rows * per_row;
    const long long step = grid_threads();
    long long j = global_thread();
    if (j >= total) return;
    // 32-bit division where every vector index and the grid fit (several times cheaper on
    // GPUs; once per thread, which a capped grid of 16-bit types amortizes over few vectors).
    long long r, dr;
    if (HIPK_GPU && total <= 0xffffffffLL && step <= 0xffffffffLL) {
        r = (unsigned int)j / (unsigned int)per_row;
        dr = (unsigned int)step / (unsigned int)per_row;
    } else {
        r = j / per_row;
        dr = step / per_row;
    }
    long long c = j - r * per_row;
    const long long dc = step - dr * per_row;
    for (; j < total; j += step) {
        long long at[K];
        HIPK_UNROLL
        for (int k = 0; k < K; ++k) at[k] = r * row[k] + c * N * inner[k];
        body.template apply<N>(at, inner);
        c += dc;
        r += dr;
        if (c >= per_row) {
            c -= per_row;
            ++r;
        }
    }
}

// The host launches the rows path only where N-element vectors fit (N divides cols, every
// row-running operand's row stride and address are multiples of N elements); anything else
// takes the strided path, which costs no more for one axis. A layout that breaks the rule
// writes nothing here (one loop per op instead of two keeps the compiles short).
template <int N, int K, typename Body>
HIPK_DEVICE void run_rows(long long rows, long long cols, const long long (&row)[K],
                          const int (&inner)[K], const Body& body) {
    if (rows > 0 && cols > 0 && cols % N == 0 && body.template vectors_ok<N>(row, inner))
        rows_loop<N>(rows, cols, row, inner, body);
}

// The strided path: K operands (the output last), rank-`rank` layout.
template <int K> struct Layout {
    long long size[HIPK_PW_RANK];
    long long stride[K][HIPK_PW_RANK];
};

// Element i's offsets from its coordinates, innermost first, by division: 32-bit division
// where every index fits (several times faster on GPUs; a uniform branch per axis, so one loop
// serves both). The host compiler gains nothing from it: the cpu platform divides in 64 bits.
template <int K, typename Body>
HIPK_DEVICE void run_any(long long n, int rank, const Layout<K>& l, const Body& body) {
    int ones[K];
    HIPK_UNROLL
    for (int k = 0; k < K; ++k) ones[k] = 1;
    const bool narrow = HIPK_GPU && n <= 0xffffffffLL;
    for (long long i = global_thread(); i < n; i += grid_threads()) {
        unsigned long long rest = (unsigned long long)i;
        long long at[K];
        HIPK_UNROLL
        for (int k = 0; k < K; ++k) at[k] = 0;
        HIPK_UNROLL
        for (int d = HIPK_PW_RANK - 1; d > 0; --d) {
            if (d < rank) {
                unsigned long long c;
                if (narrow) {
                    const unsigned int r = (unsigned int)rest, size = (unsigned int)l.size[d];
                    c = r % size;
                    rest = r / size;
                } else {
                    const unsigned long long size = (unsigned long long)l.size[d];
                    c = rest % size;
                    rest /= size;
                }
                HIPK_UNROLL
                for (int k = 0; k < K; ++k) at[k] += (long long)c * l.stride[k][d];
            }
        }
        HIPK_UNROLL
        for (int k = 0; k < K; ++k) at[k] += (long long)rest * l.stride[k][0];
        body.template apply<1>(at, ones);
    }
}

// out = f(a): one input of T, an output of R.
template <typename T, typename R, typename F> struct Map1 {
    In<T> a;
    R* y;
    F f;
    enum { N = LanesOf<MaxSize<sizeof(T), sizeof(R)>::value>::value };
    template <int M> HIPK_DEVICE bool vectors_ok(const long long (&row)[2], const int (&in)[2]) const {
        return vector_ok<T, M>(a, row[0], in[0]) && vector_ok<R, M>(y, row[1]);
    }
    template <int M>
    HIPK_DEVICE void apply(const long long (&at)[2], const int (&inner)[2]) const {
        typename Compute<T>::type u[M];
        typename Compute<R>::type w[M];
        load_n<T, M>(a, at[0], inner[0], u);
        HIPK_UNROLL
        for (int i = 0; i < M; ++i) w[i] = f(u[i]);
        store_n<R, M>(y, at[1], w);
    }
};

// out = f(a, b): two inputs of T, an output of R.
template <typename T, typename R, typename F> struct Map2 {
    In<T> a, b;
    R* y;
    F f;
    enum { N = LanesOf<MaxSize<sizeof(T), sizeof(R)>::value>::value };
    template <int M> HIPK_DEVICE bool vectors_ok(const long long (&row)[3], const int (&in)[3]) const {
        return vector_ok<T, M>(a, row[0], in[0]) && vector_ok<T, M>(b, row[1], in[1]) &&
               vector_ok<R, M>(y, row[2]);
    }
    template <int M>
    HIPK_DEVICE void apply(const long long (&at)[3], const int (&inner)[3]) const {
        typename Compute<T>::type u[M], v[M];
        typename Compute<R>::type w[M];
        load_n<T, M>(a, at[0], inner[0], u);
        load_n<T, M>(b, at[1], inner[1], v);
        HIPK_UNROLL
        for (int i = 0; i < M; ++i) w[i] = f(u[i], v[i]);
        store_n<R, M>(y, at[2], w);
    }
};

// Builds the Map1/Map2 body of functor F over inputs of T and an output of R, and runs it on
// the path's arguments (a RowsArgs or AnyArgs below).
template <typename T, typename R, typename Path> struct Run1 {
    const Path& path;
    In<T> a;
    R* y;
    template <typename F> HIPK_DEVICE void operator()(F f) const {
        Map1<T, R, F> body = {a, y, f};
        path(body);
    }
};

template <typename T, typename R, typename Path> struct Run2 {
    const Path& path;
    In<T> a, b;
    R* y;
    template <typename F> HIPK_DEVICE void operator()(F f) const {
        Map2<T, R, F> body = {a, b, y, f};
        path(body);
    }
};

// The unsigned type integer arithmetic wraps in (at least 32 bits, so no promotion to int can
// overflow: numpy's two's-complement results); floats compute in themselves.
template <typename C> struct Wrap { typedef C type; };
template <> struct Wrap<signed char> { typedef unsigned int type; };
template <> struct Wrap<unsigned char> { typedef unsigned int type; };
template <> struct Wrap<short> { typedef unsigned int type; };
template <> struct Wrap<int> { typedef unsigned int type; };
template <> struct Wrap<long long> { typedef unsigned long long type; };

template <typename C> HIPK_DEVICE C wrap_mul(C a, C b) {
    typedef typename Wrap<C>::type U;
    return (C)((U)a * (U)b);
}

// Runs a Map1/Map2 body on the path its arguments describe. `Rows` carries the rows path's
// arguments, `Any` the strided path's; each launches the body with N lanes or one.
template <int K> struct RowsArgs {
    long long rows, cols;
    long long row[K];
    int inner[K];
    template <typename Body> HIPK_DEVICE void operator()(const Body& body) const {
        run_rows<Body::N>(rows, cols, row, inner, body);
    }
};

template <int K> struct AnyArgs {
    long long n;
    int rank;
    Layout<K> layout;
    template <typename Body> HIPK_DEVICE void operator()(const Body& body) const {
        run_any(n, rank, layout, body);
    }
};

}  // namespace hipk

// The two paths' parameters, as the entry points of every family spell them out (hip-core
// reads parameter types from the text; these macros only build the structs from them).
#define HIPK_ROWS_ARGS2                                                                        \
    hipk::RowsArgs<2> path = {rows, cols, {ra, ry}, {ia, 1}}
#define HIPK_ROWS_ARGS3                                                                        \
    hipk::RowsArgs<3> path = {rows, cols, {ra, rb, ry}, {ia, ib, 1}}
#define HIPK_ANY_SIZES {n0, n1, n2, n3, n4, n5, n6, n7}
#define HIPK_ANY_STRIDES(x) {x##0, x##1, x##2, x##3, x##4, x##5, x##6, x##7}
#define HIPK_ANY_ARGS2                                                                         \
    hipk::AnyArgs<2> path = {n, rank, {HIPK_ANY_SIZES, {HIPK_ANY_STRIDES(a),                   \
                                                         HIPK_ANY_STRIDES(y)}}}
#define HIPK_ANY_ARGS3                                                                         \
    hipk::AnyArgs<3> path = {n, rank, {HIPK_ANY_SIZES, {HIPK_ANY_STRIDES(a),                   \
                                                         HIPK_ANY_STRIDES(b),                  \
                                                         HIPK_ANY_STRIDES(y)}}}
