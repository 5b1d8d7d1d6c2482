// Conversions between every pair of dtypes, from any layout (drivers: pointwise.h).
//
//   cast_<t>(target, x, y, rows, cols, ra, ry, ia)                                 rows path
//   cast_any_<t>(target, x, y, n, rank, n0..n7, a0..a7, y0..y7)
//
// <t> is the source type, `target` the index of y's type in kernels/dtypes.h's HIPK_ALL_TYPES
// order (0 f32, 1 f64, 2 f16, 3 bf16, 4 i8, 5 i16, 6 i32, 7 i64, 8 u8, 9 u32, 10 b8; as
// hip_runtime.tensors.dtypes.SUFFIXES). numpy's astype, bit for bit where numpy is defined:
// - floats round to nearest even once: f64 -> f16 rounds to odd in f32 first, so the result is
//   the single rounding numpy gives; f64 -> bf16 goes through f32, as ml_dtypes does;
//   out-of-range values become infinities, NaN stays NaN;
// - floats to integers truncate toward zero through int64, then wrap (numpy on x86; values
//   outside int64 and NaN are undefined there, and some integer here);
// - integers wrap (two's complement); to bool is x != 0 (NaN is true); bool is 0 or 1.
// x and y must not overlap (their element sizes may differ).
#include "pointwise.h"

namespace hipk {

template <typename A, typename B> struct Same { enum { value = 0 }; };
template <typename A> struct Same<A, A> { enum { value = 1 }; };

// 0: a C conversion; 1: a float to an integer (through int64); 2: f64 to f16.
template <typename C, typename R> struct ConvertKind {
    enum {
        value = IsFloat<C>::value && !IsFloat<R>::value && !Same<R, bool>::value
                    ? 1
                    : (Same<C, double>::value && Same<R, f16>::value ? 2 : 0)
    };
};

template <typename C, typename R, int Kind = ConvertKind<C, R>::value> struct Convert {
    HIPK_DEVICE typename Compute<R>::type operator()(C x) const {
        return (typename Compute<R>::type)x;
    }
};
template <typename C, typename R> struct Convert<C, R, 1> {
    HIPK_DEVICE R operator()(C x) const { return (R)(long long)x; }
};
// d rounded to f32 by round-to-odd (the odd one of the two floats around d when d is not a
// float): rounding that to f16 gives d's own nearest even f16, with no double rounding.
template <typename C, typename R> struct Convert<C, R, 2> {
    HIPK_DEVICE float operator()(double d) const {
        const float f = (float)d;
        unsigned int u = float_bits(f);
        if ((double)f != d && !(u & 1u) && d == d) {
            const bool above = (double)f > d, negative = (u >> 31) != 0;
            u = above != negative ? u - 1u : u + 1u;
        }
        return bits_float(u);
    }
};

template <typename T, typename R, typename Path>
HIPK_DEVICE void cast_to(const Path& path, const T* x, void* y) {
    const Run1<T, R, Path> run = {path, input(x, 0, 0.0, 0), (R*)y};
    run(Convert<typename Compute<T>::type, R>());
}

template <typename T, typename Path>
HIPK_DEVICE void cast(int target, const Path& path, const T* x, void* y) {
    switch (target) {
        case 0: cast_to<T, float>(path, x, y); break;
        case 1: cast_to<T, double>(path, x, y); break;
        case 2: cast_to<T, f16>(path, x, y); break;
        case 3: cast_to<T, bf16>(path, x, y); break;
        case 4: cast_to<T, signed char>(path, x, y); break;
        case 5: cast_to<T, short>(path, x, y); break;
        case 6: cast_to<T, int>(path, x, y); break;
        case 7: cast_to<T, long long>(path, x, y); break;
        case 8: cast_to<T, unsigned char>(path, x, y); break;
        case 9: cast_to<T, unsigned int>(path, x, y); break;
        case 10: cast_to<T, bool>(path, x, y); break;
        default: break;
    }
}

}  // namespace hipk

#define CAST(S, T)                                                                             \
    extern "C" __global__ void cast_##S(int target, const T* x, void* y, long long rows,        \
                                        long long cols, long long ra, long long ry, int ia) {  \
        HIPK_ROWS_ARGS2;                                                                       \
        hipk::cast(target, path, x, y);                                                        \
    }                                                                                          \
    extern "C" __global__ void cast_any_##S(                                                   \
        int target, const T* x, void* y, long long n, int rank, long long n0, long long n1,    \
        long long n2, long long n3, long long n4, long long n5, long long n6, long long n7,    \
        long long a0, long long a1, long long a2, long long a3, long long a4, long long a5,    \
        long long a6, long long a7, long long y0, long long y1, long long y2, long long y3,    \
        long long y4, long long y5, long long y6, long long y7) {                              \
        HIPK_ANY_ARGS2;                                                                        \
        hipk::cast(target, path, x, y);                                                        \
    }

HIPK_ALL_TYPES(CAST)
