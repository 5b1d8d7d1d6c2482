// How the row kernels (norms, softmax) spread rows over blocks.
//
// Launch: grid = rows (or (g, ceil(rows / g)) beyond the grid's x limit), 1-D blocks; block
// (x, y) is block number b = y * gridDim.x + x. Normally block b handles row b. When two rows
// fit in the registers of half a block (see below), block b handles rows 2b and 2b + 1 instead,
// one per half (a "part" of whole warps), and the blocks from ceil(rows / 2) on find nothing
// to do. Surplus blocks return at once. Many narrow rows: a 2-D block (w, P), w a multiple of
// the warp width, takes rows P b .. P b + P - 1, row P b + y by the threads of y (grid
// ceil(rows / P)), instead of a block scheduled per 1-2 KiB (H200, MiniLM's 384-wide bf16
// layernorm over 16384 rows: 30 -> 26.5 us for 25 MB, still a fifth of the copy rate: a warp
// a row is latency-bound, which the narrow kernels at the end of this file answer). (A
// grid-stride loop over rows would let any grid work, but the compilers then keep per-thread
// addresses live across iterations: +30-60 registers, spills on AMD.)
//
// The row is read as "vectors" of N consecutive elements: N = 16 bytes / sizeof(T) when every
// pointer is 16-byte aligned and cols % N == 0, else N = 1 (coalesced scalar reads). Vector j of
// the row belongs to thread j % threads of its part, so neighbouring threads touch neighbouring
// memory.
//
// Rows that fit are kept in registers: read from memory once and written once, with exact
// statistics over the registers. A kernel picks the tile of its vector rows (run_rows' PACKED):
// - FloatTile: HIPK_ROW_FLOATS floats per thread, whatever the type (8192 columns at 256
//   threads: 8 x 16-byte loads per thread in f32, 4 in 16-bit types).
// - PackedTile (16-bit types): HIPK_ROW_VECTORS 16-byte vectors per thread kept as raw words,
//   so 64 elements at the registers of 32 floats (8192 16-bit columns at 128 threads, or two
//   rows per 256-thread block: 8 x 16-byte loads per thread), converted at each use.
// Scalar rows keep up to HIPK_SCALAR_ROW_FLOATS floats per thread (their per-element addresses
// cost more registers). Longer rows are streamed: one read for the statistics, a second read
// for the output. Either way every row needs one block reduction (of a pair or triple of
// statistics where needed).
#pragma once

#include "common.h"

// Register tiles per thread (see above). With __launch_bounds__(1024) on the entry points the
// row kernels use at most 64 registers on sm_90 and at most 81 VGPRs on gfx90a, no spills.
#define HIPK_ROW_VECTORS 8
#define HIPK_ROW_FLOATS 32
#define HIPK_SCALAR_ROW_FLOATS 8

namespace hipk {

// 2^x for the 16-bit softmax, whose scores are kept in the log2 domain: one instruction on
// NVIDIA (ex2.approx.ftz, about 2 ulp; results below 2^-126 flush to 0, far under what a 16-bit
// probability next to the row's maximum can show), exp2f elsewhere.
HIPK_DEVICE float exp2_fast(float x) {
#if defined(__CUDA_ARCH__)
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
#else
    return exp2f(x);
#endif
}

// Two floats rounded (to nearest even) into the 32-bit word of two 16-bit values, `lo` in the
// low half: one instruction on NVIDIA from sm_80 instead of two conversions and a merge.
HIPK_DEVICE unsigned int pack_pair(float lo, float hi, const bf16*) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    unsigned int w;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(hi), "f"(lo));
    return w;
#else
    return (unsigned int)bf16_bits_from_float(lo) | ((unsigned int)bf16_bits_from_float(hi) << 16);
#endif
}
HIPK_DEVICE unsigned int pack_pair(float lo, float hi, const f16*) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    unsigned int w;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(hi), "f"(lo));
    return w;
#else
    return (unsigned int)half_bits_from_float(lo) | ((unsigned int)half_bits_from_float(hi) << 16);
#endif
}

// p[0..N) = in, rounded to T: store_floats, except that 16-bit vectors are packed in pairs.
template <typename T, int N> struct RowStore {
    HIPK_DEVICE static void store(T* p, const float (&in)[N]) { store_floats<T, N>(p, in); }
};
template <typename T, int N> struct PairStore {
    HIPK_DEVICE static void store(T* p, const float (&in)[N]) {
        Vec<unsigned int, N / 2> packed;
        HIPK_UNROLL
        for (int i = 0; i < N / 2; ++i) packed.v[i] = pack_pair(in[2 * i], in[2 * i + 1], p);
        *reinterpret_cast<Vec<unsigned int, N / 2>*>(p) = packed;
    }
};
template <> struct RowStore<bf16, 8> : PairStore<bf16, 8> {};
template <> struct RowStore<f16, 8> : PairStore<f16, 8> {};

template <typename T, int N> HIPK_DEVICE void store_row(T* p, const float (&in)[N]) {
    RowStore<T, N>::store(p, in);
}

// The row layout a block uses for rows of `cols` elements whose pointers are all in `ptrs`
// (nulls allowed: an absent weight or bias does not constrain the layout).
template <typename T>
HIPK_DEVICE bool row_vectorizable(int cols, const void* a, const void* b, const void* c,
                                  const void* d) {
    const int n = Lanes16<T>::value;
    return cols % n == 0 && aligned(a, 16) && aligned(b, 16) && aligned(c, 16) && aligned(d, 16);
}

// Where x's rows start when they are not `cols` apart (a slice of columns, permuted leading
// axes): row r at (r / inner) * outer + (r % inner) * step elements (inner = 1: r * outer).
struct RowStrides {
    long long inner, outer, step;
    HIPK_DEVICE long long at(long long r) const { return (r / inner) * outer + (r % inner) * step; }
    // Whether every row start keeps N-element vectors aligned (given an aligned x).
    HIPK_DEVICE bool multiple_of(int n) const { return outer % n == 0 && step % n == 0; }
};

// The block number (see above).
HIPK_DEVICE long long block_number() { return (long long)blockIdx.y * gridDim.x + blockIdx.x; }

// The threads that handle one row: the whole block, or one half of it.
struct RowPart {
    int thread;   // this thread's index in the part
    int threads;  // threads of the part
    int part;     // which part of the block

    // The vector index of this thread's item k.
    HIPK_DEVICE int vector(int k) const { return k * threads + thread; }

    HIPK_DEVICE BlockReducer reducer(float* scratch) const {
        const BlockReducer r = {scratch, 0, thread, threads, part};
        return r;
    }
};

// 32-bit words of N elements of T (N = 1 for 16-bit types: one element in the low half).
template <typename T, int N> struct Words { enum { value = (N * (int)sizeof(T) + 3) / 4 }; };

// A row held in registers: ITEMS vectors of N elements per thread. Every loop has a
// compile-time trip count and is unrolled, so the tile stays in registers. Items past the row's
// end are not loaded: every use checks valid(k). Two kinds with one interface:
// - FloatTile: the elements as floats (converted once, at the load); `keep` replaces one.
// - PackedTile: the raw 32-bit words of the storage type, converted at each use: 16-bit types
//   take half the registers, so a thread holds twice the elements (kept as 16-bit values, the
//   compilers give each its own register); `keep` does nothing (keeps == 0).
template <typename T, int N, int ITEMS> struct TileBase {
    enum { n = N, items = ITEMS };

    // True when item k holds real row elements.
    HIPK_DEVICE static bool valid(const RowPart& p, int k, int cols) {
        return p.vector(k) < cols / N;
    }

    // How many real elements this thread holds.
    HIPK_DEVICE static int count(const RowPart& p, int cols) {
        const int vectors = cols / N;
        return vectors > p.thread
                   ? imin(ITEMS, (vectors - p.thread + p.threads - 1) / p.threads) * N
                   : 0;
    }
};

template <typename T, int N, int ITEMS> struct FloatTile : TileBase<T, N, ITEMS> {
    enum { keeps = 1 };
    float v[ITEMS][N];

    HIPK_DEVICE void load(const RowPart& p, const T* row, int cols) {
        const int vectors = cols / N;
        HIPK_UNROLL
        for (int k = 0; k < ITEMS; ++k) {
            const int j = p.vector(k);
            if (j < vectors) load_floats<T, N>(row + (long long)j * N, v[k]);
        }
    }

    HIPK_DEVICE float at(int k, int i) const { return v[k][i]; }
    HIPK_DEVICE void keep(int k, int i, float value) { v[k][i] = value; }
};

// The 16-bit value `bits` of type T as a float (the pointer only picks the type).
HIPK_DEVICE float half_to_float(unsigned short bits, const bf16*) {
    return bits_float((unsigned int)bits << 16);
}
HIPK_DEVICE float half_to_float(unsigned short bits, const f16*) {
    return half_bits_to_float(bits);
}
HIPK_DEVICE float half_to_float(unsigned short, const float*) { return 0.0f; }  // never used

template <typename T, int N, int ITEMS> struct PackedTile : TileBase<T, N, ITEMS> {
    enum { W = Words<T, N>::value, keeps = sizeof(T) == 4 };
    unsigned int w[ITEMS][W];

    HIPK_DEVICE void load(const RowPart& p, const T* row, int cols) {
        const int vectors = cols / N;
        HIPK_UNROLL
        for (int k = 0; k < ITEMS; ++k) {
            const int j = p.vector(k);
            if (j >= vectors) continue;
            const T* at = row + (long long)j * N;
            if (N * sizeof(T) == W * 4) {
                typedef Vec<unsigned int, W> Packed;
                const Packed packed = *reinterpret_cast<const Packed*>(at);
                HIPK_UNROLL
                for (int i = 0; i < W; ++i) w[k][i] = packed.v[i];
            } else {  // one 16-bit element
                w[k][0] = *reinterpret_cast<const unsigned short*>(at);
            }
        }
    }

    HIPK_DEVICE float at(int k, int i) const {
        if (sizeof(T) == 4) return bits_float(w[k][i]);
        return half_to_float((unsigned short)(w[k][i / 2] >> (16 * (i % 2))), (const T*)0);
    }

    HIPK_DEVICE void keep(int k, int i, float value) {
        if (sizeof(T) == 4) w[k][i] = float_bits(value);
    }
};

// The register tile of vector rows: PackedTile for 16-bit types when PACKED, else FloatTile.
template <typename T, bool PACKED> struct VectorTile {
    enum { N = Lanes16<T>::value };
    typedef FloatTile<T, N, HIPK_ROW_FLOATS / N> type;
};
template <> struct VectorTile<f16, true> {
    typedef PackedTile<f16, 8, HIPK_ROW_VECTORS> type;
};
template <> struct VectorTile<bf16, true> {
    typedef PackedTile<bf16, 8, HIPK_ROW_VECTORS> type;
};

// --- rows of huge or tiny values ----------------------------------------------------------------
// Squares overflow f32 from |x| = 2^64 (1.8e19) on, and vanish below |x| = 2^-75. A row whose
// statistics came out inf or NaN (or so small that eps does not hide the loss) is computed
// again from x * s, s a power of two (exact) that brings its largest |x| to [2^20, 2^21): no
// square of it overflows, and the ones that matter do not underflow. Cost: a normal row pays a
// few scalar tests of its reduced statistics, and a block of two rows (parts) one barrier more
// (agreed); a rescaled row pays two more block reductions (its max |x|, then the statistics of
// x * s) and two more reads of x (norms.hip's rescale_row, a call: the kernels' registers stay
// those of the normal path, within a few).

#define HIPK_FLOAT_MAX 3.40282347e38f
#define HIPK_TINY_SQUARES 7.88860905e-31f  // 2^-100: below it, squares of the row were lost

// Whether rows of T may need it: f16's squares (at most 65504^2, at least 2^-48) neither
// overflow nor vanish in f32, so its kernels compile the rescaled path out.
template <typename T> struct Rescalable { enum { value = 1 }; };
template <> struct Rescalable<f16> { enum { value = 0 }; };

// The power of two s in [2^-126, 2^126] with |m| * s in [2^20, 2^21), or as near as the range
// allows; 1 for 0, inf and NaN. (Bits, not ldexpf/ilogbf: the same on every compiler.)
HIPK_DEVICE float power_of_two_scale(float m) {
    const int biased = (int)((float_bits(m) >> 23) & 0xffu);  // 0: a subnormal (or 0)
    if (biased == 0xff || m == 0.0f) return 1.0f;
    const int exponent = 127 + 20 - (biased - 127);  // s's biased exponent, 20 to 274
    return bits_float((unsigned int)(exponent < 253 ? exponent : 253) << 23);
}

// Whether a row's statistics must be computed again, scaled: `denominator` (variance or mean
// square, plus eps) is inf, NaN or tiny, or the mean overflowed. (NaN inputs go that way too,
// and stay NaN.) Only for a part with a row.
HIPK_DEVICE bool needs_rescale(float mean, float denominator, int cols) {
    return cols > 0 && !(denominator >= HIPK_TINY_SQUARES && denominator <= HIPK_FLOAT_MAX &&
                         fabsf(mean) <= HIPK_FLOAT_MAX);
}

// `need`, the same in every thread of the block, as the rescaled path's reductions require. One
// row per block, all warps whole: the reduction gave every warp the same bits (the same
// partials, folded in the same order), so the threads agree already and it costs nothing. Two
// rows per block (parts), or a partial last warp (its lanes fold the partials in another order:
// a sum at the edge of overflow may round otherwise): one __syncthreads_or.
HIPK_DEVICE bool agreed(bool need, const RowPart& p) {
    const int block = (int)(blockDim.x * blockDim.y);
    if (p.threads == block && (block & (warp_lanes() - 1)) == 0) return need;
#if HIPK_GPU
    if (p.threads == warp_lanes()) return need;  // a one-warp part: lane 0's broadcast sums
#endif
    return __syncthreads_or(need) != 0;
}

// 1 / sqrt(v + eps * s^2) without overflow: the scaled rows' reciprocal deviation, where v is
// the variance (or mean square) of x * s. An eps * s^2 past f32 leaves eps alone.
HIPK_DEVICE float scaled_rsqrt(float v, float eps, float s) {
    const float e = eps * s * s;
    return e <= HIPK_FLOAT_MAX ? 1.0f / sqrtf(v + e) : 1.0f / (sqrtf(eps) * s);
}

// The largest |x| of a block's row part (0 for none): the first step of rescaling.
struct MaxAbs {
    HIPK_DEVICE Floats<1> identity() const {
        Floats<1> s = {{0.0f}};
        return s;
    }
    HIPK_DEVICE Floats<1> operator()(Floats<1> a, Floats<1> b) const {
        a.v[0] = fmaxf(a.v[0], b.v[0]);  // (a NaN drops out: the rows stay NaN anyway)
        return a;
    }
};

// The largest |x| of this thread's vectors of a row, read from memory.
template <typename T, int N>
HIPK_DEVICE Floats<1> stream_max_abs(const T* x, const RowPart& p, int cols) {
    Floats<1> m = {{0.0f}};
    for (int j = p.thread; j < cols / N; j += p.threads) {
        float v[N];
        load_floats<T, N>(x + (long long)j * N, v);
        HIPK_UNROLL
        for (int i = 0; i < N; ++i) m.v[0] = fmaxf(m.v[0], fabsf(v[i]));
    }
    return m;
}

// A row that run_rows' vector tile does not hold (cols = 0: a part without a row): scalar rows
// in registers where they fit, else streamed.
template <typename T, typename RowOp>
HIPK_DEVICE void run_unfit_row(const RowOp& op, const RowPart& p, long long row, int n, int cols,
                               bool vectors) {
    const int N = Lanes16<T>::value;
    if (!vectors && cols <= HIPK_SCALAR_ROW_FLOATS * p.threads)
        op.template regs<FloatTile<T, 1, HIPK_SCALAR_ROW_FLOATS> >(p, row, n);
    else if (vectors)
        op.template stream<N>(p, row, n);
    else
        op.template stream<1>(p, row, n);
}

// Runs the fitting path of a row kernel `op` for this block's row(s). `op` provides
//   template <typename Tile> void regs(const RowPart&, long long row, int cols) const;
//   template <int N> void stream(const RowPart&, long long row, int cols) const;
// with `cols` = 0 for a part of the block without a row (it still takes part in the
// reductions, but touches no memory). `vectors`: the row's pointers allow N = Lanes16<T>
// (row_vectorizable). PACKED: 16-bit vector rows use PackedTile.
template <typename T, bool PACKED, typename RowOp>
HIPK_DEVICE void run_rows(const RowOp& op, long long rows, int cols, bool vectors) {
    typedef typename VectorTile<T, PACKED>::type Tile;
    const int threads = (int)blockDim.x, fit = Tile::n * Tile::items;
    const long long b = block_number();
    // A 2-D block (the host's launch for many narrow rows): blockDim.y rows, one per y, each
    // by blockDim.x threads (whole warps). Otherwise two rows per block when each fits in half
    // of it (whole warps per half): twice the loads in flight per thread, half the barriers per
    // row. Either way a block's rows are consecutive.
    const int stacked = (int)blockDim.y;
    const bool pair = stacked == 1 && vectors && threads % (2 * warp_lanes()) == 0 &&
                      cols <= fit * (threads / 2);
    const int parts = pair ? 2 : stacked;
    const long long first = parts * b;
    if (first >= rows) return;  // the whole block: no __syncthreads is skipped by some only
    const int size = pair ? threads / 2 : threads;
    const int part = pair ? (int)threadIdx.x / size : (int)threadIdx.y;
    const RowPart p = {(int)threadIdx.x - (pair ? part * size : 0), size, part};
    const long long row = first + part < rows ? first + part : first;
    const int n = first + part < rows ? cols : 0;
    if (vectors && cols <= fit * size)
        op.template regs<Tile>(p, row, n);
    else
        run_unfit_row<T>(op, p, row, n, cols, vectors);
}

// --- many narrow rows, several a warp ---------------------------------------------------------
// A warp that holds one narrow row has a few loads in flight and then spends most of its life
// reducing (H200, MiniLM's [16384, 384] bf16 layernorm a row a warp: 23 us, 0.27 of the copy
// rate, 64 registers of which the row takes 6). The narrow kernels give a warp `rows` rows of
// at most 16 elements a lane (512 at 32 lanes, 1024 at 64), issue every load of them before
// the first reduction, and reduce each by shuffles alone (a part of one warp: BlockReducer).
// Their tiles take the registers of run_rows' one row: PackedTile 16-bit rows 4 a warp,
// FloatTile rows (f32, add_layernorm's sums) 2.
template <typename T, bool PACKED> struct NarrowTile {
    enum { rows = 2 };
    typedef FloatTile<T, Lanes16<T>::value, 16 / Lanes16<T>::value> type;
};
template <> struct NarrowTile<f16, true> {
    enum { rows = 4 };
    typedef PackedTile<f16, 8, 2> type;
};
template <> struct NarrowTile<bf16, true> {
    enum { rows = 4 };
    typedef PackedTile<bf16, 8, 2> type;
};

// Runs the narrow path of a row kernel `op`, which provides (besides run_rows' stream)
//   template <typename Tile> void load(Tile&, const RowPart&, long long row, int cols) const;
//   template <typename Tile> void finish(const Tile&, const RowPart&, long long row,
//                                        int cols) const;
// (`regs` is load, then finish). Launch: a 2-D block (warp, P), block b's part y taking rows
// R (P b + y) .. + R - 1 (R = NarrowTile::rows; the host's ops/norms.py narrow_rows_per_warp
// must say the same, or rows go unwritten); grid ceil(rows / (P R)). A layout the tile cannot
// hold (the host never launches one: unaligned operands, rows too long) still gives right
// rows, one at a time by run_rows' other paths.
template <typename T, bool PACKED, typename RowOp>
HIPK_DEVICE void run_narrow_rows(const RowOp& op, long long rows, int cols, bool vectors) {
    typedef NarrowTile<T, PACKED> Narrow;
    typedef typename Narrow::type Tile;
    const int R = Narrow::rows;
    const long long block_first = block_number() * (long long)blockDim.y * R;
    if (block_first >= rows) return;  // the whole block: no barrier is skipped by some only
    const RowPart p = {(int)threadIdx.x, (int)blockDim.x, (int)threadIdx.y};
    const long long first = block_first + (long long)threadIdx.y * R;
    if (vectors && cols <= Tile::n * Tile::items * p.threads) {
        Tile tiles[R];
        HIPK_UNROLL
        for (int i = 0; i < R; ++i) {  // every row's loads before any reduction
            const bool inside = first + i < rows;
            op.template load<Tile>(tiles[i], p, inside ? first + i : block_first,
                                   inside ? cols : 0);
        }
        HIPK_UNROLL
        for (int i = 0; i < R; ++i) {
            const bool inside = first + i < rows;
            op.template finish<Tile>(tiles[i], p, inside ? first + i : block_first,
                                     inside ? cols : 0);
        }
        return;
    }
    for (int i = 0; i < R; ++i) {
        const bool inside = first + i < rows;
        run_unfit_row<T>(op, p, inside ? first + i : block_first, inside ? cols : 0, cols,
                         vectors);
    }
}

}  // namespace hipk
