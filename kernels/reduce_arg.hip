// max, min, argmax and argmin along one merged axis: see reduce.h for the layouts and
// parameters.
#include "reduce.h"

// --- entry points: one per dtype (hip-core reads the parameter types from the text) --------

// lowest = 1: min. y takes the values and y_index the indices, each where not null (results,
// or with partial = 1 partials); a second pass of arg reads the partials' indices from
// `index` (null otherwise: the index is r).
#define HIPK_REDUCE_ARG(S_, T_)                                                                 \
    extern "C" __global__ __launch_bounds__(256) void reduce_arg_##S_(                         \
        const T_* x, const long long* index, T_* y, long long* y_index, long long O,           \
        long long R, long long I, long long so, long long sr, long long si, long long S,       \
        long long chunk, int by_cols, int lanes, int vec, int lowest, int partial) {           \
        const hipk::ExtremeOp<T_> op = {y, y_index, index, lowest, partial};                   \
        const hipk::Layout l = HIPK_LAYOUT_VALUE;                                              \
        hipk::reduce(op, x, l, by_cols, vec);                                                  \
    }
HIPK_ALL_TYPES(HIPK_REDUCE_ARG)
