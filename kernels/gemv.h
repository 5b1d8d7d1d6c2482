// The GEMV kernel's device code (kernels/gemv.hip's entry points, and gemv_chain.hip's):
// `run` is one block's share of one product, block `block` of its grid.
//
// Matrix-vector products over dense f32 / f16 / bf16 weights for a decode step's few rows of x,
// with what a transformer layer does around them fused in: y[r, j] = sum_k x[r, k] * W[j, k].
//
//   gemv_r<R>_<t>, gemv_norm_r<R>_<t>, gemv_swiglu_r<R>_<t>(const T* w, const T* x, T* y,
//       const T* residual, const T* norm, int n, int k, int rows, int slices, float eps,
//       long long xs, long long ys, long long rs)
//
// rows <= R rows of x (R = 1, 2, 4 or 8, registers; 16: gemv_mma.h): row r at x + r * xs; y's
// at y + r * ys.
// w: [n, k] row-major ([2 n, k] for gemv_swiglu); w, x and every row 16-byte aligned (k a
// multiple of 16 / sizeof(T)). The fusions, an entry point each (each its own register budget):
// - gemv_norm (norm [k]): x's rows are RMS-normalized first, as rmsnorm(x, norm, eps) would,
//   without the normalized rows ever being written: y[r, j] = rsqrt(mean_k x[r, k]^2 + eps) *
//   sum_k W[j, k] * (x[r, k] * norm[k]). The sum of squares comes from the x elements each
//   team loads anyway, so the norm costs no memory traffic (an rmsnorm launch of its own read
//   and wrote the row: 6.3 us of a 2048-wide row on the H200, issue 38).
// - gemv_swiglu (norm too): SwiGLU of a stacked gate/up weight: y[r, j] = silu(g) * u, g from
//   row j and u from row n + j of w (a team reads both: two rows of loads in flight).
// - residual (any entry point; null: none): y[r, j] = residual[r * rs + j] + the product (a
//   skip connection; residual may be y itself: each element is read and written by the one
//   thread that owns it).
// Everything is accumulated in f32 and rounded once to T; unfused, the intermediates (the
// normalized row, g and u) are rounded to T on the way, so results differ by T's rounding
// (gemv_mma.h's tensor-core path also rounds x times the norm weight to T).
//
// Work: a block of 256 threads is 8 teams of 32 lanes; `slices` consecutive teams (1, 2, 4 or
// 8) share C consecutive output columns (weight rows, or gate/up pairs; C = min(R, 4),
// `Columns`), so a block takes 8 / slices groups of them: slices > 1 splits long rows over
// more warps where the columns alone would not fill the device (H200, one slice: a 1B Llama's
// output and down products, [2048, 2048] and [2048, 8192], took 12 us a launch on average).
// Lane l of slice s reads each of its rows' 16-byte chunks c = 32 s + l + 32 slices i, AHEAD
// chunks issued before any is used, and multiplies them by the matching 16 bytes of every row
// of x (hot in the cache: every team reads them). The
// lanes' sums meet by shuffles within the team on a GPU (32 lanes of a warp, or half a 64-lane
// wavefront: the xor offsets stay below 32), then the slices' through shared memory; through
// shared memory alone elsewhere. Grid ceil(n / (8 / slices · C)).
#pragma once

#include "common.h"
#include "dtypes.h"
#include "early_start.h"

#define HIPK_GEMV_THREADS 256  // threads per block (the host's launch)
#define HIPK_GEMV_TEAM 32      // lanes per output column
#ifndef HIPK_GEMV_AHEAD
#define HIPK_GEMV_AHEAD 1  // chunks a lane loads before using them (H200: 1 of 1-8, bench_gemv)
#endif

namespace hipk {
namespace gemv {

template <typename T> struct Chunk {
    enum { elements = Lanes16<T>::value };
};

// p[0..V) of a weight row as floats: 16 bytes through the read-only data path on NVIDIA (the
// weights are read once; x, which every team reads, keeps the L1 to itself).
template <typename T, int V> HIPK_DEVICE void load_weights(const T* p, float (&out)[V]) {
#if defined(__CUDA_ARCH__)
    const uint4 bits = __ldg(reinterpret_cast<const uint4*>(p));
    Vec<T, V> packed;
    *reinterpret_cast<uint4*>(&packed) = bits;
    HIPK_UNROLL
    for (int i = 0; i < V; ++i) out[i] = to_float(packed.v[i]);
#else
    load_floats<T, V>(p, out);
#endif
}

// The sum over a team's 32 lanes, in every lane of it (a GPU); elsewhere each thread its own.
HIPK_DEVICE float team_sum(float v) {
#if defined(__CUDA_ARCH__)
    HIPK_UNROLL
    for (int offset = HIPK_GEMV_TEAM / 2; offset > 0; offset /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, offset);
#elif HIPK_GPU
    HIPK_UNROLL
    for (int offset = HIPK_GEMV_TEAM / 2; offset > 0; offset /= 2) v += __shfl_xor(v, offset);
#endif
    return v;
}

HIPK_DEVICE float silu(float g) { return g / (1.0f + expf(-g)); }  // (as binary.hip's swiglu)

// Output columns a team takes: with more rows of x, each x element a lane loads (and converts)
// serves several weight rows, so x's loads stay below the weights' (H200: 8 rows of one column
// a team ran at 0.16-0.19 of the copy rate, bound by x's loads, issue 38).
template <int R> struct Columns {
    enum { value = R >= 4 ? 4 : R };
};

// A lane's sums: per column the product with each row of x (and the up row's: swiglu), and x's
// squares (norm; the same for every column).
template <int R, int C> struct Sums {
    float dot[C][R], up[C][R], squares[R];
};

template <typename T, int R, int C, bool NORM, bool PAIRS>
HIPK_DEVICE void accumulate(const T* w, int j0, int n, const T* x, const T* norm, int k, int rows,
                            long long xs, int first_chunk, int step, Sums<R, C>& s) {
    constexpr int V = Chunk<T>::elements, AHEAD = HIPK_GEMV_AHEAD;
    const int chunks = k / V;
    for (int first = first_chunk; first < chunks; first += AHEAD * step) {
        float wv[AHEAD][C][V], uv[PAIRS ? AHEAD : 1][C][V];
        HIPK_UNROLL
        for (int a = 0; a < AHEAD; ++a) {  // every weight load issued before any is used
            const int c = first + a * step;
            HIPK_UNROLL
            for (int col = 0; col < C; ++col) {
                if (c < chunks && j0 + col < n) {
                    const T* row = w + (long long)(j0 + col) * k + (long long)c * V;
                    load_weights<T, V>(row, wv[a][col]);
                    if (PAIRS) load_weights<T, V>(row + (long long)n * k, uv[PAIRS ? a : 0][col]);
                } else {
                    HIPK_UNROLL
                    for (int e = 0; e < V; ++e) wv[a][col][e] = uv[PAIRS ? a : 0][col][e] = 0.0f;
                }
            }
        }
        HIPK_UNROLL
        for (int a = 0; a < AHEAD; ++a) {
            const int c = first + a * step;
            float g[V];
            if (NORM && c < chunks) load_floats<T, V>(norm + (long long)c * V, g);
            HIPK_UNROLL
            for (int r = 0; r < R; ++r) {
                if (r < rows && c < chunks) {  // (no break: the loops must unroll)
                    float xv[V];
                    load_floats<T, V>(x + r * xs + (long long)c * V, xv);
                    HIPK_UNROLL
                    for (int e = 0; e < V; ++e) {
                        if (NORM) {
                            s.squares[r] += xv[e] * xv[e];
                            xv[e] *= g[e];
                        }
                        HIPK_UNROLL
                        for (int col = 0; col < C; ++col) {
                            s.dot[col][r] += wv[a][col][e] * xv[e];
                            if (PAIRS) s.up[col][r] += uv[PAIRS ? a : 0][col][e] * xv[e];
                        }
                    }
                }
            }
        }
    }
}

// Output (r, j) from the team's summed values.
template <typename T, bool NORM, bool PAIRS>
HIPK_DEVICE T finish(float dot, float up, float squares, int k, float eps, const T* residual) {
    if (NORM) {
        const float scale = 1.0f / sqrtf(squares / (float)k + eps);  // (as norms.hip)
        dot *= scale;
        up *= scale;
    }
    float v = PAIRS ? silu(dot) * up : dot;
    if (residual) v += to_float(*residual);
    return from_float<T>(v);
}

// Floats of __shared__ memory `run` needs for the partial sums of a block (the caller's).
template <int R> struct Scratch {
#if HIPK_GPU
    enum { floats = HIPK_GEMV_THREADS / HIPK_GEMV_TEAM * Columns<R>::value * R * 3 };
#else
    enum { floats = 3 * R * HIPK_GEMV_THREADS };
#endif
};

// Block `block` of a product's grid (1-D blocks of HIPK_GEMV_THREADS), its partial sums in
// `scratch` (__shared__, Scratch<R>::floats).
template <typename T, int R, bool NORM, bool PAIRS>
HIPK_DEVICE void run(const T* w, const T* x, T* y, const T* residual, const T* norm, int n, int k,
                     int rows, int slices, float eps, long long xs, long long ys, long long rs,
                     int block, float* scratch) {
    constexpr int THREADS = HIPK_GEMV_THREADS, TEAM = HIPK_GEMV_TEAM, TEAMS = THREADS / TEAM;
    constexpr int C = Columns<R>::value;
    const int t = (int)threadIdx.x, lane = t % TEAM, team = t / TEAM;
    const int groups = TEAMS / slices, group = team / slices, slice = team % slices;
    const int j0 = (block * groups + group) * C;  // the group's first column
    // Started early (early_start.h): the weights do not depend on the kernel ahead, so the
    // lines of the team's first chunks go to L2 while it finishes (H200: a layer's four
    // products 603 -> 560 us a token in a probe, against 587 for the wait alone).
    if (j0 < n && lane % (128 / 16) == 0) {
        const int c = slice * TEAM + lane;
        HIPK_UNROLL
        for (int col = 0; col < C; ++col) {
            if (c < k / Chunk<T>::elements && j0 + col < n) {
                const T* row = w + (long long)(j0 + col) * k + (long long)c * Chunk<T>::elements;
                prefetch_l2(row);
                if (PAIRS) prefetch_l2(row + (long long)n * k);
            }
        }
    }
    start_after_previous_grid();
    Sums<R, C> s;
    HIPK_UNROLL
    for (int r = 0; r < R; ++r) {
        s.squares[r] = 0.0f;
        HIPK_UNROLL
        for (int col = 0; col < C; ++col) s.dot[col][r] = s.up[col][r] = 0.0f;
    }
    if (j0 < n) {
        accumulate<T, R, C, NORM, PAIRS>(w, j0, n, x, norm, k, rows, xs, slice * TEAM + lane,
                                         TEAM * slices, s);
    }
#if HIPK_GPU
    HIPK_UNROLL
    for (int r = 0; r < R; ++r) {
        if (NORM) s.squares[r] = team_sum(s.squares[r]);
        HIPK_UNROLL
        for (int col = 0; col < C; ++col) {
            s.dot[col][r] = team_sum(s.dot[col][r]);
            if (PAIRS) s.up[col][r] = team_sum(s.up[col][r]);
        }
    }
    if (slices > 1) {  // (the same for the whole block: every thread reaches the barrier)
        // The slices' team sums meet in shared memory; the group's first team adds them in
        // slice order.
        float(*part)[C][R][3] = reinterpret_cast<float(*)[C][R][3]>(scratch);  // [TEAMS]
        if (lane == 0) {
            HIPK_UNROLL
            for (int col = 0; col < C; ++col) {
                HIPK_UNROLL
                for (int r = 0; r < R; ++r) {
                    part[team][col][r][0] = s.dot[col][r];
                    part[team][col][r][1] = s.up[col][r];
                    part[team][col][r][2] = s.squares[r];
                }
            }
        }
        __syncthreads();
        if (slice != 0) return;
        HIPK_UNROLL
        for (int col = 0; col < C; ++col) {
            HIPK_UNROLL
            for (int r = 0; r < R; ++r) {
                float sum[3] = {0.0f, 0.0f, 0.0f};
                for (int p = 0; p < slices; ++p) {
                    HIPK_UNROLL
                    for (int q = 0; q < 3; ++q) sum[q] += part[team + p][col][r][q];
                }
                s.dot[col][r] = sum[0];
                s.up[col][r] = sum[1];
                s.squares[r] = sum[2];
            }
        }
    }
    HIPK_UNROLL
    for (int col = 0; col < C; ++col) {
        HIPK_UNROLL
        for (int r = 0; r < R; ++r) {  // lane col * R + r writes (r, j0 + col)
            const int j = j0 + col;
            if (r < rows && j < n && lane == (col * R + r) % TEAM) {
                y[r * ys + j] = finish<T, NORM, PAIRS>(s.dot[col][r], s.up[col][r],
                                                       s.squares[r], k, eps,
                                                       residual ? residual + r * rs + j : nullptr);
            }
        }
    }
#else
    // Each thread's own sums meet in shared memory, a column at a time; one thread per output
    // adds its group's (slices · TEAM threads) in order.
    float(*part)[R][THREADS] = reinterpret_cast<float(*)[R][THREADS]>(scratch);  // [3]
    for (int col = 0; col < C; ++col) {
        HIPK_UNROLL
        for (int r = 0; r < R; ++r) {
            part[0][r][t] = s.dot[col][r];
            part[1][r][t] = s.up[col][r];
            part[2][r][t] = s.squares[r];
        }
        __syncthreads();
        for (int o = t; o < groups * R; o += THREADS) {
            const int g = o % groups, r = o / groups;
            const int j = (block * groups + g) * C + col;
            if (r < rows && j < n) {
                float sum[3] = {0.0f, 0.0f, 0.0f};
                for (int l = 0; l < slices * TEAM; ++l) {
                    HIPK_UNROLL
                    for (int q = 0; q < 3; ++q) sum[q] += part[q][r][g * slices * TEAM + l];
                }
                y[r * ys + j] = finish<T, NORM, PAIRS>(sum[0], sum[1], sum[2], k, eps,
                                                       residual ? residual + r * rs + j : nullptr);
            }
        }
        __syncthreads();
    }
#endif
}

}  // namespace gemv
}  // namespace hipk

