// Matrix-core attention for 16-bit q, k, v (attention.hip's `attention_mma_d<D>_<t>` entry
// points): FlashAttention-2's structure on NVIDIA tensor cores from sm_80, with the portable
// kernel of attention.hip as the fallback wherever this path is not compiled (the cpu
// platform, AMD, NVIDIA before sm_80). Both paths take the same launch, so the host picks the
// entry point without knowing which one the compiler kept:
//
//   grid (ceil(sq / 64), heads, B), block of HIPK_ATTENTION_THREADS (128) threads; d == D
//   (64 or 128); q, k, v, out 16-byte aligned with batch, head and sequence strides that are
//   multiples of 8 elements (16 bytes), so that every row of a tile moves as 16-byte chunks.
//
// NVIDIA path (one block = 64 query rows of one (batch, head); 4 warps of 16 rows each):
// - The query tile goes global -> shared (cp.async) -> registers (ldmatrix) once, as the
//   A operands of S = Q Kᵀ; its shared buffer is then the key buffer.
// - Keys and values stream through shared memory in tiles of 64 rows, loaded with cp.async
//   as in FlashAttention-2: V_n's load overlaps S = Q K_nᵀ and K_{n+1}'s load overlaps the
//   softmax and O += P V_n (one buffer each: 2 x 64 x D x 2 bytes = 32 KiB at D = 128).
// - Shared tiles are rows of D / 8 16-byte chunks, chunk c of row r stored at c ^ (r % 8)
//   (XOR swizzle): ldmatrix's 8 row addresses of one 8 x 8 matrix (8 consecutive rows, one
//   logical chunk) then fall in 8 distinct 16-byte bank groups, and so do the cp.async stores.
// - S and O live in registers as m16n8k16 accumulators (mma.sync ... f32.bf16.bf16.f32 or
//   f16); the softmax is online per row in the log2 domain (scale * log2 e folded into one
//   multiply, exp2 by ex2.approx), the running max and sum per row, O rescaled when the max
//   grows. P is rounded to the storage type and used as the A operand of P V straight from the
//   S registers (the accumulator layout of two n8 tiles is the A layout of one k16 step).
// - Causal: key tiles entirely above the diagonal are never loaded; tiles that cross it, the
//   last partial tile and every tile under a mask are masked per element; rows that see no
//   key end with sum 0 and write zeros.
// - Blocks are taken from the last query tile down (most keys first under causal masking) so
//   the longest blocks do not start last.
//
// Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16" with .bf16/.f16; lane =
// threadIdx % 32, g = lane / 4 ("groupID"), t = lane % 4 ("threadID_in_group")):
//   A (16 x 16, row): a0 = A[g][2t..2t+1], a1 = A[g+8][2t..2t+1], a2 = A[g][2t+8..2t+9],
//                     a3 = A[g+8][2t+8..2t+9]    (each a 32-bit word, lower column low half)
//   B (16 x 8, col):  b0 = B[2t..2t+1][g], b1 = B[2t+8..2t+9][g]   (lower k low half)
//   C (16 x 8, f32):  c0, c1 = C[g][2t], C[g][2t+1]; c2, c3 = C[g+8][2t], C[g+8][2t+1]
// ldmatrix.m8n8.x4.b16: lanes 8i..8i+7 give the row addresses of matrix i; register i of a
// lane receives matrix i's [lane / 4][2 (lane % 4) .. +1] (with .trans: [2 (lane % 4) .. +1]
// [lane / 4], the two elements from consecutive rows).
// - Q (row-major [query][d]) as A, k step kk: lane l addresses query row l % 16, chunk
//   2 kk + l / 16 -> a0..a3 in order.
// - K (row-major [key][d]) as B of S = Q Kᵀ (B[k = d][n = key] = K[key][d]: B's column is a
//   K row, so no transpose): lane l addresses key 16 np + 8 (m / 2) + l % 8, chunk
//   2 kk + m % 2 (m = l / 8) -> b0, b1 of key tile 2 np, then b0, b1 of key tile 2 np + 1.
// - V (row-major [key][d]) as B of O = P V (B[k = key][n = d] = V[key][d]: two consecutive
//   keys of one d per register, hence .trans): lane l addresses key 16 kk + 8 (m % 2) + l % 8,
//   chunk 2 dp + m / 2 -> b0, b1 of d tile 2 dp, then b0, b1 of d tile 2 dp + 1.
// - P as A of P V for keys 16 kk..16 kk+15: S tiles 2 kk and 2 kk + 1 hold exactly
//   a0 = pack(s[2kk][0], s[2kk][1]), a1 = pack(s[2kk][2], s[2kk][3]),
//   a2 = pack(s[2kk+1][0], s[2kk+1][1]), a3 = pack(s[2kk+1][2], s[2kk+1][3]).
#pragma once

#include "rows.h"  // exp2_fast, pack_pair

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define HIPK_ATTENTION_MMA 1
#else
#define HIPK_ATTENTION_MMA 0
#endif

#define HIPK_MMA_ROWS 64  // query rows per block (16 per warp)
#define HIPK_MMA_KEYS 64  // keys per shared-memory tile

namespace hipk {

#if HIPK_ATTENTION_MMA

namespace mma {

// D += A B for one m16n8k16 tile with f32 accumulators (the layouts above).
HIPK_DEVICE void mma_16816(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1,
                           const bf16*) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
HIPK_DEVICE void mma_16816(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1,
                           const f16*) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Shared-memory reads and asynchronous copies: volatile with a memory clobber, so the compiler
// keeps them in order with the barriers around them.
HIPK_DEVICE void ldmatrix_x4(unsigned (&r)[4], unsigned address) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address)
                 : "memory");
}
HIPK_DEVICE void ldmatrix_x4_trans(unsigned (&r)[4], unsigned address) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address)
                 : "memory");
}

// 16 bytes global -> shared, bypassing L1; `bytes` 0 writes zeros (rows past the end).
HIPK_DEVICE void copy16_async(unsigned address, const void* source, int bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
                 :
                 : "r"(address), "l"(source), "r"(bytes)
                 : "memory");
}
HIPK_DEVICE void async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
HIPK_DEVICE void async_wait_all() { asm volatile("cp.async.wait_group 0;" ::: "memory"); }

HIPK_DEVICE unsigned shared_address(const void* p) {
    return (unsigned)__cvta_generic_to_shared(p);
}

// Byte offset of 16-byte chunk `c` of row `r` in a swizzled tile of D / 8 chunks per row.
template <int D> HIPK_DEVICE unsigned chunk_at(int r, int c) {
    return (unsigned)((r * (D / 8) + (c ^ (r & 7))) * 16);
}

// Rows [0, HIPK_MMA_KEYS) of a [rows, D] operand (row stride `stride` elements) into the
// swizzled tile at `tile`; rows from `valid` on are zero-filled (their source is row 0, which
// exists, but no byte of it is read).
template <int D, typename T>
HIPK_DEVICE void load_tile(unsigned tile, const T* rows, long long stride, int valid) {
    const int CHUNKS = D / 8;
    HIPK_UNROLL
    for (int i = (int)threadIdx.x; i < HIPK_MMA_KEYS * CHUNKS; i += HIPK_ATTENTION_THREADS) {
        const int r = i / CHUNKS, c = i - r * CHUNKS;
        const bool in = r < valid;
        copy16_async(tile + chunk_at<D>(r, c), rows + (in ? r * stride : 0) + c * 8, in ? 16 : 0);
    }
}

// Shared memory of one block: the key tile (first the query tile) and the value tile.
template <int D> struct Tiles {
    alignas(128) unsigned short k[HIPK_MMA_KEYS * D];
    alignas(128) unsigned short v[HIPK_MMA_KEYS * D];
};

template <typename T, int D>
HIPK_DEVICE void attention_mma(const T* q, const T* k, const T* v, T* out, const void* mask,
                               const AttentionArgs& a, Tiles<D>& smem) {
    const int DT = D / 8;    // n8 tiles of the output row
    const int DK = D / 16;   // k16 steps of Q Kᵀ
    const int NT = HIPK_MMA_KEYS / 8;   // n8 tiles of a score row
    const float LOG2E = 1.4426950408889634f;
    const int lane = (int)threadIdx.x & 31, warp = (int)threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int q0 = (int)(gridDim.x - 1 - blockIdx.x) * HIPK_MMA_ROWS;
    const int h = (int)blockIdx.y, b = (int)blockIdx.z;
    const int hk = h / (a.heads / a.kv_heads);
    const int shift = a.skv - a.sq;
    q += b * a.qb + h * a.qh + (long long)q0 * a.qs;
    k += b * a.kb + hk * a.kh;
    v += b * a.vb + hk * a.vh;
    out += b * a.ob + h * a.oh;
    if (mask != nullptr) {
        const long long at = b * a.mb + h * a.mh;
        mask = a.mask_kind == 1 ? (const void*)(static_cast<const T*>(mask) + at)
                                : (const void*)(static_cast<const unsigned char*>(mask) + at);
    }
    const unsigned ktile = shared_address(smem.k), vtile = shared_address(smem.v);

    // The query tile, through the key buffer, into A fragments.
    unsigned qf[DK][4];
    load_tile<D>(ktile, q, a.qs, a.sq - q0);
    async_commit();
    async_wait_all();
    __syncthreads();
    HIPK_UNROLL
    for (int kk = 0; kk < DK; ++kk)
        ldmatrix_x4(qf[kk], ktile + chunk_at<D>(warp * 16 + (lane & 15), 2 * kk + (lane >> 4)));

    // This thread's rows (g and g + 8 of the warp's 16) and their running statistics.
    const int row0 = q0 + warp * 16 + g;
    float o[DT][4];
    HIPK_UNROLL
    for (int i = 0; i < DT; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    float top[2] = {neg_inf(), neg_inf()}, sum[2] = {0.0f, 0.0f};
    const float scale = a.scale * LOG2E;

    // Keys past the last one the tile's last query may see are never loaded.
    int keys = a.skv;
    if (a.causal) keys = imin(keys, imin(q0 + HIPK_MMA_ROWS, a.sq) + shift);
    const int tiles = keys > 0 ? (keys + HIPK_MMA_KEYS - 1) / HIPK_MMA_KEYS : 0;
    __syncthreads();  // every warp holds its query fragments: the buffer is the key tile's now
    if (tiles > 0) load_tile<D>(ktile, k, a.ks, a.skv);
    async_commit();
    for (int n = 0; n < tiles; ++n) {
        const int k0 = n * HIPK_MMA_KEYS;
        async_wait_all();
        __syncthreads();  // K_n has landed; every warp is done with V_{n-1}
        load_tile<D>(vtile, v + k0 * a.vs, a.vs, a.skv - k0);
        async_commit();

        // S = Q K_nᵀ for the warp's 16 rows x 64 keys.
        float s[NT][4];
        HIPK_UNROLL
        for (int i = 0; i < NT; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
        HIPK_UNROLL
        for (int kk = 0; kk < DK; ++kk) {
            HIPK_UNROLL
            for (int np = 0; np < NT / 2; ++np) {
                const int m = lane >> 3;
                unsigned f[4];
                ldmatrix_x4(f, ktile + chunk_at<D>(16 * np + 8 * (m >> 1) + (lane & 7),
                                                   2 * kk + (m & 1)));
                mma_16816(s[2 * np], qf[kk], f[0], f[1], (const T*)nullptr);
                mma_16816(s[2 * np + 1], qf[kk], f[2], f[3], (const T*)nullptr);
            }
        }
        async_wait_all();
        __syncthreads();  // V_n has landed; every warp is done with K_n
        if (n + 1 < tiles) {
            load_tile<D>(ktile, k + (k0 + HIPK_MMA_KEYS) * a.ks, a.ks, a.skv - k0 - HIPK_MMA_KEYS);
        }
        async_commit();

        // Scores in the log2 domain; masked ones -inf. Only tiles that cross the causal
        // diagonal, the end of the keys or a mask look at each element.
        const bool partial = a.mask_kind != 0 || k0 + HIPK_MMA_KEYS > a.skv ||
                             (a.causal && k0 + HIPK_MMA_KEYS - 1 > q0 + shift);
        HIPK_UNROLL
        for (int i = 0; i < NT; ++i) {
            HIPK_UNROLL
            for (int e = 0; e < 4; ++e) {
                float x = s[i][e] * scale;
                if (partial) {
                    const int query = row0 + (e >> 1) * 8, key = k0 + i * 8 + 2 * t + (e & 1);
                    bool attend = query < a.sq && key < a.skv && !(a.causal && key > query + shift);
                    if (attend && a.mask_kind) {
                        const long long at = query * a.mq + key * a.mk;
                        x += mask_value<T>(mask, a.mask_kind, at, &attend) * LOG2E;
                    }
                    if (!attend) x = neg_inf();
                }
                s[i][e] = x;
            }
        }
        // Online softmax per row: the row's max over the 4 lanes that share it (xor 1, 2).
        HIPK_UNROLL
        for (int r = 0; r < 2; ++r) {
            float m = top[r];
            HIPK_UNROLL
            for (int i = 0; i < NT; ++i) m = fmaxf(m, fmaxf(s[i][2 * r], s[i][2 * r + 1]));
            m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
            m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
            const float base = m == neg_inf() ? 0.0f : m;  // exp2(-inf - 0) = 0, no NaN
            const float rescale = exp2_fast(top[r] - base);
            top[r] = m;
            float add = 0.0f;
            HIPK_UNROLL
            for (int i = 0; i < NT; ++i) {
                s[i][2 * r] = exp2_fast(s[i][2 * r] - base);
                s[i][2 * r + 1] = exp2_fast(s[i][2 * r + 1] - base);
                add += s[i][2 * r] + s[i][2 * r + 1];
            }
            sum[r] = sum[r] * rescale + add;  // this lane's columns; the 4 lanes add up at the end
            HIPK_UNROLL
            for (int i = 0; i < DT; ++i) {
                o[i][2 * r] *= rescale;
                o[i][2 * r + 1] *= rescale;
            }
        }
        // O += P V_n: P from the S registers (see the header), V through ldmatrix.trans.
        HIPK_UNROLL
        for (int kk = 0; kk < HIPK_MMA_KEYS / 16; ++kk) {
            const unsigned p[4] = {
                pack_pair(s[2 * kk][0], s[2 * kk][1], (const T*)nullptr),
                pack_pair(s[2 * kk][2], s[2 * kk][3], (const T*)nullptr),
                pack_pair(s[2 * kk + 1][0], s[2 * kk + 1][1], (const T*)nullptr),
                pack_pair(s[2 * kk + 1][2], s[2 * kk + 1][3], (const T*)nullptr),
            };
            HIPK_UNROLL
            for (int dp = 0; dp < DT / 2; ++dp) {
                const int m = lane >> 3;
                unsigned f[4];
                ldmatrix_x4_trans(f, vtile + chunk_at<D>(16 * kk + 8 * (m & 1) + (lane & 7),
                                                         2 * dp + (m >> 1)));
                mma_16816(o[2 * dp], p, f[0], f[1], (const T*)nullptr);
                mma_16816(o[2 * dp + 1], p, f[2], f[3], (const T*)nullptr);
            }
        }
    }
    async_wait_all();  // nothing may be in flight at exit (the last commit is empty)

    // out = O / sum per row; a row that saw no key has sum 0 and writes zeros.
    HIPK_UNROLL
    for (int r = 0; r < 2; ++r) {
        float total = sum[r];
        total += __shfl_xor_sync(0xffffffffu, total, 1);
        total += __shfl_xor_sync(0xffffffffu, total, 2);
        const float inv = total > 0.0f ? 1.0f / total : 0.0f;
        const int query = row0 + r * 8;
        if (query >= a.sq) continue;
        unsigned* o_row = reinterpret_cast<unsigned*>(out + (long long)query * a.os);
        HIPK_UNROLL
        for (int i = 0; i < DT; ++i) {
            const float lo = o[i][2 * r] * inv, hi = o[i][2 * r + 1] * inv;
            o_row[i * 4 + t] = pack_pair(lo, hi, (const T*)nullptr);
        }
    }
}

}  // namespace mma

#endif  // HIPK_ATTENTION_MMA

}  // namespace hipk
