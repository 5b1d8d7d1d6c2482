// Layer normalization and RMS normalization over the last dimension of a [rows, cols] tensor.
//
//   layernorm_<t>(x, weight, bias, y, rows, cols, eps):
//       y = (x - mean) / sqrt(var + eps) * weight + bias     (biased variance, as PyTorch)
//   rmsnorm_<t>(x, weight, y, rows, cols, eps):
//       y = x / sqrt(mean(x^2) + eps) * weight
//
// weight and bias have `cols` elements of the same type; either may be null (1 and 0). y may be
// x (in place). Statistics are accumulated in f32 for every type.
// Launch: one block per row (grid = rows, see rows.h), 1-D blocks of up to 1024 threads; about
// cols / 32 threads (a multiple of the warp size) keeps the row in registers with 8 x 16-byte
// loads in flight per thread.
#include "rows.h"

namespace hipk {

// y[j*N + i] = (v[i] - shift) * scale * weight + bias: the affine tail of both norms.
template <typename T, int N>
HIPK_DEVICE void write_normalized(T* y, const T* weight, const T* bias, int j, const float (&v)[N],
                                  float shift, float scale) {
    float w[N], b[N], out[N];
    load_floats_or<T, N>(weight ? weight + (long long)j * N : 0, 1.0f, w);
    load_floats_or<T, N>(bias ? bias + (long long)j * N : 0, 0.0f, b);
    HIPK_UNROLL
    for (int i = 0; i < N; ++i) out[i] = (v[i] - shift) * scale * w[i] + b[i];
    store_floats<T, N>(y + (long long)j * N, out);
}

// One row of layernorm (x, y point at the row; weight and bias at the whole vectors).
template <typename T> struct LayerNormRow {
    const T* x;
    const T* weight;
    const T* bias;
    T* y;
    int cols;
    float eps;
    float* scratch;  // __shared__, HIPK_REDUCER_SCRATCH floats

    // Mean, then the variance of the centred registers: exact two-pass statistics, one read.
    template <int N, int ITEMS> HIPK_DEVICE void regs() const {
        BlockReducer reduce = {scratch, 0};
        RowTile<T, N, ITEMS> row;
        row.load(x, cols, 0.0f);
        float sum = 0.0f;
        HIPK_UNROLL
        for (int k = 0; k < ITEMS; ++k)
            HIPK_UNROLL
            for (int i = 0; i < N; ++i) sum += row.v[k][i];
        const float mean = reduce.sum(sum) / (float)cols;
        float squares = 0.0f;
        HIPK_UNROLL
        for (int k = 0; k < ITEMS; ++k) {
            if (!row.valid(k, cols)) continue;  // padding slots hold 0, not the mean
            HIPK_UNROLL
            for (int i = 0; i < N; ++i) {
                const float d = row.v[k][i] - mean;
                squares += d * d;
            }
        }
        const float rstd = 1.0f / sqrtf(reduce.sum(squares) / (float)cols + eps);
        HIPK_UNROLL
        for (int k = 0; k < ITEMS; ++k)
            if (row.valid(k, cols))
                write_normalized<T, N>(y, weight, bias, row_vector(k), row.v[k], mean, rstd);
    }

    // Welford per thread during the first read, Chan's merge across the block (two block sums
    // of well-conditioned terms, unlike sum(x^2) - n * mean^2), a second read to normalize.
    template <int N> HIPK_DEVICE void stream() const {
        BlockReducer reduce = {scratch, 0};
        const int vectors = cols / N;
        float count = 0.0f, mean = 0.0f, m2 = 0.0f;
        for (int j = threadIdx.x; j < vectors; j += blockDim.x) {
            float v[N];
            load_floats<T, N>(x + (long long)j * N, v);
            HIPK_UNROLL
            for (int i = 0; i < N; ++i) {
                count += 1.0f;
                const float d = v[i] - mean;
                mean += d / count;
                m2 += d * (v[i] - mean);
            }
        }
        const float row_mean = reduce.sum(count * mean) / (float)cols;
        const float d = mean - row_mean;
        const float var = reduce.sum(m2 + count * d * d) / (float)cols;
        const float rstd = 1.0f / sqrtf(var + eps);
        for (int j = threadIdx.x; j < vectors; j += blockDim.x) {
            float v[N];
            load_floats<T, N>(x + (long long)j * N, v);
            write_normalized<T, N>(y, weight, bias, j, v, row_mean, rstd);
        }
    }
};

template <typename T>
HIPK_DEVICE void layernorm(const T* x, const T* weight, const T* bias, T* y, int rows, int cols,
                           float eps) {
    __shared__ float scratch[HIPK_REDUCER_SCRATCH];
    const long long r = block_row();
    if (r >= rows) return;  // the whole block: no __syncthreads is skipped by some threads only
    const LayerNormRow<T> op = {x + r * cols, weight, bias, y + r * cols, cols, eps, scratch};
    run_row<T>(op, cols, row_vectorizable<T>(cols, x, weight, bias, y));
}

// One row of rmsnorm.
template <typename T> struct RmsNormRow {
    const T* x;
    const T* weight;
    T* y;
    int cols;
    float eps;
    float* scratch;  // __shared__, HIPK_REDUCER_SCRATCH floats

    template <int N, int ITEMS> HIPK_DEVICE void regs() const {
        BlockReducer reduce = {scratch, 0};
        RowTile<T, N, ITEMS> row;
        row.load(x, cols, 0.0f);
        float squares = 0.0f;
        HIPK_UNROLL
        for (int k = 0; k < ITEMS; ++k)
            HIPK_UNROLL
            for (int i = 0; i < N; ++i) squares += row.v[k][i] * row.v[k][i];
        const float rrms = 1.0f / sqrtf(reduce.sum(squares) / (float)cols + eps);
        HIPK_UNROLL
        for (int k = 0; k < ITEMS; ++k)
            if (row.valid(k, cols))
                write_normalized<T, N>(y, weight, (const T*)0, row_vector(k), row.v[k], 0.0f,
                                       rrms);
    }

    template <int N> HIPK_DEVICE void stream() const {
        BlockReducer reduce = {scratch, 0};
        const int vectors = cols / N;
        float squares = 0.0f;
        for (int j = threadIdx.x; j < vectors; j += blockDim.x) {
            float v[N];
            load_floats<T, N>(x + (long long)j * N, v);
            HIPK_UNROLL
            for (int i = 0; i < N; ++i) squares += v[i] * v[i];
        }
        const float rrms = 1.0f / sqrtf(reduce.sum(squares) / (float)cols + eps);
        for (int j = threadIdx.x; j < vectors; j += blockDim.x) {
            float v[N];
            load_floats<T, N>(x + (long long)j * N, v);
            write_normalized<T, N>(y, weight, (const T*)0, j, v, 0.0f, rrms);
        }
    }
};

template <typename T>
HIPK_DEVICE void rmsnorm(const T* x, const T* weight, T* y, int rows, int cols, float eps) {
    __shared__ float scratch[HIPK_REDUCER_SCRATCH];
    const long long r = block_row();
    if (r >= rows) return;
    const RmsNormRow<T> op = {x + r * cols, weight, y + r * cols, cols, eps, scratch};
    run_row<T>(op, cols, row_vectorizable<T>(cols, x, weight, y, 0));
}

}  // namespace hipk

// --- entry points: one per type (hip-core reads the parameter types from these lines) -------

extern "C" __global__ void layernorm_f32(const float* x, const float* weight, const float* bias,
                                         float* y, int rows, int cols, float eps) {
    hipk::layernorm(x, weight, bias, y, rows, cols, eps);
}
extern "C" __global__ void layernorm_f16(const hipk::f16* x, const hipk::f16* weight,
                                         const hipk::f16* bias, hipk::f16* y, int rows, int cols,
                                         float eps) {
    hipk::layernorm(x, weight, bias, y, rows, cols, eps);
}
extern "C" __global__ void layernorm_bf16(const hipk::bf16* x, const hipk::bf16* weight,
                                          const hipk::bf16* bias, hipk::bf16* y, int rows,
                                          int cols, float eps) {
    hipk::layernorm(x, weight, bias, y, rows, cols, eps);
}

extern "C" __global__ void rmsnorm_f32(const float* x, const float* weight, float* y, int rows,
                                       int cols, float eps) {
    hipk::rmsnorm(x, weight, y, rows, cols, eps);
}
extern "C" __global__ void rmsnorm_f16(const hipk::f16* x, const hipk::f16* weight, hipk::f16* y,
                                       int rows, int cols, float eps) {
    hipk::rmsnorm(x, weight, y, rows, cols, eps);
}
extern "C" __global__ void rmsnorm_bf16(const hipk::bf16* x, const hipk::bf16* weight,
                                        hipk::bf16* y, int rows, int cols, float eps) {
    hipk::rmsnorm(x, weight, y, rows, cols, eps);
}
