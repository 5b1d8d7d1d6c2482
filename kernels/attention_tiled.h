// The register-tiled portable attention (attention.hip's attention_d32_<t> and attention_d64_<t>,
// and the fallback of attention_mma_d32/d64 where no matrix-core path is compiled): the same
// contract as attention.hip's header comment, on SIMT f32 arithmetic, for head sizes up to 64.
//
// One block of HIPK_ATTENTION_THREADS (128) threads takes BQ = 64 queries of one (batch, head)
// and streams the keys in tiles of BK = 64 through shared memory. Thread t = 8 g + c (g = 0..15
// its row group, c = 0..7 its column group; the 8 threads of a row group are 8 consecutive
// lanes, a "team"):
// - S = Q Kᵀ: the thread holds the scores of queries 4 g .. 4 g + 3 against keys c + 8 j
//   (j = 0..7) in registers, and builds them 4 head elements at a time from 4 q and 8 k
//   16-byte shared loads: 128 FMAs per 12 loads (the old kernel: 1 FMA per 2 loads).
// - The online softmax in the log2 domain (q pre-scaled by scale * log2 e, masks' addends
//   multiplied by log2 e): each row's tile max is merged across the team by xor shuffles
//   (offsets 4, 2, 1: inside any warp of 32 or 64 lanes), the running max kept per thread
//   (the same in the whole team), the running sum kept per thread over its own keys and
//   summed across the team once, at the end.
// - P goes to shared memory transposed ([key][query], where K was: P is written after the
//   scores are done reading K), and O += P V with the thread holding rows 4 g .. 4 g + 3 x
//   head columns 4 c + 32 h (h < D / 32) in registers: 1 + D / 32 16-byte loads per key for
//   4 D / 8 FMAs.
// - Bank conflicts: the rows of K and of Pᵀ are read (K) or written (Pᵀ) by the 8 threads of
//   a quarter warp at 8 consecutive rows and one 16-byte chunk; chunk x of row r is stored at
//   x ^ (r % 8) (an XOR swizzle), so the 8 accesses fall in 8 distinct 16-byte bank groups.
//   Q and V are read at one row per quarter warp (broadcast or consecutive chunks): unswizzled.
// - Global loads: 4 consecutive elements per access (16 bytes in f32) when d % 4 == 0 and the
//   tensors and their strides are 4-element aligned, else one element at a time.
// Shared memory: Q, V and K-or-Pᵀ, 64 x 64 floats each at D = 64 (exactly the 48 KiB of static
// shared memory a kernel may declare); 8 + 8 + 16 KiB at D = 32.
//
// The cpu platform (no shuffles in kernels there: HIP_FFI_CPU_WARP_SIZE may be 1) merges a
// row's maxima and sums through a shared scratch row instead.
#pragma once

#include "rows.h"  // exp2_fast

// The per-thread loops: unrolled on a GPU (so the small arrays stay in registers); on the cpu
// platform, where barriers split the kernel and its arrays live in memory anyway, unrolling
// them made g++ take minutes over attention.hip.
#if HIPK_GPU
#define HIPK_TILED_UNROLL HIPK_UNROLL
#else
#define HIPK_TILED_UNROLL
#endif

// __launch_bounds__' second argument on the entry points: on NVIDIA the blocks per
// multiprocessor the compile keeps registers for (sm_90, ptxas: D 32 at 4 blocks takes 128
// registers with ~70 bytes of spills in the mask code, unbounded 128-ish anyway; D 64 fits 168
// registers with no spill at 3 blocks, spills 100+ bytes at 4); on AMD it means waves per SIMD
// instead, and 1 asks nothing.
#if defined(__CUDA_ARCH__)
#define HIPK_TILED_MIN_BLOCKS_D32 4
#define HIPK_TILED_MIN_BLOCKS_D64 3
#else
#define HIPK_TILED_MIN_BLOCKS_D32 1
#define HIPK_TILED_MIN_BLOCKS_D64 1
#endif

namespace hipk {
namespace tiled {

enum { BQ = 64, BK = 64, TEAM = 8, ROWS = 4, KEYS = BK / TEAM, THREADS = 128 };
typedef Vec<float, 4> F4;  // one 16-byte shared memory access

// Floats of the K tile or the Pᵀ tile, whichever is larger (they share memory).
template <int D> struct KeyFloats {
    enum { value = BK * (D > BQ ? D : BQ) };
};

template <int D> struct Tiles {
    alignas(16) float q[BQ * D];                // [query][d], pre-scaled by scale * log2 e
    alignas(16) float v[BK * D];                // [key][d]
    alignas(16) float kp[KeyFloats<D>::value];  // K [key][d], then Pᵀ [key][query], swizzled
#if !HIPK_GPU
    float team[BQ][TEAM];  // a row's partial maxima or sums, one per team thread
#endif
};

// The float index of chunk x (4 floats) of row r in a swizzled tile of `width` floats per row.
HIPK_DEVICE int swizzled(int r, int x, int width) { return r * width + ((x ^ (r & 7)) << 2); }

HIPK_DEVICE float team_shuffle(float v, int offset) {
#if defined(__CUDA_ARCH__)
    return __shfl_xor_sync(0xffffffffu, v, offset);
#elif HIPK_GPU
    return __shfl_xor(v, offset);
#else
    (void)offset;
    return v;
#endif
}

// Each row's max (MAX) or sum over the team, in every thread of it. All threads call it.
template <bool MAX, int D>
HIPK_DEVICE void team_merge(float (&x)[ROWS], Tiles<D>& t, int g, int c) {
#if HIPK_GPU
    (void)t;
    (void)g;
    (void)c;
    HIPK_TILED_UNROLL
    for (int i = 0; i < ROWS; ++i) {
        HIPK_TILED_UNROLL
        for (int offset = TEAM / 2; offset > 0; offset /= 2) {
            const float other = team_shuffle(x[i], offset);
            x[i] = MAX ? fmaxf(x[i], other) : x[i] + other;
        }
    }
#else
    for (int i = 0; i < ROWS; ++i) t.team[g * ROWS + i][c] = x[i];
    __syncthreads();
    for (int i = 0; i < ROWS; ++i) {
        float merged = t.team[g * ROWS + i][0];
        for (int o = 1; o < TEAM; ++o) {
            const float other = t.team[g * ROWS + i][o];
            merged = MAX ? fmaxf(merged, other) : merged + other;
        }
        x[i] = merged;
    }
    __syncthreads();  // read before the next merge writes
#endif
}

// Whether p's rows (stride s elements, d of them used) can move as 4-element vectors.
template <typename T>
HIPK_DEVICE bool rows_of_4(const T* p, long long b, long long h, long long s, int d) {
    return d % 4 == 0 && aligned(p, 4 * sizeof(T)) && b % 4 == 0 && h % 4 == 0 && s % 4 == 0;
}

// rows [r0, r0 + rows) of x (row stride s, d columns) into a [rows][D] float tile, times
// `factor`; rows past `limit` and columns past d as zeros. `swizzle`: K's chunk order.
template <typename T, int D>
HIPK_DEVICE void load_tile(float* tile, const T* x, long long s, int r0, int limit, int d,
                           float factor, bool vec, bool swizzle) {
    const int CHUNKS = D / 4;
    for (int e = (int)threadIdx.x; e < 64 * CHUNKS; e += THREADS) {
        const int r = e / CHUNKS, x4 = e - r * CHUNKS, col = x4 * 4;
        float f[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (r0 + r < limit) {
            const T* row = x + (long long)(r0 + r) * s + col;
            if (vec) {
                if (col < d) load_floats<T, 4>(row, f);
            } else {
                HIPK_TILED_UNROLL
                for (int i = 0; i < 4; ++i)
                    if (col + i < d) f[i] = load_value(row[i]);
            }
        }
        float* at = tile + (swizzle ? swizzled(r, x4, D) : r * D + col);
        HIPK_TILED_UNROLL
        for (int i = 0; i < 4; ++i) at[i] = f[i] * factor;
    }
}

template <typename T, int D>
HIPK_DEVICE void attention(const T* q, const T* k, const T* v, T* out, const void* mask,
                           const AttentionArgs& a, Tiles<D>& t, int q0) {
    enum { H = D / 32 };  // 4-column chunks of the output a thread holds
    const float LOG2E = 1.4426950408889634f;
    const int tid = (int)threadIdx.x, g = tid / TEAM, c = tid - g * TEAM;
    const int d = a.d, shift = a.skv - a.sq;
    select_head(q, k, v, out, mask, a, (int)blockIdx.y, (int)blockIdx.z);
    const bool vq = rows_of_4(q, a.qb, a.qh, a.qs, d), vo = rows_of_4(out, a.ob, a.oh, a.os, d);
    const bool vk = rows_of_4(k, a.kb, a.kh, a.ks, d) && rows_of_4(v, a.vb, a.vh, a.vs, d);
    load_tile<T, D>(t.q, q, a.qs, q0, a.sq, d, a.scale * LOG2E, vq, false);
    float top[ROWS], sum[ROWS], acc[ROWS][4 * H];
    HIPK_TILED_UNROLL
    for (int i = 0; i < ROWS; ++i) {
        top[i] = neg_inf();
        sum[i] = 0.0f;
        HIPK_TILED_UNROLL
        for (int e = 0; e < 4 * H; ++e) acc[i][e] = 0.0f;
    }
    // Keys past the last one the tile's last query may see are never loaded.
    int keys = a.skv;
    if (a.causal) keys = imin(keys, imin(q0 + BQ, a.sq) + shift);
    for (int k0 = 0; k0 < keys; k0 += BK) {
        __syncthreads();  // the previous tile's Pᵀ and V are consumed (and Q is written)
        load_tile<T, D>(t.kp, k, a.ks, k0, a.skv, d, 1.0f, vk, true);
        load_tile<T, D>(t.v, v, a.vs, k0, a.skv, d, 1.0f, vk, false);
        __syncthreads();
        float s[ROWS][KEYS];
        HIPK_TILED_UNROLL
        for (int i = 0; i < ROWS; ++i) {
            HIPK_TILED_UNROLL
            for (int j = 0; j < KEYS; ++j) s[i][j] = 0.0f;
        }
        HIPK_TILED_UNROLL
        for (int x = 0; x < D / 4; ++x) {
            float qf[ROWS][4];  // then one key's chunk at a time: fewer live registers
            HIPK_TILED_UNROLL
            for (int i = 0; i < ROWS; ++i) {
                const F4 w = *reinterpret_cast<const F4*>(t.q + (g * ROWS + i) * D + 4 * x);
                HIPK_TILED_UNROLL
                for (int e = 0; e < 4; ++e) qf[i][e] = w.v[e];
            }
            HIPK_TILED_UNROLL
            for (int j = 0; j < KEYS; ++j) {
                const F4 w = *reinterpret_cast<const F4*>(t.kp + swizzled(c + TEAM * j, x, D));
                HIPK_TILED_UNROLL
                for (int i = 0; i < ROWS; ++i) {
                    HIPK_TILED_UNROLL
                    for (int e = 0; e < 4; ++e) s[i][j] += qf[i][e] * w.v[e];
                }
            }
        }
        // Masks: a score the query may not see is -inf; additive masks join in log2 units.
        HIPK_TILED_UNROLL
        for (int i = 0; i < ROWS; ++i) {
            const int query = q0 + g * ROWS + i;
            HIPK_TILED_UNROLL
            for (int j = 0; j < KEYS; ++j) {
                const int key = k0 + c + TEAM * j;
                bool attend = query < a.sq && key < a.skv && !(a.causal && key > query + shift);
                if (attend && a.mask_kind) {
                    const long long at = query * a.mq + key * a.mk;
                    s[i][j] += mask_value<T>(mask, a.mask_kind, at, &attend) * LOG2E;
                }
                if (!attend) s[i][j] = neg_inf();
            }
        }
        float tile_top[ROWS];
        HIPK_TILED_UNROLL
        for (int i = 0; i < ROWS; ++i) {
            tile_top[i] = s[i][0];
            HIPK_TILED_UNROLL
            for (int j = 1; j < KEYS; ++j) tile_top[i] = fmaxf(tile_top[i], s[i][j]);
        }
        team_merge<true>(tile_top, t, g, c);
        HIPK_TILED_UNROLL
        for (int i = 0; i < ROWS; ++i) {
            const float now = fmaxf(top[i], tile_top[i]);
            const float base = now == neg_inf() ? 0.0f : now;  // exp2(-inf - 0) = 0, no NaN
            const float rescale = exp2_fast(top[i] - base);
            top[i] = now;
            sum[i] *= rescale;
            HIPK_TILED_UNROLL
            for (int e = 0; e < 4 * H; ++e) acc[i][e] *= rescale;
            HIPK_TILED_UNROLL
            for (int j = 0; j < KEYS; ++j) {
                s[i][j] = exp2_fast(s[i][j] - base);
                sum[i] += s[i][j];
            }
        }
        __syncthreads();  // every thread's scores are done reading K: Pᵀ takes its place
        HIPK_TILED_UNROLL
        for (int j = 0; j < KEYS; ++j) {
            const int key = c + TEAM * j;
            F4 w;
            HIPK_TILED_UNROLL
            for (int i = 0; i < ROWS; ++i) w.v[i] = s[i][j];
            *reinterpret_cast<F4*>(t.kp + swizzled(key, g, BQ)) = w;
        }
        __syncthreads();
        // Keys past the tile's last real one have p = 0 and v = 0: skipped.
        const int tile_keys = imin(BK, keys - k0);
        for (int key = 0; key < tile_keys; ++key) {
            const F4 p = *reinterpret_cast<const F4*>(t.kp + swizzled(key, g, BQ));
            HIPK_TILED_UNROLL
            for (int h = 0; h < H; ++h) {
                const F4 w = *reinterpret_cast<const F4*>(t.v + key * D + 32 * h + 4 * c);
                HIPK_TILED_UNROLL
                for (int i = 0; i < ROWS; ++i) {
                    HIPK_TILED_UNROLL
                    for (int e = 0; e < 4; ++e) acc[i][4 * h + e] += p.v[i] * w.v[e];
                }
            }
        }
    }
    team_merge<false>(sum, t, g, c);
    HIPK_TILED_UNROLL
    for (int i = 0; i < ROWS; ++i) {
        const int query = q0 + g * ROWS + i;
        if (query >= a.sq) continue;
        const float scale = sum[i] > 0.0f ? 1.0f / sum[i] : 0.0f;  // a query that saw no key
        T* o = out + (long long)query * a.os;
        HIPK_TILED_UNROLL
        for (int h = 0; h < H; ++h) {
            const int col = 32 * h + 4 * c;
            float f[4];
            HIPK_TILED_UNROLL
            for (int e = 0; e < 4; ++e) f[e] = acc[i][4 * h + e] * scale;
            if (vo) {
                if (col < d) store_floats<T, 4>(o + col, f);
            } else {
                HIPK_TILED_UNROLL
                for (int e = 0; e < 4; ++e)
                    if (col + e < d) o[col + e] = store_value<T>(f[e]);
            }
        }
    }
}

}  // namespace tiled
}  // namespace hipk
