// sum and mean along one merged axis: see reduce.h for the layouts and parameters.
#include "reduce_split.h"

// --- entry points: one per dtype (hip-core reads the parameter types from the text) --------

// y: SumOut<T> (T for floats, i64 otherwise), or null with `part`: SumAcc<T> partials. With
// `counters` too, the split is finished by its last block (reduce_split.h): partials
// to `part`, the result to y.
#define HIPK_REDUCE_SUM(S_, T_)                                                                 \
    extern "C" __global__ __launch_bounds__(256) void reduce_sum_##S_(                         \
        const T_* x, void* y, void* part, unsigned int* counters, long long O, long long R,    \
        long long I, long long so, long long sr, long long si, long long S, long long chunk,   \
        int by_cols, int lanes, int vec, long long count, int mean) {                          \
        typedef hipk::SumAcc<T_>::type A;                                                      \
        typedef hipk::SumOut<T_>::type Out;                                                    \
        const hipk::SumOp<T_, A, Out> op = {counters ? (Out*)0 : (Out*)y, (A*)part, count,     \
                                            counters ? 0 : mean};                              \
        const hipk::SumOp<A, A, Out> finish = {(Out*)y, (A*)0, count, mean};                   \
        const hipk::Layout l = HIPK_LAYOUT_VALUE;                                              \
        hipk::reduce_split(op, finish, x, (const A*)part, counters, l, by_cols, vec);          \
    }
HIPK_ALL_TYPES(HIPK_REDUCE_SUM)

// The second pass of a 16-bit float sum: f32 partials in, the 16-bit type out.
template <typename T>
__device__ void sum2(const float* x, T* y, const hipk::Layout& l, int by_cols, int vec,
                     long long count, int mean) {
    const hipk::SumOp<float, float, T> op = {y, (float*)0, count, mean};
    hipk::reduce(op, x, l, by_cols, vec);
}
extern "C" __global__ __launch_bounds__(256) void reduce_sum2_f16(
    const float* x, hipk::f16* y, long long O, long long R, long long I, long long so,
    long long sr, long long si, long long S, long long chunk, int by_cols, int lanes, int vec,
    long long count, int mean) {
    const hipk::Layout l = HIPK_LAYOUT_VALUE;
    sum2(x, y, l, by_cols, vec, count, mean);
}
extern "C" __global__ __launch_bounds__(256) void reduce_sum2_bf16(
    const float* x, hipk::bf16* y, long long O, long long R, long long I, long long so,
    long long sr, long long si, long long S, long long chunk, int by_cols, int lanes, int vec,
    long long count, int mean) {
    const hipk::Layout l = HIPK_LAYOUT_VALUE;
    sum2(x, y, l, by_cols, vec, count, mean);
}
