// Tensor-core pass 1 of attention_decode.hip (its `attention_decode_mma_d<DT>_<t>` entry points),
// NVIDIA sm_80+ and 16-bit types only; everywhere else those entry points run the portable
// `split` (same launch, same results). Included by attention_decode.hip after hipk::decode's
// Args, clamped_length, finite_or_zero, split_keys and merge_if_last.
//
// One block = WARPS warps (blockDim.x / 32) over the same keys as `split`'s block: the chunk's
// keys go in steps of 16, step s to warp s % WARPS, each warp with its own online softmax, the
// warps merged through shared memory at the end. No shared-memory staging: every K and V byte
// goes global -> registers with one 16-byte load, straight into the mma layouts:
// - S = Q Kᵀ with m16n8k16: M = the block's 4 query rows (lanes g < 4 of the A rows; 4..15 zero),
//   N = 8 keys, K = 16 head dims. B[k][n] = K[key n][dim], so lane (g, t) (g = lane / 4,
//   t = lane % 4) needs key g's dims only. The dot product does not care which dims go to which
//   k-step as long as Q uses the same assignment: lane t loads the 16-byte chunks 4 i + t
//   (i < DT / 32) of its key row (one load instruction: 8 keys x 64 contiguous bytes) and feeds
//   its words 2 kk, 2 kk + 1 as b0, b1 of k-step kk; Q's lanes load their row the same way and
//   feed a0, a2 (a1, a3: rows 8..15, zero).
// - Oᵀ = Vᵀ Pᵀ with m16n8k16: M = 16 head dims, N = the 8 rows (4 used), K = the step's 16 keys.
//   B = Pᵀ is S's accumulators as they are (lane (g, t) holds row g's keys 2t, 2t + 1 of each
//   8-key tile: b0, b1 once rounded to T). A[m][k] = V[key k][dim m] needs two keys of one dim
//   per register: each lane loads its V chunks as for K, and movmatrix.trans turns the 8 keys x
//   8 dims matrix of word w of the lanes' chunk i (row g = key g) into A's fragment: its column
//   g (A's row) is dim 8 (4 i + g / 2) + 2 w + g % 2 (MmaState::dim). The accumulators of lane
//   (g, t) are rows 2t, 2t + 1 (t < 2 real), whose softmax rescales come from lanes 8t, 8t + 4.
// Registers (DT 128, sm_90): K and V 64 words per step and two steps in flight (the next one's
// loads issued before this one's math), Q 16, O 32: 228 in all (CUDA 13), two blocks per
// multiprocessor.
#pragma once

#include "mma_sync.h"  // mma16816

#define HIPK_DECODE_MMA HIPK_MMA_SYNC
#define HIPK_DECODE_MMA_WARPS 4  // most warps per block (the merge's shared memory)
#ifndef HIPK_DECODE_EARLY_LOADS  // 0: no prefetch, the keys loaded once the length is (A/B)
#define HIPK_DECODE_EARLY_LOADS 1
#endif

namespace hipk {
namespace decode {

#if HIPK_DECODE_MMA

HIPK_DEVICE float shuffle_from(float v, int lane) { return __shfl_sync(0xffffffffu, v, lane); }

// The transpose of the 8 x 8 16-bit matrix whose row g, columns 2t..2t+1 lane (g, t) holds.
HIPK_DEVICE unsigned transpose8x8(unsigned w) {
    unsigned r;
    asm("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(r) : "r"(w));
    return r;
}

// Lane t's chunks 4 i + t (i < CH) of one row: 4 CH words, zeros past d or when !valid.
template <typename T, int DT> struct MmaRow {
    enum { CH = DT / 32, WORDS = 4 * CH };
    unsigned w[WORDS];

    HIPK_DEVICE void load(const T* row, int t, int d, bool valid) {
        HIPK_UNROLL
        for (int i = 0; i < CH; ++i) {
            const int c = (4 * i + t) * 8;
            Vec<unsigned int, 4> x = {{0u, 0u, 0u, 0u}};
            if (valid && c < d) x = *reinterpret_cast<const Vec<unsigned int, 4>*>(row + c);
            HIPK_UNROLL
            for (int j = 0; j < 4; ++j) w[4 * i + j] = x.v[j];
        }
    }
};

// One step's 16 keys k0.. as lane (g, t) holds them: keys k0 + g and k0 + 8 + g.
template <typename T, int DT> struct MmaStep {
    MmaRow<T, DT> k[2], v[2];

    HIPK_DEVICE void load(const T* keys, const T* values, long long ks, long long vs, int k0,
                          int end, int g, int t, int d) {
        HIPK_UNROLL
        for (int n = 0; n < 2; ++n) {
            const int key = k0 + 8 * n + g;
            const bool valid = key < end;
            const long long at = valid ? key : 0;
            k[n].load(keys + at * ks, t, d, valid);
            v[n].load(values + at * vs, t, d, valid);
        }
    }

    // Zeros for the keys from `end` on (loaded before the length was known: a cache row past
    // the length may hold anything, and a NaN there times p = 0 is still NaN).
    HIPK_DEVICE void clear_from(int k0, int end, int g) {
        HIPK_UNROLL
        for (int n = 0; n < 2; ++n) {
            if (k0 + 8 * n + g < end) continue;
            HIPK_UNROLL
            for (int w = 0; w < MmaRow<T, DT>::WORDS; ++w) k[n].w[w] = v[n].w[w] = 0u;
        }
    }
};

// Before the wait for the kernel ahead (early_start.h): the L2 lines of the cache rows that
// warp `warp` of a chunk-0 block loads first (the keys and values of its first two 16-key
// steps; rows below smax, whatever the length: it may still be being written). Rows before the
// newest were stored by earlier steps and are read from device memory, a round trip that the
// kernel ahead's tail now hides; the lines still being written are current after the wait
// (every write meets in L2).
template <typename T>
HIPK_DEVICE void prefetch_first_steps(const T* keys, const T* values, long long ks,
                                      long long vs, int smax, int d, int warp, int warps,
                                      int lane) {
    HIPK_UNROLL
    for (int s = 0; s < 2; ++s) {
        const int key = 16 * (warp + s * warps) + lane % 16;
        if (key >= smax) continue;
        const T* row = lane < 16 ? keys + key * ks : values + key * vs;
        // Every 128-byte line the row touches (a row need not start on one).
        const unsigned long long last = (unsigned long long)(row + d) - 1;
        for (unsigned long long at = (unsigned long long)row & ~127ull; at <= last; at += 128)
            prefetch_l2(reinterpret_cast<const void*>(at));
    }
}

template <typename T, int DT> struct MmaState {
    enum { CH = DT / 32, TILES = 2 * CH };
    MmaRow<T, DT> q;      // row g < 4 of the block (zeros for g >= 4 and absent rows)
    float o[TILES][4];    // Oᵀ's m-tile 2 i + h: see dim()
    float m, l;           // row g's running max (base 2) and this lane's share of its sum
    int lim;              // the last key row g may see in this chunk (-1: none)

    // The dim of Oᵀ's m-tile j, accumulator e (rows 2t + e % 2): A's rows g and g + 8 are the
    // transposed word matrices (i, 2h) and (i, 2h + 1), whose column g is dim
    // 8 (4 i + g / 2) + 2 w + g % 2.
    HIPK_DEVICE static int dim(int j, int e, int g) {
        const int i = j / 2, w = 2 * (j % 2) + e / 2;
        return 8 * (4 * i + g / 2) + 2 * w + g % 2;
    }

    // One step: keys k0 .. k0 + 15.
    HIPK_DEVICE void step(const MmaStep<T, DT>& x, int k0, int t, float scale) {
        float s[2][4];  // S's n-tiles (keys k0 + 8 n ..): [0], [1] row g, keys 2t, 2t + 1
        HIPK_UNROLL
        for (int n = 0; n < 2; ++n) {
            HIPK_UNROLL
            for (int e = 0; e < 4; ++e) s[n][e] = 0.0f;
            HIPK_UNROLL
            for (int kk = 0; kk < 2 * CH; ++kk)
                mma16816(s[n], q.w[2 * kk], 0u, q.w[2 * kk + 1], 0u, x.k[n].w[2 * kk],
                         x.k[n].w[2 * kk + 1], (const T*)0);
        }
        float top = m;
        HIPK_UNROLL
        for (int n = 0; n < 2; ++n) {
            HIPK_UNROLL
            for (int e = 0; e < 2; ++e) {
                const int key = k0 + 8 * n + 2 * t + e;
                s[n][e] = key > lim ? neg_inf() : s[n][e] * scale;
                top = fmaxf(top, s[n][e]);
            }
        }
        top = fmaxf(top, shuffle_xor(top, 1));
        top = fmaxf(top, shuffle_xor(top, 2));
        const float base = finite_or_zero(top);  // exp2(-inf - 0) = 0: no NaN
        const float alpha = exp2_fast(m - base);
        m = top;
        float sum = 0.0f;
        unsigned p[2];  // Pᵀ as B: b0 keys 0..7, b1 keys 8..15 of row g (column g of B)
        HIPK_UNROLL
        for (int n = 0; n < 2; ++n) {
            const float p0 = exp2_fast(s[n][0] - base), p1 = exp2_fast(s[n][1] - base);
            sum += p0 + p1;
            p[n] = pack_pair(p0, p1, (const T*)0);
        }
        l = l * alpha + sum;
        // Oᵀ = Vᵀ Pᵀ: this lane's accumulators are rows 2t and 2t + 1, whose alphas live in
        // lanes 4 (2t) and 4 (2t + 1).
        const float even = shuffle_from(alpha, 8 * t), odd = shuffle_from(alpha, 8 * t + 4);
        HIPK_UNROLL
        for (int j = 0; j < TILES; ++j) {
            const int w0 = 4 * (j / 2) + 2 * (j % 2);
            o[j][0] *= even;
            o[j][1] *= odd;
            o[j][2] *= even;
            o[j][3] *= odd;
            mma16816(o[j], transpose8x8(x.v[0].w[w0]), transpose8x8(x.v[0].w[w0 + 1]),
                     transpose8x8(x.v[1].w[w0]), transpose8x8(x.v[1].w[w0 + 1]), p[0], p[1],
                     (const T*)0);
        }
    }
};

// Pass 1's block on tensor cores: `split`'s grid, inputs and outputs (see the header of
// attention_decode.hip); rows, chunks and partials are the same.
template <typename T, int DT>
HIPK_DEVICE void split_mma(const T* q, const T* k, const T* v, const int* lengths, T* out,
                           float* part, float* stats, unsigned int* counters, const Args& a) {
    enum { ROWS = HIPK_DECODE_ROWS, W = HIPK_DECODE_MMA_WARPS };
    typedef MmaState<T, DT> State;
    __shared__ float warp_out[W][ROWS][DT];
    __shared__ float warp_top[W][ROWS], warp_sum[W][ROWS];
    const int tid = (int)threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int warps = (int)blockDim.x / 32, g = lane / 4, t = lane % 4;
    const int per_kv = a.heads / a.kv_heads, group_rows = per_kv * a.sq;
    const int row_groups = (group_rows + ROWS - 1) / ROWS;
    const int rg = (int)blockIdx.x % row_groups, c = (int)blockIdx.x / row_groups;
    const int hk = (int)blockIdx.y, b = (int)blockIdx.z;
    const T* keys = k + b * a.kb + hk * a.kh;
    const T* values = v + b * a.vb + hk * a.vh;
    // Chunk 0 starts at key 0 whatever the length: its first step's loads need not wait for
    // the length's (the keys and values, q and the length are loads in flight at once; the
    // rows from the chunk's end on are zeroed once the length gives it).
    const bool early = HIPK_DECODE_EARLY_LOADS && c == 0;
    if (early) prefetch_first_steps(keys, values, a.ks, a.vs, a.smax, a.d, warp, warps, lane);
    start_after_previous_grid();
    MmaStep<T, DT> x;
    if (early && 16 * warp < a.smax) x.load(keys, values, a.ks, a.vs, 16 * warp, a.smax, g, t, a.d);

    State st;  // lane row g: query row_of_g (query q_index of head group q_group)
    const int row_of_g = rg * ROWS + g, q_group = row_of_g / a.sq;
    const int q_index = row_of_g - q_group * a.sq;
    const bool real = g < ROWS && row_of_g < group_rows;
    const long long q_at = b * a.qb + (hk * per_kv + q_group) * a.qh + q_index * a.qs;
    st.q.load(q + (real ? q_at : 0), t, a.d, real);
    const int len = clamped_length(lengths, b, a.smax);
    const KeySplit keyed = split_keys(len, a);
    if (c >= keyed.used) return;  // the whole block: no keys of the sequence left for it
    const int c0 = keyed.begin(c), end = keyed.end(c);
    const bool direct = keyed.used == 1;  // the block has all the keys: out, no partials
    st.lim = real ? imin(len - a.sq + q_index, end - 1) : -1;
    st.m = neg_inf();
    st.l = 0.0f;
    HIPK_UNROLL
    for (int j = 0; j < State::TILES; ++j) {
        HIPK_UNROLL
        for (int e = 0; e < 4; ++e) st.o[j][e] = 0.0f;
    }
    const int stride = 16 * warps;
    // The next step's loads are issued before this step's math: two steps (16 KB) in flight
    // per warp. (H200, bf16 B32 Hq32/Hkv8 KV4096 D128 unsplit: 4195 GB/s against 2615 with
    // one step per warp, 2626 with that step's loads non-coherent and not allocated in L1.)
    int k0 = c0 + 16 * warp;
    if (early) {
        x.clear_from(k0, end, g);
    } else if (k0 < end) {
        x.load(keys, values, a.ks, a.vs, k0, end, g, t, a.d);
    }
    for (; k0 < end; k0 += stride) {
        MmaStep<T, DT> next;
        if (k0 + stride < end) next.load(keys, values, a.ks, a.vs, k0 + stride, end, g, t, a.d);
        st.step(x, k0, t, a.scale);
        x = next;
    }

    // The warps' rows through shared memory.
    st.l += shuffle_xor(st.l, 1);
    st.l += shuffle_xor(st.l, 2);
    if (g < ROWS && t == 0) {
        warp_top[warp][g] = st.m;
        warp_sum[warp][g] = st.l;
    }
    if (2 * t < ROWS) {  // accumulators of rows 2t, 2t + 1
        HIPK_UNROLL
        for (int j = 0; j < State::TILES; ++j) {
            HIPK_UNROLL
            for (int e = 0; e < 4; ++e) warp_out[warp][2 * t + e % 2][State::dim(j, e, g)] = st.o[j][e];
        }
    }
    __syncthreads();
    const int dp = (a.d + 3) & ~3;
    for (int job = tid; job < ROWS * a.d; job += (int)blockDim.x) {
        const int r = job / a.d, col = job - r * a.d;
        const int rho = rg * ROWS + r, gg = rho / a.sq, i = rho - gg * a.sq;
        if (rho >= group_rows) break;  // rows in order: the rest are absent too
        const int h = hk * per_kv + gg;
        float top = neg_inf();
        for (int w = 0; w < warps; ++w) top = fmaxf(top, warp_top[w][r]);
        const float base = finite_or_zero(top);
        float total = 0.0f, sum = 0.0f;
        for (int w = 0; w < warps; ++w) {
            const float scale = exp2_fast(warp_top[w][r] - base);
            total += warp_sum[w][r] * scale;
            sum += warp_out[w][r][col] * scale;
        }
        const long long row = ((long long)b * a.heads + h) * a.sq + i;
        if (direct) {
            out[b * a.ob + h * a.oh + i * a.os + col] =
                from_float<T>(total > 0.0f ? sum / total : 0.0f);
        } else {
            part[(row * a.chunks + c) * dp + col] = sum;
            if (col == 0) {
                stats[(row * a.chunks + c) * 2] = top;
                stats[(row * a.chunks + c) * 2 + 1] = total;
            }
        }
    }
    merge_if_last<T>(part, stats, out, counters, a, keyed.used, rg, hk, b, row_groups);
}

#endif  // HIPK_DECODE_MMA

// The entry points' body: the tensor-core block where it is compiled (16-bit types, DT <= 128),
// else the portable one. Each waits for the kernel ahead itself (split_mma prefetches first).
template <typename T, int DT> struct MmaOrSplit {
    HIPK_DEVICE static void run(const T* q, const T* k, const T* v, const int* lengths, T* out,
                                float* part, float* stats, unsigned int* counters,
                                const Args& a) {
        start_after_previous_grid();
        split<T, DT>(q, k, v, lengths, out, part, stats, counters, a);
    }
};
#if HIPK_DECODE_MMA
template <int DT> struct MmaOrSplit<bf16, DT> {
    HIPK_DEVICE static void run(const bf16* q, const bf16* k, const bf16* v, const int* lengths,
                                bf16* out, float* part, float* stats, unsigned int* counters,
                                const Args& a) {
        split_mma<bf16, DT>(q, k, v, lengths, out, part, stats, counters, a);
    }
};
template <int DT> struct MmaOrSplit<f16, DT> {
    HIPK_DEVICE static void run(const f16* q, const f16* k, const f16* v, const int* lengths,
                                f16* out, float* part, float* stats, unsigned int* counters,
                                const Args& a) {
        split_mma<f16, DT>(q, k, v, lengths, out, part, stats, counters, a);
    }
};
#endif

}  // namespace decode
}  // namespace hipk
