// Stable sorting along the last axis (argsort, topk), every dtype.
//
// Each element becomes an unsigned key whose order is the value's (kernels only compare keys):
// floats by their bits with the sign folded (-0.0 counts as +0.0, every NaN as the largest
// key: NaN last ascending, as numpy), signed integers with the sign bit flipped, unsigned and
// bool as they are; descending flips every key bit (NaN first, as the largest). Keys are 32-bit
// for types of up to 4 bytes, 64-bit for 8-byte ones. Pairs (key, column) compare key first and
// column second: all distinct, so every sort below is stable for free.
//
// sort_block_<t>(x, keys, cols, rows, n, row_stride, col_stride, descending, keep)
//     each block sorts tiles of HIPK_SORT_TILE columns of a row (bitonic, in shared memory) and
//     writes the first `keep` pairs of each as a sorted run (padded with pairs after every real
//     one where the tile is shorter): row r's runs at keys[r * m ...], cols[...] (int32
//     columns), m = tiles per row * keep. keep = HIPK_SORT_TILE sorts whole rows; a topk of
//     k <= HIPK_SORT_TILE keeps k per tile, so the merges below see only the candidates.
// sort_merge_k<bits>(keys, cols, keys_out, cols_out, rows, m, width)
//     merges neighbouring runs of `width` into runs of 2 * width: each element finds its place
//     by a binary search in the other run (a merge path per element; equal pairs, only ever
//     padding, keep the first run first). One launch per doubling.
// sort_finish_u<bits>(x, cols, values, indices, rows, m, k, row_stride, col_stride)
//     the first k of each sorted row: indices (int64) and, when values is not null, x's
//     elements at them (bits moved, one kernel per element size).
// x is read through (row_stride, col_stride) in elements: rows of any layout the host merged.
// Launch: sort_block with HIPK_SORT_BLOCK threads (any grid: blocks loop over tiles); the rest
// any 1-D grid and block.
#include "dtypes.h"

#define HIPK_SORT_TILE 2048
#define HIPK_SORT_BLOCK 256

namespace hipk {

template <typename T> struct SortKey { typedef unsigned int type; };
template <> struct SortKey<double> { typedef unsigned long long type; };
template <> struct SortKey<long long> { typedef unsigned long long type; };

HIPK_DEVICE unsigned long long double_bits(double d) {
    union { double d; unsigned long long u; } pun;
    pun.d = d;
    return pun.u;
}

// Float bits (B bits wide, sign at the top) as an order-preserving key.
template <typename K, int B> HIPK_DEVICE K float_key(K u, K exponent_all_ones) {
    const K sign = (K)1 << (B - 1);
    const K magnitude = u & (sign - 1);
    if (magnitude > exponent_all_ones) return (K)(sign | (sign - 1));  // NaN: the largest
    if (magnitude == 0) u = 0;                                           // -0.0 is +0.0
    return (u & sign) ? (K)(~u & (sign | (sign - 1))) : (K)(u | sign);
}

HIPK_DEVICE unsigned int key_of(float v) {
    return float_key<unsigned int, 32>(float_bits(v), 0x7f800000u);
}
HIPK_DEVICE unsigned long long key_of(double v) {
    return float_key<unsigned long long, 64>(double_bits(v), 0x7ff0000000000000ull);
}
HIPK_DEVICE unsigned int key_of(f16 v) { return float_key<unsigned int, 16>(v.bits, 0x7c00u); }
HIPK_DEVICE unsigned int key_of(bf16 v) { return float_key<unsigned int, 16>(v.bits, 0x7f80u); }
HIPK_DEVICE unsigned int key_of(signed char v) { return (unsigned int)(unsigned char)v ^ 0x80u; }
HIPK_DEVICE unsigned int key_of(short v) { return (unsigned int)(unsigned short)v ^ 0x8000u; }
HIPK_DEVICE unsigned int key_of(int v) { return (unsigned int)v ^ 0x80000000u; }
HIPK_DEVICE unsigned long long key_of(long long v) {
    return (unsigned long long)v ^ 0x8000000000000000ull;
}
HIPK_DEVICE unsigned int key_of(unsigned char v) { return v; }
HIPK_DEVICE unsigned int key_of(unsigned int v) { return v; }
HIPK_DEVICE unsigned int key_of(bool v) { return v ? 1u : 0u; }

// Every key bit of T's width, for descending order (the padding key stays above them all).
template <typename T> HIPK_DEVICE typename SortKey<T>::type key_mask() {
    typedef typename SortKey<T>::type K;
    return sizeof(T) >= sizeof(K) ? (K)~(K)0 : (K)(((K)1 << (sizeof(T) * 8)) - 1);
}

template <typename K> HIPK_DEVICE bool before(K a, int ia, K b, int ib) {
    return a < b || (a == b && ia < ib);
}

template <typename T>
HIPK_DEVICE void sort_block(const T* x, typename SortKey<T>::type* keys, int* cols, long long rows,
                            long long n, long long row_stride, long long col_stride,
                            int descending, int keep, typename SortKey<T>::type* skeys,
                            int* scols) {
    typedef typename SortKey<T>::type K;
    const long long tiles_per_row = (n + HIPK_SORT_TILE - 1) / HIPK_SORT_TILE;
    const long long m = tiles_per_row * keep;
    const long long tiles = rows * tiles_per_row;
    const K flip = descending ? key_mask<T>() : (K)0;
    const int tid = (int)threadIdx.x, threads = (int)blockDim.x;
    for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {  // the same for the whole block
        const long long row = t / tiles_per_row;
        const long long first = (t - row * tiles_per_row) * HIPK_SORT_TILE;
        const int len = (int)(n - first < HIPK_SORT_TILE ? n - first : HIPK_SORT_TILE);
        int size = 1;
        while (size < len) size <<= 1;
        for (int i = tid; i < size; i += threads) {
            if (i < len) {
                const T v = x[row * row_stride + (first + i) * col_stride];
                skeys[i] = key_of(v) ^ flip;
                scols[i] = (int)(first + i);
            } else {  // padding: after every real pair
                skeys[i] = (K)~(K)0;
                scols[i] = 0x7fffffff;
            }
        }
        __syncthreads();
        for (int k = 2; k <= size; k <<= 1) {
            for (int j = k >> 1; j > 0; j >>= 1) {
                for (int i = tid; i < size; i += threads) {
                    const int other = i ^ j;
                    if (other > i) {
                        const bool ascending = (i & k) == 0;
                        const K a = skeys[i], b = skeys[other];
                        const int ia = scols[i], ib = scols[other];
                        if (before(b, ib, a, ia) == ascending) {
                            skeys[i] = b, skeys[other] = a;
                            scols[i] = ib, scols[other] = ia;
                        }
                    }
                }
                __syncthreads();
            }
        }
        const long long out = row * m + (first / HIPK_SORT_TILE) * keep;
        for (int i = tid; i < keep; i += threads) {
            keys[out + i] = i < size ? skeys[i] : (K)~(K)0;
            cols[out + i] = i < size ? scols[i] : 0x7fffffff;
        }
        __syncthreads();  // the tile is written out before the next one overwrites it
    }
}

// Pairs of [lo, hi) of a sorted run that come before (key, col), or also those equal to it
// (`equal`: an element of the second run goes after equal ones of the first).
template <typename K>
HIPK_DEVICE long long rank_in(const K* keys, const int* cols, long long lo, long long hi, K key,
                              int col, bool equal) {
    long long a = lo, b = hi;
    while (a < b) {
        const long long mid = (a + b) >> 1;
        const K k = keys[mid];
        const int c = cols[mid];
        if (before(k, c, key, col) || (equal && k == key && c == col))
            a = mid + 1;
        else
            b = mid;
    }
    return a - lo;
}

template <typename K>
HIPK_DEVICE void sort_merge(const K* keys, const int* cols, K* keys_out, int* cols_out,
                            long long rows, long long n, long long width) {
    const long long total = rows * n;
    for (long long i = global_thread(); i < total; i += grid_threads()) {
        const long long row = i / n, p = i - row * n;
        const long long base = p / (2 * width) * (2 * width);
        const long long middle = base + width < n ? base + width : n;
        const long long end = base + 2 * width < n ? base + 2 * width : n;
        const K key = keys[i];
        const int col = cols[i];
        const long long at = row * n;
        long long to;
        if (p < middle)  // in the first run: after the second run's pairs before it
            to = p + rank_in(keys + at, cols + at, middle, end, key, col, false);
        else
            to = base + (p - middle) + rank_in(keys + at, cols + at, base, middle, key, col, true);
        keys_out[at + to] = key;
        cols_out[at + to] = col;
    }
}

template <typename U>
HIPK_DEVICE void sort_finish(const U* x, const int* cols, U* values, long long* indices,
                             long long rows, long long n, long long k, long long row_stride,
                             long long col_stride) {
    const long long total = rows * k;
    for (long long i = global_thread(); i < total; i += grid_threads()) {
        const long long row = i / k, j = i - row * k;
        const long long col = cols[row * n + j];
        indices[i] = col;
        if (values) values[i] = x[row * row_stride + col * col_stride];
    }
}

}  // namespace hipk

// --- entry points (hip-core reads the parameter types from these lines) -----------------------

#define HIPK_SORT_BLOCK_ENTRY(S, T)                                                            \
    extern "C" __global__ void sort_block_##S(const T* x, void* keys, int* cols, long long rows, \
                                              long long n, long long row_stride,               \
                                              long long col_stride, int descending, int keep) { \
        typedef hipk::SortKey<T>::type K;                                                      \
        __shared__ K skeys[HIPK_SORT_TILE];                                                    \
        __shared__ int scols[HIPK_SORT_TILE];                                                  \
        hipk::sort_block(x, static_cast<K*>(keys), cols, rows, n, row_stride, col_stride,      \
                         descending, keep, skeys, scols);                                      \
    }
HIPK_ALL_TYPES(HIPK_SORT_BLOCK_ENTRY)

extern "C" __global__ void sort_merge_k32(const unsigned int* keys, const int* cols,
                                          unsigned int* keys_out, int* cols_out, long long rows,
                                          long long n, long long width) {
    hipk::sort_merge(keys, cols, keys_out, cols_out, rows, n, width);
}
extern "C" __global__ void sort_merge_k64(const unsigned long long* keys, const int* cols,
                                          unsigned long long* keys_out, int* cols_out,
                                          long long rows, long long n, long long width) {
    hipk::sort_merge(keys, cols, keys_out, cols_out, rows, n, width);
}

extern "C" __global__ void sort_finish_u8(const unsigned char* x, const int* cols,
                                          unsigned char* values, long long* indices,
                                          long long rows, long long n, long long k,
                                          long long row_stride, long long col_stride) {
    hipk::sort_finish(x, cols, values, indices, rows, n, k, row_stride, col_stride);
}
extern "C" __global__ void sort_finish_u16(const unsigned short* x, const int* cols,
                                           unsigned short* values, long long* indices,
                                           long long rows, long long n, long long k,
                                           long long row_stride, long long col_stride) {
    hipk::sort_finish(x, cols, values, indices, rows, n, k, row_stride, col_stride);
}
extern "C" __global__ void sort_finish_u32(const unsigned int* x, const int* cols,
                                           unsigned int* values, long long* indices,
                                           long long rows, long long n, long long k,
                                           long long row_stride, long long col_stride) {
    hipk::sort_finish(x, cols, values, indices, rows, n, k, row_stride, col_stride);
}
extern "C" __global__ void sort_finish_u64(const unsigned long long* x, const int* cols,
                                           unsigned long long* values, long long* indices,
                                           long long rows, long long n, long long k,
                                           long long row_stride, long long col_stride) {
    hipk::sort_finish(x, cols, values, indices, rows, n, k, row_stride, col_stride);
}
