// add_layernorm: layernorm(x + residual + input_bias) in one pass, the residual add and the
// product's bias of a post-LN transformer layer (BERT: LayerNorm(x W^T + b + residual)) fused
// into the norm that follows the product, so a plain GEMM (no bias, no residual) writes x and
// x, residual and input_bias are each read once, y written once.
//
// Part of norms.hip (included by it after LayerNormRow, whose normalization it reuses); not a
// header of its own.
//
// The sum, x + residual + input_bias (left to right), is formed in f32 and kept in registers
// (FloatTile: a 16-bit row is not held packed, so a thread holds HIPK_ROW_FLOATS elements
// whatever the type; the host sizes the launch so). The unfused ops (add, then layernorm)
// round the sum to T before normalizing: for 16-bit types the results differ by that rounding
// (the fused ones are nearer the exact sum's); in f32 only the order of the additions differs.
// Two paths go through memory instead:
// - a row too long for the registers (stream): x + residual + input_bias is written to y
//   (rounded to T), then y normalized in place by LayerNormRow's stream, each thread reading
//   back the vectors it wrote (the same vector-to-thread mapping): one more write and read of
//   the row, rounded as the unfused ops round it;
// - a row in registers whose statistics left f32's range (rows.h's rescaling): its sums are
//   written to y (rounded to T) and rescaled there (LayerNormRow::normalize).
#pragma once

namespace hipk {

// v += residual's and input_bias's vector j (a null pointer adds nothing), in f32.
template <typename T, int N>
HIPK_DEVICE void add_addends(float (&v)[N], const T* residual_row, const T* input_bias, int j) {
    float a[N], b[N];
    load_floats_or<T, N>(residual_row ? residual_row + (long long)j * N : 0, 0.0f, a);
    load_floats_or<T, N>(input_bias ? input_bias + (long long)j * N : 0, 0.0f, b);
    HIPK_UNROLL
    for (int i = 0; i < N; ++i) v[i] = v[i] + a[i] + b[i];
}

// One row of add_layernorm: LayerNormRow's, on x + residual + input_bias.
template <typename T> struct AddLayerNormRow {
    LayerNormRow<T> norm;  // x (its rows at norm.xrows), weight, bias, y, eps
    const T* residual;     // [rows, cols], rows norm.stride apart, or null
    const T* input_bias;   // [cols] or null

    // x's row in a FloatTile, the addends added to each element it holds, then normalized.
    template <typename Tile>
    HIPK_DEVICE void regs(const RowPart& p, long long r, int cols) const {
        Tile row;
        load(row, p, r, cols);
        finish(row, p, r, cols);
    }

    // regs' two halves (rows.h's narrow rows): x + residual + input_bias into the tile, then
    // normalized.
    template <typename Tile>
    HIPK_DEVICE void load(Tile& row, const RowPart& p, long long r, int cols) const {
        const int N = Tile::n;
        row.load(p, norm.x + norm.xrows.at(r), cols);
        const T* residual_row = residual ? residual + r * norm.stride : 0;
        HIPK_UNROLL
        for (int k = 0; k < Tile::items; ++k) {
            if (!row.valid(p, k, cols)) continue;
            float v[N];
            HIPK_UNROLL
            for (int i = 0; i < N; ++i) v[i] = row.at(k, i);
            add_addends<T, N>(v, residual_row, input_bias, p.vector(k));
            HIPK_UNROLL
            for (int i = 0; i < N; ++i) row.keep(k, i, v[i]);
        }
    }
    template <typename Tile>
    HIPK_DEVICE void finish(const Tile& row, const RowPart& p, long long r, int cols) const {
        norm.template normalize<true>(row, p, r, cols);
    }

    // The sum written to y, then y normalized in place (see above).
    template <int N> HIPK_DEVICE void stream(const RowPart& p, long long r, int cols) const {
        const T* xr = norm.x + norm.xrows.at(r);
        const T* residual_row = residual ? residual + r * norm.stride : 0;
        T* yr = norm.y + r * norm.stride;
        for (int j = p.thread; j < cols / N; j += p.threads) {
            float v[N];
            load_floats<T, N>(xr + (long long)j * N, v);
            add_addends<T, N>(v, residual_row, input_bias, j);
            store_row<T, N>(yr + (long long)j * N, v);
        }
        LayerNormRow<T> in_place = norm;
        in_place.x = norm.y;
        const RowStrides contiguous = {1, norm.stride, 0};
        in_place.xrows = contiguous;
        in_place.template stream<N>(p, r, cols);
    }
};

// The kernel's body (norms.hip's add_layernorm_<t>, and _narrow_<t> when NARROW): rows.h's
// launch, FloatTile rows.
template <typename T, bool NARROW>
HIPK_DEVICE void add_layernorm(const T* x, const T* residual, const T* input_bias,
                               const T* weight, const T* bias, T* y, int rows, int cols,
                               float eps, long long x_inner, long long x_outer,
                               long long x_step) {
    start_after_previous_grid();  // (every entry point may be started early: early_start.h)
    __shared__ float scratch[HIPK_REDUCER_SCRATCH];
    const RowStrides xrows = {x_inner, x_outer, x_step};
    const LayerNormRow<T> norm = {x, weight, bias, y, cols, xrows, eps, scratch};
    const AddLayerNormRow<T> op = {norm, residual, input_bias};
    // Vectors: 16-byte loads of every operand (row_vectorizable: all of them aligned).
    const bool vectors = xrows.multiple_of(Lanes16<T>::value) &&
                         row_vectorizable<T>(cols, x, weight, bias, y) &&
                         row_vectorizable<T>(cols, residual, input_bias, 0, 0);
    if (NARROW)  // (FloatTile either way: the sums are kept as floats)
        run_narrow_rows<T, false>(op, rows, cols, vectors);
    else
        run_rows<T, false>(op, rows, cols, vectors);
}

}  // namespace hipk
