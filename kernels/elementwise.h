// The grid-stride driver of activations.hip's swiglu: out[i] = f(a[i], b[i]), f on floats, on
// contiguous tensors (the pointwise ops of any layout use pointwise.h).
//
// Any 1-D grid is correct (threads stride over the tensor); for full bandwidth launch about
// ceil(n / (16 bytes / element size) / blockDim.x) blocks, or a few per multiprocessor. When
// every pointer is aligned for it, each thread moves 16 bytes per access (Vec) and a scalar
// loop finishes the last n % N elements; otherwise the whole tensor takes the scalar loop.
// out may be one of the inputs (each element is read before it is written, by one thread).
#pragma once

#include "common.h"

namespace hipk {

template <typename T, typename F>
HIPK_DEVICE void map2(const T* a, const T* b, T* out, long long n, const F& f) {
    const int N = Lanes16<T>::value;
    long long done = 0;
    if (aligned(a, 16) && aligned(b, 16) && aligned(out, 16)) {
        const long long vectors = n / N;
        for (long long j = global_thread(); j < vectors; j += grid_threads()) {
            float u[N], v[N];
            load_floats<T, N>(a + j * N, u);
            load_floats<T, N>(b + j * N, v);
            HIPK_UNROLL
            for (int i = 0; i < N; ++i) u[i] = f(u[i], v[i]);
            store_floats<T, N>(out + j * N, u);
        }
        done = vectors * N;
    }
    for (long long i = done + global_thread(); i < n; i += grid_threads())
        out[i] = from_float<T>(f(to_float(a[i]), to_float(b[i])));
}

}  // namespace hipk
