// The reciprocal root mean square of one row, for kernels that take the products of rows not
// yet RMS-normalized: a norm weight g folded into the next product's weight (W' = W diag(g))
// makes rmsnorm(x, g) W^T = diag(rrms(x)) x W'^T, so the product runs on x itself and whoever
// consumes it scales each row by rrms(x) (rope.hip's rope_and_cache_rms, swiglu_rms.hip): the
// rmsnorm launch between two BLAS calls disappears.
//
// rrms = 1 / sqrt(mean(row^2) + eps), the squares summed in f32 as norms.hip's rmsnorm sums
// them. Unlike rmsnorm it does not rescale a row whose f32 sum of squares overflows (elements
// of about 1.8e19 / sqrt(cols) and more): such a row's factor is 0. Every thread of a 1-D block calls it with the
// same row (it synchronizes the block).
#pragma once
#include "common.h"

namespace hipk {

// A BlockReducer over the whole 1-D block (one part).
HIPK_DEVICE BlockReducer whole_block_reducer(float* scratch) {
    const BlockReducer r = {scratch, 0, (int)threadIdx.x, (int)blockDim.x, 0};
    return r;
}

template <typename T>
HIPK_DEVICE float block_row_rrms(BlockReducer& reduce, const T* row, int cols, float eps) {
    float squares = 0.0f;
    for (int i = (int)threadIdx.x; i < cols; i += (int)blockDim.x) {
        const float v = to_float(row[i]);
        squares += v * v;
    }
    return 1.0f / sqrtf(reduce.sum(squares) / (float)cols + eps);
}

}  // namespace hipk
