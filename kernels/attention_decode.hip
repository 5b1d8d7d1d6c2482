// Decode attention over a batch of KV caches, split over the keys (flash-decoding). Sequence b
// holds keys 0..len-1, len = lengths[b] read on the device (clamped to [0, smax]); its sq new
// queries are its last sq positions, so query i sees keys j <= len - sq + i (none when that is
// negative: zeros). Query head h reads key/value head h / (heads / kv_heads).
//
//   attention_decode_d<DT>_<t>(q, k, v, lengths, out, part, stats, counters, heads, kv_heads,
//       sq, d, smax, chunk_min, chunk_step, chunks, vec, scale, qb, qh, qs, kb, kh, ks, vb, vh,
//       vs, ob, oh, os)
//   attention_decode_combine_<t>(part, stats, lengths, out, heads, sq, d, smax, chunk_min,
//       chunk_step, chunks, ob, oh, os)
//
// q [B, heads, sq, d], k and v [B, kv_heads, smax, d], out [B, heads, sq, d]: batch, head and
// position strides in elements (qb .. os), the d axis contiguous (a cache stored
// [B, smax, kv_heads, d] needs no copy). scale: the scores' factor times log2(e) (the softmax
// runs in base 2: each exponential is one exp2). vec: every row start is 16-byte aligned and d
// a multiple of 16 / sizeof(T) (16-byte loads); 0: element loads.
//
// Chunks: the host fixes their count, `chunks` (1..HIPK_DECODE_MAX_CHUNKS, from the shapes: the
// grid, so a launch captured in a graph replays as lengths grow); the keys each takes follow
// the length read on the device (split_keys in attention_decode_merge.h): ceil(len / chunks)
// rounded up to whole `chunk_step`s (whole steps of the key loops), at least `chunk_min` keys
// (>= 1), chunk c taking [c * keys, min((c + 1) * keys, len)): a sequence's keys spread over
// ceil(len / keys) chunks, all of them but for the step's rounding once len reaches
// chunks * chunk_min, whatever smax is; the blocks of the chunks past those return at once. A
// sequence that uses one chunk (chunks == 1, a short or an empty one: chunk 0 always runs, so
// length 0 gives zeros) is written to out directly, with no partials and no merge.
//
// Pass 1, grid (row_groups * chunks, kv_heads, B), block min(256, 8 * warpSize) threads. Block
// (x = rg + row_groups * c, hk, b) takes chunk c's keys of kv head hk and the query rows
// rho = rg * 4 .. + 4 (HIPK_DECODE_ROWS) of the G * sq rows that read it (G = heads / kv_heads;
// rho = g * sq + i is query i of head hk * G + g): every K/V byte is read once for all of them.
// Inside a block, groups of LANES lanes (DT / 8 on a GPU: 16-byte pieces of a row per lane; the
// whole row per thread on the cpu platform) take HIPK_DECODE_KEYS keys per step, each group
// keeping its own online softmax (no barrier in the key loop); the groups merge at the end.
// One chunk used: the block writes out (T). Otherwise it writes f32 partials,
// row = (b * heads + h) * sq + i, dp = d rounded up to 4:
//   part[(row * chunks + c) * dp + col]  the unnormalized sum of p * v,
//   stats[(row * chunks + c) * 2 + 0, 1] the running max (base 2) and the sum of p,
// and (counters not null: zeros, one per row group, kv head and batch; the host's default) the
// last block of a row group to finish merges its rows in the same launch, or (counters null)
// the combine kernel (grid B * heads * sq, block 256) merges a row's chunks into out.
// f32 arithmetic for every storage type; a row that sees no key gives zeros, not NaN.
#include "dtypes.h"
#include "early_start.h"  // every entry point may be started early: each block waits first
#include "rows.h"         // exp2_fast, pack_pair (the tensor-core block)

#define HIPK_DECODE_WARPS 8        // most warps per block: the host launches min(256, 8 * warp)
#define HIPK_DECODE_ROWS 4         // query rows per block (more rows: more row groups)
#define HIPK_DECODE_KEYS 4         // 16-bit keys per lane group and step: 2 * 4 loads in flight
#define HIPK_DECODE_MAX_CHUNKS 1024  // the host never splits a sequence in more chunks
#define HIPK_DECODE_COMBINE 256    // threads of a combine block

// The per-thread loops: unrolled on a GPU (so the small arrays stay in registers); on the cpu
// platform a thread holds whole rows (up to 256 elements) and unrolling them would take g++
// minutes for nothing (its arrays live in memory anyway).
#if HIPK_GPU
#define HIPK_DECODE_UNROLL HIPK_UNROLL
#else
#define HIPK_DECODE_UNROLL
#endif

namespace hipk {
namespace decode {

HIPK_DEVICE float shuffle_xor(float v, int mask) {
#if defined(__CUDA_ARCH__)
    return __shfl_xor_sync(0xffffffffu, v, mask);
#elif HIPK_GPU
    return __shfl_xor(v, mask);
#else
    (void)mask;  // one-lane warps: never called with a partner
    return v;
#endif
}

// How a row of DT elements spreads over the LANES lanes that share a key: lane l holds vectors
// v = 0..NV-1 of VEC elements at (v * LANES + l) * VEC (consecutive lanes, consecutive 16-byte
// pieces: coalesced), E = NV * VEC elements in all (8 on a GPU: one 16-byte load per row and
// lane for 16-bit types; 16 elements per lane measured slower on an H200).
template <typename T, int DT> struct Layout {
    enum { VEC = 16 / sizeof(T) };
#if HIPK_GPU
    enum { LANES = DT / 8 };
#else
    enum { LANES = 1 };
#endif
    enum { E = DT / LANES, NV = E / VEC };
    HIPK_DEVICE static int col(int e, int lane) {
        return ((e / VEC) * LANES + lane) * VEC + e % VEC;
    }
};

// The raw bits of an element, and an element of 16-byte word w (half `hi` for 16-bit types).
HIPK_DEVICE unsigned int raw_bits(float x) { return float_bits(x); }
HIPK_DEVICE unsigned int raw_bits(f16 x) { return x.bits; }
HIPK_DEVICE unsigned int raw_bits(bf16 x) { return x.bits; }
HIPK_DEVICE float word_value(unsigned int w, int, const float*) { return bits_float(w); }
HIPK_DEVICE float word_value(unsigned int w, int hi, const bf16*) {
    return bits_float(hi ? (w & 0xffff0000u) : (w << 16));
}
HIPK_DEVICE float word_value(unsigned int w, int hi, const f16*) {
    return half_bits_to_float((unsigned short)(hi ? w >> 16 : w & 0xffffu));
}

// A lane's E elements of a key or value row kept as the loaded 32-bit words (16-bit types
// take half the registers of floats, so more rows can be in flight), converted at each use.
template <typename T, int DT> struct Piece {
    typedef Layout<T, DT> L;
    enum { PER_WORD = 4 / sizeof(T), WORDS = L::E / PER_WORD };
    unsigned int w[WORDS];

    HIPK_DEVICE void load(const T* row, int lane, int d, bool vec) {
        HIPK_DECODE_UNROLL
        for (int n = 0; n < L::NV; ++n) {
            const int c = (n * L::LANES + lane) * L::VEC;
            unsigned int* words = w + n * 4;
            if (vec && c < d) {
                typedef Vec<unsigned int, 4> Words;
                const Words packed = *reinterpret_cast<const Words*>(row + c);
                HIPK_DECODE_UNROLL
                for (int j = 0; j < 4; ++j) words[j] = packed.v[j];
            } else {
                HIPK_DECODE_UNROLL
                for (int j = 0; j < 4; ++j) words[j] = 0u;
                HIPK_DECODE_UNROLL
                for (int e = 0; e < L::VEC; ++e) {  // half e % PER_WORD of word e / PER_WORD
                    const unsigned int bits = c + e < d ? raw_bits(row[c + e]) : 0u;
                    words[e / PER_WORD] |= bits << 16 * (e % PER_WORD);
                }
            }
        }
    }

    HIPK_DEVICE void zero() {
        HIPK_DECODE_UNROLL
        for (int j = 0; j < WORDS; ++j) w[j] = 0u;  // +0.0 in every type
    }

    HIPK_DEVICE float at(int e) const {
        return word_value(w[e / PER_WORD], e % PER_WORD, (const T*)0);
    }
};

// The lane's E elements of `row` as floats; elements at or past d are 0.
template <typename T, int DT>
HIPK_DEVICE void load_part(const T* row, int lane, int d, bool vec, float (&x)[Layout<T, DT>::E]) {
    Piece<T, DT> piece;
    piece.load(row, lane, d, vec);
    HIPK_DECODE_UNROLL
    for (int e = 0; e < Layout<T, DT>::E; ++e) x[e] = piece.at(e);
}

// v[0..N) summed over the lanes l ^ (O, O/2 .. 1) of a group, every lane ending with all N sums
// (bit for bit the same in each). Recursive halving then doubling: at each level a lane keeps
// one half of the values and adds its partner's copy of that half, so K values over L lanes
// take 2 (K - 1) shuffles instead of K log2(L). N and O are compile-time: v stays in registers.
template <int K, int N, int O> struct GroupSum {
    HIPK_DEVICE static void run(float (&v)[K], int lane) {
        enum { H = N > 1 ? N / 2 : 1 };
        if (N > 1) {
            const bool upper = (lane & O) != 0;
            HIPK_DECODE_UNROLL
            for (int i = 0; i < H; ++i) {
                const float send = upper ? v[i] : v[i + H];
                const float keep = upper ? v[i + H] : v[i];
                v[i] = keep + shuffle_xor(send, O);
            }
            GroupSum<K, H, O / 2>::run(v, lane);
            HIPK_DECODE_UNROLL
            for (int i = 0; i < H; ++i) {
                const float other = shuffle_xor(v[i], O);
                v[i + H] = upper ? v[i] : other;
                v[i] = upper ? other : v[i];
            }
        } else {
            v[0] += shuffle_xor(v[0], O);
            GroupSum<K, 1, O / 2>::run(v, lane);
        }
    }
};
template <int K, int N> struct GroupSum<K, N, 0> {
    HIPK_DEVICE static void run(float (&)[K], int) {}
};

struct Args {
    int heads, kv_heads, sq, d, smax, chunk_min, chunk_step, chunks, vec;
    float scale;
    long long qb, qh, qs, kb, kh, ks, vb, vh, vs, ob, oh, os;
};

HIPK_DEVICE int clamped_length(const int* lengths, int b, int smax) {
    const int len = lengths[b];
    return len < 0 ? 0 : (len > smax ? smax : len);
}

HIPK_DEVICE float finite_or_zero(float top) { return top == neg_inf() ? 0.0f : top; }

}  // namespace decode
}  // namespace hipk

#include "attention_decode_merge.h"  // split_keys, combine, merge_if_last

namespace hipk {
namespace decode {

// One block of pass 1 (see the header). U keys per lane group and step: HIPK_DECODE_KEYS for
// 16-bit types, half as many f32 rows (twice the registers each: the same bytes in flight per
// thread). On an H200, prefetching the next step (1 block/SM: ~200 registers) or taking twice
// the keys per step measured no faster.
template <typename T, int DT>
HIPK_DEVICE void split(const T* q, const T* k, const T* v, const int* lengths, T* out,
                       float* part, float* stats, unsigned int* counters, const Args& a) {
    typedef Layout<T, DT> L;
    enum { ROWS = HIPK_DECODE_ROWS, E = L::E, LANES = L::LANES };
    enum { U = HIPK_DECODE_KEYS / (sizeof(T) / 2), K = ROWS * U };
    __shared__ float red[HIPK_DECODE_WARPS][DT];
    __shared__ float warp_top[HIPK_DECODE_WARPS][ROWS], warp_sum[HIPK_DECODE_WARPS][ROWS];
    const int tid = (int)threadIdx.x, lane = tid % LANES, group = tid / LANES;
    // At most HIPK_DECODE_WARPS warps take part (the merge's shared rows): on the cpu
    // platform, whose "warps" are single threads, the block's other threads only wait at
    // the barriers.
    const int width = warp_lanes(), warp = tid / width;
    const int warps = imin((int)blockDim.x / width, HIPK_DECODE_WARPS);
    const int groups = warps * width / LANES;
    const bool active = warp < warps;
    const int per_kv = a.heads / a.kv_heads, group_rows = per_kv * a.sq;
    const int row_groups = (group_rows + ROWS - 1) / ROWS;
    const int rg = (int)blockIdx.x % row_groups, c = (int)blockIdx.x / row_groups;
    const int hk = (int)blockIdx.y, b = (int)blockIdx.z;
    const int len = clamped_length(lengths, b, a.smax);
    const KeySplit keyed = split_keys(len, a);
    if (c >= keyed.used) return;  // the whole block: no keys of the sequence left for it
    const int c0 = keyed.begin(c), end = keyed.end(c);
    const bool direct = keyed.used == 1;  // the block has all the keys: out, no partials

    // The block's query rows, pre-scaled; lim: the last key each may see in this chunk. Each
    // lane group keeps its own online softmax over its keys: running max m, sum l, output acc.
    float qx[ROWS][E], m[ROWS], l[ROWS], acc[ROWS][E];
    int lim[ROWS];
    HIPK_DECODE_UNROLL
    for (int r = 0; r < ROWS; ++r) {
        const int rho = rg * ROWS + r, g = rho / a.sq, i = rho - g * a.sq;
        if (rho < group_rows) {
            const int h = hk * per_kv + g;
            load_part<T, DT>(q + b * a.qb + h * a.qh + i * a.qs, lane, a.d, a.vec, qx[r]);
        }
        lim[r] = rho < group_rows ? imin(len - a.sq + i, end - 1) : -1;
        m[r] = neg_inf();
        l[r] = 0.0f;
        HIPK_DECODE_UNROLL
        for (int e = 0; e < E; ++e) {
            qx[r][e] = rho < group_rows ? qx[r][e] * a.scale : 0.0f;
            acc[r][e] = 0.0f;
        }
    }
    const T* keys = k + b * a.kb + hk * a.kh;
    const T* values = v + b * a.vb + hk * a.vh;
    // The trip count is the block's (uniform: every lane of a warp reaches the shuffles); a
    // key past `end` is neither loaded nor counted.
    for (int k0 = c0; k0 < (active ? end : c0); k0 += groups * U) {
        Piece<T, DT> kx[U], vx[U];  // key k0 + u * groups + group; zeros past `end`
        HIPK_DECODE_UNROLL
        for (int u = 0; u < U; ++u) {
            const int key = k0 + u * groups + group;
            if (key < end) {
                kx[u].load(keys + key * a.ks, lane, a.d, a.vec);
                vx[u].load(values + key * a.vs, lane, a.d, a.vec);
            } else {
                kx[u].zero();
                vx[u].zero();
            }
        }
        float s[K];  // s[u * ROWS + r]: row r's score of key u, then its probability
        HIPK_DECODE_UNROLL
        for (int u = 0; u < U; ++u) {
            HIPK_DECODE_UNROLL
            for (int r = 0; r < ROWS; ++r) {
                float dot = 0.0f;
                HIPK_DECODE_UNROLL
                for (int e = 0; e < E; ++e) dot += qx[r][e] * kx[u].at(e);
                s[u * ROWS + r] = dot;
            }
        }
        GroupSum<K, K, LANES / 2>::run(s, lane);
        HIPK_DECODE_UNROLL
        for (int r = 0; r < ROWS; ++r) {
            float top = m[r];
            HIPK_DECODE_UNROLL
            for (int u = 0; u < U; ++u) {
                if (k0 + u * groups + group > lim[r]) s[u * ROWS + r] = neg_inf();
                top = fmaxf(top, s[u * ROWS + r]);
            }
            const float base = finite_or_zero(top);  // exp2(-inf - 0) = 0: no NaN
            const float alpha = exp2f(m[r] - base);
            m[r] = top;
            float sum = 0.0f;
            HIPK_DECODE_UNROLL
            for (int u = 0; u < U; ++u) {
                const float p = exp2f(s[u * ROWS + r] - base);
                s[u * ROWS + r] = p;
                sum += p;
            }
            l[r] = l[r] * alpha + sum;
            HIPK_DECODE_UNROLL
            for (int e = 0; e < E; ++e) acc[r][e] *= alpha;
        }
        HIPK_DECODE_UNROLL
        for (int u = 0; u < U; ++u) {
            HIPK_DECODE_UNROLL
            for (int r = 0; r < ROWS; ++r) {
                HIPK_DECODE_UNROLL
                for (int e = 0; e < E; ++e) acc[r][e] += s[u * ROWS + r] * vx[u].at(e);
            }
        }
    }

    // Merge the groups: the block's max per row (within each warp by shuffles, then across
    // warps), each group rescaled to it, then sums within warps and across them, row by row.
    float top[ROWS];
    HIPK_DECODE_UNROLL
    for (int r = 0; r < ROWS; ++r) {
        top[r] = m[r];
        for (int o = LANES; o < width; o *= 2) top[r] = fmaxf(top[r], shuffle_xor(top[r], o));
        if (active && tid % width == 0) warp_top[warp][r] = top[r];
    }
    __syncthreads();
    HIPK_DECODE_UNROLL
    for (int r = 0; r < ROWS; ++r) {
        top[r] = neg_inf();
        for (int w = 0; w < warps; ++w) top[r] = fmaxf(top[r], warp_top[w][r]);
        const float alpha = exp2f(m[r] - finite_or_zero(top[r]));
        l[r] *= alpha;
        HIPK_DECODE_UNROLL
        for (int e = 0; e < E; ++e) acc[r][e] *= alpha;
        for (int o = LANES; o < width; o *= 2) {
            l[r] += shuffle_xor(l[r], o);
            HIPK_DECODE_UNROLL
            for (int e = 0; e < E; ++e) acc[r][e] += shuffle_xor(acc[r][e], o);
        }
        if (active && tid % width == 0) warp_sum[warp][r] = l[r];
    }
    const int dp = (a.d + 3) & ~3;
    HIPK_DECODE_UNROLL
    for (int r = 0; r < ROWS; ++r) {
        const int rho = rg * ROWS + r, g = rho / a.sq, i = rho - g * a.sq, h = hk * per_kv + g;
        if (rho >= group_rows) break;  // the whole block
        if (active && tid % width < LANES) {  // the warp's first group holds its sums
            HIPK_DECODE_UNROLL
            for (int e = 0; e < E; ++e) red[warp][L::col(e, lane)] = acc[r][e];
        }
        __syncthreads();
        float total = 0.0f;
        for (int w = 0; w < warps; ++w) total += warp_sum[w][r];
        const long long row = ((long long)b * a.heads + h) * a.sq + i;
        for (int t = tid; t < a.d; t += (int)blockDim.x) {
            float sum = 0.0f;
            for (int w = 0; w < warps; ++w) sum += red[w][t];
            if (direct)
                out[b * a.ob + h * a.oh + i * a.os + t] =
                    from_float<T>(total > 0.0f ? sum / total : 0.0f);
            else
                part[(row * a.chunks + c) * dp + t] = sum;
        }
        if (!direct && tid == 0) {
            stats[(row * a.chunks + c) * 2] = top[r];
            stats[(row * a.chunks + c) * 2 + 1] = total;
        }
        __syncthreads();  // red is rewritten for the next row
    }

    merge_if_last<T>(part, stats, out, counters, a, keyed.used, rg, hk, b, row_groups);
}

}  // namespace decode
}  // namespace hipk

#include "attention_decode_mma.h"  // split_mma: the tensor-core block (NVIDIA sm_80+)

// --- entry points: three head tiles and the combine per storage type, the tensor-core block
// for the 16-bit types' two smaller tiles (the parameters written out in each: hip-core reads
// their types from the text).
#define HIPK_DECODE_BODY(T, DT)                                                                    \
    hipk::start_after_previous_grid();                                                             \
    const hipk::decode::Args args = {heads, kv_heads, sq, d, smax, chunk_min, chunk_step,          \
                                     chunks, vec, scale, qb, qh, qs, kb, kh, ks, vb, vh, vs,       \
                                     ob, oh, os};                                                  \
    hipk::decode::split<T, DT>(q, k, v, lengths, out, part, stats, counters, args)
#define HIPK_DECODE_MMA_BODY(T, DT) /* (MmaOrSplit waits for the kernel ahead) */                  \
    const hipk::decode::Args args = {heads, kv_heads, sq, d, smax, chunk_min, chunk_step,          \
                                     chunks, vec, scale, qb, qh, qs, kb, kh, ks, vb, vh, vs,       \
                                     ob, oh, os};                                                  \
    hipk::decode::MmaOrSplit<T, DT>::run(q, k, v, lengths, out, part, stats, counters, args)

#define HIPK_ATTENTION_DECODE(S, T)                                                                \
    extern "C" __global__ __launch_bounds__(256, 2) void attention_decode_d64_##S(                 \
        const T* q, const T* k, const T* v, const int* lengths, T* out, float* part,               \
        float* stats, unsigned int* counters, int heads, int kv_heads, int sq, int d, int smax,    \
        int chunk_min, int chunk_step, int chunks, int vec, float scale, long long qb,             \
        long long qh, long long qs, long long kb, long long kh, long long ks, long long vb,        \
        long long vh, long long vs, long long ob, long long oh, long long os) {                    \
        HIPK_DECODE_BODY(T, 64);                                                                   \
    }                                                                                              \
    extern "C" __global__ __launch_bounds__(256, 2) void attention_decode_d128_##S(                \
        const T* q, const T* k, const T* v, const int* lengths, T* out, float* part,               \
        float* stats, unsigned int* counters, int heads, int kv_heads, int sq, int d, int smax,    \
        int chunk_min, int chunk_step, int chunks, int vec, float scale, long long qb,             \
        long long qh, long long qs, long long kb, long long kh, long long ks, long long vb,        \
        long long vh, long long vs, long long ob, long long oh, long long os) {                    \
        HIPK_DECODE_BODY(T, 128);                                                                  \
    }                                                                                              \
    extern "C" __global__ __launch_bounds__(256, 2) void attention_decode_d256_##S(                \
        const T* q, const T* k, const T* v, const int* lengths, T* out, float* part,               \
        float* stats, unsigned int* counters, int heads, int kv_heads, int sq, int d, int smax,    \
        int chunk_min, int chunk_step, int chunks, int vec, float scale, long long qb,             \
        long long qh, long long qs, long long kb, long long kh, long long ks, long long vb,        \
        long long vh, long long vs, long long ob, long long oh, long long os) {                    \
        HIPK_DECODE_BODY(T, 256);                                                                  \
    }                                                                                              \
    extern "C" __global__ void attention_decode_combine_##S(const float* part,                     \
        const float* stats, const int* lengths, T* out, int heads, int sq, int d, int smax,        \
        int chunk_min, int chunk_step, int chunks, long long ob, long long oh, long long os) {     \
        hipk::start_after_previous_grid();                                                         \
        hipk::decode::combine<T>(part, stats, lengths, out, heads, sq, d, smax, chunk_min,         \
                                 chunk_step, chunks, ob, oh, os);                                  \
    }                                                                                              \
    extern "C" __global__ __launch_bounds__(256) void attention_decode_mma_d64_##S(                \
        const T* q, const T* k, const T* v, const int* lengths, T* out, float* part,               \
        float* stats, unsigned int* counters, int heads, int kv_heads, int sq, int d, int smax,    \
        int chunk_min, int chunk_step, int chunks, int vec, float scale, long long qb,             \
        long long qh, long long qs, long long kb, long long kh, long long ks, long long vb,        \
        long long vh, long long vs, long long ob, long long oh, long long os) {                    \
        HIPK_DECODE_MMA_BODY(T, 64);                                                               \
    }                                                                                              \
    extern "C" __global__ __launch_bounds__(256) void attention_decode_mma_d128_##S(               \
        const T* q, const T* k, const T* v, const int* lengths, T* out, float* part,               \
        float* stats, unsigned int* counters, int heads, int kv_heads, int sq, int d, int smax,    \
        int chunk_min, int chunk_step, int chunks, int vec, float scale, long long qb,             \
        long long qh, long long qs, long long kb, long long kh, long long ks, long long vb,        \
        long long vh, long long vs, long long ob, long long oh, long long os) {                    \
        HIPK_DECODE_MMA_BODY(T, 128);                                                              \
    }
HIPK_F32_AND_16BIT_TYPES(HIPK_ATTENTION_DECODE)
