// Matrix-core attention on AMD CDNA2 / CDNA3 (gfx90a, gfx942): attention.hip's
// `attention_mma_d<D>_<t>` entry points there, with the launch and layout conditions of
// attention_mma.h (grid (ceil(sq / 128), heads, B), 128 threads, 16-byte rows, d == D).
//
// A block is 2 wave64s of 64 query rows each (4 tiles of 16); keys stream through LDS in tiles
// of BN = 32 (a plain 16-byte load per lane and a barrier on each side: simple, not tuned).
// Products are v_mfma_f32_16x16x16 (bf16_1k or f16) with f32 accumulators, computed
// transposed so that every lane keeps one query throughout:
// - Sᵀ = K Qᵀ: A = K (16 keys x 16 d), B = Qᵀ (16 d x 16 queries), out Sᵀ (keys x queries).
// - Oᵀ += Vᵀ Pᵀ: A = Vᵀ (16 d x 16 keys), B = Pᵀ (16 keys x 16 queries), out Oᵀ (d x queries).
// MFMA 16x16x16 operand layouts (wave64; lane l, col = l % 16, quad = l / 16; 4 elements e):
//   A[i][k]: lane holds A[col][4 quad + e]     B[k][j]: lane holds B[4 quad + e][col]
//   D[i][j]: lane holds D[4 quad + e][col]
// so a lane's Sᵀ values (keys 4 quad + e of query col) are exactly its Pᵀ operand for the
// same 16 keys, and its Oᵀ values are d = 4 quad + e of query col: the running max and sum of
// query col live in the lane (and its 3 twins at l ^ 16, l ^ 32, which hold the other keys;
// row reductions are two xor shuffles). The query fragments (B of Sᵀ: Q[col][4 quad + e]) are
// read once from global memory into registers.
#pragma once

#include "rows.h"  // exp2_fast, pack_pair

#if defined(__gfx90a__) || defined(__gfx942__)
#define HIPK_ATTENTION_MFMA 1
#else
#define HIPK_ATTENTION_MFMA 0
#endif

namespace hipk {

#if HIPK_ATTENTION_MFMA

namespace mma {

// Four 16-bit values, element e in half e % 2 (low first) of word e / 2.
struct alignas(8) Quad16 { unsigned w[2]; };

typedef short hipk_short4 __attribute__((ext_vector_type(4)));
typedef _Float16 hipk_half4 __attribute__((ext_vector_type(4)));
typedef float hipk_float4 __attribute__((ext_vector_type(4)));

// D += A B for one 16x16x16 tile (the layouts above).
HIPK_DEVICE void mfma_16x16x16(float (&c)[4], const Quad16& a, const Quad16& b, const bf16*) {
    union { Quad16 q; hipk_short4 v; } x, y;
    x.q = a;
    y.q = b;
    hipk_float4 acc = {c[0], c[1], c[2], c[3]};
    acc = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(x.v, y.v, acc, 0, 0, 0);
    c[0] = acc[0], c[1] = acc[1], c[2] = acc[2], c[3] = acc[3];
}
HIPK_DEVICE void mfma_16x16x16(float (&c)[4], const Quad16& a, const Quad16& b, const f16*) {
    union { Quad16 q; hipk_half4 v; } x, y;
    x.q = a;
    y.q = b;
    hipk_float4 acc = {c[0], c[1], c[2], c[3]};
    acc = __builtin_amdgcn_mfma_f32_16x16x16f16(x.v, y.v, acc, 0, 0, 0);
    c[0] = acc[0], c[1] = acc[1], c[2] = acc[2], c[3] = acc[3];
}

HIPK_DEVICE float shuffle_xor(float v, int mask) { return __shfl_xor(v, mask); }

// Keys per LDS tile; LDS rows of D + 8 elements (16-byte aligned rows, and lanes reading 16
// consecutive rows spread over the banks).
#define HIPK_MFMA_KEYS 32
#define HIPK_MMA_SHARED(D) (2 * HIPK_MFMA_KEYS * ((D) + 8))

template <typename T, int D>
HIPK_DEVICE void attention_mma(const T* q, const T* k, const T* v, T* out, const void* mask,
                               const AttentionArgs& a, unsigned short* smem) {
    const int BN = HIPK_MFMA_KEYS, PAD = D + 8;
    const int QT = 4;       // 16-query tiles per wave
    const int DK = D / 16;  // 16-d steps of Sᵀ, and 16-d tiles of Oᵀ
    const int KT = BN / 16; // 16-key tiles per LDS tile
    const float LOG2E = 1.4426950408889634f;
    const int lane = (int)threadIdx.x & 63, wave = (int)threadIdx.x >> 6;
    const int col = lane & 15, quad = lane >> 4;
    const int q0 = (int)(gridDim.x - 1 - blockIdx.x) * HIPK_MMA_ROWS;
    const int shift = a.skv - a.sq;
    select_head(q, k, v, out, mask, a, (int)blockIdx.y, (int)blockIdx.z);
    unsigned short* kt = smem;
    unsigned short* vt = smem + BN * PAD;

    // This lane's query of each tile, and its fragments (B of Sᵀ), zero past the end.
    const int first = q0 + wave * 16 * QT + col;
    Quad16 qf[QT][DK];
    HIPK_UNROLL
    for (int t = 0; t < QT; ++t) {
        const int query = first + t * 16;
        const T* row = q + (long long)imin(query, a.sq - 1) * a.qs + quad * 4;
        HIPK_UNROLL
        for (int kk = 0; kk < DK; ++kk) {
            const Quad16 zero = {{0u, 0u}};
            qf[t][kk] = query < a.sq ? *reinterpret_cast<const Quad16*>(row + kk * 16) : zero;
        }
    }
    float o[QT][DK][4];
    float top[QT], sum[QT];
    HIPK_UNROLL
    for (int t = 0; t < QT; ++t) {
        top[t] = neg_inf();
        sum[t] = 0.0f;
        HIPK_UNROLL
        for (int i = 0; i < DK; ++i) o[t][i][0] = o[t][i][1] = o[t][i][2] = o[t][i][3] = 0.0f;
    }
    const float scale = a.scale * LOG2E;
    int keys = a.skv;
    if (a.causal) keys = imin(keys, imin(q0 + HIPK_MMA_ROWS, a.sq) + shift);
    for (int k0 = 0; k0 < keys; k0 += BN) {
        __syncthreads();  // every wave is done with the previous tile
        for (int i = (int)threadIdx.x; i < BN * (D / 8); i += HIPK_ATTENTION_THREADS) {
            const int r = i / (D / 8), c = (i - r * (D / 8)) * 8;
            Vec<unsigned short, 8> kr = {{0, 0, 0, 0, 0, 0, 0, 0}}, vr = kr;
            if (k0 + r < a.skv) {
                kr = *reinterpret_cast<const Vec<unsigned short, 8>*>(k + (k0 + r) * a.ks + c);
                vr = *reinterpret_cast<const Vec<unsigned short, 8>*>(v + (k0 + r) * a.vs + c);
            }
            *reinterpret_cast<Vec<unsigned short, 8>*>(kt + r * PAD + c) = kr;
            *reinterpret_cast<Vec<unsigned short, 8>*>(vt + r * PAD + c) = vr;
        }
        __syncthreads();

        // Sᵀ = K Qᵀ: each K fragment serves the wave's 4 query tiles.
        float s[QT][KT][4];
        HIPK_UNROLL
        for (int t = 0; t < QT; ++t) {
            HIPK_UNROLL
            for (int j = 0; j < KT; ++j) s[t][j][0] = s[t][j][1] = s[t][j][2] = s[t][j][3] = 0.0f;
        }
        HIPK_UNROLL
        for (int kk = 0; kk < DK; ++kk) {
            HIPK_UNROLL
            for (int j = 0; j < KT; ++j) {
                const Quad16 kf =
                    *reinterpret_cast<const Quad16*>(kt + (j * 16 + col) * PAD + kk * 16 + quad * 4);
                HIPK_UNROLL
                for (int t = 0; t < QT; ++t) mfma_16x16x16(s[t][j], kf, qf[t][kk], (const T*)nullptr);
            }
        }
        // Scores in the log2 domain, masked ones -inf, as in attention_mma.h.
        const bool partial = a.mask_kind != 0 || k0 + BN > a.skv ||
                             (a.causal && k0 + BN - 1 > q0 + shift);
        HIPK_UNROLL
        for (int t = 0; t < QT; ++t) {
            const int query = first + t * 16;
            float top_now = top[t];
            HIPK_UNROLL
            for (int j = 0; j < KT; ++j) {
                HIPK_UNROLL
                for (int e = 0; e < 4; ++e) {
                    float x = s[t][j][e] * scale;
                    if (partial) {
                        const int key = k0 + j * 16 + quad * 4 + e;
                        bool attend = query < a.sq && key < a.skv &&
                                      !(a.causal && key > query + shift);
                        if (attend && a.mask_kind) {
                            const long long at = query * a.mq + key * a.mk;
                            x += mask_value<T>(mask, a.mask_kind, at, &attend) * LOG2E;
                        }
                        if (!attend) x = neg_inf();
                    }
                    s[t][j][e] = x;
                    top_now = fmaxf(top_now, x);
                }
            }
            top_now = fmaxf(top_now, shuffle_xor(top_now, 16));
            top_now = fmaxf(top_now, shuffle_xor(top_now, 32));
            const float start = top_now == neg_inf() ? 0.0f : top_now;  // no -inf - -inf
            const float rescale = exp2_fast(top[t] - start);
            top[t] = top_now;
            float add = 0.0f;
            HIPK_UNROLL
            for (int j = 0; j < KT; ++j) {
                HIPK_UNROLL
                for (int e = 0; e < 4; ++e) {
                    s[t][j][e] = exp2_fast(s[t][j][e] - start);
                    add += s[t][j][e];
                }
            }
            sum[t] = sum[t] * rescale + add;  // this lane's keys; the twins add up at the end
            HIPK_UNROLL
            for (int i = 0; i < DK; ++i) {
                o[t][i][0] *= rescale;
                o[t][i][1] *= rescale;
                o[t][i][2] *= rescale;
                o[t][i][3] *= rescale;
            }
        }
        // Oᵀ += Vᵀ Pᵀ: Pᵀ from the Sᵀ registers; each V fragment serves the 4 query tiles.
        HIPK_UNROLL
        for (int j = 0; j < KT; ++j) {
            Quad16 p[QT];
            HIPK_UNROLL
            for (int t = 0; t < QT; ++t) {
                p[t].w[0] = pack_pair(s[t][j][0], s[t][j][1], (const T*)nullptr);
                p[t].w[1] = pack_pair(s[t][j][2], s[t][j][3], (const T*)nullptr);
            }
            const unsigned short* column = vt + (j * 16 + quad * 4) * PAD + col;
            HIPK_UNROLL
            for (int i = 0; i < DK; ++i) {
                Quad16 vf;  // Vᵀ[d = 16 i + col][keys 4 quad + e] = V[keys][d]
                vf.w[0] = column[i * 16] | ((unsigned)column[i * 16 + PAD] << 16);
                vf.w[1] = column[i * 16 + 2 * PAD] | ((unsigned)column[i * 16 + 3 * PAD] << 16);
                HIPK_UNROLL
                for (int t = 0; t < QT; ++t) mfma_16x16x16(o[t][i], vf, p[t], (const T*)nullptr);
            }
        }
    }

    // out = O / sum per query; a query that saw no key has sum 0 and writes zeros.
    HIPK_UNROLL
    for (int t = 0; t < QT; ++t) {
        float total = sum[t];
        total += shuffle_xor(total, 16);
        total += shuffle_xor(total, 32);
        const float inv = total > 0.0f ? 1.0f / total : 0.0f;
        const int query = first + t * 16;
        if (query >= a.sq) continue;
        T* row = out + (long long)query * a.os + quad * 4;
        HIPK_UNROLL
        for (int i = 0; i < DK; ++i) {
            Quad16 w;
            w.w[0] = pack_pair(o[t][i][0] * inv, o[t][i][1] * inv, (const T*)nullptr);
            w.w[1] = pack_pair(o[t][i][2] * inv, o[t][i][3] * inv, (const T*)nullptr);
            *reinterpret_cast<Quad16*>(row + i * 16) = w;
        }
    }
}

}  // namespace mma

#endif  // HIPK_ATTENTION_MFMA

}  // namespace hipk
