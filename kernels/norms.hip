// Layer normalization and RMS normalization over the last dimension of a [rows, cols] tensor.
//
//   layernorm_<t>(x, weight, bias, y, rows, cols, eps, x_inner, x_outer, x_step):
//       y = (x - mean) / sqrt(var + eps) * weight + bias     (biased variance, as PyTorch)
//   add_layernorm_<t>(x, residual, input_bias, weight, bias, y, rows, cols, eps, x_inner,
//                     x_outer, x_step):
//       y = layernorm(x + residual + input_bias): a post-LN layer's residual add and its
//       product's bias fused into the norm (add_norm.h: the sum kept in f32, not rounded to T)
//   layernorm_narrow_<t>, add_layernorm_narrow_<t>(the same arguments): many narrow rows
//       (at most 16 elements a lane of a warp), several a warp (rows.h's run_narrow_rows)
//   rmsnorm_<t>(x, weight, y, rows, cols, eps, x_inner, x_outer, x_step):
//       y = x / sqrt(mean(x^2) + eps) * weight
//
// x's row r starts at (r / x_inner) * x_outer + (r % x_inner) * x_step (rows.h's RowStrides:
// a slice of columns, permuted leading axes), y's at r * cols.
//
// weight and bias have `cols` elements of the same type; either may be null (1 and 0). y may be
// x (in place). Statistics are accumulated in f32 for every type. add_layernorm's residual is
// [rows, cols] (rows `cols` apart) and its input_bias [cols], either null (0); y may be x or
// residual; its rows are held as floats (FloatTile: about cols / 32 threads whatever the type).
// Launch: grid = rows (see rows.h: a block takes one row, or two when they fit in half a block),
// 1-D blocks of up to 1024 threads; about cols * sizeof(T) / 128 threads (a multiple of the
// warp size) keeps the row in registers with 8 x 16-byte loads in flight per thread (16-bit
// rows are held packed). One block reduction per row; a row whose f32 sums of squares overflow
// (|x| from about 1.8e19 on) or vanish (tiny rows, with an eps too small to hide them) is
// computed again from x scaled by a power of two (rows.h; rescale_row below), so rows of any
// finite magnitude normalize. A NaN row takes that path too, and stays NaN.
// The narrow entries: a 2-D block (warp, P) of at most 256 threads, each warp taking R rows
// (rows.h's NarrowTile: 4 for 16-bit layernorm, 2 otherwise), grid ceil(rows / (P R)); the
// host launches them only for rows of whole aligned 16-byte vectors that fit a warp.
#include "early_start.h"
#include "rows.h"

namespace hipk {

// y[j*N + i] = (v[i] - shift) * scale * weight + bias: the affine tail of both norms. On GPUs as
// two fmas, (v[i] * scale - shift * scale) * weight + bias (FUSED; rmsnorm: shift 0, the same
// values as v[i] * scale): on the H200, 8192 x 8192 bf16 layernorm 83.9 % -> 85.0 % of the copy
// rate. The CPU platform keeps the subtraction first (no fused multiply-add there: v[i] * scale
// rounded before the near-cancelling addition would lose too much), and so do GPUs for a row
// whose shift * scale overflows (see fusable).
template <typename T, int N, bool FUSED>
HIPK_DEVICE void write_normalized(T* y, const T* weight, const T* bias, int j, const float (&v)[N],
                                  float shift, float scale) {
    float w[N], b[N], out[N];
    load_floats_or<T, N>(weight ? weight + (long long)j * N : 0, 1.0f, w);
    load_floats_or<T, N>(bias ? bias + (long long)j * N : 0, 0.0f, b);
#if HIPK_GPU
    if (FUSED) {
        const float offset = -shift * scale;
        HIPK_UNROLL
        for (int i = 0; i < N; ++i) out[i] = fmaf(fmaf(v[i], scale, offset), w[i], b[i]);
        store_row<T, N>(y + (long long)j * N, out);
        return;
    }
#endif
    HIPK_UNROLL
    for (int i = 0; i < N; ++i) out[i] = (v[i] - shift) * scale * w[i] + b[i];
    store_row<T, N>(y + (long long)j * N, out);
}

// Whether a row may take the fused form: shift * scale must be finite. It overflows for a mean
// from about 1e36 on next to a small spread (a constant row of huge values), where the fused
// form would give inf - inf. Decided once per row, so that each form's loop stays branch-free:
// a test in write_normalized itself cost 8 % of the copy rate (bf16, H100).
HIPK_DEVICE bool fusable(float shift, float scale) {
    return fabsf(shift * scale) <= 3.40282347e38f;  // FLT_MAX
}

// The items of a register tile, normalized and written (see write_normalized).
template <bool FUSED, typename T, typename Tile>
HIPK_DEVICE void write_tile(T* y, const T* weight, const T* bias, const RowPart& p,
                            const Tile& row, int cols, float shift, float scale) {
    const int N = Tile::n;
    HIPK_UNROLL
    for (int k = 0; k < Tile::items; ++k) {
        if (!row.valid(p, k, cols)) continue;
        float v[N];
        HIPK_UNROLL
        for (int i = 0; i < N; ++i) v[i] = row.at(k, i);
        write_normalized<T, N, FUSED>(y, weight, bias, p.vector(k), v, shift, scale);
    }
}

// The items of a register tile written as they are, rounded to T (a summed row that must be
// rescaled: LayerNormRow::normalize).
template <typename T, typename Tile>
HIPK_DEVICE void store_tile(T* y, const RowPart& p, const Tile& row, int cols) {
    const int N = Tile::n;
    HIPK_UNROLL
    for (int k = 0; k < Tile::items; ++k) {
        if (!row.valid(p, k, cols)) continue;
        float v[N];
        HIPK_UNROLL
        for (int i = 0; i < N; ++i) v[i] = row.at(k, i);
        store_row<T, N>(y + (long long)p.vector(k) * N, v);
    }
}

// A streamed row (N-element vectors), read again, normalized and written. SCALED: a rescaled
// row (rows.h), whose shift and scale are those of x * s.
template <bool FUSED, bool SCALED, typename T, int N>
HIPK_DEVICE void write_streamed(T* y, const T* x, const T* weight, const T* bias,
                                const RowPart& p, int cols, float shift, float scale,
                                float s = 1.0f) {
    for (int j = p.thread; j < cols / N; j += p.threads) {
        float v[N];
        load_floats<T, N>(x + (long long)j * N, v);
        if (SCALED)
            HIPK_UNROLL
            for (int i = 0; i < N; ++i) v[i] *= s;
        write_normalized<T, N, FUSED>(y, weight, bias, j, v, shift, scale);
    }
}

// (count, mean, M2 = sum of squared deviations from the mean) of a set of values, merged by
// Chan et al.'s parallel formula: exact statistics of the union from those of the parts,
// with no cancellation (unlike sum(x^2) - n * mean^2). The identity is the empty set.
// The M2 term is d * (d * (n_a * f)): n_a * f = n_a n_b / n is exactly 0 when either part is
// empty, so merging an empty part adds 0 whatever the other's mean. (Written d * d * n_a * f,
// d * d overflowed to inf for means from 2^64 ≈ 1.8e19 on, and inf * 0 made the row NaN:
// short rows leave most threads empty. No extra work: the same three products, reordered.)
struct MeanM2 {
    HIPK_DEVICE Floats<3> identity() const {
        Floats<3> s = {{0.0f, 0.0f, 0.0f}};
        return s;
    }
    HIPK_DEVICE Floats<3> operator()(const Floats<3>& a, const Floats<3>& b) const {
        const float n = a.v[0] + b.v[0];
        const float f = fast_divide(b.v[0], fmaxf(n, 1.0f));  // b's share (0 when both are empty)
        const float d = b.v[1] - a.v[1];
        Floats<3> s = {{n, a.v[1] + d * f, a.v[2] + b.v[2] + d * (d * (a.v[0] * f))}};
        return s;
    }
};

// Welford over this thread's vectors of a row (of x * s when SCALED): (count, mean, M2), for
// Chan's merge.
template <bool SCALED, typename T, int N>
HIPK_DEVICE Floats<3> welford(const T* xr, const RowPart& p, int cols, float s) {
    float count = 0.0f, mean = 0.0f, m2 = 0.0f;
    for (int j = p.thread; j < cols / N; j += p.threads) {
        float v[N];
        load_floats<T, N>(xr + (long long)j * N, v);
        HIPK_UNROLL
        for (int i = 0; i < N; ++i) {
            const float u = SCALED ? v[i] * s : v[i];
            count += 1.0f;
            const float d = u - mean;
            mean += d / count;
            m2 += d * (u - mean);
        }
    }
    const Floats<3> mine = {{count, mean, m2}};
    return mine;
}

// This thread's sum of squares of its vectors of a row (of x * s when SCALED).
template <bool SCALED, typename T, int N>
HIPK_DEVICE float sum_of_squares(const T* xr, const RowPart& p, int cols, float s) {
    float squares = 0.0f;
    for (int j = p.thread; j < cols / N; j += p.threads) {
        float v[N];
        load_floats<T, N>(xr + (long long)j * N, v);
        HIPK_UNROLL
        for (int i = 0; i < N; ++i) {
            const float u = SCALED ? v[i] * s : v[i];
            squares += u * u;
        }
    }
    return squares;
}

// A row whose statistics left f32's range (rows.h), normalized from x * s: its max |x| (a
// reduction), s, the statistics of x * s (another), the output; x read from memory three times
// (it is still there: nothing of the part's row has been written). RMS: rmsnorm's (no bias),
// else layernorm's. Its own function (__noinline__, arguments by value: no stack), as inlined
// into the register paths it took the kernels from 68-77 VGPRs to 79-86 on gfx90a (fewer waves
// per SIMD) for a path that normal rows never run.
template <bool RMS, typename T, int N>
__device__ __noinline__ void rescale_row(const T* xr, const T* weight, const T* bias, T* yr,
                                         float eps, BlockReducer reduce, RowPart p, int cols) {
    const Floats<1> peak = reduce.reduce(stream_max_abs<T, N>(xr, p, cols), MaxAbs());
    const float s = power_of_two_scale(peak.v[0]);
    if (RMS) {
        const float squares = reduce.sum(sum_of_squares<true, T, N>(xr, p, cols, s));
        const float mean_square = squares / (float)cols;
        write_streamed<false, true, T, N>(yr, xr, weight, (const T*)0, p, cols, 0.0f,
                                          scaled_rsqrt(mean_square, eps, s), s);
    } else {
        const Floats<3> all = reduce.reduce(welford<true, T, N>(xr, p, cols, s), MeanM2());
        write_streamed<false, true, T, N>(yr, xr, weight, bias, p, cols, all.v[1],
                                          scaled_rsqrt(all.v[2] / (float)cols, eps, s), s);
    }
}

// One row of layernorm (x, y point at the whole tensors, `stride` elements per row).
template <typename T> struct LayerNormRow {
    const T* x;
    const T* weight;
    const T* bias;
    T* y;
    int stride;         // y's row stride: the row length
    RowStrides xrows;   // where x's rows start (a slice of columns, permuted leading axes)
    float eps;
    float* scratch;  // __shared__, HIPK_REDUCER_SCRATCH floats

    // Each thread's (count, mean, M2) from shifted sums over its registers, merged by the block
    // in one reduction (Chan); one read. Statistics that left f32's range (inf or NaN from an
    // overflow, or lost to underflow where eps does not hide it) send the row to rescale_row.
    template <typename Tile>
    HIPK_DEVICE void regs(const RowPart& p, long long r, int cols) const {
        Tile row;
        load(row, p, r, cols);
        finish(row, p, r, cols);
    }

    // regs' two halves (rows.h's narrow rows issue several rows' loads before any reduction).
    template <typename Tile>
    HIPK_DEVICE void load(Tile& row, const RowPart& p, long long r, int cols) const {
        row.load(p, x + xrows.at(r), cols);
    }
    template <typename Tile>
    HIPK_DEVICE void finish(const Tile& row, const RowPart& p, long long r, int cols) const {
        normalize<false>(row, p, r, cols);
    }

    // Row r normalized into y from this thread's part of it in `row` (regs). SUMMED: `row`
    // holds values that are not x's (add_norm.h's x + residual + input_bias), so a row that
    // must be rescaled, which rescale_row reads from memory, is first written to y (rounded
    // to T) and rescaled there, in place (each thread reads back the vectors it wrote).
    template <bool SUMMED, typename Tile>
    HIPK_DEVICE void normalize(const Tile& row, const RowPart& p, long long r, int cols) const {
        const int N = Tile::n, ITEMS = Tile::items;
        BlockReducer reduce = p.reducer(scratch);
        const int count = row.count(p, cols);
        // One pass over the registers: sums of d = x - shift and of d^2, shifted by the thread's
        // first element (so no cancellation unless that element lies many standard deviations
        // from the mean); two accumulators each (even and odd elements) halve the chains of
        // dependent additions.
        const float shift = count > 0 ? row.at(0, 0) : 0.0f;
        float sum[2] = {0.0f, 0.0f}, squares[2] = {0.0f, 0.0f};
        HIPK_UNROLL
        for (int k = 0; k < ITEMS; ++k) {
            if (!row.valid(p, k, cols)) continue;
            HIPK_UNROLL
            for (int i = 0; i < N; ++i) {
                const float d = row.at(k, i) - shift;
                sum[i % 2] += d;
                squares[i % 2] += d * d;
            }
        }
        const float n = fmaxf((float)count, 1.0f), s = sum[0] + sum[1];
        // Rounding may leave M2 below 0; an overflow's NaN (inf - inf: the squares and s * s / n
        // both overflowed, the mean need not) must stay, to be seen.
        const float m2 = squares[0] + squares[1] - s * fast_divide(s, n);
        const Floats<3> mine = {{(float)count, shift + fast_divide(s, n), m2 < 0.0f ? 0.0f : m2}};
        const Floats<3> all = reduce.reduce(mine, MeanM2());
        const float mean = all.v[1], var = all.v[2] / (float)cols;
        if (Rescalable<T>::value && agreed(needs_rescale(mean, var + eps, cols), p)) {
            const T* source = x + xrows.at(r);
            if (SUMMED) {
                store_tile(y + r * stride, p, row, cols);
                source = y + r * stride;
            }
            rescale_row<false, T, N>(source, weight, bias, y + r * stride, eps, reduce, p, cols);
            return;
        }
        const float rstd = 1.0f / sqrtf(var + eps);
        if (fusable(mean, rstd))
            write_tile<true>(y + r * stride, weight, bias, p, row, cols, mean, rstd);
        else
            write_tile<false>(y + r * stride, weight, bias, p, row, cols, mean, rstd);
    }

    // Welford per thread during the first read, Chan's merge across the block (one reduction),
    // a second read to normalize; rescaled (see regs) when the statistics left f32's range.
    template <int N> HIPK_DEVICE void stream(const RowPart& p, long long r, int cols) const {
        BlockReducer reduce = p.reducer(scratch);
        const T* xr = x + xrows.at(r);
        const Floats<3> all = reduce.reduce(welford<false, T, N>(xr, p, cols, 1.0f), MeanM2());
        const float mean = all.v[1], var = all.v[2] / (float)cols;
        if (Rescalable<T>::value && agreed(needs_rescale(mean, var + eps, cols), p)) {
            rescale_row<false, T, N>(xr, weight, bias, y + r * stride, eps, reduce, p, cols);
            return;
        }
        const float rstd = 1.0f / sqrtf(var + eps);
        if (fusable(mean, rstd))
            write_streamed<true, false, T, N>(y + r * stride, xr, weight, bias, p, cols, mean,
                                              rstd);
        else
            write_streamed<false, false, T, N>(y + r * stride, xr, weight, bias, p, cols, mean,
                                               rstd);
    }
};

// NARROW: rows.h's narrow rows (layernorm_narrow_<t>), else its one or two rows a part.
template <typename T, bool NARROW>
HIPK_DEVICE void layernorm(const T* x, const T* weight, const T* bias, T* y, int rows, int cols,
                           float eps, long long x_inner, long long x_outer,
                           long long x_step) {
    start_after_previous_grid();  // (every entry point may be started early: early_start.h)
    __shared__ float scratch[HIPK_REDUCER_SCRATCH];
    const RowStrides xrows = {x_inner, x_outer, x_step};
    const LayerNormRow<T> op = {x, weight, bias, y, cols, xrows, eps, scratch};
    // PackedTile: on the H200 (8192 x 8192 bf16, 256 threads) 77 % of the copy rate against 60 %
    // with FloatTile.
    const bool vectors = xrows.multiple_of(Lanes16<T>::value) &&
                         row_vectorizable<T>(cols, x, weight, bias, y);
    if (NARROW)
        run_narrow_rows<T, true>(op, rows, cols, vectors);
    else
        run_rows<T, true>(op, rows, cols, vectors);
}

// One row of rmsnorm.
template <typename T> struct RmsNormRow {
    const T* x;
    const T* weight;
    T* y;
    int stride;         // as in LayerNormRow
    RowStrides xrows;
    float eps;
    float* scratch;  // __shared__, HIPK_REDUCER_SCRATCH floats

    template <typename Tile>
    HIPK_DEVICE void regs(const RowPart& p, long long r, int cols) const {
        const int N = Tile::n, ITEMS = Tile::items;
        BlockReducer reduce = p.reducer(scratch);
        Tile row;
        row.load(p, x + xrows.at(r), cols);
        float squares[2] = {0.0f, 0.0f};  // even and odd elements, as in layernorm
        HIPK_UNROLL
        for (int k = 0; k < ITEMS; ++k)
            if (row.valid(p, k, cols))
                HIPK_UNROLL
                for (int i = 0; i < N; ++i) squares[i % 2] += row.at(k, i) * row.at(k, i);
        const float mean_square = reduce.sum(squares[0] + squares[1]) / (float)cols;
        if (Rescalable<T>::value && agreed(needs_rescale(0.0f, mean_square + eps, cols), p)) {
            rescale_row<true, T, N>(x + xrows.at(r), weight, (const T*)0, y + r * stride, eps,
                                    reduce, p, cols);  // as in layernorm
            return;
        }
        const float rrms = 1.0f / sqrtf(mean_square + eps);
        write_tile<true>(y + r * stride, weight, (const T*)0, p, row, cols, 0.0f, rrms);
    }

    template <int N> HIPK_DEVICE void stream(const RowPart& p, long long r, int cols) const {
        BlockReducer reduce = p.reducer(scratch);
        const T* xr = x + xrows.at(r);
        const float squares = reduce.sum(sum_of_squares<false, T, N>(xr, p, cols, 1.0f));
        const float mean_square = squares / (float)cols;
        if (Rescalable<T>::value && agreed(needs_rescale(0.0f, mean_square + eps, cols), p)) {
            rescale_row<true, T, N>(xr, weight, (const T*)0, y + r * stride, eps, reduce, p, cols);
            return;
        }
        const float rrms = 1.0f / sqrtf(mean_square + eps);
        write_streamed<true, false, T, N>(y + r * stride, xr, weight, (const T*)0, p, cols, 0.0f,
                                          rrms);
    }
};

template <typename T>
HIPK_DEVICE void rmsnorm(const T* x, const T* weight, T* y, int rows, int cols, float eps,
                         long long x_inner, long long x_outer, long long x_step) {
    start_after_previous_grid();  // (every entry point may be started early: early_start.h)
    __shared__ float scratch[HIPK_REDUCER_SCRATCH];
    const RowStrides xrows = {x_inner, x_outer, x_step};
    const RmsNormRow<T> op = {x, weight, y, cols, xrows, eps, scratch};
    const bool vectors = xrows.multiple_of(Lanes16<T>::value);  // as above
    run_rows<T, true>(op, rows, cols, vectors && row_vectorizable<T>(cols, x, weight, y, 0));
}

}  // namespace hipk

#include "add_norm.h"  // add_layernorm: x + residual + input_bias, normalized (LayerNormRow's)

// --- entry points: one set per type (hip-core reads the parameter types from these lines) ---
// __launch_bounds__(1024): blocks may have up to 1024 threads, so nvcc/nvrtc keep every kernel
// within 64 registers (without it they took up to 72 on sm_90: fewer resident blocks).

// The narrow kernels' launches have at most 256 threads (HipBackend's (warp, parts) blocks):
// their bound lets the compiler keep several rows' tiles in registers. add_layernorm's asks for
// 4 resident blocks too (64 registers on sm_90, not 104): on the H200, MiniLM's [16384, 384]
// rows (L2-warm graph) bf16 24.4 -> 20.0 us, f32 35.1 -> 28.2; layernorm's own rows lose with
// it (bf16 16.6 -> 18.1 us). -D options override either (bench variants).
#ifndef HIPK_NARROW_BOUNDS
#define HIPK_NARROW_BOUNDS 256
#endif
#ifndef HIPK_ADD_NARROW_BOUNDS
#define HIPK_ADD_NARROW_BOUNDS 256, 4
#endif

#define LAYERNORMS(S, T)                                                                           \
    extern "C" __global__ void __launch_bounds__(1024) layernorm_##S(                              \
        const T* x, const T* weight, const T* bias, T* y, int rows, int cols, float eps,           \
        long long x_inner, long long x_outer, long long x_step) {                                  \
        hipk::layernorm<T, false>(x, weight, bias, y, rows, cols, eps, x_inner, x_outer,           \
                                  x_step);                                                         \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(HIPK_NARROW_BOUNDS) layernorm_narrow_##S(         \
        const T* x, const T* weight, const T* bias, T* y, int rows, int cols, float eps,           \
        long long x_inner, long long x_outer, long long x_step) {                                  \
        hipk::layernorm<T, true>(x, weight, bias, y, rows, cols, eps, x_inner, x_outer,            \
                                 x_step);                                                          \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(1024) add_layernorm_##S(                          \
        const T* x, const T* residual, const T* input_bias, const T* weight, const T* bias,        \
        T* y, int rows, int cols, float eps, long long x_inner, long long x_outer,                 \
        long long x_step) {                                                                        \
        hipk::add_layernorm<T, false>(x, residual, input_bias, weight, bias, y, rows, cols,        \
                                      eps, x_inner, x_outer, x_step);                              \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(HIPK_ADD_NARROW_BOUNDS) add_layernorm_narrow_##S( \
        const T* x, const T* residual, const T* input_bias, const T* weight, const T* bias,        \
        T* y, int rows, int cols, float eps, long long x_inner, long long x_outer,                 \
        long long x_step) {                                                                        \
        hipk::add_layernorm<T, true>(x, residual, input_bias, weight, bias, y, rows, cols,         \
                                     eps, x_inner, x_outer, x_step);                               \
    }

HIPK_F32_AND_16BIT_TYPES(LAYERNORMS)

extern "C" __global__ void __launch_bounds__(1024) rmsnorm_f32(
    const float* x, const float* weight, float* y, int rows, int cols, float eps,
    long long x_inner, long long x_outer, long long x_step) {
    hipk::rmsnorm(x, weight, y, rows, cols, eps, x_inner, x_outer, x_step);
}
extern "C" __global__ void __launch_bounds__(1024) rmsnorm_f16(
    const hipk::f16* x, const hipk::f16* weight, hipk::f16* y, int rows, int cols, float eps,
    long long x_inner, long long x_outer, long long x_step) {
    hipk::rmsnorm(x, weight, y, rows, cols, eps, x_inner, x_outer, x_step);
}
extern "C" __global__ void __launch_bounds__(1024) rmsnorm_bf16(
    const hipk::bf16* x, const hipk::bf16* weight, hipk::bf16* y, int rows, int cols, float eps,
    long long x_inner, long long x_outer, long long x_step) {
    hipk::rmsnorm(x, weight, y, rows, cols, eps, x_inner, x_outer, x_step);
}
