// Scaled dot-product attention, flash-style: out = softmax(scale * q k^T + mask) v, with the
// scores of one tile of queries against one tile of keys in shared memory at a time (never in
// device memory) and the softmax computed online (a running max and sum per query, the
// partial output rescaled whenever the max grows).
//
//   attention_d<D>_<t>(q, k, v, out, mask, mask_kind, heads, kv_heads, sq, skv, d, scale,
//                      causal, <strides>)
//
// q [B, heads, sq, d], k and v [B, kv_heads, skv, d], out [B, heads, sq, d], each with its own
// batch, head and sequence strides (elements) and the d axis contiguous, so [B, S, H, D]
// layouts need no copy. Query head h reads key/value head h / (heads / kv_heads) (grouped-query
// attention). mask_kind 0: no mask; 1: an additive mask of the element type; 2: a boolean mask
// (1 byte, nonzero = attend); its strides over [B, heads, sq, skv] are 0 on broadcast axes.
// causal: query i sees key j only when j <= i + skv - sq (the queries are the last sq
// positions: a decode step sees its whole cache). A query that sees no key gets zeros, not
// NaN. f32 arithmetic for every storage type.
//
// Tiles: D = 32 (d <= 32) and D = 64 (d <= 64) run the register-tiled kernel of
// attention_tiled.h, 64 queries x 64 keys per step; D = 128 and D = 256 the scalar kernel below
// (scores from shared memory, one thread per query's softmax), 16 x 32 and 8 x 16 (what fits 48
// KiB of static shared memory with f32 tiles), as does attention_scalar_d64 (32 x 32: the D 64
// kernel before the register-tiled one, kept for A/B benchmarks). Launch: grid (ceil(sq /
// queries per tile), heads, B), block of exactly HIPK_ATTENTION_THREADS threads.
//
// This is the portable path every platform runs. The 16-bit entry points
// attention_mma_d<D>_<f16|bf16> (D = 32, 64, 128; same parameters; launch and layout conditions in
// attention_mma.h) use the matrix cores where a path for them is compiled (attention_mma.h:
// NVIDIA sm_80+; attention_mfma.h: AMD gfx90a, gfx942) and run the portable kernel over
// 128 / (queries per tile) tiles per block elsewhere, so the host launches them the same way
// on every platform (D = 128 with dynamic shared memory: attention_mma.h).
#include "dtypes.h"

#define HIPK_ATTENTION_THREADS 128

namespace hipk {

struct AttentionArgs {
    int mask_kind, heads, kv_heads, sq, skv, d, causal;
    float scale;
    long long qb, qh, qs, kb, kh, ks, vb, vh, vs, ob, oh, os, mb, mh, mq, mk;
};

// The shared memory of one block: the query tile (pre-scaled), the key and value tiles (rows
// padded by one float so that threads reading down a column hit distinct banks), the tile's
// scores then probabilities, and each query's running max, sum and last rescale factor.
template <int D, int BQ, int BK> struct AttentionTiles {
    float q[BQ][D];
    float k[BK][D + 1];
    float v[BK][D + 1];
    float p[BQ][BK];
    float max[BQ], sum[BQ], rescale[BQ];
};

template <typename T>
HIPK_DEVICE float mask_value(const void* mask, int kind, long long at, bool* attend) {
    if (kind == 1) return load_value(static_cast<const T*>(mask)[at]);
    if (kind == 2) *attend = static_cast<const unsigned char*>(mask)[at] != 0;
    return 0.0f;
}

// Moves q and out to head h of batch b, k and v to the key/value head it reads, and the mask
// (if any) to its (b, h) slice: where every kernel starts.
template <typename T>
HIPK_DEVICE void select_head(const T*& q, const T*& k, const T*& v, T*& out, const void*& mask,
                             const AttentionArgs& a, int h, int b) {
    const int hk = h / (a.heads / a.kv_heads);
    q += b * a.qb + h * a.qh;
    k += b * a.kb + hk * a.kh;
    v += b * a.vb + hk * a.vh;
    out += b * a.ob + h * a.oh;
    if (mask != nullptr) {
        const long long at = b * a.mb + h * a.mh;
        mask = a.mask_kind == 1 ? (const void*)(static_cast<const T*>(mask) + at)
                                : (const void*)(static_cast<const unsigned char*>(mask) + at);
    }
}

template <typename T, int D, int BQ, int BK>
HIPK_DEVICE void attention(const T* q, const T* k, const T* v, T* out, const void* mask,
                           const AttentionArgs& a, AttentionTiles<D, BQ, BK>& t, int q0) {
    const int THREADS = HIPK_ATTENTION_THREADS;
    const int PER_ROW = THREADS / BQ;  // threads sharing one query's output row
    const int OWN = D / PER_ROW;       // output elements per thread
    const int tid = (int)threadIdx.x;
    const int d = a.d, shift = a.skv - a.sq;
    select_head(q, k, v, out, mask, a, (int)blockIdx.y, (int)blockIdx.z);
    for (int i = tid; i < BQ * d; i += THREADS) {
        const int r = i / d, c = i - r * d;
        t.q[r][c] = q0 + r < a.sq ? load_value(q[(long long)(q0 + r) * a.qs + c]) * a.scale : 0.0f;
    }
    if (tid < BQ) {
        t.max[tid] = neg_inf();
        t.sum[tid] = 0.0f;
    }
    const int row = tid / PER_ROW, part = tid - row * PER_ROW;
    float acc[OWN];
    HIPK_UNROLL
    for (int e = 0; e < OWN; ++e) acc[e] = 0.0f;
    // Keys past the last one the tile's last query may see are never loaded.
    int keys = a.skv;
    if (a.causal) keys = imin(keys, imin(q0 + BQ, a.sq) + shift);
    for (int k0 = 0; k0 < keys; k0 += BK) {
        __syncthreads();  // the previous tile's k, v and p are consumed (and q is written)
        for (int i = tid; i < BK * d; i += THREADS) {
            const int j = i / d, c = i - j * d;
            const bool in = k0 + j < a.skv;
            t.k[j][c] = in ? load_value(k[(long long)(k0 + j) * a.ks + c]) : 0.0f;
            t.v[j][c] = in ? load_value(v[(long long)(k0 + j) * a.vs + c]) : 0.0f;
        }
        __syncthreads();
        for (int e = tid; e < BQ * BK; e += THREADS) {
            const int r = e / BK, j = e - r * BK, query = q0 + r, key = k0 + j;
            float score = 0.0f;
            for (int c = 0; c < d; ++c) score += t.q[r][c] * t.k[j][c];
            bool attend = query < a.sq && key < a.skv && !(a.causal && key > query + shift);
            if (attend && a.mask_kind) {
                const long long at = query * a.mq + key * a.mk;
                score += mask_value<T>(mask, a.mask_kind, at, &attend);
            }
            t.p[r][j] = attend ? score : neg_inf();
        }
        __syncthreads();
        if (tid < BQ) {  // one thread per query folds the tile into its running statistics
            float top = t.max[tid];
            for (int j = 0; j < BK; ++j) top = fmaxf(top, t.p[tid][j]);
            const float base = top == neg_inf() ? 0.0f : top;  // exp(-inf - 0) = 0, no NaN
            float sum = 0.0f;
            for (int j = 0; j < BK; ++j) {
                const float p = expf(t.p[tid][j] - base);
                t.p[tid][j] = p;
                sum += p;
            }
            const float rescale = expf(t.max[tid] - base);
            t.sum[tid] = t.sum[tid] * rescale + sum;
            t.max[tid] = top;
            t.rescale[tid] = rescale;
        }
        __syncthreads();
        const float rescale = t.rescale[row];
        HIPK_UNROLL
        for (int e = 0; e < OWN; ++e) acc[e] *= rescale;
        for (int j = 0; j < BK; ++j) {
            const float p = t.p[row][j];
            HIPK_UNROLL
            for (int e = 0; e < OWN; ++e) acc[e] += p * t.v[j][part + e * PER_ROW];
        }
    }
    __syncthreads();  // the last tile's sums are written
    const int query = q0 + row;
    if (query >= a.sq) return;
    const float sum = t.sum[row];
    const float scale = sum > 0.0f ? 1.0f / sum : 0.0f;  // a query that saw no key: zeros
    T* o = out + (long long)query * a.os;
    HIPK_UNROLL
    for (int e = 0; e < OWN; ++e) {
        const int c = part + e * PER_ROW;
        if (c < d) o[c] = store_value<T>(acc[e] * scale);
    }
}

}  // namespace hipk

#include "attention_tiled.h"
#include "attention_mma.h"
#include "attention_mfma.h"

namespace hipk {

// attention_mma's launch (HIPK_MMA_ROWS queries per block) served by the portable kernel: its tiles of
// BQ queries one after the other, a barrier between them (the next tile rewrites the shared
// statistics the last one's outputs still read).
template <typename T, int D, int BQ, int BK>
HIPK_DEVICE void attention_mma_rows(const T* q, const T* k, const T* v, T* out, const void* mask,
                                   const AttentionArgs& a, AttentionTiles<D, BQ, BK>& t) {
    const int first = (int)blockIdx.x * HIPK_MMA_ROWS;
    for (int q0 = first; q0 < imin(first + HIPK_MMA_ROWS, a.sq); q0 += BQ) {
        attention<T, D, BQ, BK>(q, k, v, out, mask, a, t, q0);
        __syncthreads();
    }
}

// The same with the register-tiled kernel (D = 32, 64): tiles of tiled::BQ queries.
template <typename T, int D, int BQ, int BK>
HIPK_DEVICE void attention_mma_rows(const T* q, const T* k, const T* v, T* out, const void* mask,
                                    const AttentionArgs& a, tiled::Tiles<D>& t) {
    const int first = (int)blockIdx.x * HIPK_MMA_ROWS;
    for (int q0 = first; q0 < imin(first + HIPK_MMA_ROWS, a.sq); q0 += tiled::BQ) {
        tiled::attention<T, D>(q, k, v, out, mask, a, t, q0);
        __syncthreads();
    }
}

}  // namespace hipk

// The tiles of attention_mma_d<D>: static shared memory at D = 64; at D = 128 the dynamic
// shared memory the host launches with (HIPK_MMA_DYNAMIC_BYTES_D128, or the device's opt-in
// limit where that is less, which the portable tiles still fit), whichever path is compiled.
static_assert(sizeof(hipk::AttentionTiles<128, 16, 32>) <= 48 * 1024, "portable D 128 tiles");
#if HIPK_GPU
static_assert(sizeof(hipk::tiled::Tiles<64>) <= 48 * 1024, "register-tiled D 64 tiles");
#endif
#if HIPK_ATTENTION_MMA || HIPK_ATTENTION_MFMA
static_assert(HIPK_MMA_SHARED(128) * 2 <= HIPK_MMA_DYNAMIC_BYTES_D128, "matrix-core D 128 tiles");
#endif
#define HIPK_MMA_TILES_D32(BQ, BK) alignas(128) __shared__ unsigned short tiles[HIPK_MMA_SHARED(32)]
#define HIPK_MMA_TILES_D64(BQ, BK) alignas(128) __shared__ unsigned short tiles[HIPK_MMA_SHARED(64)]
#define HIPK_FALLBACK_TILES_D32(BQ, BK) __shared__ hipk::tiled::Tiles<32> tiles
#define HIPK_MMA_TILES_D128(BQ, BK) extern __shared__ __align__(128) unsigned short tiles[]
#define HIPK_FALLBACK_TILES_D64(BQ, BK) __shared__ hipk::tiled::Tiles<64> tiles
#define HIPK_FALLBACK_TILES_D128(BQ, BK)                                                        \
    extern __shared__ __align__(128) unsigned short hipk_dynamic_tiles[];                       \
    hipk::AttentionTiles<128, BQ, BK>& tiles =                                                  \
        *reinterpret_cast<hipk::AttentionTiles<128, BQ, BK>*>(hipk_dynamic_tiles)

#if HIPK_ATTENTION_MMA || HIPK_ATTENTION_MFMA
#define HIPK_ATTENTION_MMA_BODY(T, D, BQ, BK)                                                   \
    HIPK_MMA_TILES_D##D(BQ, BK);                                                                \
    const hipk::AttentionArgs args = {mask_kind, heads, kv_heads, sq, skv, d, causal, scale,   \
                                      qb, qh, qs, kb, kh, ks, vb, vh, vs, ob, oh, os,          \
                                      mb, mh, mq, mk};                                          \
    hipk::mma::attention_mma<T, D>(q, k, v, out, mask, args, tiles)
#else
#define HIPK_ATTENTION_MMA_BODY(T, D, BQ, BK)                                                   \
    HIPK_FALLBACK_TILES_D##D(BQ, BK);                                                           \
    const hipk::AttentionArgs args = {mask_kind, heads, kv_heads, sq, skv, d, causal, scale,   \
                                      qb, qh, qs, kb, kh, ks, vb, vh, vs, ob, oh, os,          \
                                      mb, mh, mq, mk};                                          \
    hipk::attention_mma_rows<T, D, BQ, BK>(q, k, v, out, mask, args, tiles)
#endif

#define HIPK_ATTENTION_BODY(T, D, BQ, BK)                                                       \
    __shared__ hipk::AttentionTiles<D, BQ, BK> tiles;                                          \
    const hipk::AttentionArgs args = {mask_kind, heads, kv_heads, sq, skv, d, causal, scale,   \
                                      qb, qh, qs, kb, kh, ks, vb, vh, vs, ob, oh, os,          \
                                      mb, mh, mq, mk};                                          \
    hipk::attention<T, D, BQ, BK>(q, k, v, out, mask, args, tiles, (int)blockIdx.x * (BQ))

#define HIPK_ATTENTION_TILED_BODY(T, D)                                                         \
    __shared__ hipk::tiled::Tiles<D> tiles;                                                    \
    const hipk::AttentionArgs args = {mask_kind, heads, kv_heads, sq, skv, d, causal, scale,   \
                                      qb, qh, qs, kb, kh, ks, vb, vh, vs, ob, oh, os,          \
                                      mb, mh, mq, mk};                                          \
    hipk::tiled::attention<T, D>(q, k, v, out, mask, args, tiles, (int)blockIdx.x * hipk::tiled::BQ)

// --- entry points: four tile shapes per storage type (the parameters written out in each:
// hip-core reads their types from the text). D 32 and 64 run the register-tiled kernel (64
// queries per block); attention_scalar_d64 is the kernel they replaced (32 queries per block),
// kept for A/B benchmarks (bench_attention.py's "hip scalar" rows). ----------------------------
#define HIPK_ATTENTION(S, T)                                                                       \
    extern "C" __global__ void                                                                     \
    __launch_bounds__(HIPK_ATTENTION_THREADS, HIPK_TILED_MIN_BLOCKS_D32) attention_d32_##S(        \
        const T* q, const T* k, const T* v, T* out,                                                \
        const void* mask, int mask_kind, int heads, int kv_heads, int sq, int skv, int d,          \
        float scale, int causal, long long qb, long long qh, long long qs, long long kb,           \
        long long kh, long long ks, long long vb, long long vh, long long vs, long long ob,        \
        long long oh, long long os, long long mb, long long mh, long long mq, long long mk) {      \
        HIPK_ATTENTION_TILED_BODY(T, 32);                                                          \
    }                                                                                              \
    extern "C" __global__ void                                                                     \
    __launch_bounds__(HIPK_ATTENTION_THREADS, HIPK_TILED_MIN_BLOCKS_D64) attention_d64_##S(        \
        const T* q, const T* k, const T* v, T* out,                                                \
        const void* mask, int mask_kind, int heads, int kv_heads, int sq, int skv, int d,          \
        float scale, int causal, long long qb, long long qh, long long qs, long long kb,           \
        long long kh, long long ks, long long vb, long long vh, long long vs, long long ob,        \
        long long oh, long long os, long long mb, long long mh, long long mq, long long mk) {      \
        HIPK_ATTENTION_TILED_BODY(T, 64);                                                          \
    }                                                                                              \
    extern "C" __global__ void attention_scalar_d64_##S(const T* q, const T* k, const T* v,       \
        T* out, const void* mask, int mask_kind, int heads, int kv_heads, int sq, int skv, int d,  \
        float scale, int causal, long long qb, long long qh, long long qs, long long kb,           \
        long long kh, long long ks, long long vb, long long vh, long long vs, long long ob,        \
        long long oh, long long os, long long mb, long long mh, long long mq, long long mk) {      \
        HIPK_ATTENTION_BODY(T, 64, 32, 32);                                                        \
    }                                                                                              \
    extern "C" __global__ void attention_d128_##S(const T* q, const T* k, const T* v, T* out,      \
        const void* mask, int mask_kind, int heads, int kv_heads, int sq, int skv, int d,          \
        float scale, int causal, long long qb, long long qh, long long qs, long long kb,           \
        long long kh, long long ks, long long vb, long long vh, long long vs, long long ob,        \
        long long oh, long long os, long long mb, long long mh, long long mq, long long mk) {      \
        HIPK_ATTENTION_BODY(T, 128, 16, 32);                                                       \
    }                                                                                              \
    extern "C" __global__ void attention_d256_##S(const T* q, const T* k, const T* v, T* out,      \
        const void* mask, int mask_kind, int heads, int kv_heads, int sq, int skv, int d,          \
        float scale, int causal, long long qb, long long qh, long long qs, long long kb,           \
        long long kh, long long ks, long long vb, long long vh, long long vs, long long ob,        \
        long long oh, long long os, long long mb, long long mh, long long mq, long long mk) {      \
        HIPK_ATTENTION_BODY(T, 256, 8, 16);                                                        \
    }
HIPK_F32_AND_16BIT_TYPES(HIPK_ATTENTION)

// --- the 16-bit entry points of the 128-query launch (attention_mma.h), written out: dtypes.h
// has no list of the 16-bit types alone, and hip-core reads the parameters from the text ----
extern "C" __global__ void __launch_bounds__(HIPK_ATTENTION_THREADS) attention_mma_d32_f16(
    const hipk::f16* q, const hipk::f16* k, const hipk::f16* v, hipk::f16* out,
    const void* mask, int mask_kind, int heads, int kv_heads, int sq, int skv, int d,
    float scale, int causal, long long qb, long long qh, long long qs, long long kb,
    long long kh, long long ks, long long vb, long long vh, long long vs, long long ob,
    long long oh, long long os, long long mb, long long mh, long long mq, long long mk) {
    HIPK_ATTENTION_MMA_BODY(hipk::f16, 32, 32, 32);
}
extern "C" __global__ void __launch_bounds__(HIPK_ATTENTION_THREADS) attention_mma_d32_bf16(
    const hipk::bf16* q, const hipk::bf16* k, const hipk::bf16* v, hipk::bf16* out,
    const void* mask, int mask_kind, int heads, int kv_heads, int sq, int skv, int d,
    float scale, int causal, long long qb, long long qh, long long qs, long long kb,
    long long kh, long long ks, long long vb, long long vh, long long vs, long long ob,
    long long oh, long long os, long long mb, long long mh, long long mq, long long mk) {
    HIPK_ATTENTION_MMA_BODY(hipk::bf16, 32, 32, 32);
}
extern "C" __global__ void __launch_bounds__(HIPK_ATTENTION_THREADS) attention_mma_d64_f16(
    const hipk::f16* q, const hipk::f16* k, const hipk::f16* v, hipk::f16* out,
    const void* mask, int mask_kind, int heads, int kv_heads, int sq, int skv, int d,
    float scale, int causal, long long qb, long long qh, long long qs, long long kb,
    long long kh, long long ks, long long vb, long long vh, long long vs, long long ob,
    long long oh, long long os, long long mb, long long mh, long long mq, long long mk) {
    HIPK_ATTENTION_MMA_BODY(hipk::f16, 64, 32, 32);
}
extern "C" __global__ void __launch_bounds__(HIPK_ATTENTION_THREADS) attention_mma_d64_bf16(
    const hipk::bf16* q, const hipk::bf16* k, const hipk::bf16* v, hipk::bf16* out,
    const void* mask, int mask_kind, int heads, int kv_heads, int sq, int skv, int d,
    float scale, int causal, long long qb, long long qh, long long qs, long long kb,
    long long kh, long long ks, long long vb, long long vh, long long vs, long long ob,
    long long oh, long long os, long long mb, long long mh, long long mq, long long mk) {
    HIPK_ATTENTION_MMA_BODY(hipk::bf16, 64, 32, 32);
}
extern "C" __global__ void __launch_bounds__(HIPK_ATTENTION_THREADS) attention_mma_d128_f16(
    const hipk::f16* q, const hipk::f16* k, const hipk::f16* v, hipk::f16* out,
    const void* mask, int mask_kind, int heads, int kv_heads, int sq, int skv, int d,
    float scale, int causal, long long qb, long long qh, long long qs, long long kb,
    long long kh, long long ks, long long vb, long long vh, long long vs, long long ob,
    long long oh, long long os, long long mb, long long mh, long long mq, long long mk) {
    HIPK_ATTENTION_MMA_BODY(hipk::f16, 128, 16, 32);
}
extern "C" __global__ void __launch_bounds__(HIPK_ATTENTION_THREADS) attention_mma_d128_bf16(
    const hipk::bf16* q, const hipk::bf16* k, const hipk::bf16* v, hipk::bf16* out,
    const void* mask, int mask_kind, int heads, int kv_heads, int sq, int skv, int d,
    float scale, int causal, long long qb, long long qh, long long qs, long long kb,
    long long kh, long long ks, long long vb, long long vh, long long vs, long long ob,
    long long oh, long long os, long long mb, long long mh, long long mq, long long mk) {
    HIPK_ATTENTION_MMA_BODY(hipk::bf16, 128, 16, 32);
}
