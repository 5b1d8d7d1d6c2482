// Matrix-core attention for 16-bit q, k, v (attention.hip's `attention_mma_d<D>_<t>` entry
// points): FlashAttention-2's structure on NVIDIA tensor cores from sm_80 (attention_mfma.h
// holds the AMD one), with the portable kernel of attention.hip as the fallback wherever no
// matrix-core path is compiled (the cpu platform, other AMD GPUs, NVIDIA before sm_80). All
// take the same launch, so the host picks the entry point without knowing which one the
// compiler kept:
//
//   grid (ceil(sq / HIPK_MMA_ROWS), heads, B), HIPK_MMA_ROWS = 128 queries per block, block
//   of HIPK_ATTENTION_THREADS (128) threads; D = 128: HIPK_MMA_DYNAMIC_BYTES_D128 (64 KiB) of
//   dynamic shared memory, or the device's opt-in limit where that is less (no D = 128 path
//   that such a device compiles needs more than 48 KiB); d == D (32, 64 or 128); q, k, v, out
//   16-byte aligned with batch, head and sequence strides that are multiples of 8 elements
//   (16 bytes), so that every row of a tile moves as 16-byte chunks.
//
// NVIDIA path (one block = 128 query rows of one (batch, head); 4 warps of 32 rows each, two
// m16 tiles, so that every K and V fragment read from shared memory feeds two mma):
// - The query tile goes global -> shared (cp.async), then to registers (ldmatrix) as the A
//   operands of S = Q Kᵀ: once, its shared memory then holding the key/value stages (D 64),
//   or at every k16 step, the tile kept beside the stages (D 128: MmaShape says why).
// - Keys and values stream through shared memory in tiles of BN keys (MmaShape), STAGES tiles
//   in flight with cp.async: the loads of tile n + STAGES - 1 are issued at step n, right
//   after the one barrier of the step, into the stage tile n - 1 used.
// - Shared tiles are rows of D / 8 16-byte chunks, chunk c of row r stored at c ^ swizzle(r)
//   (XOR swizzle; swizzle(r) = r % 8 for rows of 8 or more chunks): ldmatrix's 8 row addresses
//   of one 8 x 8 matrix (8 consecutive rows, one logical chunk) then fall in 8 distinct 16-byte
//   bank groups, and so do the cp.async stores.
// - S and O live in registers as m16n8k16 accumulators (mma.sync ... f32.bf16.bf16.f32 or
//   f16); the softmax is online per row in the log2 domain (scale * log2 e folded into one
//   multiply, exp2 by ex2.approx), the running max and sum per row, O rescaled when the max
//   grows. P is rounded to the storage type and used as the A operand of P V straight from the
//   S registers (the accumulator layout of two n8 tiles is the A layout of one k16 step).
// - Causal: key tiles entirely above the diagonal are never loaded; tiles that cross it, the
//   last partial tile and every tile under a mask are masked per element; rows that see no
//   key end with sum 0 and write zeros. Every warp of a block runs every loaded tile: a
//   per-warp skip of the tiles past its own rows' diagonal saves only part of one diagonal
//   block's work, and the H200 timed D 128 ~30% faster on the tree just before such a skip
//   than on every tree after it (the likeliest cause of that drop; not isolated).
// - Blocks are taken from the last query tile down (most keys first under causal masking) so
//   the longest blocks do not start last (within one head, or over the grid: MmaShape).
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

#define HIPK_MMA_ROWS 128  // query rows per block

// Dynamic shared memory of the D = 128 entry points, in bytes, on every path (attention.hip
// puts the matrix-core tiles, or the portable fallback's, there): the NVIDIA tiles need 64 KiB
// (MmaShared<128>), more than the 48 KiB of static shared memory a kernel may declare.
#define HIPK_MMA_DYNAMIC_BYTES_D128 65536

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
// Wait until at most N of this thread's groups are still in flight.
template <int N> HIPK_DEVICE void async_wait() {
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

HIPK_DEVICE unsigned shared_address(const void* p) {
    return (unsigned)__cvta_generic_to_shared(p);
}

// What chunk c of row r is XORed with in a tile of D / 8 chunks per row. The 32 banks span
// 128 bytes, 8 chunks: rows of 8 chunks or more (D >= 64) swizzle by r % 8; narrower rows share
// a bank line (D = 32: rows 2i and 2i + 1, 4 chunks each), so they swizzle by the line, r /
// (64 / D), within their D / 8 chunks, and 8 consecutive rows of one logical chunk still hit 8
// distinct 16-byte bank groups. Either way the swizzle repeats every 8 rows.
template <int D> HIPK_DEVICE int swizzle(int r) {
    return D >= 64 ? (r & 7) : ((r / (64 / D)) & (D / 8 - 1));
}

// Byte offset of 16-byte chunk `c` of row `r` in a swizzled tile of D / 8 chunks per row.
template <int D> HIPK_DEVICE unsigned chunk_at(int r, int c) {
    return (unsigned)((r * (D / 8) + (c ^ swizzle<D>(r))) * 16);
}

// Rows [0, ROWS) of a [rows, D] operand (row stride `stride` elements) into the swizzled
// tile at shared address `tile`; rows from `valid` on are zero-filled (their source is row 0,
// which exists, but no byte of it is read).
template <int D, int ROWS, typename T>
HIPK_DEVICE void load_rows(unsigned tile, const T* rows, long long stride, int valid) {
    // Thread i moves chunk i % (D / 8) of rows i / (D / 8) + j STEP: its chunk and its rows'
    // swizzle (STEP is a multiple of 8) stay the same, so one pointer and one address step.
    const int CHUNKS = D / 8, STEP = HIPK_ATTENTION_THREADS / CHUNKS;
    static_assert(STEP % 8 == 0 && ROWS % STEP == 0, "whole steps of 8 rows");
    const int c = (int)threadIdx.x % CHUNKS, r = (int)threadIdx.x / CHUNKS;
    const T* from = rows + r * stride + c * 8;
    const unsigned to = tile + chunk_at<D>(r, c);
    HIPK_UNROLL
    for (int j = 0; j < ROWS / STEP; ++j) {
        const bool in = r + j * STEP < valid;
        copy16_async(to + j * STEP * D * 2, in ? from : rows, in ? 16 : 0);
        from += STEP * stride;
    }
}

// The tile shapes per head size: MT m16 tiles (16 query rows each) per warp, so a block of 4
// warps takes 64 MT = HIPK_MMA_ROWS queries (each K and V fragment read from shared memory
// serves MT tiles: at MT = 1 the ldmatrix traffic, not the tensor cores, bounds the kernel),
// BN keys per shared-memory tile, STAGES tiles in flight (cp.async prefetch). QREGS: the query
// fragments stay in registers from the start; else the query tile stays in shared memory,
// before the stages, and each k16 step reads its MT fragments with ldmatrix.
// Registers per thread: output accumulators MT D / 2, scores MT BN / 2, query fragments
// MT D / 4 with QREGS. D = 32 (BERT-small heads): 32 keys x 3 stages, QREGS (12 KiB); on an
// H100, bench_encoder's B32 H12 S128 with a key-padding mask took 15.4 us per call with it
// (cuDNN 15.6), 35.6 with D = 64's 64 x 2 (torch.profiler kernel times); 128 x 2 was
// slower still. D = 64: 64 keys x 2 stages, QREGS (254 registers on sm_90, 32 KiB).
// D = 128: 32 keys x 2 stages, the queries in shared memory (255 registers, no spill; 32 KiB
// of queries + 32 KiB of stages = 64 KiB, dynamic). One H200 run (bf16 causal, B4 H32 S2048
// and B1 H32 S8192, TFLOP/s, registers / spilled bytes from ptxas) timed every shape against
// each other: this one 267 and 313 (0.51x cuDNN); 32 keys x 3 stages (80 KiB) the same; 64 x 2
// with queries in shared memory (96 KiB, 76 bytes spilled) 261 / 303; 32 x 4 (96 KiB) 260 /
// 302; 16 x 4 with queries in registers (the previous shape, 4 bytes spilled) 243 / 285, in
// shared memory 221 / 261; 32 x 2 in registers (124 bytes spilled) 226 / 265; 8 warps of one
// m16 tile (MT = 1, queries in registers, 210-255 registers) 202-218 / 235-263 whatever the
// keys and stages (ldmatrix-bound), and slower still capped at 128 registers (2 blocks per
// multiprocessor, spilling). LONGEST_FIRST: the order blocks take their query tiles in
// (attention_mma's comment); at D = 128 the grid-wide order measured as fast as or faster
// than the per-head one.
template <int MT_, int BN_, int STAGES_, int QREGS_, int LONGEST_FIRST_> struct MmaTiles {
    enum { MT = MT_, BN = BN_, STAGES = STAGES_, QREGS = QREGS_, LONGEST_FIRST = LONGEST_FIRST_ };
};
template <int D> struct MmaShape;
template <> struct MmaShape<32> : MmaTiles<2, 32, 3, 1, 0> {};
template <> struct MmaShape<64> : MmaTiles<2, 64, 2, 1, 0> {};
template <> struct MmaShape<128> : MmaTiles<2, 32, 2, 0, 1> {};

template <typename T, int D>
HIPK_DEVICE void attention_mma(const T* q, const T* k, const T* v, T* out, const void* mask,
                               const AttentionArgs& a, unsigned short* smem) {
    typedef MmaShape<D> Shape;
    const int MT = Shape::MT, BN = Shape::BN, STAGES = Shape::STAGES, QREGS = Shape::QREGS;
    static_assert(MT * 64 == HIPK_MMA_ROWS, "a block takes HIPK_MMA_ROWS queries");
    const int DT = D / 8;    // n8 tiles of an output row
    const int DK = D / 16;   // k16 steps of Q Kᵀ
    const int NT = BN / 8;   // n8 tiles of a score row
    const unsigned ROW = D * 2;  // bytes per tile row
    const float LOG2E = 1.4426950408889634f;
    const unsigned FULL = 0xffffffffu;
    const int lane = (int)threadIdx.x & 31, warp = (int)threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3, l7 = lane & 7, m = lane >> 3;
    // Blocks start in the order of their linear index (x fastest). Without LONGEST_FIRST a
    // block takes the query tiles of one (head, batch) from the last down; with it the last
    // query tile of every (head, batch) comes first, then the one before...: the longest
    // blocks (most keys under causal masking) start first over the whole grid, so the short
    // ones fill the end of the run. (64 bits: x y z may exceed 2^32 blocks.)
    int tile = (int)(gridDim.x - 1 - blockIdx.x), h = (int)blockIdx.y, b = (int)blockIdx.z;
    if (Shape::LONGEST_FIRST) {
        const unsigned slices = gridDim.y * gridDim.z;  // (head, batch) pairs, < 2^32
        const unsigned long long at =
            blockIdx.x + (unsigned long long)gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
        tile = (int)(gridDim.x - 1 - (unsigned)(at / slices));
        const unsigned slice = (unsigned)(at % slices);
        h = (int)(slice % gridDim.y);
        b = (int)(slice / gridDim.y);
    }
    const int q0 = tile * HIPK_MMA_ROWS;
    const int shift = a.skv - a.sq;
    select_head(q, k, v, out, mask, a, h, b);
    q += (long long)q0 * a.qs;
    // Shared memory: STAGES stages of (key tile, value tile), BN rows of D each; the query
    // tile (HIPK_MMA_ROWS rows) before them (!QREGS), or staged where they go (QREGS).
    const unsigned base = shared_address(smem);
    const unsigned TILE = BN * ROW;
    const unsigned stages = base + (QREGS ? 0u : (unsigned)HIPK_MMA_ROWS * ROW);
    // This lane's ldmatrix byte offsets in a tile (see the header; the chunk of step kk or dp
    // is the chunk of step 0 XOR 2 kk, as 2 kk never carries into bit 0; XOR with kk << 5
    // touches only the chunk bits of the offset, below the row's). Rows 8 or 16 further on
    // have the same swizzle.
    const int lane_swizzle = swizzle<D>(l7), q_swizzle = swizzle<D>(lane & 15);
    const unsigned q_at = (unsigned)(warp * 16 * MT + (lane & 15)) * ROW +
                          (unsigned)(((lane >> 4) ^ q_swizzle) << 4);
    const unsigned k_at =
        (unsigned)(8 * (m >> 1) + l7) * ROW + (unsigned)(((m & 1) ^ lane_swizzle) << 4);
    const unsigned v_at =
        (unsigned)(8 * (m & 1) + l7) * ROW + (unsigned)(((m >> 1) ^ lane_swizzle) << 4);

    // The query tile, through shared memory, into A fragments (QREGS: all of them now).
    unsigned qf[MT][QREGS ? DK : 1][4];
    load_rows<D, HIPK_MMA_ROWS>(base, q, a.qs, a.sq - q0);
    async_commit();
    async_wait_all();
    __syncthreads();
    if (QREGS) {
        HIPK_UNROLL
        for (int mt = 0; mt < MT; ++mt) {
            HIPK_UNROLL
            for (int kk = 0; kk < (QREGS ? DK : 1); ++kk)
                ldmatrix_x4(qf[mt][kk], base + ((q_at + mt * 16 * ROW) ^ (unsigned)(kk << 5)));
        }
    }

    // Output accumulators and the running max and sum of this thread's rows: m16 tile mt,
    // rows g (r = 0) and g + 8 (r = 1) of it.
    const int row0 = q0 + warp * 16 * MT + g;
    float o[MT][DT][4];
    float top[MT][2], sum[MT][2];
    HIPK_UNROLL
    for (int mt = 0; mt < MT; ++mt) {
        top[mt][0] = top[mt][1] = neg_inf();
        sum[mt][0] = sum[mt][1] = 0.0f;
        HIPK_UNROLL
        for (int i = 0; i < DT; ++i) o[mt][i][0] = o[mt][i][1] = o[mt][i][2] = o[mt][i][3] = 0.0f;
    }
    const float scale = a.scale * LOG2E;

    // Keys past the last one the block's last query may see are never loaded.
    int keys = a.skv;
    if (a.causal) keys = imin(keys, imin(q0 + HIPK_MMA_ROWS, a.sq) + shift);
    const int tiles = keys > 0 ? (keys + BN - 1) / BN : 0;
    __syncthreads();  // every warp holds its query fragments: the stages are free
    // Tile n goes to stage n % STAGES; the first STAGES - 1 are requested before the loop, tile
    // n + STAGES - 1 at the start of step n, into the stage tile n - 1 used. One commit group
    // per tile (empty past the end), so "tile n has landed" is "at most STAGES - 2 groups are
    // in flight" at step n.
    HIPK_UNROLL
    for (int i = 0; i < STAGES - 1; ++i) {
        if (i < tiles) {
            const unsigned to = stages + (unsigned)i * 2 * TILE;
            load_rows<D, BN>(to, k + i * BN * a.ks, a.ks, a.skv - i * BN);
            load_rows<D, BN>(to + TILE, v + i * BN * a.vs, a.vs, a.skv - i * BN);
        }
        async_commit();
    }
    for (int n = 0; n < tiles; ++n) {
        const int k0 = n * BN;
        async_wait<STAGES - 2>();  // tile n has landed (this thread's part of it)
        __syncthreads();  // ... every thread's part; and every warp is done with tile n - 1
        const int ahead = n + STAGES - 1;
        if (ahead < tiles) {
            const unsigned to = stages + (unsigned)(ahead % STAGES) * 2 * TILE;
            const long long key = (long long)ahead * BN;
            load_rows<D, BN>(to, k + key * a.ks, a.ks, a.skv - ahead * BN);
            load_rows<D, BN>(to + TILE, v + key * a.vs, a.vs, a.skv - ahead * BN);
        }
        async_commit();
        const unsigned kt = stages + (unsigned)(n % STAGES) * 2 * TILE, vt = kt + TILE;

        // S = Q Kᵀ: each K fragment pair serves the warp's MT m16 tiles.
        float s[MT][NT][4];
        HIPK_UNROLL
        for (int mt = 0; mt < MT; ++mt) {
            HIPK_UNROLL
            for (int i = 0; i < NT; ++i) s[mt][i][0] = s[mt][i][1] = s[mt][i][2] = s[mt][i][3] = 0.0f;
        }
        HIPK_UNROLL
        for (int kk = 0; kk < DK; ++kk) {
            const unsigned at = kt + (k_at ^ (unsigned)(kk << 5));
            unsigned qk[MT][4];  // !QREGS: this k16 step's query fragments
            if (!QREGS) {
                HIPK_UNROLL
                for (int mt = 0; mt < MT; ++mt)
                    ldmatrix_x4(qk[mt], base + ((q_at + mt * 16 * ROW) ^ (unsigned)(kk << 5)));
            }
            HIPK_UNROLL
            for (int np = 0; np < NT / 2; ++np) {
                unsigned f[4];
                ldmatrix_x4(f, at + np * 16 * ROW);
                HIPK_UNROLL
                for (int mt = 0; mt < MT; ++mt) {
                    const unsigned(&qa)[4] = QREGS ? qf[mt][QREGS ? kk : 0] : qk[mt];
                    mma_16816(s[mt][2 * np], qa, f[0], f[1], (const T*)nullptr);
                    mma_16816(s[mt][2 * np + 1], qa, f[2], f[3], (const T*)nullptr);
                }
            }
        }

        // Scores in the log2 domain; masked ones -inf. Only tiles that cross the causal
        // diagonal, the end of the keys or a mask look at each element.
        const bool partial = a.mask_kind != 0 || k0 + BN > a.skv ||
                             (a.causal && k0 + BN - 1 > q0 + shift);
        // A mask the same for every query (a key-padding mask [B, 1, 1, S]: mq == 0) is read
        // once per key of this thread's columns, not once per score: MT * 2 times fewer
        // loads, each folded into an addend (-inf: masked). Only where the registers are to
        // spare (D = 32; D 64 and 128 use nearly all 255).
        const bool by_key = D <= 32 && a.mask_kind != 0 && a.mq == 0;
        float key_add[NT][2];
        if (by_key) {
            HIPK_UNROLL
            for (int i = 0; i < NT; ++i) {
                HIPK_UNROLL
                for (int j = 0; j < 2; ++j) {
                    const int key = k0 + i * 8 + 2 * t + j;
                    bool attend = key < a.skv;
                    float add = 0.0f;
                    if (attend) add = mask_value<T>(mask, a.mask_kind, key * a.mk, &attend);
                    key_add[i][j] = attend ? add * LOG2E : neg_inf();
                }
            }
        }
        HIPK_UNROLL
        for (int mt = 0; mt < MT; ++mt) {
            HIPK_UNROLL
            for (int i = 0; i < NT; ++i) {
                HIPK_UNROLL
                for (int e = 0; e < 4; ++e) {
                    float x = s[mt][i][e] * scale;
                    if (partial) {
                        const int query = row0 + mt * 16 + (e >> 1) * 8;
                        const int key = k0 + i * 8 + 2 * t + (e & 1);
                        bool attend = query < a.sq && key < a.skv &&
                                      !(a.causal && key > query + shift);
                        if (by_key) {
                            x += key_add[i][e & 1];
                        } else if (attend && a.mask_kind) {
                            const long long at = query * a.mq + key * a.mk;
                            x += mask_value<T>(mask, a.mask_kind, at, &attend) * LOG2E;
                        }
                        if (!attend) x = neg_inf();
                    }
                    s[mt][i][e] = x;
                }
            }
        }
        // Online softmax per row: the row's max over the 4 lanes that share it (xor 1, 2);
        // the output is rescaled only when some row of the warp has a new max.
        float rescale[MT][2];
        bool grown = false;
        HIPK_UNROLL
        for (int mt = 0; mt < MT; ++mt) {
            HIPK_UNROLL
            for (int r = 0; r < 2; ++r) {
                float top_now = top[mt][r];
                HIPK_UNROLL
                for (int i = 0; i < NT; ++i)
                    top_now = fmaxf(top_now, fmaxf(s[mt][i][2 * r], s[mt][i][2 * r + 1]));
                top_now = fmaxf(top_now, __shfl_xor_sync(FULL, top_now, 1));
                top_now = fmaxf(top_now, __shfl_xor_sync(FULL, top_now, 2));
                const float start = top_now == neg_inf() ? 0.0f : top_now;  // no -inf - -inf
                rescale[mt][r] = exp2_fast(top[mt][r] - start);
                grown |= top_now != top[mt][r];
                top[mt][r] = top_now;
                float add = 0.0f;
                HIPK_UNROLL
                for (int i = 0; i < NT; ++i) {
                    s[mt][i][2 * r] = exp2_fast(s[mt][i][2 * r] - start);
                    s[mt][i][2 * r + 1] = exp2_fast(s[mt][i][2 * r + 1] - start);
                    add += s[mt][i][2 * r] + s[mt][i][2 * r + 1];
                }
                // This lane's columns only; the 4 lanes of the row add up at the end.
                sum[mt][r] = sum[mt][r] * rescale[mt][r] + add;
            }
        }
        if (__any_sync(FULL, grown)) {
            HIPK_UNROLL
            for (int mt = 0; mt < MT; ++mt) {
                HIPK_UNROLL
                for (int i = 0; i < DT; ++i) {
                    o[mt][i][0] *= rescale[mt][0];
                    o[mt][i][1] *= rescale[mt][0];
                    o[mt][i][2] *= rescale[mt][1];
                    o[mt][i][3] *= rescale[mt][1];
                }
            }
        }
        // O += P V: P from the S registers (see the header), V through ldmatrix.trans, each
        // V fragment pair serving the warp's MT m16 tiles.
        HIPK_UNROLL
        for (int kk = 0; kk < BN / 16; ++kk) {
            unsigned p[MT][4];
            HIPK_UNROLL
            for (int mt = 0; mt < MT; ++mt) {
                p[mt][0] = pack_pair(s[mt][2 * kk][0], s[mt][2 * kk][1], (const T*)nullptr);
                p[mt][1] = pack_pair(s[mt][2 * kk][2], s[mt][2 * kk][3], (const T*)nullptr);
                p[mt][2] = pack_pair(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1], (const T*)nullptr);
                p[mt][3] = pack_pair(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3], (const T*)nullptr);
            }
            const unsigned at = vt + kk * 16 * ROW;
            HIPK_UNROLL
            for (int dp = 0; dp < DT / 2; ++dp) {
                unsigned f[4];
                ldmatrix_x4_trans(f, at + (v_at ^ (unsigned)(dp << 5)));
                HIPK_UNROLL
                for (int mt = 0; mt < MT; ++mt) {
                    mma_16816(o[mt][2 * dp], p[mt], f[0], f[1], (const T*)nullptr);
                    mma_16816(o[mt][2 * dp + 1], p[mt], f[2], f[3], (const T*)nullptr);
                }
            }
        }
    }
    async_wait_all();  // nothing may be in flight at exit (the last commits are empty)

    // out = O / sum per row; a row that saw no key has sum 0 and writes zeros.
    HIPK_UNROLL
    for (int mt = 0; mt < MT; ++mt) {
        HIPK_UNROLL
        for (int r = 0; r < 2; ++r) {
            float total = sum[mt][r];
            total += __shfl_xor_sync(FULL, total, 1);
            total += __shfl_xor_sync(FULL, total, 2);
            const float inv = total > 0.0f ? 1.0f / total : 0.0f;
            const int query = row0 + mt * 16 + r * 8;
            if (query >= a.sq) continue;
            unsigned* o_row = reinterpret_cast<unsigned*>(out + (long long)query * a.os);
            HIPK_UNROLL
            for (int i = 0; i < DT; ++i) {
                const float lo = o[mt][i][2 * r] * inv, hi = o[mt][i][2 * r + 1] * inv;
                o_row[i * 4 + t] = pack_pair(lo, hi, (const T*)nullptr);
            }
        }
    }
}

// Shared memory of one block in 16-bit elements (see MmaShape).
template <int D> struct MmaShared {
    enum {
        STAGED = 2 * MmaShape<D>::STAGES * MmaShape<D>::BN * D,
        QUERIES = HIPK_MMA_ROWS * D,
        elements = MmaShape<D>::QREGS ? (STAGED > QUERIES ? STAGED : QUERIES) : STAGED + QUERIES
    };
};
#define HIPK_MMA_SHARED(D) (hipk::mma::MmaShared<D>::elements)

}  // namespace mma

#endif  // HIPK_ATTENTION_MMA

}  // namespace hipk
