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
// Launch: one block per row (grid = rows, see rows.h), 1-D blocks of up to 1024 threads, about
// cols / 32 threads for rows kept in registers.
#include "rows.h"

namespace hipk {

template <typename T> struct SoftmaxRow {
    const T* x;
    T* y;
    int cols;
    float scale;
    int last;  // the last key this row sees (cols - 1 without a mask; < 0: none)
    float* scratch;  // __shared__, HIPK_REDUCER_SCRATCH floats

    // The scaled score of element c, or -inf where masked.
    HIPK_DEVICE float score(float value, int c) const { return c <= last ? value * scale : neg_inf(); }

    template <int N, int ITEMS> HIPK_DEVICE void regs() const {
        BlockReducer reduce = {scratch, 0};
        RowTile<T, N, ITEMS> row;
        row.load(x, cols, 0.0f);
        float m = neg_inf();
        HIPK_UNROLL
        for (int k = 0; k < ITEMS; ++k) {
            const int j = row_vector(k);
            HIPK_UNROLL
            for (int i = 0; i < N; ++i) {
                // Slots past the row's end are masked like keys past `last`.
                row.v[k][i] = j * N < cols ? score(row.v[k][i], j * N + i) : neg_inf();
                m = fmaxf(m, row.v[k][i]);
            }
        }
        // With no visible key at all, every score is -inf: exp(-inf - 0) = 0 and the row is 0.
        const float row_max = reduce.max(m);
        const float base = row_max == neg_inf() ? 0.0f : row_max;
        float sum = 0.0f;
        HIPK_UNROLL
        for (int k = 0; k < ITEMS; ++k)
            HIPK_UNROLL
            for (int i = 0; i < N; ++i) {
                row.v[k][i] = expf(row.v[k][i] - base);
                sum += row.v[k][i];
            }
        const float total = reduce.sum(sum);
        const float inverse = total > 0.0f ? 1.0f / total : 0.0f;
        HIPK_UNROLL
        for (int k = 0; k < ITEMS; ++k) {
            if (!row.valid(k, cols)) continue;
            float out[N];
            HIPK_UNROLL
            for (int i = 0; i < N; ++i) out[i] = row.v[k][i] * inverse;
            store_floats<T, N>(y + (long long)row_vector(k) * N, out);
        }
    }

    // Online softmax in one read: each thread keeps a running max and a sum rescaled to it;
    // the block merges them (max, then sums rescaled to the row max); a second read writes.
    template <int N> HIPK_DEVICE void stream() const {
        BlockReducer reduce = {scratch, 0};
        const int vectors = cols / N;
        float m = neg_inf(), sum = 0.0f;
        for (int j = threadIdx.x; j < vectors; j += blockDim.x) {
            float v[N];
            load_floats<T, N>(x + (long long)j * N, v);
            HIPK_UNROLL
            for (int i = 0; i < N; ++i) {
                const float s = score(v[i], j * N + i);
                if (s > m) {
                    sum = sum * expf(m - s) + 1.0f;  // expf(-inf) = 0 for the first score
                    m = s;
                } else if (s != neg_inf()) {
                    sum += expf(s - m);
                }
            }
        }
        const float row_max = reduce.max(m);
        const float base = row_max == neg_inf() ? 0.0f : row_max;  // as in regs()
        const float total = reduce.sum(m == neg_inf() ? 0.0f : sum * expf(m - base));
        const float inverse = total > 0.0f ? 1.0f / total : 0.0f;
        for (int j = threadIdx.x; j < vectors; j += blockDim.x) {
            float v[N];
            load_floats<T, N>(x + (long long)j * N, v);
            HIPK_UNROLL
            for (int i = 0; i < N; ++i) v[i] = expf(score(v[i], j * N + i) - base) * inverse;
            store_floats<T, N>(y + (long long)j * N, v);
        }
    }
};

template <typename T>
HIPK_DEVICE void softmax(const T* x, T* y, int rows, int cols, float scale, int causal_rows) {
    __shared__ float scratch[HIPK_REDUCER_SCRATCH];
    const long long r = block_row();
    if (r >= rows) return;
    const int last = causal_rows > 0 ? (int)(r % causal_rows) + cols - causal_rows : cols - 1;
    const SoftmaxRow<T> op = {x + r * cols, y + r * cols, cols, scale, last, scratch};
    run_row<T>(op, cols, row_vectorizable<T>(cols, x, y, 0, 0));
}

}  // namespace hipk

// --- entry points: one per type (hip-core reads the parameter types from these lines) -------

extern "C" __global__ void softmax_f32(const float* x, float* y, int rows, int cols, float scale,
                                       int causal_rows) {
    hipk::softmax(x, y, rows, cols, scale, causal_rows);
}
extern "C" __global__ void softmax_f16(const hipk::f16* x, hipk::f16* y, int rows, int cols,
                                       float scale, int causal_rows) {
    hipk::softmax(x, y, rows, cols, scale, causal_rows);
}
extern "C" __global__ void softmax_bf16(const hipk::bf16* x, hipk::bf16* y, int rows, int cols,
                                        float scale, int causal_rows) {
    hipk::softmax(x, y, rows, cols, scale, causal_rows);
}
