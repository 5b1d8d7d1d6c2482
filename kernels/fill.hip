// Tensors made from nothing: constant fills, ranges and triangular masks.
//
// fill_<u>(y, n, pattern, rank, n0..n5, s0..s5)
//     every element of y's layout (sizes n0.., strides s0.. in elements) = `pattern`, the
//     element's bits in the low bytes of a 64-bit word: one kernel per element size (8, 16,
//     32, 64 bits) serves every dtype. A contiguous y (rank 1, stride 1) is written 16 bytes
//     per thread where it is aligned.
// arange_<t>(y, n, start, step)
//     y[i] = start + i * step for i < n: computed in double for the float types (rounded once
//     to the type; f16 and bf16 through float) and in long long for the integers (wrapping
//     into the type as C does).
// tril_<u>(x, y, batch, rows, cols, k, upper, keep, drop)
//     y [batch, rows, cols] (C-contiguous) = x where column - row <= k (upper = 0: tril) or
//     >= k (upper = 1: triu), else the bits `drop`; x may be y (in place), or null: then the
//     kept elements are the bits `keep` (a mask made from nothing: causal masks).
// Launch: any 1-D grid and block (grid-stride loops).
#include "dtypes.h"

#define HIPK_FILL_RANK 6

namespace hipk {

template <typename U> HIPK_DEVICE U from_pattern(unsigned long long pattern) {
    return (U)pattern;  // the low bytes: the element's bits
}

// Coordinates by division, in 32 bits whenever the count allows (I).
template <typename U, typename I>
HIPK_DEVICE void fill_strided(U* y, long long n, U v, int rank,
                              const long long (&size)[HIPK_FILL_RANK],
                              const long long (&stride)[HIPK_FILL_RANK]) {
    for (long long i = global_thread(); i < n; i += grid_threads()) {
        I rest = (I)i;
        long long at = 0;
        for (int k = rank - 1; k >= 0; --k) {
            const I c = rest % (I)size[k];
            rest /= (I)size[k];
            at += (long long)c * stride[k];
        }
        y[at] = v;
    }
}

template <typename U>
HIPK_DEVICE void fill(U* y, long long n, unsigned long long pattern, int rank,
                      const long long (&size)[HIPK_FILL_RANK],
                      const long long (&stride)[HIPK_FILL_RANK]) {
    const U v = from_pattern<U>(pattern);
    if (rank == 1 && stride[0] == 1) {
        const int N = Lanes16<U>::value;
        typedef Vec<U, N> Packed;
        // Scalar head up to a 16-byte boundary, then whole vectors, then the scalar tail.
        long long head = (long long)((16 - (unsigned long long)y % 16) % 16 / sizeof(U));
        if (head > n) head = n;
        Packed packed;
        HIPK_UNROLL
        for (int j = 0; j < N; ++j) packed.v[j] = v;
        const long long vectors = (n - head) / N;
        Packed* body = reinterpret_cast<Packed*>(y + head);
        for (long long i = global_thread(); i < vectors; i += grid_threads()) body[i] = packed;
        for (long long i = global_thread(); i < head; i += grid_threads()) y[i] = v;
        for (long long i = head + vectors * N + global_thread(); i < n; i += grid_threads())
            y[i] = v;
        return;
    }
    if (n <= 0xffffffffLL)
        fill_strided<U, unsigned int>(y, n, v, rank, size, stride);
    else
        fill_strided<U, unsigned long long>(y, n, v, rank, size, stride);
}

template <typename U, typename I>
HIPK_DEVICE void tril_run(const U* x, U* y, I n, I rows, I cols, long long k, int upper, U kept,
                          U dropped) {
    for (long long i = global_thread(); i < (long long)n; i += grid_threads()) {
        const I line = (I)i / cols, c = (I)i - line * cols;
        const long long offset = (long long)c - (long long)(line % rows);  // column - row
        const bool inside = upper ? offset >= k : offset <= k;
        y[i] = inside ? (x ? x[i] : kept) : dropped;
    }
}

template <typename U>
HIPK_DEVICE void tril(const U* x, U* y, long long batch, long long rows, long long cols,
                      long long k, int upper, unsigned long long keep, unsigned long long drop) {
    const long long n = batch * rows * cols;
    const U kept = from_pattern<U>(keep), dropped = from_pattern<U>(drop);
    if (n <= 0xffffffffLL)
        tril_run<U, unsigned int>(x, y, (unsigned int)n, (unsigned int)rows, (unsigned int)cols, k,
                                  upper, kept, dropped);
    else
        tril_run<U, unsigned long long>(x, y, n, rows, cols, k, upper, kept, dropped);
}

}  // namespace hipk

// --- entry points (hip-core reads the parameter types from these lines) -----------------------

#define HIPK_FILL(U)                                                                           \
    const long long size[HIPK_FILL_RANK] = {n0, n1, n2, n3, n4, n5};                           \
    const long long stride[HIPK_FILL_RANK] = {s0, s1, s2, s3, s4, s5};                         \
    hipk::fill<U>(y, n, pattern, rank, size, stride)

extern "C" __global__ void fill_u8(unsigned char* y, long long n, unsigned long long pattern,
                                   int rank, long long n0, long long n1, long long n2,
                                   long long n3, long long n4, long long n5, long long s0,
                                   long long s1, long long s2, long long s3, long long s4,
                                   long long s5) {
    HIPK_FILL(unsigned char);
}
extern "C" __global__ void fill_u16(unsigned short* y, long long n, unsigned long long pattern,
                                    int rank, long long n0, long long n1, long long n2,
                                    long long n3, long long n4, long long n5, long long s0,
                                    long long s1, long long s2, long long s3, long long s4,
                                    long long s5) {
    HIPK_FILL(unsigned short);
}
extern "C" __global__ void fill_u32(unsigned int* y, long long n, unsigned long long pattern,
                                    int rank, long long n0, long long n1, long long n2,
                                    long long n3, long long n4, long long n5, long long s0,
                                    long long s1, long long s2, long long s3, long long s4,
                                    long long s5) {
    HIPK_FILL(unsigned int);
}
extern "C" __global__ void fill_u64(unsigned long long* y, long long n, unsigned long long pattern,
                                    int rank, long long n0, long long n1, long long n2,
                                    long long n3, long long n4, long long n5, long long s0,
                                    long long s1, long long s2, long long s3, long long s4,
                                    long long s5) {
    HIPK_FILL(unsigned long long);
}

extern "C" __global__ void tril_u8(const unsigned char* x, unsigned char* y, long long batch,
                                   long long rows, long long cols, long long k, int upper,
                                   unsigned long long keep, unsigned long long drop) {
    hipk::tril(x, y, batch, rows, cols, k, upper, keep, drop);
}
extern "C" __global__ void tril_u16(const unsigned short* x, unsigned short* y, long long batch,
                                    long long rows, long long cols, long long k, int upper,
                                    unsigned long long keep, unsigned long long drop) {
    hipk::tril(x, y, batch, rows, cols, k, upper, keep, drop);
}
extern "C" __global__ void tril_u32(const unsigned int* x, unsigned int* y, long long batch,
                                    long long rows, long long cols, long long k, int upper,
                                    unsigned long long keep, unsigned long long drop) {
    hipk::tril(x, y, batch, rows, cols, k, upper, keep, drop);
}
extern "C" __global__ void tril_u64(const unsigned long long* x, unsigned long long* y,
                                    long long batch, long long rows, long long cols, long long k,
                                    int upper, unsigned long long keep, unsigned long long drop) {
    hipk::tril(x, y, batch, rows, cols, k, upper, keep, drop);
}

#define HIPK_ARANGE_FLOAT(S, T)                                                                \
    extern "C" __global__ void arange_##S(T* y, long long n, double start, double step) {      \
        for (long long i = hipk::global_thread(); i < n; i += hipk::grid_threads())            \
            y[i] = hipk::store_value<T>(                                                       \
                (hipk::Compute<T>::type)(start + (double)i * step));                           \
    }
HIPK_FLOAT_TYPES(HIPK_ARANGE_FLOAT)

#define HIPK_ARANGE_INT(S, T)                                                                  \
    extern "C" __global__ void arange_##S(T* y, long long n, long long start, long long step) { \
        for (long long i = hipk::global_thread(); i < n; i += hipk::grid_threads())            \
            y[i] = (T)((unsigned long long)start + (unsigned long long)i * step);              \
    }
HIPK_INT_TYPES(HIPK_ARANGE_INT)
