// Strided copies, moving bits (one entry point per element size serves every dtype of that
// size: u8, u16, u32, u64 are 1, 2, 4 and 8 bytes).
//
// copy_<u>(src, dst, CopyArgs args) copies the args.n elements of a rank-`args.rank` layout
// (row-major over args.size[0..rank-1]) from src to dst, each side with its own strides
// (args.src, args.dst): one element per thread per pass of a grid-stride loop, so both sides
// coalesce wherever their innermost strides are 1. The coordinates come from integer division
// (this kernel's cost), 32-bit when every linear index fits (n < 2^32). CopyArgs travels by
// value; the host packs it from hip_runtime.libraries.kernel_structs.COPY_ARGS, whose layout
// must be this one (packages/hip-runtime/tests/test_kernel_structs.py compares the two on
// the device).
//
// copy_tiles_<u>(src, dst, na, nb, sa, sb, da, db, m0, m1, ms0, ms1, md0, md1, vec) copies a
// transpose: axis a (na elements, strides sa and da) has src stride sa = 1 and axis b (nb, sb,
// db) dst stride db = 1, so a block moves tiles of those two axes through shared memory,
// reading along a and writing along b, and both sides coalesce (as transpose.hip). Up to two
// more axes (m0 x m1, outer first; size 1 when absent) are a batch. A kernel of its own, so
// its registers do not limit copy_<u>'s occupancy. vec (the path; 1-4 need na, nb, sb, da and
// the batch strides multiples of V = 16 / sizeof(u), both pointers 16-byte aligned): 0: 32 x 32
// tiles, one element per access; 1: 64 x 64 tiles (32 x 32 for u64) read and written with
// 16-byte accesses, each thread with all its loads of a tile in flight (4 for u32: 64 bytes),
// through shared memory element by element; 2 (u16 only): 64 x 128 tiles of element pairs,
// a 2-byte transpose moved as a 4-byte one (copy_tiles_pairs below); 3 and 4 (u16, u32 only):
// V x V blocks transposed in registers (copy_tiles_reg below). The host
// (strided_copy.TILE_MODES) picks.
//
// Strides are in elements and may be negative or zero (a broadcast source); offsets are 64-bit.
// Unused sizes are ignored. The host (hip_runtime.tensors.strided_copy) merges axes first, so
// most copies arrive as rank 1 or 2. dst must not overlap src, nor itself (no zero stride in
// dst); the host copies through a temporary where they would.
// Launch: any 1-D grid; block 256 (copy_tiles_<u>: exactly 256).
#include "common.h"

#define HIPK_COPY_RANK 8
#define HIPK_COPY_TILE 32
#define HIPK_COPY_ROWS 8  // copy_tiles_<u> blocks are 32 x 8 threads (256)

namespace hipk {

// copy_<u>'s arguments after the two pointers. Field order and types are the host's
// (COPY_ARGS): rank is followed by 4 bytes of padding, the arrays being 8-byte aligned.
struct CopyArgs {
    long long n;                     // elements to copy
    int rank;                        // axes used, 1 .. HIPK_COPY_RANK
    long long size[HIPK_COPY_RANK];  // row-major sizes; entries from rank on are ignored
    long long src[HIPK_COPY_RANK];   // src's strides (elements; negative or 0 allowed)
    long long dst[HIPK_COPY_RANK];   // dst's strides (elements)
};

// Element i's offsets: its coordinates, innermost first, by division. R and I are compile-time,
// so the loops unroll and the layout is read once into registers (not from the argument on
// every pass: stores through dst may alias it as far as the compiler knows).
template <typename T, int R, typename I>
HIPK_DEVICE void copy_rank(const T* src, T* dst, long long n, const CopyArgs& l) {
    I sizes[R];
    long long from[R], to[R];
    HIPK_UNROLL
    for (int k = 0; k < R; ++k) {
        sizes[k] = (I)l.size[k];
        from[k] = l.src[k];
        to[k] = l.dst[k];
    }
    for (long long i = global_thread(); i < n; i += grid_threads()) {
        I rest = (I)i;
        long long s = 0, d = 0;
        HIPK_UNROLL
        for (int k = R - 1; k > 0; --k) {
            const I c = rest % sizes[k];
            rest /= sizes[k];
            s += (long long)c * from[k];
            d += (long long)c * to[k];
        }
        s += (long long)rest * from[0];
        d += (long long)rest * to[0];
        dst[d] = src[s];
    }
}

template <typename T, int R>
HIPK_DEVICE void copy_any_index(const T* src, T* dst, long long n, const CopyArgs& l) {
    if (n <= 0xffffffffLL)
        copy_rank<T, R, unsigned int>(src, dst, n, l);
    else
        copy_rank<T, R, unsigned long long>(src, dst, n, l);
}

template <typename T> HIPK_DEVICE void copy(const T* src, T* dst, const CopyArgs& l) {
    const long long n = l.n;
    switch (l.rank) {
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

// A transposing copy through `tile`, __shared__ T[32][33] (the padding keeps a tile column off
// a single bank): axis a (na elements) has src stride 1, axis b (nb) dst stride 1, and up to
// two batch axes (m0 x m1, outer first) are decomposed once per tile. Blocks are 32 x 8
// threads; each thread has its 4 loads of a tile in flight at once.
template <typename T>
HIPK_DEVICE void copy_tiles(const T* src, T* dst, long long na, long long nb, long long sa,
                            long long sb, long long da, long long db, long long m0, long long m1,
                            long long ms0, long long ms1, long long md0, long long md1,
                            T (*tile)[HIPK_COPY_TILE + 1]) {
    const int per_thread = HIPK_COPY_TILE / HIPK_COPY_ROWS;
    const long long tiles_a = (na + HIPK_COPY_TILE - 1) / HIPK_COPY_TILE;
    const long long tiles_b = (nb + HIPK_COPY_TILE - 1) / HIPK_COPY_TILE;
    const long long tiles = m0 * m1 * tiles_a * tiles_b;
    const int tx = (int)threadIdx.x % HIPK_COPY_TILE, ty = (int)threadIdx.x / HIPK_COPY_TILE;
    // The loop bounds are the same for every thread of the block, so all reach each barrier.
    for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
        long long rest = t / tiles_b;
        const long long b0 = (t - rest * tiles_b) * HIPK_COPY_TILE;
        long long batch = rest / tiles_a;
        const long long a0 = (rest - batch * tiles_a) * HIPK_COPY_TILE;
        const long long c0 = batch / m1, c1 = batch - c0 * m1;
        const long long s = a0 * sa + b0 * sb + c0 * ms0 + c1 * ms1;
        const long long d = a0 * da + b0 * db + c0 * md0 + c1 * md1;
        T v[per_thread] = {};
        HIPK_UNROLL
        for (int r = 0; r < per_thread; ++r) {  // consecutive threads walk src's axis a
            const int j = ty + r * HIPK_COPY_ROWS;
            if (a0 + tx < na && b0 + j < nb) v[r] = src[s + tx * sa + j * sb];
        }
        HIPK_UNROLL
        for (int r = 0; r < per_thread; ++r) tile[ty + r * HIPK_COPY_ROWS][tx] = v[r];
        __syncthreads();
        HIPK_UNROLL
        for (int r = 0; r < per_thread; ++r) {  // and dst's axis b
            const int i = ty + r * HIPK_COPY_ROWS;
            if (a0 + i < na && b0 + tx < nb) dst[d + i * da + tx * db] = tile[tx][i];
        }
        __syncthreads();  // the tile is read out before the next one overwrites it
    }
}

// The vector path of copy_tiles (vec = 1, see the top): tiles of E x E elements, E = 64 (32
// for 8-byte units, to keep the tile at 8 KiB), in `tile` (E rows of E + 1: the padding
// spreads a tile column over the banks). Threads read V-element vectors along a (consecutive
// threads, consecutive vectors) into tile[b][a], then write V-element vectors along b, each
// gathered from a tile column.
template <typename T> struct CopyEdge { enum { value = sizeof(T) == 8 ? 32 : 64 }; };

template <typename T>
HIPK_DEVICE void copy_tiles_vec(const T* src, T* dst, long long na, long long nb, long long sb,
                                long long da, long long m0, long long m1, long long ms0,
                                long long ms1, long long md0, long long md1, T* tile) {
    enum {
        V = 16 / sizeof(T), E = CopyEdge<T>::value, P = E + 1, ROW = E / V,
        PASSES = E * E / V / 256  // vectors per thread per tile: 1 (u8) ... 4 (u32)
    };
    const long long tiles_a = (na + E - 1) / E, tiles_b = (nb + E - 1) / E;
    const long long tiles = m0 * m1 * tiles_a * tiles_b;
    const int t = (int)threadIdx.x;
    // The loop bounds are the same for every thread of the block, so all reach each barrier.
    for (long long k = blockIdx.x; k < tiles; k += gridDim.x) {
        const long long rest = k / tiles_b;
        const long long b0 = (k - rest * tiles_b) * E;
        const long long batch = rest / tiles_a;
        const long long a0 = (rest - batch * tiles_a) * E;
        const long long c0 = batch / m1, c1 = batch - c0 * m1;
        const T* from = src + a0 + b0 * sb + c0 * ms0 + c1 * ms1;
        T* to = dst + a0 * da + b0 + c0 * md0 + c1 * md1;
        Vec<T, V> v[PASSES] = {};
        HIPK_UNROLL
        for (int p = 0; p < PASSES; ++p) {  // all of the thread's loads in flight at once
            const int q = t + p * 256, a = q % ROW * V, b = q / ROW;
            if (a0 + a < na && b0 + b < nb)
                v[p] = *reinterpret_cast<const Vec<T, V>*>(from + a + b * sb);
        }
        HIPK_UNROLL
        for (int p = 0; p < PASSES; ++p) {
            const int q = t + p * 256, a = q % ROW * V, b = q / ROW;
            HIPK_UNROLL
            for (int i = 0; i < V; ++i) tile[b * P + a + i] = v[p].v[i];
        }
        __syncthreads();
        HIPK_UNROLL
        for (int p = 0; p < PASSES; ++p) {  // a vector along b: V elements of a tile column
            const int q = t + p * 256, b = q % ROW * V, a = q / ROW;
            if (a0 + a < na && b0 + b < nb) {
                Vec<T, V> w;
                HIPK_UNROLL
                for (int i = 0; i < V; ++i) w.v[i] = tile[(b + i) * P + a];
                *reinterpret_cast<Vec<T, V>*>(to + a * da + b) = w;
            }
        }
        __syncthreads();  // the tile is read out before the next one overwrites it
    }
}

// The register paths (vec = 3, 4; 2- and 4-byte units only, V = 16 / sizeof(T)): each thread
// reads a V x V block as V 16-byte vectors along a (V consecutive b), transposes it in
// registers, and stores the V 16-byte vectors along b (V consecutive a) straight to dst: no
// shared memory, no barrier, and V loads in flight (128 bytes for u16). TA threads of a warp
// run along a (vec 3: 4, so a warp reads 64-byte runs of 8 rows and writes 128-byte runs of 4;
// vec 4: 8, the other way round), the others along b: a tile is TA V (a) x (256 / TA) V (b).
template <typename T, int V> struct Block { Vec<T, V> v[V]; };

template <typename T, int TA>
HIPK_DEVICE void copy_tiles_reg(const T* src, T* dst, long long na, long long nb, long long sb,
                                long long da, long long m0, long long m1, long long ms0,
                                long long ms1, long long md0, long long md1) {
    enum { V = 16 / sizeof(T), TB = 256 / TA, A = TA * V, B = TB * V };
    const long long tiles_a = (na + A - 1) / A, tiles_b = (nb + B - 1) / B;
    const long long tiles = m0 * m1 * tiles_a * tiles_b;
    const int t = (int)threadIdx.x, ja = t % TA, jb = t / TA;
    for (long long k = blockIdx.x; k < tiles; k += gridDim.x) {
        const long long rest = k / tiles_b;
        const long long b0 = (k - rest * tiles_b) * B;
        const long long batch = rest / tiles_a;
        const long long a0 = (rest - batch * tiles_a) * A;
        const long long c0 = batch / m1, c1 = batch - c0 * m1;
        const long long a = a0 + ja * V, b = b0 + jb * V;
        if (a >= na || b >= nb) continue;  // (na, nb multiples of V: a block is all in or out)
        const T* from = src + a + b * sb + c0 * ms0 + c1 * ms1;
        T* to = dst + a * da + b + c0 * md0 + c1 * md1;
        Block<T, V> in, out;
        HIPK_UNROLL
        for (int r = 0; r < V; ++r) in.v[r] = *reinterpret_cast<const Vec<T, V>*>(from + r * sb);
        HIPK_UNROLL
        for (int i = 0; i < V; ++i)
            HIPK_UNROLL
            for (int r = 0; r < V; ++r) out.v[i].v[r] = in.v[r].v[i];
        HIPK_UNROLL
        for (int i = 0; i < V; ++i) *reinterpret_cast<Vec<T, V>*>(to + i * da) = out.v[i];
    }
}

// The pair path (vec = 2; 2-byte units only): a 2-byte transpose moved as a 4-byte one. Each
// thread reads 16-byte vectors of rows b and b + 1 (8 elements along a each) and packs them
// into 8 words, element a + i of row b in the low half and of row b + 1 in the high one: in
// dst, contiguous along b, each pair is one word. The tile holds those words, tile[a][b / 2],
// and is written out as 16-byte vectors of 4 words along b: 4-byte shared accesses where
// copy_tiles_vec makes 2-byte ones, each with a pack or unpack around it. A tile is 64 (a) x
// 128 (b) elements: 2 row pairs (4 loads in flight) per thread in, 4 vectors out. Tile rows are
// PAIR_STRIDE words (16-byte aligned for the vector reads), and the words of a-vector g = a / 8
// sit 4 g columns further on (mod 64): a warp's stores (8 a-vectors x 4 row pairs) then fall
// in 32 distinct banks, and every 8 lanes of a vector read in 8 distinct 16-byte bank groups.
#define HIPK_PAIR_STRIDE 68
#define HIPK_PAIR_BYTES (64 * HIPK_PAIR_STRIDE * 4)

template <typename T>
HIPK_DEVICE void copy_tiles_pairs(const T* src, T* dst, long long na, long long nb, long long sb,
                                  long long da, long long m0, long long m1, long long ms0,
                                  long long ms1, long long md0, long long md1, unsigned* tile) {
    // A x B elements, W = B / 2 words per tile row; IN row pairs in, OUT vectors out per thread
    enum { A = 64, W = 64, B = 2 * W, S = HIPK_PAIR_STRIDE, IN = A / 8 * W / 256, OUT = A * W / 4 / 256 };
    const long long tiles_a = (na + A - 1) / A, tiles_b = (nb + B - 1) / B;
    const long long tiles = m0 * m1 * tiles_a * tiles_b;
    const int t = (int)threadIdx.x;
    // The loop bounds are the same for every thread of the block, so all reach each barrier.
    for (long long k = blockIdx.x; k < tiles; k += gridDim.x) {
        const long long rest = k / tiles_b;
        const long long b0 = (k - rest * tiles_b) * B;
        const long long batch = rest / tiles_a;
        const long long a0 = (rest - batch * tiles_a) * A;
        const long long c0 = batch / m1, c1 = batch - c0 * m1;
        const T* from = src + a0 + b0 * sb + c0 * ms0 + c1 * ms1;
        T* to = dst + a0 * da + b0 + c0 * md0 + c1 * md1;
        Vec<T, 8> low[IN] = {}, high[IN] = {};
        HIPK_UNROLL
        for (int p = 0; p < IN; ++p) {  // all of the thread's loads in flight at once
            const int u = t + p * 256, a = u % 8 * 8, b = u / 8 * 2;
            if (a0 + a < na && b0 + b < nb) {  // (nb is a multiple of 8: row b + 1 is there)
                low[p] = *reinterpret_cast<const Vec<T, 8>*>(from + a + b * sb);
                high[p] = *reinterpret_cast<const Vec<T, 8>*>(from + a + (b + 1) * sb);
            }
        }
        HIPK_UNROLL
        for (int p = 0; p < IN; ++p) {
            const int u = t + p * 256, g = u % 8, column = (u / 8 + 4 * g) & (W - 1);
            HIPK_UNROLL
            for (int i = 0; i < 8; ++i)
                tile[(g * 8 + i) * S + column] =
                    (unsigned)low[p].v[i] | ((unsigned)high[p].v[i] << 16);
        }
        __syncthreads();
        HIPK_UNROLL
        for (int p = 0; p < OUT; ++p) {  // words 4 j .. 4 j + 3 of tile row a: b = 8 j .. + 7
            const int q = t + p * 256, a = q / (W / 4), j = q % (W / 4);
            if (a0 + a < na && b0 + 8 * j < nb) {
                const int column = (4 * j + 4 * (a / 8)) & (W - 1);
                *reinterpret_cast<Vec<unsigned, 4>*>(to + a * da + 8 * j) =
                    *reinterpret_cast<const Vec<unsigned, 4>*>(tile + a * S + column);
            }
        }
        __syncthreads();  // the tile is read out before the next one overwrites it
    }
}

// copy_tiles_pairs exists for 2-byte units only; the host asks no other unit for it.
template <typename T, int S = sizeof(T)> struct PairTiles {
    static HIPK_DEVICE void run(const T*, T*, long long, long long, long long, long long,
                                long long, long long, long long, long long, long long,
                                long long, unsigned*) {}
};
template <typename T> struct PairTiles<T, 2> {
    static HIPK_DEVICE void run(const T* src, T* dst, long long na, long long nb, long long sb,
                                long long da, long long m0, long long m1, long long ms0,
                                long long ms1, long long md0, long long md1, unsigned* tile) {
        copy_tiles_pairs(src, dst, na, nb, sb, da, m0, m1, ms0, ms1, md0, md1, tile);
    }
};

// copy_tiles_reg's paths exist for 2- and 4-byte units; the others never take them (the host).
template <typename T, int S = sizeof(T)> struct RegTiles {
    static HIPK_DEVICE void run(const T*, T*, long long, long long, long long, long long,
                                long long, long long, long long, long long, long long,
                                long long, int) {}
};
template <typename T> struct RegTiles<T, 2> {
    static HIPK_DEVICE void run(const T* src, T* dst, long long na, long long nb, long long sb,
                                long long da, long long m0, long long m1, long long ms0,
                                long long ms1, long long md0, long long md1, int vec) {
        if (vec == 3)
            copy_tiles_reg<T, 4>(src, dst, na, nb, sb, da, m0, m1, ms0, ms1, md0, md1);
        else
            copy_tiles_reg<T, 8>(src, dst, na, nb, sb, da, m0, m1, ms0, ms1, md0, md1);
    }
};
template <typename T> struct RegTiles<T, 4> : RegTiles<T, 2> {};

// One shared buffer for the shared paths (static shared arrays of several paths would add
// up), in bytes: the largest of the three tiles this unit's paths use.
template <typename T> struct TileBytes {
    enum {
        VEC = CopyEdge<T>::value * (CopyEdge<T>::value + 1) * sizeof(T),
        ELEMENT = HIPK_COPY_TILE * (HIPK_COPY_TILE + 1) * sizeof(T),
        PAIRS = sizeof(T) == 2 ? HIPK_PAIR_BYTES : 0,
        SHARED = VEC > ELEMENT ? VEC : ELEMENT,
        value = PAIRS > SHARED ? PAIRS : SHARED
    };
};

template <typename T>
HIPK_DEVICE void copy_tiles_any(const T* src, T* dst, long long na, long long nb, long long sa,
                                long long sb, long long da, long long db, long long m0,
                                long long m1, long long ms0, long long ms1, long long md0,
                                long long md1, int vec) {
    __shared__ __align__(16) unsigned char bytes[TileBytes<T>::value];
    T* tile = reinterpret_cast<T*>(bytes);
    if (vec >= 3)
        RegTiles<T>::run(src, dst, na, nb, sb, da, m0, m1, ms0, ms1, md0, md1, vec);
    else if (vec == 2)
        PairTiles<T>::run(src, dst, na, nb, sb, da, m0, m1, ms0, ms1, md0, md1,
                          reinterpret_cast<unsigned*>(bytes));
    else if (vec)
        copy_tiles_vec(src, dst, na, nb, sb, da, m0, m1, ms0, ms1, md0, md1, tile);
    else
        copy_tiles(src, dst, na, nb, sa, sb, da, db, m0, m1, ms0, ms1, md0, md1,
                   reinterpret_cast<T (*)[HIPK_COPY_TILE + 1]>(tile));
}

}  // namespace hipk

// --- entry points: one per element size (hip-core reads the parameter types from these lines) -

extern "C" __global__ void copy_u8(const unsigned char* src, unsigned char* dst,
                                   hipk::CopyArgs args) {
    hipk::copy(src, dst, args);
}
extern "C" __global__ void copy_u16(const unsigned short* src, unsigned short* dst,
                                    hipk::CopyArgs args) {
    hipk::copy(src, dst, args);
}
extern "C" __global__ void copy_u32(const unsigned int* src, unsigned int* dst,
                                    hipk::CopyArgs args) {
    hipk::copy(src, dst, args);
}
extern "C" __global__ void copy_u64(const unsigned long long* src, unsigned long long* dst,
                                    hipk::CopyArgs args) {
    hipk::copy(src, dst, args);
}

extern "C" __global__ __launch_bounds__(256) void copy_tiles_u8(
    const unsigned char* src, unsigned char* dst, long long na, long long nb, long long sa, long long sb,
    long long da, long long db, long long m0, long long m1, long long ms0, long long ms1,
    long long md0, long long md1, int vec) {
    hipk::copy_tiles_any(src, dst, na, nb, sa, sb, da, db, m0, m1, ms0, ms1, md0, md1, vec);
}
extern "C" __global__ __launch_bounds__(256) void copy_tiles_u16(
    const unsigned short* src, unsigned short* dst, long long na, long long nb, long long sa, long long sb,
    long long da, long long db, long long m0, long long m1, long long ms0, long long ms1,
    long long md0, long long md1, int vec) {
    hipk::copy_tiles_any(src, dst, na, nb, sa, sb, da, db, m0, m1, ms0, ms1, md0, md1, vec);
}
extern "C" __global__ __launch_bounds__(256) void copy_tiles_u32(
    const unsigned int* src, unsigned int* dst, long long na, long long nb, long long sa, long long sb,
    long long da, long long db, long long m0, long long m1, long long ms0, long long ms1,
    long long md0, long long md1, int vec) {
    hipk::copy_tiles_any(src, dst, na, nb, sa, sb, da, db, m0, m1, ms0, ms1, md0, md1, vec);
}
extern "C" __global__ __launch_bounds__(256) void copy_tiles_u64(
    const unsigned long long* src, unsigned long long* dst, long long na, long long nb, long long sa, long long sb,
    long long da, long long db, long long m0, long long m1, long long ms0, long long ms1,
    long long md0, long long md1, int vec) {
    hipk::copy_tiles_any(src, dst, na, nb, sa, sb, da, db, m0, m1, ms0, ms1, md0, md1, vec);
}
