// The GEMV kernel's 16-row tile (kernels/gemv.hip's gemv_r16_<t>, gemv_norm_r16_<t>,
// gemv_swiglu_r16_<t>): the same products and fusions as gemv.h's tiles (its header says what
// they compute), for up to 16 rows of x, where gemv.h's tiles are bound by their arithmetic
// (16 rows: 16 multiply-adds per weight element, as many as the multiprocessor's f32 units
// take, issue 38) and BLAS's tiles read the weights well below the copy rate.
//
// Work: a tile is 16 output columns (weight rows j0 .. j0 + 15; with PAIRS also the up rows
// n + j0 ..); `slices` consecutive teams of 32 lanes (1, 2, 4 or 8) share a tile, team s of
// them taking steps s, s + slices, ... of its rows, a step being 4 16-byte chunks of each row
// (32 elements of a 16-bit type); a block of 8 teams takes 8 / slices tiles. Grid
// ceil(n / 16 / (8 / slices)). The teams' sums meet in shared memory, and every thread then
// finishes outputs (norm scale, SwiGLU, residual, gemv.h's `finish`) for coalesced stores.
//
// On NVIDIA from sm_80, for 16-bit types, a team is a warp multiplying with m16n8k16 tiles:
// A = 16 weight rows, B = x's rows (two 8-row halves, the second only past 8 rows), K = 16
// elements. The dot products do not care which k goes to which slot as long as A and B agree,
// so lane (g, t) loads one 16-byte chunk per row, chunk t of the step, of weight rows g and
// g + 8 and of x's rows g and g + 8, and its words 2i, 2i + 1 are its a0/a2 (a1/a3: row g + 8)
// and b0/b1 of the step's mma i (i = 0, 1): no shared memory, no shuffles, every weight byte
// loaded once through the read-only path past L1, AHEAD steps of loads in flight before any is
// used. gemv_norm multiplies x by the norm weight two values an instruction, rounded to T for B
// (BLAS after a separate rmsnorm rounds the normalized row instead: the same size of rounding);
// x's squares are counted once a block (`counts_squares`).
//
// Where it stands (H200, bench_gemv, bf16): the 16-row tile halved the kernel's step at 4 rows
// but reads the weights at 0.27-0.84 of the copy rate against cuBLAS's 0.47-1.0, so the op
// takes it only when asked (ops/gemv.py). A warp's load reads 8 rows x 64 bytes; more teams on
// a tile (8: the neighbouring pieces of each row at once) and loads past L1 helped, issuing the
// next steps' loads before the multiplies did not. The next step is staging the tile's rows in
// shared memory with whole-line loads (cp.async) and ldmatrix, as BLAS does.
//
// Elsewhere (AMD, older NVIDIA GPUs, f32, the cpu platform with 32- or 64-lane warps) lane l of
// a team takes column l % 16 and rows 8 (l / 16) .. + 7 over the team's steps with f32
// multiply-adds: slower (x's loads again), but the same grid, sums and results up to rounding.
#pragma once

#include "gemv.h"      // finish, Chunk, the block and team sizes
#include "mma_sync.h"  // mma16816

#define HIPK_GEMV_TILE 16  // output columns a tile takes; also the most rows of x
#ifndef HIPK_GEMV_MMA_AHEAD
#define HIPK_GEMV_MMA_AHEAD 2  // steps of loads in flight before any is used (H200: 2 of 2, 4)
#endif

namespace hipk {
namespace gemv {

// Floats of __shared__ memory a block needs: per team [sums][16 columns][16 rows] partial
// products (sums 2 with PAIRS: the up rows'), then per team x's squares of its 16 rows.
template <bool PAIRS> struct TileScratch {
    enum { teams = HIPK_GEMV_THREADS / HIPK_GEMV_TEAM, sums = PAIRS ? 2 : 1 };
    enum { squares_at = teams * sums * HIPK_GEMV_TILE * HIPK_GEMV_TILE };  // (an offset)
    enum { floats = squares_at + teams * HIPK_GEMV_TILE };
};

// A team's partial sums, shared memory's view: part[team][sum][column][row], squares[team][row].
struct TileSums {
    float* scratch;
    HIPK_DEVICE float& part(int team, int sum, int sums, int column, int row) const {
        return scratch[((team * sums + sum) * HIPK_GEMV_TILE + column) * HIPK_GEMV_TILE + row];
    }
    HIPK_DEVICE float& squares(int squares_at, int team, int row) const {
        return scratch[squares_at + team * HIPK_GEMV_TILE + row];
    }
};

// x's squares (gemv_norm, gemv_swiglu) are the same for every tile of a block: each step's are
// counted by one team only, of tile (step / slices) % tiles (the step's slice is step % slices),
// and the block's teams' counts add up to the whole row.
HIPK_DEVICE bool counts_squares(int step, int slices, int tile, int tiles) {
    return (step / slices) % tiles == tile;
}

#if HIPK_MMA_SYNC

struct Words {
    unsigned int w[4];  // one 16-byte chunk: 8 16-bit values, two a word
};

HIPK_DEVICE Words zero_words() {
    Words z;
    HIPK_UNROLL
    for (int i = 0; i < 4; ++i) z.w[i] = 0u;
    return z;
}

// A weight chunk through the read-only path, kept out of L1 (read once: x, read by every
// team, keeps L1 to itself; H200, 1B head at 4 rows: 0.84 of the copy rate against 0.77
// through L1); zeros when !valid.
HIPK_DEVICE Words weight_words(const void* p, bool valid) {
    if (!valid) return zero_words();
    Words r;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r.w[0]), "=r"(r.w[1]), "=r"(r.w[2]), "=r"(r.w[3])
                 : "l"(p));
    return r;
}

// Two 16-bit values times two, rounded once (as the f32 product rounded to T: the product of
// two 16-bit values is exact in f32).
HIPK_DEVICE unsigned int times_pair(unsigned int a, unsigned int b, const bf16*) {
    unsigned int r;  // (fma with -0: bf16x2 mul needs sm_90)
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(0x80008000u));
    return r;
}
HIPK_DEVICE unsigned int times_pair(unsigned int a, unsigned int b, const f16*) {
    unsigned int r;
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    return r;
}

// The squares of a chunk's 8 values, summed in f32.
HIPK_DEVICE float chunk_squares(const Words& c, const bf16*) {
    float sum = 0.0f;
    HIPK_UNROLL
    for (int i = 0; i < 4; ++i) {
        const float lo = bits_float(c.w[i] << 16), hi = bits_float(c.w[i] & 0xffff0000u);
        sum += lo * lo + hi * hi;
    }
    return sum;
}
HIPK_DEVICE float chunk_squares(const Words& c, const f16*) {
    float sum = 0.0f;
    HIPK_UNROLL
    for (int i = 0; i < 4; ++i) {
        const float lo = half_bits_to_float((unsigned short)(c.w[i] & 0xffffu));
        const float hi = half_bits_to_float((unsigned short)(c.w[i] >> 16));
        sum += lo * lo + hi * hi;
    }
    return sum;
}

// x's chunk at p (zeros when !valid); with NORM its squares go to `squares` when `counted` and
// the chunk is returned times the norm weight's chunk `g`.
template <typename T, bool NORM>
HIPK_DEVICE Words x_words(const T* p, bool valid, const Words& g, bool counted, float& squares) {
    if (!valid) return zero_words();
    Words r;
    *reinterpret_cast<uint4*>(r.w) = *reinterpret_cast<const uint4*>(p);
    if (NORM) {
        if (counted) squares += chunk_squares(r, p);
        HIPK_UNROLL
        for (int i = 0; i < 4; ++i) r.w[i] = times_pair(r.w[i], g.w[i], p);
    }
    return r;
}

// AHEAD steps of a team's weight chunks (rows g and g + 8 of its tile, and of the up rows with
// PAIRS), as loaded: `load` issues every load before any is used.
template <typename T, bool PAIRS> struct StepGroup {
    enum { AHEAD = HIPK_GEMV_MMA_AHEAD, STEP = 32 };  // STEP: elements of a row a step
    Words a[AHEAD][2], u[PAIRS ? AHEAD : 1][2];

    HIPK_DEVICE void load(const T* w_low, long long up_rows, int k, int first, int slices, int t,
                          bool low, bool high) {
        const T* w_high = w_low + 8LL * k;
        HIPK_UNROLL
        for (int i = 0; i < AHEAD; ++i) {
            const int c = (first + i * slices) * STEP;
            const bool in = c + 8 * t < k;
            a[i][0] = weight_words(w_low + c, in && low);
            a[i][1] = weight_words(w_high + c, in && high);
            if (PAIRS) {
                u[PAIRS ? i : 0][0] = weight_words(w_low + up_rows + c, in && low);
                u[PAIRS ? i : 0][1] = weight_words(w_high + up_rows + c, in && high);
            }
        }
    }
};

// Team sums of one tile by tensor-core tiles: dot[h] (and up[h]) are the lane's accumulators
// of x's rows 8h .. 8h + 7, squares[h] x's row 8h + g's squares over the lane's chunks of the
// steps whose squares this team counts (`counts_squares`). (Issuing the next group's loads
// before this one's multiplies measured slower on the H200: more registers, fewer warps.)
template <typename T, bool NORM, bool PAIRS>
HIPK_DEVICE void tile_mma(const T* w, const T* x, const T* norm, int n, int k, int rows,
                          long long xs, int j0, int slice, int slices, int tile, int tiles,
                          int lane, float (&dot)[2][4], float (&up)[2][4], float (&squares)[2]) {
    typedef StepGroup<T, PAIRS> Group;
    constexpr int AHEAD = Group::AHEAD, STEP = Group::STEP;
    const int g = lane / 4, t = lane % 4, steps = (k + STEP - 1) / STEP;
    const bool low = j0 + g < n, high = j0 + g + 8 < n, second = rows > 8;
    const T* w_low = w + (long long)(j0 + g) * k + 8 * t;
    const long long up_rows = (long long)n * k;
    for (int first = slice; first < steps; first += AHEAD * slices) {
        Group group;
        group.load(w_low, up_rows, k, first, slices, t, low, high);
        HIPK_UNROLL
        for (int i = 0; i < AHEAD; ++i) {
            const int step = first + i * slices, c = step * STEP + 8 * t;
            const bool in = c < k, counted = NORM && counts_squares(step, slices, tile, tiles);
            Words gw = zero_words();
            if (NORM && in) {
                *reinterpret_cast<uint4*>(gw.w) = *reinterpret_cast<const uint4*>(norm + c);
            }
            HIPK_UNROLL
            for (int h = 0; h < 2; ++h) {
                if (h == 1 && !second) continue;  // (not break: the loop must unroll)
                const int r = 8 * h + g;
                const Words b = x_words<T, NORM>(x + r * xs + c, in && r < rows, gw, counted,
                                                 squares[h]);
                const Words(&a)[2] = group.a[i];
                HIPK_UNROLL
                for (int m = 0; m < 2; ++m) {
                    mma16816(dot[h], a[0].w[2 * m], a[1].w[2 * m], a[0].w[2 * m + 1],
                             a[1].w[2 * m + 1], b.w[2 * m], b.w[2 * m + 1], x);
                    if (PAIRS) {
                        const Words(&u)[2] = group.u[PAIRS ? i : 0];
                        mma16816(up[h], u[0].w[2 * m], u[1].w[2 * m], u[0].w[2 * m + 1],
                                 u[1].w[2 * m + 1], b.w[2 * m], b.w[2 * m + 1], x);
                    }
                }
            }
        }
    }
}

// The team's tensor-core sums into shared memory (lane (g, t) holds columns g, g + 8 of rows
// 8h + 2t, 8h + 2t + 1; x's row squares are summed over the 4 lanes t first).
template <typename T, bool NORM, bool PAIRS>
HIPK_DEVICE void tile_sums_mma(const T* w, const T* x, const T* norm, int n, int k, int rows,
                               long long xs, int j0, int slice, int slices, int team, int lane,
                               TileSums sums) {
    constexpr int S = TileScratch<PAIRS>::sums, AT = TileScratch<PAIRS>::squares_at;
    float dot[2][4], up[2][4], squares[2] = {0.0f, 0.0f};
    HIPK_UNROLL
    for (int h = 0; h < 2; ++h) {
        HIPK_UNROLL
        for (int e = 0; e < 4; ++e) dot[h][e] = up[h][e] = 0.0f;
    }
    tile_mma<T, NORM, PAIRS>(w, x, norm, n, k, rows, xs, j0, slice, slices, team / slices,
                             HIPK_GEMV_THREADS / HIPK_GEMV_TEAM / slices, lane, dot, up, squares);
    const int g = lane / 4, t = lane % 4;
    HIPK_UNROLL
    for (int h = 0; h < 2; ++h) {
        HIPK_UNROLL
        for (int e = 0; e < 4; ++e) {
            const int column = g + 8 * (e / 2), row = 8 * h + 2 * t + e % 2;
            sums.part(team, 0, S, column, row) = dot[h][e];
            if (PAIRS) sums.part(team, 1, S, column, row) = up[h][e];
        }
        float q = squares[h];
        q += __shfl_xor_sync(0xffffffffu, q, 1);
        q += __shfl_xor_sync(0xffffffffu, q, 2);
        if (t == 0) sums.squares(AT, team, 8 * h + g) = q;
    }
}

#endif  // HIPK_MMA_SYNC

// The portable team sums: lane l takes column l % 16 and x's rows 8 (l / 16) .. + 7 over the
// team's steps (4 chunks of every row a step, as the tensor-core path).
template <typename T, bool NORM, bool PAIRS>
HIPK_DEVICE void tile_sums_portable(const T* w, const T* x, const T* norm, int n, int k,
                                    int rows, long long xs, int j0, int slice, int slices,
                                    int team, int lane, TileSums sums) {
    constexpr int V = Chunk<T>::elements, STEP = 4 * V, HALF = HIPK_GEMV_TILE / 2;
    constexpr int S = TileScratch<PAIRS>::sums, AT = TileScratch<PAIRS>::squares_at;
    const int column = lane % HIPK_GEMV_TILE, r0 = HALF * (lane / HIPK_GEMV_TILE);
    const int j = j0 + column;
    float dot[HALF], up[HALF], squares[HALF];
    for (int r = 0; r < HALF; ++r) dot[r] = up[r] = squares[r] = 0.0f;
    const int tile = team / slices, tiles = HIPK_GEMV_THREADS / HIPK_GEMV_TEAM / slices;
    for (int c = slice * STEP; c < k; c += slices * STEP) {
        const bool counted = counts_squares(c / STEP, slices, tile, tiles);
        for (int q = c; q < c + STEP && q < k; q += V) {
            float wv[V], uv[V], gv[V];
            if (j < n) {
                load_floats<T, V>(w + (long long)j * k + q, wv);
                if (PAIRS) load_floats<T, V>(w + ((long long)n + j) * k + q, uv);
            }
            if (NORM) load_floats<T, V>(norm + q, gv);
            for (int r = 0; r < HALF && r0 + r < rows; ++r) {
                float xv[V];
                load_floats<T, V>(x + (r0 + r) * xs + q, xv);
                for (int e = 0; e < V; ++e) {
                    if (NORM) {
                        if (counted) squares[r] += xv[e] * xv[e];
                        xv[e] *= gv[e];
                    }
                    if (j < n) {
                        dot[r] += wv[e] * xv[e];
                        if (PAIRS) up[r] += uv[e] * xv[e];
                    }
                }
            }
        }
    }
    for (int r = 0; r < HALF; ++r) {
        sums.part(team, 0, S, column, r0 + r) = dot[r];
        if (PAIRS) sums.part(team, 1, S, column, r0 + r) = up[r];
        if (column == 0) sums.squares(AT, team, r0 + r) = squares[r];
    }
}

// A team's sums of its tile: the tensor-core path where it is compiled (16-bit types, sm_80+),
// else the portable one.
template <typename T, bool NORM, bool PAIRS> struct TilePath {
    HIPK_DEVICE static void sums(const T* w, const T* x, const T* norm, int n, int k, int rows,
                                 long long xs, int j0, int slice, int slices, int team, int lane,
                                 TileSums out) {
        tile_sums_portable<T, NORM, PAIRS>(w, x, norm, n, k, rows, xs, j0, slice, slices, team,
                                           lane, out);
    }
};
#if HIPK_MMA_SYNC
#define HIPK_GEMV_MMA_PATH(T)                                                                      \
    template <bool NORM, bool PAIRS> struct TilePath<T, NORM, PAIRS> {                             \
        HIPK_DEVICE static void sums(const T* w, const T* x, const T* norm, int n, int k,          \
                                     int rows, long long xs, int j0, int slice, int slices,        \
                                     int team, int lane, TileSums out) {                           \
            tile_sums_mma<T, NORM, PAIRS>(w, x, norm, n, k, rows, xs, j0, slice, slices, team,     \
                                          lane, out);                                              \
        }                                                                                          \
    };
HIPK_GEMV_MMA_PATH(bf16)
HIPK_GEMV_MMA_PATH(f16)
#undef HIPK_GEMV_MMA_PATH
#endif

// Block `block` of a 16-row product's grid (1-D blocks of HIPK_GEMV_THREADS), its partial sums
// in `scratch` (__shared__, TileScratch<PAIRS>::floats).
template <typename T, bool NORM, bool PAIRS>
HIPK_DEVICE void run_tile(const T* w, const T* x, T* y, const T* residual, const T* norm, int n,
                          int k, int rows, int slices, float eps, long long xs, long long ys,
                          long long rs, int block, float* scratch) {
    constexpr int THREADS = HIPK_GEMV_THREADS, TEAM = HIPK_GEMV_TEAM, TILE = HIPK_GEMV_TILE;
    constexpr int S = TileScratch<PAIRS>::sums, AT = TileScratch<PAIRS>::squares_at;
    const int t = (int)threadIdx.x, lane = t % TEAM, team = t / TEAM;
    const int tiles = THREADS / TEAM / slices, slice = team % slices;
    const int j0 = (block * tiles + team / slices) * TILE;
    // Started early (early_start.h): the lines of the team's first step of each row to L2.
    if (lane % 4 == 0 && slice * 32 < k) {
        const T* first = w + (long long)(j0 + lane / 4) * k + slice * 32;
        HIPK_UNROLL
        for (int half = 0; half < 2; ++half) {
            if (j0 + lane / 4 + 8 * half >= n) continue;
            prefetch_l2(first + 8LL * half * k);
            if (PAIRS) prefetch_l2(first + (8LL * half + n) * k);
        }
    }
    start_after_previous_grid();
    const TileSums sums = {scratch};
    TilePath<T, NORM, PAIRS>::sums(w, x, norm, n, k, rows, xs, j0, slice, slices, team, lane,
                                   sums);
    __syncthreads();
    for (int o = t; o < tiles * TILE * TILE; o += THREADS) {  // consecutive threads: columns
        const int tile = o / (TILE * TILE), row = o / TILE % TILE, column = o % TILE;
        const int j = (block * tiles + tile) * TILE + column;
        if (row >= rows || j >= n) continue;
        float dot = 0.0f, up = 0.0f, squares = 0.0f;
        for (int p = tile * slices; p < (tile + 1) * slices; ++p) {  // slice order
            dot += sums.part(p, 0, S, column, row);
            if (PAIRS) up += sums.part(p, 1, S, column, row);
        }
        if (NORM) {
            for (int p = 0; p < THREADS / TEAM; ++p) squares += sums.squares(AT, p, row);
        }
        y[row * ys + j] = finish<T, NORM, PAIRS>(dot, up, squares, k, eps,
                                                  residual ? residual + row * rs + j : nullptr);
    }
}

}  // namespace gemv
}  // namespace hipk
