// Strided copies, moving bits (one entry point per element size serves every dtype of that
// size: u8, u16, u32, u64 are 1, 2, 4 and 8 bytes).
//
// copy_<u>(src, dst, n, rank, size0..7, src_stride0..7, dst_stride0..7) copies the n elements
// of a rank-`rank` layout (row-major over size0..size<rank-1>) from src to dst, each side with
// its own strides: one element per thread per pass of a grid-stride loop, so both sides
// coalesce wherever their innermost strides are 1. The coordinates come from integer division
// (this kernel's cost), 32-bit when every linear index fits (n < 2^32).
//
// copy_tiles_<u>(src, dst, rank, tile_a, tile_b, size0..3, src_stride0..3, dst_stride0..3)
// copies a transpose: axis tile_a has src stride 1 and axis tile_b dst stride 1, so a block
// moves 32 x 32 tiles of those two axes through shared memory, reading along tile_a and
// writing along tile_b, and both sides coalesce (as transpose.hip). rank is 2..4; the other
// axes are a batch. A kernel of its own, so its registers do not limit copy_<u>'s occupancy.
//
// Strides are in elements and may be negative or zero (a broadcast source); offsets are 64-bit.
// Unused sizes are ignored. The host (hip_runtime.strided_copy) merges axes first, so most
// copies arrive as rank 1 or 2. dst must not overlap src, nor itself (no zero stride in dst);
// the host copies through a temporary where they would.
// Launch: any 1-D grid; block 256 (copy_tiles_<u>: a multiple of 32, up to 1024).
#include "common.h"

#define HIPK_COPY_RANK 8
#define HIPK_COPY_TILE 32

namespace hipk {

struct CopyLayout {
    long long size[HIPK_COPY_RANK];
    long long src[HIPK_COPY_RANK];
    long long dst[HIPK_COPY_RANK];
};

// Element i's offsets: its coordinates, innermost first, by division. R and I are compile-time,
// so the loop unrolls and the layout stays in registers.
template <typename T, int R, typename I>
HIPK_DEVICE void copy_rank(const T* src, T* dst, long long n, const CopyLayout& l) {
    for (long long i = global_thread(); i < n; i += grid_threads()) {
        I rest = (I)i;
        long long s = 0, d = 0;
        HIPK_UNROLL
        for (int k = R - 1; k > 0; --k) {
            const I size = (I)l.size[k];
            const I c = rest % size;
            rest /= size;
            s += (long long)c * l.src[k];
            d += (long long)c * l.dst[k];
        }
        s += (long long)rest * l.src[0];
        d += (long long)rest * l.dst[0];
        dst[d] = src[s];
    }
}

template <typename T, int R>
HIPK_DEVICE void copy_any_index(const T* src, T* dst, long long n, const CopyLayout& l) {
    if (n <= 0xffffffffLL)
        copy_rank<T, R, unsigned int>(src, dst, n, l);
    else
        copy_rank<T, R, unsigned long long>(src, dst, n, l);
}

template <typename T>
HIPK_DEVICE void copy(const T* src, T* dst, long long n, int rank, const CopyLayout& l) {
    switch (rank) {
        case 1: copy_any_index<T, 1>(src, dst, n, l); break;
        case 2: copy_any_index<T, 2>(src, dst, n, l); break;
        case 3: copy_any_index<T, 3>(src, dst, n, l); break;
        case 4: copy_any_index<T, 4>(src, dst, n, l); break;
        case 5: copy_any_index<T, 5>(src, dst, n, l); break;
        case 6: copy_any_index<T, 6>(src, dst, n, l); break;
        case 7: copy_any_index<T, 7>(src, dst, n, l); break;
        case 8: copy_any_index<T, 8>(src, dst, n, l); break;
        default: break;  // the host never asks for another rank
    }
}

// A transposing copy of rank R (2..4) through `tile`, __shared__ T[32][33] (the padding keeps
// a tile column off a single bank). The batch axes (all but a and b) are decomposed once per
// tile, in 64 bits; within a tile the offsets are sums.
template <typename T, int R>
HIPK_DEVICE void copy_tiles(const T* src, T* dst, const long long (&size)[4],
                            const long long (&ss)[4], const long long (&ds)[4], int a, int b,
                            T (*tile)[HIPK_COPY_TILE + 1]) {
    long long na = 1, nb = 1, sa = 0, sb = 0, da = 0, db = 0, batches = 1;
    HIPK_UNROLL
    for (int k = 0; k < R; ++k) {
        if (k == a) na = size[k], sa = ss[k], da = ds[k];
        else if (k == b) nb = size[k], sb = ss[k], db = ds[k];
        else batches *= size[k];
    }
    const long long tiles_a = (na + HIPK_COPY_TILE - 1) / HIPK_COPY_TILE;
    const long long tiles_b = (nb + HIPK_COPY_TILE - 1) / HIPK_COPY_TILE;
    const long long tiles = batches * tiles_a * tiles_b;
    const int tx = (int)threadIdx.x % HIPK_COPY_TILE, ty = (int)threadIdx.x / HIPK_COPY_TILE;
    const int rows = (int)blockDim.x / HIPK_COPY_TILE;
    // The loop bounds are the same for every thread of the block, so all reach each barrier.
    for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
        long long rest = t / tiles_b;
        const long long b0 = (t - rest * tiles_b) * HIPK_COPY_TILE;
        const long long a0 = (rest % tiles_a) * HIPK_COPY_TILE;
        rest /= tiles_a;
        long long s = a0 * sa + b0 * sb, d = a0 * da + b0 * db;
        HIPK_UNROLL
        for (int k = R - 1; k >= 0; --k) {
            if (k == a || k == b) continue;
            const long long c = rest % size[k];
            rest /= size[k];
            s += c * ss[k];
            d += c * ds[k];
        }
        for (int j = ty; j < HIPK_COPY_TILE; j += rows)  // consecutive threads walk src's axis a
            if (a0 + tx < na && b0 + j < nb) tile[j][tx] = src[s + tx * sa + j * sb];
        __syncthreads();
        for (int i = ty; i < HIPK_COPY_TILE; i += rows)  // and dst's axis b
            if (a0 + i < na && b0 + tx < nb) dst[d + i * da + tx * db] = tile[tx][i];
        __syncthreads();  // the tile is read out before the next one overwrites it
    }
}

template <typename T>
HIPK_DEVICE void transpose_any(const T* src, T* dst, int rank, int a, int b,
                               const long long (&size)[4], const long long (&ss)[4],
                               const long long (&ds)[4]) {
    __shared__ T tile[HIPK_COPY_TILE][HIPK_COPY_TILE + 1];
    switch (rank) {
        case 2: copy_tiles<T, 2>(src, dst, size, ss, ds, a, b, tile); break;
        case 3: copy_tiles<T, 3>(src, dst, size, ss, ds, a, b, tile); break;
        case 4: copy_tiles<T, 4>(src, dst, size, ss, ds, a, b, tile); break;
        default: break;  // the host never asks for another rank
    }
}

}  // namespace hipk

// The layout travels as scalar arguments (hip-core packs only scalars and pointers), which
// costs nothing per launch, unlike an array uploaded beside it.
#define HIPK_COPY_LAYOUT                                                                       \
    hipk::CopyLayout l = {{n0, n1, n2, n3, n4, n5, n6, n7},                                    \
                          {s0, s1, s2, s3, s4, s5, s6, s7},                                    \
                          {d0, d1, d2, d3, d4, d5, d6, d7}}
#define HIPK_TILE_LAYOUT                                                                       \
    const long long size[4] = {n0, n1, n2, n3}, ss[4] = {s0, s1, s2, s3}, ds[4] = {d0, d1, d2, d3}

// --- entry points: one per element size (hip-core reads the parameter types from these lines) -

extern "C" __global__ void copy_u8(const unsigned char* src, unsigned char* dst, long long n,
                                   int rank, long long n0, long long n1, long long n2,
                                   long long n3, long long n4, long long n5, long long n6,
                                   long long n7, long long s0, long long s1, long long s2,
                                   long long s3, long long s4, long long s5, long long s6,
                                   long long s7, long long d0, long long d1, long long d2,
                                   long long d3, long long d4, long long d5, long long d6,
                                   long long d7) {
    HIPK_COPY_LAYOUT;
    hipk::copy(src, dst, n, rank, l);
}
extern "C" __global__ void copy_u16(const unsigned short* src, unsigned short* dst, long long n,
                                    int rank, long long n0, long long n1, long long n2,
                                    long long n3, long long n4, long long n5, long long n6,
                                    long long n7, long long s0, long long s1, long long s2,
                                    long long s3, long long s4, long long s5, long long s6,
                                    long long s7, long long d0, long long d1, long long d2,
                                    long long d3, long long d4, long long d5, long long d6,
                                    long long d7) {
    HIPK_COPY_LAYOUT;
    hipk::copy(src, dst, n, rank, l);
}
extern "C" __global__ void copy_u32(const unsigned int* src, unsigned int* dst, long long n,
                                    int rank, long long n0, long long n1, long long n2,
                                    long long n3, long long n4, long long n5, long long n6,
                                    long long n7, long long s0, long long s1, long long s2,
                                    long long s3, long long s4, long long s5, long long s6,
                                    long long s7, long long d0, long long d1, long long d2,
                                    long long d3, long long d4, long long d5, long long d6,
                                    long long d7) {
    HIPK_COPY_LAYOUT;
    hipk::copy(src, dst, n, rank, l);
}
extern "C" __global__ void copy_u64(const unsigned long long* src, unsigned long long* dst,
                                    long long n, int rank, long long n0, long long n1,
                                    long long n2, long long n3, long long n4, long long n5,
                                    long long n6, long long n7, long long s0, long long s1,
                                    long long s2, long long s3, long long s4, long long s5,
                                    long long s6, long long s7, long long d0, long long d1,
                                    long long d2, long long d3, long long d4, long long d5,
                                    long long d6, long long d7) {
    HIPK_COPY_LAYOUT;
    hipk::copy(src, dst, n, rank, l);
}

extern "C" __global__ void copy_tiles_u8(const unsigned char* src, unsigned char* dst, int rank,
                                         int tile_a, int tile_b, long long n0, long long n1,
                                         long long n2, long long n3, long long s0, long long s1,
                                         long long s2, long long s3, long long d0, long long d1,
                                         long long d2, long long d3) {
    HIPK_TILE_LAYOUT;
    hipk::transpose_any(src, dst, rank, tile_a, tile_b, size, ss, ds);
}
extern "C" __global__ void copy_tiles_u16(const unsigned short* src, unsigned short* dst,
                                          int rank, int tile_a, int tile_b, long long n0,
                                          long long n1, long long n2, long long n3, long long s0,
                                          long long s1, long long s2, long long s3, long long d0,
                                          long long d1, long long d2, long long d3) {
    HIPK_TILE_LAYOUT;
    hipk::transpose_any(src, dst, rank, tile_a, tile_b, size, ss, ds);
}
extern "C" __global__ void copy_tiles_u32(const unsigned int* src, unsigned int* dst, int rank,
                                          int tile_a, int tile_b, long long n0, long long n1,
                                          long long n2, long long n3, long long s0, long long s1,
                                          long long s2, long long s3, long long d0, long long d1,
                                          long long d2, long long d3) {
    HIPK_TILE_LAYOUT;
    hipk::transpose_any(src, dst, rank, tile_a, tile_b, size, ss, ds);
}
extern "C" __global__ void copy_tiles_u64(const unsigned long long* src, unsigned long long* dst,
                                          int rank, int tile_a, int tile_b, long long n0,
                                          long long n1, long long n2, long long n3, long long s0,
                                          long long s1, long long s2, long long s3, long long d0,
                                          long long d1, long long d2, long long d3) {
    HIPK_TILE_LAYOUT;
    hipk::transpose_any(src, dst, rank, tile_a, tile_b, size, ss, ds);
}
