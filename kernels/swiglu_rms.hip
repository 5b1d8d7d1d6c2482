// SwiGLU of gate/up products of rows not yet RMS-normalized (row_rms.h: the MLP norm's weight
// folded into the stacked gate/up weight, so the product reads x itself).
//
//   swiglu_rms_<t>(gate, up, y, x, rows, inter, gate_row, up_row, x_row, hidden, eps):
//       y[r, j] = silu(gate[r, j] * s) * (up[r, j] * s), s = 1 / sqrt(mean(x[r]^2) + eps),
//       for r < rows, j < inter: what binary.hip's swiglu gives for the products of rmsnorm(x)
//       (silu(g) = g / (1 + exp(-g)) in f32, as there). gate, up and x rows are gate_row,
//       up_row and x_row elements apart (column views of one [rows, 2 inter] product need no
//       copy), x's rows `hidden` long; y is [rows, inter], C-contiguous, and shares no byte
//       with the others (the host checks).
//
// Launch: 1-D blocks of B threads; grid (ceil(inter / (4 B)), row blocks): a block takes
// rows blockIdx.y, + gridDim.y, ...; for each, a thread loads its (up to) 4 columns
// blockIdx.x * 4 B + threadIdx.x + k B of gate and up, then the block computes the row's factor
// (those loads in flight meanwhile), then the thread stores its outputs. Every entry point may
// be started early (early_start.h): each block waits for the kernel ahead before it reads.
#include "early_start.h"
#include "row_rms.h"

namespace hipk {

enum { SWIGLU_RMS_COLUMNS = 4 };  // a thread's columns (the host's grid: _SWIGLU_RMS_COLUMNS)

template <typename T>
HIPK_DEVICE void swiglu_rms(const T* gate, const T* up, T* y, const T* x, int rows, int inter,
                            long long gate_row, long long up_row, long long x_row, int hidden,
                            float eps) {
    enum { C = SWIGLU_RMS_COLUMNS };
    start_after_previous_grid();
    __shared__ float scratch[HIPK_REDUCER_SCRATCH];
    BlockReducer reduce = whole_block_reducer(scratch);
    const long long first = (long long)blockIdx.x * blockDim.x * C + threadIdx.x;
    for (long long r = blockIdx.y; r < rows; r += gridDim.y) {
        float a[C], b[C];
        HIPK_UNROLL
        for (int c = 0; c < C; ++c) {  // the loads before the factor's reduction
            const long long j = first + (long long)c * blockDim.x;
            a[c] = j < inter ? to_float(gate[r * gate_row + j]) : 0.0f;
            b[c] = j < inter ? to_float(up[r * up_row + j]) : 0.0f;
        }
        const float s = block_row_rrms(reduce, x + r * x_row, hidden, eps);
        HIPK_UNROLL
        for (int c = 0; c < C; ++c) {
            const long long j = first + (long long)c * blockDim.x;
            const float g = a[c] * s;
            if (j < inter) y[r * inter + j] = from_float<T>(g / (1.0f + expf(-g)) * (b[c] * s));
        }
    }
}

}  // namespace hipk

// --- entry points: one per type (hip-core reads the parameter types from these lines) -------

#define HIPK_SWIGLU_RMS(S, T)                                                                      \
    extern "C" __global__ void swiglu_rms_##S(const T* gate, const T* up, T* y, const T* x,        \
                                              int rows, int inter, long long gate_row,             \
                                              long long up_row, long long x_row, int hidden,       \
                                              float eps) {                                         \
        hipk::swiglu_rms<T>(gate, up, y, x, rows, inter, gate_row, up_row, x_row, hidden, eps);    \
    }
HIPK_F32_AND_16BIT_TYPES(HIPK_SWIGLU_RMS)
