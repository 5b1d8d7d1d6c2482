// max and min (values only) along one merged axis: see reduce.h for the layouts, parameters
// and NaN semantics (argmax/argmin, which carry an index, are in reduce_arg.hip).
#include "reduce.h"

// --- entry points: one per dtype (hip-core reads the parameter types from the text) --------

// lowest = 1: min. y takes the results, or with partial = 1 the partials [O, S, I] (in T: a
// second pass of this kernel over them gives the result).
#define HIPK_REDUCE_MAX(S_, T_)                                                                 \
    extern "C" __global__ __launch_bounds__(256) void reduce_max_##S_(                         \
        const T_* x, T_* y, long long O, long long R, long long I, long long so, long long sr, \
        long long si, long long S, long long chunk, int by_cols, int lanes, int vec,           \
        int lowest, int partial) {                                                             \
        const hipk::MaxOp<T_> op = {y, lowest, partial};                                       \
        const hipk::Layout l = HIPK_LAYOUT_VALUE;                                              \
        hipk::reduce(op, x, l, by_cols, vec);                                                  \
    }
HIPK_ALL_TYPES(HIPK_REDUCE_MAX)
