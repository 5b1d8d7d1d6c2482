// Embedding lookup: embedding_<t>(ids, table, y, tokens, dim, vocab)
//
//   y[t, :] = table[ids[t], :]   for a [vocab, dim] table and int32 ids
//
// An id outside [0, vocab) gives a row of zeros instead of reading out of bounds. Rows are
// copied bit for bit (no conversion). Launch: any 1-D grid and block (grid-stride over the
// output, 16 bytes per access when table and y are aligned and dim allows it).
#include "common.h"

namespace hipk {

template <typename T>
HIPK_DEVICE void embedding(const int* ids, const T* table, T* y, int tokens, int dim, int vocab) {
    const int N = Lanes16<T>::value;
    const long long n = (long long)tokens * dim;
    if (dim % N == 0 && aligned(table, 16) && aligned(y, 16)) {
        typedef Vec<T, N> Packed;
        const Packed zero = {};
        for (long long j = global_thread(); j < n / N; j += grid_threads()) {
            const long long t = j * N / dim, c = j * N - t * dim;
            const int id = ids[t];
            *reinterpret_cast<Packed*>(y + j * N) =
                0 <= id && id < vocab ? *reinterpret_cast<const Packed*>(table + (long long)id * dim + c)
                                      : zero;
        }
        return;
    }
    const T zero = {};
    for (long long i = global_thread(); i < n; i += grid_threads()) {
        const long long t = i / dim, c = i - t * dim;
        const int id = ids[t];
        y[i] = 0 <= id && id < vocab ? table[(long long)id * dim + c] : zero;
    }
}

}  // namespace hipk

// --- entry points: one per type (hip-core reads the parameter types from these lines) -------

extern "C" __global__ void embedding_f32(const int* ids, const float* table, float* y, int tokens,
                                         int dim, int vocab) {
    hipk::embedding(ids, table, y, tokens, dim, vocab);
}
extern "C" __global__ void embedding_f16(const int* ids, const hipk::f16* table, hipk::f16* y,
                                         int tokens, int dim, int vocab) {
    hipk::embedding(ids, table, y, tokens, dim, vocab);
}
extern "C" __global__ void embedding_bf16(const int* ids, const hipk::bf16* table, hipk::bf16* y,
                                          int tokens, int dim, int vocab) {
    hipk::embedding(ids, table, y, tokens, dim, vocab);
}
