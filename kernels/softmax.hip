// Softmax over the last dimension of a [rows, cols] tensor, with a scale and an optional
// causal mask (attention scores).
//
//   softmax_<t>(x, y, rows, cols, scale, causal_rows, x_inner, x_outer, x_step):
//       y[r, c] = exp(s[r, c] - max_c s[r, :]) / sum_c exp(s[r, c] - max),  s = scale * x
//   (x's row r starts at (r / x_inner) * x_outer + (r % x_inner) * x_step, y's at r * cols:
//   x may be a slice of columns, or have permuted leading axes; see rows.h's RowStrides)
//
// causal_rows = 0: no mask. causal_rows = q > 0: the rows are stacked [..., q, cols] score
// matrices of q queries over `cols` keys whose last q keys are the queries themselves (keys
// before them come from a cache), so row r is query i = r % q and sees keys c <= i + cols - q;
// masked entries get probability 0. A row that sees no key at all (q > cols) is all zeros.
// y may be x (in place). f32 accumulation for every type. A row whose scores are all -inf
// (or masked) is all zeros (numpy would give NaN).
// Launch: grid = rows (see rows.h: a block takes one row, or two when they fit in half a block),
// 1-D blocks of up to 1024 threads, about cols / 32 threads for f32 rows kept in registers (32
// floats per thread) and cols / 64 for 16-bit ones (64 elements per thread, held packed). One
// block reduction per row.
#include "rows.h"

namespace hipk {

// (max, sum of exp(score - max)) of a set of scores, merged online: both sums rescaled to the
// larger max. The empty set (and an all-masked one) is (-inf, 0).
struct MaxSum {
    HIPK_DEVICE Floats<2> identity() const {
        Floats<2> s = {{neg_inf(), 0.0f}};
        return s;
    }
    HIPK_DEVICE Floats<2> operator()(const Floats<2>& a, const Floats<2>& b) const {
        const float m = fmaxf(a.v[0], b.v[0]);
        const float base = m == neg_inf() ? 0.0f : m;  // exp(-inf - 0) = 0: no NaN
        Floats<2> s = {{m, a.v[1] * expf(a.v[0] - base) + b.v[1] * expf(b.v[0] - base)}};
        return s;
    }
};

// MaxSum for scores in the log2 domain: (max, sum of 2^(score - max)).
struct MaxSum2 {
    HIPK_DEVICE Floats<2> identity() const {
        Floats<2> s = {{neg_inf(), 0.0f}};
        return s;
    }
    HIPK_DEVICE Floats<2> operator()(const Floats<2>& a, const Floats<2>& b) const {
        const float m = fmaxf(a.v[0], b.v[0]);
        const float base = m == neg_inf() ? 0.0f : m;  // 2^(-inf - 0) = 0: no NaN
        Floats<2> s = {
            {m, a.v[1] * exp2_fast(a.v[0] - base) + b.v[1] * exp2_fast(b.v[0] - base)}};
        return s;
    }
};

template <typename T> struct SoftmaxRow {
    const T* x;
    T* y;
    int stride;           // y's row stride: the row length
    RowStrides xrows;     // where x's rows start (a slice of columns, permuted leading axes)
    float scale;
    int causal_rows;
    float* scratch;  // __shared__, HIPK_REDUCER_SCRATCH floats

    // The last key row r sees (stride - 1 without a mask; < 0: none).
    HIPK_DEVICE int last_key(long long r) const {
        return causal_rows > 0 ? (int)(r % causal_rows) + stride - causal_rows : stride - 1;
    }

    // The scaled score of element c, or -inf where masked.
    HIPK_DEVICE float score(float value, int c, int last) const {
        return c <= last ? value * scale : neg_inf();
    }

    // Each thread's (max, sum) over its registers, merged by the block in one reduction.
    template <typename Tile>
    HIPK_DEVICE void regs(const RowPart& p, long long r, int cols) const {
        if (Tile::keeps) {
            floats<Tile>(p, r, cols);
        } else if (last_key(r) >= cols - 1) {  // no key masked (the usual case): no tests
            packed<Tile, false>(p, r, cols);
        } else {
            packed<Tile, true>(p, r, cols);
        }
    }

    // Float tiles keep exp(score - local max) and rescale it at the end: one exp per element.
    template <typename Tile>
    HIPK_DEVICE void floats(const RowPart& p, long long r, int cols) const {
        const int N = Tile::n, ITEMS = Tile::items;
        BlockReducer reduce = p.reducer(scratch);
        const int last = last_key(r);
        Tile row;
        row.load(p, x + xrows.at(r), cols);
        float m = neg_inf();
        HIPK_UNROLL
        for (int k = 0; k < ITEMS; ++k) {
            if (!row.valid(p, k, cols)) continue;
            const int c = p.vector(k) * N;
            HIPK_UNROLL
            for (int i = 0; i < N; ++i) {
                const float s = score(row.at(k, i), c + i, last);
                if (Tile::keeps) row.keep(k, i, s);
                m = fmaxf(m, s);
            }
        }
        // With no visible key here, every score is -inf: exp(-inf - 0) = 0.
        const float base = m == neg_inf() ? 0.0f : m;
        float sum = 0.0f;
        HIPK_UNROLL
        for (int k = 0; k < ITEMS; ++k) {
            if (!row.valid(p, k, cols)) continue;
            const int c = p.vector(k) * N;
            HIPK_UNROLL
            for (int i = 0; i < N; ++i) {
                const float s = Tile::keeps ? row.at(k, i) : score(row.at(k, i), c + i, last);
                const float e = expf(s - base);
                sum += e;
                row.keep(k, i, e);  // where the tile can
            }
        }
        const Floats<2> mine = {{m, sum}};
        const Floats<2> all = reduce.reduce(mine, MaxSum());
        // A row that sees no key at all: max -inf, sum 0, every output 0.
        const float row_base = all.v[0] == neg_inf() ? 0.0f : all.v[0];
        const float inverse = all.v[1] != 0.0f ? 1.0f / all.v[1] : 0.0f;  // NaN stays NaN
        const float factor = m == neg_inf() ? 0.0f : expf(m - row_base) * inverse;
        T* yr = y + r * stride;
        HIPK_UNROLL
        for (int k = 0; k < ITEMS; ++k) {
            if (!row.valid(p, k, cols)) continue;
            const int c = p.vector(k) * N;
            float out[N];
            HIPK_UNROLL
            for (int i = 0; i < N; ++i)
                out[i] = Tile::keeps
                             ? row.at(k, i) * factor
                             : expf(score(row.at(k, i), c + i, last) - row_base) * inverse;
            store_floats<T, N>(yr + (long long)p.vector(k) * N, out);
        }
    }

    // Packed 16-bit tiles hold twice the elements of float tiles but no room for their exps:
    // scores in the log2 domain, t = x * scale * log2(e), so each exp is one fma and one 2^x;
    // 2^(t - local max) summed, then 2^(t - row max) / sum written (two per element). MASKED:
    // some key of this row is masked.
    template <typename Tile, bool MASKED>
    HIPK_DEVICE void packed(const RowPart& p, long long r, int cols) const {
        const int N = Tile::n, ITEMS = Tile::items;
        BlockReducer reduce = p.reducer(scratch);
        const int last = last_key(r);
        const float k2 = scale * 1.4426950408889634f;  // log2(e)
        Tile row;
        row.load(p, x + xrows.at(r), cols);
        float m[2] = {neg_inf(), neg_inf()};  // even and odd elements: shorter chains
        HIPK_UNROLL
        for (int k = 0; k < ITEMS; ++k) {
            if (!row.valid(p, k, cols)) continue;
            const int c = p.vector(k) * N;
            HIPK_UNROLL
            for (int i = 0; i < N; ++i)
                if (!MASKED || c + i <= last) m[i % 2] = fmaxf(m[i % 2], row.at(k, i) * k2);
        }
        const float mine_max = fmaxf(m[0], m[1]);
        // With no visible key here, every score is -inf: 2^(-inf - 0) = 0.
        const float base = mine_max == neg_inf() ? 0.0f : mine_max;
        float sum[2] = {0.0f, 0.0f};
        HIPK_UNROLL
        for (int k = 0; k < ITEMS; ++k) {
            if (!row.valid(p, k, cols)) continue;
            const int c = p.vector(k) * N;
            HIPK_UNROLL
            for (int i = 0; i < N; ++i)
                if (!MASKED || c + i <= last)
                    sum[i % 2] += exp2_fast(fmaf(row.at(k, i), k2, -base));
        }
        const Floats<2> mine = {{mine_max, sum[0] + sum[1]}};
        const Floats<2> all = reduce.reduce(mine, MaxSum2());
        // A row that sees no key at all: max -inf, sum 0, every output 0.
        const float row_base = all.v[0] == neg_inf() ? 0.0f : all.v[0];
        const float inverse = all.v[1] != 0.0f ? 1.0f / all.v[1] : 0.0f;  // NaN stays NaN
        T* yr = y + r * stride;
        HIPK_UNROLL
        for (int k = 0; k < ITEMS; ++k) {
            if (!row.valid(p, k, cols)) continue;
            const int c = p.vector(k) * N;
            float out[N];
            HIPK_UNROLL
            for (int i = 0; i < N; ++i)
                out[i] = !MASKED || c + i <= last
                             ? exp2_fast(fmaf(row.at(k, i), k2, -row_base)) * inverse
                             : 0.0f;
            store_row<T, N>(yr + (long long)p.vector(k) * N, out);
        }
    }

    // Online softmax in one read: each thread keeps a running max and a sum rescaled to it;
    // the block merges the pairs in one reduction; a second read writes.
    template <int N> HIPK_DEVICE void stream(const RowPart& p, long long r, int cols) const {
        BlockReducer reduce = p.reducer(scratch);
        const int last = last_key(r);
        const T* xr = x + xrows.at(r);
        const int vectors = cols / N;
        float m = neg_inf(), sum = 0.0f;
        for (int j = p.thread; j < vectors; j += p.threads) {
            float v[N];
            load_floats<T, N>(xr + (long long)j * N, v);
            HIPK_UNROLL
            for (int i = 0; i < N; ++i) {
                const float s = score(v[i], j * N + i, last);
                if (s > m) {
                    sum = sum * expf(m - s) + 1.0f;  // expf(-inf) = 0 for the first score
                    m = s;
                } else if (s != neg_inf()) {
                    sum += expf(s - m);
                }
            }
        }
        const Floats<2> mine = {{m, sum}};
        const Floats<2> all = reduce.reduce(mine, MaxSum());
        const float base = all.v[0] == neg_inf() ? 0.0f : all.v[0];  // as in regs()
        const float inverse = all.v[1] != 0.0f ? 1.0f / all.v[1] : 0.0f;  // NaN stays NaN
        T* yr = y + r * stride;
        for (int j = p.thread; j < vectors; j += p.threads) {
            float v[N];
            load_floats<T, N>(xr + (long long)j * N, v);
            HIPK_UNROLL
            for (int i = 0; i < N; ++i) v[i] = expf(score(v[i], j * N + i, last) - base) * inverse;
            store_floats<T, N>(yr + (long long)j * N, v);
        }
    }
};

template <typename T>
HIPK_DEVICE void softmax(const T* x, T* y, int rows, int cols, float scale, int causal_rows,
                         long long x_inner, long long x_outer, long long x_step) {
    __shared__ float scratch[HIPK_REDUCER_SCRATCH];
    const RowStrides xrows = {x_inner, x_outer, x_step};
    const SoftmaxRow<T> op = {x, y, cols, xrows, scale, causal_rows, scratch};
    // 16-bit rows in PackedTile (twice the loads in flight of FloatTile, see packed()).
    const bool vectors = xrows.multiple_of(Lanes16<T>::value);
    run_rows<T, true>(op, rows, cols, vectors && row_vectorizable<T>(cols, x, y, 0, 0));
}


// --- along any axis: softmax, log_softmax, l2 normalization -----------------------------------
//
//   softmax_axis_<t>(x, y, O, R, I, so, sr, si, yo, yr, yi, lanes, vec, mode, scale, eps):
//       x's element (o, r, i) at o * so + r * sr + i * si, y's at o * yo + r * yr + i * yi
//       (y is C-contiguous, but the host may show its rows as i: short rows, one thread
//       each); each (o, i) is normalized along r:
//       mode 0: softmax(scale * x); mode 1: log_softmax(scale * x) (all -inf: -inf);
//       mode 2: x / max(||x||_2, eps) (scale unused).
// Threads as reduce.h's cols layout: `lanes` across i (N = 4 consecutive i per thread with
// vec = 1: si = yi = 1, so, sr, yo, yr and I multiples of 4, x and y 16-byte aligned),
// 256 / lanes down r; grid = O * ceil(I / (lanes * N)), block 256. Two reads of x: the
// statistics (online max and sum, or the sum of squares), merged down the block, then the
// output. The l2 norm's squares overflow f32 from |x| = 2^64 and vanish below 2^-75: a thread
// whose own sum came out inf or tiny reads its elements once more, scaled by a power of two
// (rows.h), and the merge keeps each sum's scale. The normal path pays a max per element, a
// test per thread and a multiply by 1 per output.

// The l2 norm's (s, q): a sum of squares q / s^2, s a power of two (1 unless rescaled).
// Merged at the smaller scale (the larger magnitudes: the other's terms only lose what is
// negligible next to them), unless one sum is empty (0: its scale says nothing); two sums that
// overflow together are scaled by 2^-32 more.
HIPK_DEVICE Floats<2> merge_squares(const Floats<2>& a, const Floats<2>& b) {
    if (a.v[0] == b.v[0]) {  // the usual case: both unscaled
        const Floats<2> m = {{a.v[0], a.v[1] + b.v[1]}};
        if (m.v[1] <= HIPK_FLOAT_MAX) return m;
    }
    if (a.v[1] == 0.0f) return b;
    if (b.v[1] == 0.0f) return a;
    const float s = fminf(a.v[0], b.v[0]), ra = s / a.v[0], rb = s / b.v[0];  // exact: 2^-k
    const float qa = a.v[1] * ra * ra, qb = b.v[1] * rb * rb;
    Floats<2> m = {{s, qa + qb}};
    if (!(m.v[1] <= HIPK_FLOAT_MAX) && qa <= HIPK_FLOAT_MAX && qb <= HIPK_FLOAT_MAX) {
        m.v[0] = s * 2.32830644e-10f;  // 2^-32 (an inf or NaN term: no scale helps)
        m.v[1] = qa * 5.42101086e-20f + qb * 5.42101086e-20f;  // 2^-64
    }
    return m;
}

// MaxSum, or merge_squares for the l2 norm.
struct AxisStats {
    int l2;
    HIPK_DEVICE Floats<2> operator()(const Floats<2>& a, const Floats<2>& b) const {
        return l2 ? merge_squares(a, b) : MaxSum()(a, b);
    }
};

// N floats from x + at: one vector load, or one element (N = 1).
template <typename T, int N> HIPK_DEVICE void load_at(const T* x, long long at, float (&v)[N]) {
    if (N > 1) {
        load_floats<T, N>(x + at, v);
    } else {
        v[0] = to_float(x[at]);
    }
}

template <typename T, int N>
HIPK_DEVICE void along_axis(const T* x, T* y, long long O, long long R, long long I, long long so,
                            long long sr, long long si, long long yo, long long yr,
                            long long yi, int lanes, int mode, float scale, float eps) {
    __shared__ Floats<2> slots[256];
    const int t = (int)threadIdx.x, across = t % lanes, down = t / lanes;
    const int height = (int)blockDim.x / lanes;
    const long long tiles = (I + (long long)lanes * N - 1) / ((long long)lanes * N);
    const long long o = blockIdx.x / tiles;
    const long long i0 = ((long long)(blockIdx.x % tiles) * lanes + across) * N;
    const bool mine = o < O && i0 < I;
    const AxisStats merge = {mode == 2};
    const long long base = o * so + i0 * si;
    Floats<2> stats[N];
    float peak[N];  // l2: the largest |x| of the thread's elements
    HIPK_UNROLL
    for (int k = 0; k < N; ++k) {  // the identities: (-inf, 0) for MaxSum, (1, 0) for l2
        stats[k].v[0] = merge.l2 ? 1.0f : neg_inf();
        stats[k].v[1] = 0.0f;
        peak[k] = 0.0f;
    }
    for (long long r = down; mine && r < R; r += height) {
        float v[N];
        load_at<T, N>(x, base + r * sr, v);
        HIPK_UNROLL
        for (int k = 0; k < N; ++k) {
            if (merge.l2) {
                stats[k].v[1] += v[k] * v[k];
                peak[k] = fmaxf(peak[k], fabsf(v[k]));
                continue;
            }
            const float s = v[k] * scale;
            if (s > stats[k].v[0]) {  // online: the sum rescaled to the new max
                stats[k].v[1] = stats[k].v[1] * expf(stats[k].v[0] - s) + 1.0f;
                stats[k].v[0] = s;
            } else if (s != neg_inf()) {
                stats[k].v[1] += expf(s - stats[k].v[0]);
            }
        }
    }
    if (merge.l2) {  // a thread's squares that overflowed or vanished: again, scaled (rare)
        float rescale[N];
        bool again = false;
        HIPK_UNROLL
        for (int k = 0; k < N; ++k) {
            const float q = stats[k].v[1];
            const bool lost = (q > HIPK_FLOAT_MAX || q < HIPK_TINY_SQUARES) && peak[k] > 0.0f &&
                              peak[k] <= HIPK_FLOAT_MAX;
            rescale[k] = lost ? power_of_two_scale(peak[k]) : 0.0f;  // 0: keep the sum
            again = again || lost;
        }
        if (again) {
            float q[N] = {};
            for (long long r = down; mine && r < R; r += height) {
                float v[N];
                load_at<T, N>(x, base + r * sr, v);
                HIPK_UNROLL
                for (int k = 0; k < N; ++k) q[k] += (v[k] * rescale[k]) * (v[k] * rescale[k]);
            }
            HIPK_UNROLL
            for (int k = 0; k < N; ++k)
                if (rescale[k] != 0.0f) {
                    stats[k].v[0] = rescale[k];
                    stats[k].v[1] = q[k];
                }
        }
    }
    HIPK_UNROLL
    for (int k = 0; k < N; ++k) {  // merge down the block, one element of the vectors at a time
        slots[t] = stats[k];
        for (int offset = height / 2; offset > 0; offset /= 2) {
            __syncthreads();
            if (down < offset) slots[t] = merge(slots[t], slots[t + offset * lanes]);
        }
        __syncthreads();
        stats[k] = slots[across];
        __syncthreads();
    }
    float base_k[N], factor[N], pre[N];
    HIPK_UNROLL
    for (int k = 0; k < N; ++k) {
        const float m = stats[k].v[0], sum = stats[k].v[1];
        base_k[k] = m == neg_inf() ? 0.0f : m;
        // (sum != 0 and root < eps * m rather than > and fmaxf: a NaN sum must stay NaN)
        const float root = sqrtf(sum);  // l2: the norm of x * m
        if (mode == 0) factor[k] = sum != 0.0f ? 1.0f / sum : 0.0f;
        if (mode == 1) factor[k] = sum != 0.0f ? base_k[k] + logf(sum) : neg_inf();  // log-sum-exp
        // l2: x / max(root / m, eps), as (x * m) / root (no overflow, no subnormal factor), or
        // x / eps (an eps * m past f32 is past the norm too).
        pre[k] = mode == 2 && !(root < eps * m) ? m : 1.0f;
        if (mode == 2) factor[k] = root < eps * m ? 1.0f / eps : 1.0f / root;
    }
    for (long long r = down; mine && r < R; r += height) {
        float v[N];
        load_at<T, N>(x, base + r * sr, v);
        HIPK_UNROLL
        for (int k = 0; k < N; ++k) {
            if (mode == 0) v[k] = expf(v[k] * scale - base_k[k]) * factor[k];
            else if (mode == 1)
                v[k] = factor[k] == neg_inf() ? neg_inf() : v[k] * scale - factor[k];
            else v[k] = v[k] * pre[k] * factor[k];
        }
        T* at = y + o * yo + r * yr + i0 * yi;
        if (N > 1) {
            store_floats<T, N>(at, v);
        } else {
            *at = from_float<T>(v[0]);
        }
    }
}

template <typename T>
HIPK_DEVICE void softmax_axis(const T* x, T* y, long long O, long long R, long long I,
                              long long so, long long sr, long long si, long long yo,
                              long long yr, long long yi, int lanes, int vec, int mode,
                              float scale, float eps) {
    if (vec)
        along_axis<T, 4>(x, y, O, R, I, so, sr, si, yo, yr, yi, lanes, mode, scale, eps);
    else
        along_axis<T, 1>(x, y, O, R, I, so, sr, si, yo, yr, yi, lanes, mode, scale, eps);
}

}  // namespace hipk

// --- entry points: one per type (hip-core reads the parameter types from these lines) -------
// __launch_bounds__(1024): blocks may have up to 1024 threads, so nvcc/nvrtc keep every kernel
// within 64 registers (without it they took up to 72 on sm_90: fewer resident blocks).

extern "C" __global__ void __launch_bounds__(1024) softmax_f32(
    const float* x, float* y, int rows, int cols, float scale, int causal_rows,
    long long x_inner, long long x_outer, long long x_step) {
    hipk::softmax(x, y, rows, cols, scale, causal_rows, x_inner, x_outer, x_step);
}
extern "C" __global__ void __launch_bounds__(1024) softmax_f16(
    const hipk::f16* x, hipk::f16* y, int rows, int cols, float scale, int causal_rows,
    long long x_inner, long long x_outer, long long x_step) {
    hipk::softmax(x, y, rows, cols, scale, causal_rows, x_inner, x_outer, x_step);
}
extern "C" __global__ void __launch_bounds__(1024) softmax_bf16(
    const hipk::bf16* x, hipk::bf16* y, int rows, int cols, float scale, int causal_rows,
    long long x_inner, long long x_outer, long long x_step) {
    hipk::softmax(x, y, rows, cols, scale, causal_rows, x_inner, x_outer, x_step);
}

// (16-bit floats and f32, as softmax_<t>; parameters as above)
extern "C" __global__ __launch_bounds__(256) void softmax_axis_f32(
    const float* x, float* y, long long O, long long R, long long I, long long so, long long sr,
    long long si, long long yo, long long yr, long long yi, int lanes, int vec, int mode,
    float scale, float eps) {
    hipk::softmax_axis(x, y, O, R, I, so, sr, si, yo, yr, yi, lanes, vec, mode, scale, eps);
}
extern "C" __global__ __launch_bounds__(256) void softmax_axis_f16(
    const hipk::f16* x, hipk::f16* y, long long O, long long R, long long I, long long so,
    long long sr, long long si, long long yo, long long yr, long long yi, int lanes, int vec,
    int mode, float scale, float eps) {
    hipk::softmax_axis(x, y, O, R, I, so, sr, si, yo, yr, yi, lanes, vec, mode, scale, eps);
}
extern "C" __global__ __launch_bounds__(256) void softmax_axis_bf16(
    const hipk::bf16* x, hipk::bf16* y, long long O, long long R, long long I, long long so,
    long long sr, long long si, long long yo, long long yr, long long yi, int lanes, int vec,
    int mode, float scale, float eps) {
    hipk::softmax_axis(x, y, O, R, I, so, sr, si, yo, yr, yi, lanes, vec, mode, scale, eps);
}
