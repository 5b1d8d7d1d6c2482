// Softmax over the last dimension of a [rows, cols] tensor, with a scale and an optional
// causal mask (attention scores).
//
//   softmax_<t>(x, y, rows, cols, scale, causal_rows):
//       y[r, c] = exp(s[r, c] - max_c s[r, :]) / sum_c exp(s[r, c] - max),  s = scale * x
//
// causal_rows = 0: no mask. causal_rows = q > 0: the rows are stacked [..., q, cols] score
// matrices of q queries over `cols` keys whose last q keys are the queries themselves (keys
// before them come from a cache), so row r is query i = r % q and sees keys c <= i + cols - q;
// masked entries get probability 0. A row that sees no key at all (q > cols) is all zeros.
// y may be x (in place). f32 accumulation for every type.
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
    int stride;
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
        row.load(p, x + r * stride, cols);
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
        const float inverse = all.v[1] > 0.0f ? 1.0f / all.v[1] : 0.0f;
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
        row.load(p, x + r * stride, cols);
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
        const float inverse = all.v[1] > 0.0f ? 1.0f / all.v[1] : 0.0f;
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
        const T* xr = x + r * stride;
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
        const float inverse = all.v[1] > 0.0f ? 1.0f / all.v[1] : 0.0f;
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
HIPK_DEVICE void softmax(const T* x, T* y, int rows, int cols, float scale, int causal_rows) {
    __shared__ float scratch[HIPK_REDUCER_SCRATCH];
    const SoftmaxRow<T> op = {x, y, cols, scale, causal_rows, scratch};
    // 16-bit rows in PackedTile (twice the loads in flight of FloatTile, see packed()).
    run_rows<T, true>(op, rows, cols, row_vectorizable<T>(cols, x, y, 0, 0));
}

}  // namespace hipk

// --- entry points: one per type (hip-core reads the parameter types from these lines) -------
// __launch_bounds__(1024): blocks may have up to 1024 threads, so nvcc/nvrtc keep every kernel
// within 64 registers (without it they took up to 72 on sm_90: fewer resident blocks).

extern "C" __global__ void __launch_bounds__(1024) softmax_f32(
    const float* x, float* y, int rows, int cols, float scale, int causal_rows) {
    hipk::softmax(x, y, rows, cols, scale, causal_rows);
}
extern "C" __global__ void __launch_bounds__(1024) softmax_f16(
    const hipk::f16* x, hipk::f16* y, int rows, int cols, float scale, int causal_rows) {
    hipk::softmax(x, y, rows, cols, scale, causal_rows);
}
extern "C" __global__ void __launch_bounds__(1024) softmax_bf16(
    const hipk::bf16* x, hipk::bf16* y, int rows, int cols, float scale, int causal_rows) {
    hipk::softmax(x, y, rows, cols, scale, causal_rows);
}
