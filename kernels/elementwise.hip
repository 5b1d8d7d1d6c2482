// add_row_bias_<t>(x, bias, y, rows, cols): y[r, c] = x[r, c] + bias[c] on contiguous tensors
// (f32 arithmetic for every type), the bias of hip_runtime.ops.linalg's `linear`. Every other
// elementwise op is a pointwise kernel (binary.hip, unary.hip, math.hip: any layout).
//
// y may alias x. Launch: any 1-D grid and block (grid-stride).
#include "common.h"

namespace hipk {

// Indices are elements of the [rows, cols] tensor, never bytes (the seeds' bias add advanced
// its row pointer in bytes). A vector never straddles two rows because cols % N == 0 on the
// vector path, so its bias slice bias[c .. c + N) is contiguous and aligned like the row.
template <typename T>
HIPK_DEVICE void add_row_bias(const T* x, const T* bias, T* y, long long rows, int cols) {
    const int N = Lanes16<T>::value;
    const long long n = rows * cols;
    long long done = 0;
    if (cols % N == 0 && aligned(x, 16) && aligned(bias, 16) && aligned(y, 16)) {
        const long long vectors = n / N;
        for (long long j = global_thread(); j < vectors; j += grid_threads()) {
            const long long c = (j * N) % cols;
            float v[N], b[N];
            load_floats<T, N>(x + j * N, v);
            load_floats<T, N>(bias + c, b);
            HIPK_UNROLL
            for (int i = 0; i < N; ++i) v[i] += b[i];
            store_floats<T, N>(y + j * N, v);
        }
        done = n;
    }
    for (long long i = done + global_thread(); i < n; i += grid_threads())
        y[i] = from_float<T>(to_float(x[i]) + to_float(bias[i % cols]));
}

}  // namespace hipk

// --- entry points: one per type (hip-core reads the parameter types from these lines) -------

extern "C" __global__ void add_row_bias_f32(const float* x, const float* bias, float* y,
                                            long long rows, int cols) {
    hipk::add_row_bias(x, bias, y, rows, cols);
}
extern "C" __global__ void add_row_bias_f16(const hipk::f16* x, const hipk::f16* bias,
                                            hipk::f16* y, long long rows, int cols) {
    hipk::add_row_bias(x, bias, y, rows, cols);
}
extern "C" __global__ void add_row_bias_bf16(const hipk::bf16* x, const hipk::bf16* bias,
                                             hipk::bf16* y, long long rows, int cols) {
    hipk::add_row_bias(x, bias, y, rows, cols);
}
