// Indexing by device ids: rows picked (index_select, embedding), elements gathered along an
// axis, and sums scattered along one (scatter_add, index_add).
//
// index_select_<u>(x, ids, wide, y, outer, count, inner, size, xo, xa, xi)
//     y[o, j, c] = x[o * xo + ids[j] * xa + c * xi]   (y C-contiguous [outer, count, inner])
//     Bits move in units of <u> = 8, 16, 32, 64 or 128 bits: the host views every dtype in the
//     widest unit its innermost run, strides and addresses allow (an embedding row of bf16 goes
//     16 bytes per thread). Strides are in units.
// gather_<u>(x, index, y, IndexArgs a)
//     y[p] = x[p with its coordinate along the axis replaced by index[p]] (torch's gather), for
//     the a.n elements p of index's layout: sizes a.size; x's strides a.big (0 along the axis,
//     whose stride is a.along), index's a.index, y's a.other (the host merges axes and drops
//     size-1 ones).
// scatter_add_<t>(y, index, src, IndexArgs a)
//     y[p with its coordinate along the axis replaced by index[p]] += src[p], atomically (many
//     p may hit one element): f32, f64, i32, u32, i64 with the hardware's atomics, the 1- and
//     2-byte types (f16, bf16, i8, i16, u8, bool: a logical or) through a compare-and-swap of
//     the aligned 32-bit word around the element. 16-bit floats add in f32 and round once per
//     addition. index_add is this kernel with ids broadcast (stride 0) over index's other axes;
//     a.big are y's strides, a.other src's.
// IndexArgs travels by value; the host packs it from hip_runtime.libraries.kernel_structs.
// INDEX_ARGS, whose layout must be this one (packages/hip-runtime/tests/
// test_kernel_structs.py compares the two on the device).
//
// Ids are int32 (wide = 0) or int64 (wide = 1), read on the device: the host cannot see them
// without a sync. An id outside [0, size) (negative ones too: nothing wraps) reads zero bits in
// index_select and gather, and is skipped by scatter_add; nothing outside the tensors is
// touched. Launch: any 1-D grid and block (grid-stride loops).
#include "dtypes.h"

#define HIPK_INDEX_RANK 6

namespace hipk {

HIPK_DEVICE long long load_id(const void* ids, int wide, long long at) {
    return wide ? static_cast<const long long*>(ids)[at]
                : (long long)static_cast<const int*>(ids)[at];
}

// 32-bit coordinates whenever the element count allows: 64-bit division costs several times
// more on the GPU, and index_select's cost is its divisions.
template <typename U, typename I>
HIPK_DEVICE void index_select_run(const U* x, const void* ids, int wide, U* y, I outer, I count,
                                  I inner, long long size, long long xo, long long xa,
                                  long long xi) {
    const long long n = (long long)outer * count * inner;
    for (long long i = global_thread(); i < n; i += grid_threads()) {
        const I r = (I)i / inner, c = (I)i - r * inner;
        const I o = r / count, j = r - o * count;
        const long long id = load_id(ids, wide, j);
        U v = {};
        if (0 <= id && id < size) v = x[o * xo + id * xa + c * xi];
        y[i] = v;
    }
}

template <typename U>
HIPK_DEVICE void index_select(const U* x, const void* ids, int wide, U* y, long long outer,
                              long long count, long long inner, long long size, long long xo,
                              long long xa, long long xi) {
    if (outer * count * inner <= 0xffffffffLL)
        index_select_run<U, unsigned int>(x, ids, wide, y, (unsigned int)outer,
                                          (unsigned int)count, (unsigned int)inner, size, xo, xa,
                                          xi);
    else
        index_select_run<U, unsigned long long>(x, ids, wide, y, outer, count, inner, size, xo,
                                                xa, xi);
}

// gather's and scatter_add's arguments after the pointers, and the layout they walk: index's
// sizes and, per axis, the strides of the tensor indexed along the axis (0 on the axis itself),
// of index, and of the other tensor. Field order and types are the host's (INDEX_ARGS).
struct IndexArgs {
    long long n;                         // elements of index's layout
    int rank;                            // axes used, 1 .. HIPK_INDEX_RANK
    int wide;                            // ids are int64 (1) or int32 (0)
    long long size_along;                // the indexed tensor's size along the axis
    long long along;                     // and its stride there (elements)
    long long size[HIPK_INDEX_RANK];     // index's sizes; entries from rank on are ignored
    long long big[HIPK_INDEX_RANK];      // the indexed tensor's strides (0 on the axis)
    long long index[HIPK_INDEX_RANK];    // index's strides
    long long other[HIPK_INDEX_RANK];    // the other tensor's (gather: y; scatter_add: src)
};

struct Offsets {
    long long big, index, other;
};

// Element i's offsets: its coordinates by division, in 32 bits whenever the count allows (I).
template <typename I> HIPK_DEVICE Offsets offsets_of(I i, int rank, const IndexArgs& l) {
    Offsets o = {0, 0, 0};
    for (int k = rank - 1; k >= 0; --k) {
        const I size = (I)l.size[k];
        const I c = i % size;
        i /= size;
        o.big += (long long)c * l.big[k];
        o.index += (long long)c * l.index[k];
        o.other += (long long)c * l.other[k];
    }
    return o;
}

template <typename U, typename I>
HIPK_DEVICE void gather_run(const U* x, const void* index, U* y, const IndexArgs& a) {
    // (the scalars in locals: stores through y may alias `a` as far as the compiler knows)
    const long long n = a.n, size = a.size_along, along = a.along;
    const int rank = a.rank, wide = a.wide;
    for (long long i = global_thread(); i < n; i += grid_threads()) {
        const Offsets o = offsets_of<I>((I)i, rank, a);
        const long long id = load_id(index, wide, o.index);
        U v = {};
        if (0 <= id && id < size) v = x[o.big + id * along];
        y[o.other] = v;
    }
}

template <typename U>
HIPK_DEVICE void gather(const U* x, const void* index, U* y, const IndexArgs& a) {
    if (a.n <= 0xffffffffLL)
        gather_run<U, unsigned int>(x, index, y, a);
    else
        gather_run<U, unsigned long long>(x, index, y, a);
}

// --- atomic adds ------------------------------------------------------------------------------

// The bits of a 1- or 2-byte element, and back.
template <typename T> HIPK_DEVICE unsigned int narrow_bits(T v) {
    union { T t; unsigned short u16; unsigned char u8; } pun;
    pun.u16 = 0;
    pun.t = v;
    return sizeof(T) == 1 ? pun.u8 : pun.u16;
}

template <typename T> HIPK_DEVICE T narrow_value(unsigned int bits) {
    union { T t; unsigned short u16; unsigned char u8; } pun;
    if (sizeof(T) == 1)
        pun.u8 = (unsigned char)bits;
    else
        pun.u16 = (unsigned short)bits;
    return pun.t;
}

// *p += v for a type narrower than the 32-bit words atomics work on: a compare-and-swap loop on
// the aligned word holding *p, changing only *p's bytes (allocations are whole words at least).
template <typename T> HIPK_DEVICE void atomic_add_narrow(T* p, T v) {
    const unsigned long long at = (unsigned long long)p;
    unsigned int* word = reinterpret_cast<unsigned int*>(at & ~3ull);
    const unsigned int shift = (unsigned int)(at & 3ull) * 8u;
    const unsigned int mask = (sizeof(T) == 1 ? 0xffu : 0xffffu) << shift;
    unsigned int old = *(volatile unsigned int*)word, assumed;
    do {
        assumed = old;
        const T now = narrow_value<T>((assumed & mask) >> shift);
        const T sum = store_value<T>(load_value(now) + load_value(v));
        const unsigned int next = (assumed & ~mask) | (narrow_bits(sum) << shift);
        old = atomicCAS(word, assumed, next);
    } while (old != assumed);
}

template <typename T> HIPK_DEVICE void atomic_add(T* p, T v) { atomic_add_narrow(p, v); }
template <> HIPK_DEVICE void atomic_add<float>(float* p, float v) { atomicAdd(p, v); }
template <> HIPK_DEVICE void atomic_add<double>(double* p, double v) { atomicAdd(p, v); }
template <> HIPK_DEVICE void atomic_add<int>(int* p, int v) { atomicAdd(p, v); }
template <> HIPK_DEVICE void atomic_add<unsigned int>(unsigned int* p, unsigned int v) {
    atomicAdd(p, v);
}
template <> HIPK_DEVICE void atomic_add<long long>(long long* p, long long v) {
    // Two's complement: an unsigned add of the same bits is the signed sum, wrapped.
    atomicAdd(reinterpret_cast<unsigned long long*>(p), (unsigned long long)v);
}

template <typename T, typename I>
HIPK_DEVICE void scatter_add_run(T* y, const void* index, const T* src, const IndexArgs& a) {
    const long long n = a.n, size = a.size_along, along = a.along;  // (as gather_run)
    const int rank = a.rank, wide = a.wide;
    for (long long i = global_thread(); i < n; i += grid_threads()) {
        const Offsets o = offsets_of<I>((I)i, rank, a);
        const long long id = load_id(index, wide, o.index);
        if (0 <= id && id < size) atomic_add(y + o.big + id * along, src[o.other]);
    }
}

template <typename T>
HIPK_DEVICE void scatter_add(T* y, const void* index, const T* src, const IndexArgs& a) {
    if (a.n <= 0xffffffffLL)
        scatter_add_run<T, unsigned int>(y, index, src, a);
    else
        scatter_add_run<T, unsigned long long>(y, index, src, a);
}

}  // namespace hipk

// --- entry points (hip-core reads the parameter types from these lines) -----------------------

#define HIPK_INDEX_SELECT(U)                                                                   \
    hipk::index_select(reinterpret_cast<const U*>(x), ids, wide, reinterpret_cast<U*>(y), outer, \
                       count, inner, size, xo, xa, xi)

extern "C" __global__ void index_select_u8(const unsigned char* x, const void* ids, int wide,
                                           unsigned char* y, long long outer, long long count,
                                           long long inner, long long size, long long xo,
                                           long long xa, long long xi) {
    HIPK_INDEX_SELECT(unsigned char);
}
extern "C" __global__ void index_select_u16(const unsigned short* x, const void* ids, int wide,
                                            unsigned short* y, long long outer, long long count,
                                            long long inner, long long size, long long xo,
                                            long long xa, long long xi) {
    HIPK_INDEX_SELECT(unsigned short);
}
extern "C" __global__ void index_select_u32(const unsigned int* x, const void* ids, int wide,
                                            unsigned int* y, long long outer, long long count,
                                            long long inner, long long size, long long xo,
                                            long long xa, long long xi) {
    HIPK_INDEX_SELECT(unsigned int);
}
extern "C" __global__ void index_select_u64(const unsigned long long* x, const void* ids,
                                            int wide, unsigned long long* y, long long outer,
                                            long long count, long long inner, long long size,
                                            long long xo, long long xa, long long xi) {
    HIPK_INDEX_SELECT(unsigned long long);
}
// 16 bytes per access: pairs of 64-bit words, 16-byte aligned (the host checks).
extern "C" __global__ void index_select_u128(const unsigned long long* x, const void* ids,
                                             int wide, unsigned long long* y, long long outer,
                                             long long count, long long inner, long long size,
                                             long long xo, long long xa, long long xi) {
    typedef hipk::Vec<unsigned long long, 2> Pair;
    HIPK_INDEX_SELECT(Pair);
}

#define HIPK_GATHER(U)                                                                         \
    hipk::gather(reinterpret_cast<const U*>(x), index, reinterpret_cast<U*>(y), args)

extern "C" __global__ void gather_u8(const unsigned char* x, const void* index, unsigned char* y,
                                     hipk::IndexArgs args) {
    HIPK_GATHER(unsigned char);
}
extern "C" __global__ void gather_u16(const unsigned short* x, const void* index,
                                      unsigned short* y, hipk::IndexArgs args) {
    HIPK_GATHER(unsigned short);
}
extern "C" __global__ void gather_u32(const unsigned int* x, const void* index, unsigned int* y,
                                      hipk::IndexArgs args) {
    HIPK_GATHER(unsigned int);
}
extern "C" __global__ void gather_u64(const unsigned long long* x, const void* index,
                                      unsigned long long* y, hipk::IndexArgs args) {
    HIPK_GATHER(unsigned long long);
}

#define HIPK_SCATTER_ADD(S, T)                                                                 \
    extern "C" __global__ void scatter_add_##S(T* y, const void* index, const T* src,          \
                                               hipk::IndexArgs args) {                         \
        hipk::scatter_add(y, index, src, args);                                                \
    }
HIPK_ALL_TYPES(HIPK_SCATTER_ADD)
