// max and min (values only) along one merged axis: see reduce.h for the layouts, parameters
// and NaN semantics (argmax/argmin, which carry an index, are in reduce_arg.hip).
#include "reduce_split.h"

// --- entry points: one per dtype (hip-core reads the parameter types from the text) --------

// lowest = 1: min. y takes the results; with `part` the first pass writes the partials
// [O, S, I] there instead (in T: a second pass of this kernel over them gives the result), and
// with `counters` too the split is finished by its last block (reduce_split.h).
#define HIPK_REDUCE_MAX(S_, T_)                                                                 \
    extern "C" __global__ __launch_bounds__(256) void reduce_max_##S_(                         \
        const T_* x, T_* y, T_* part, unsigned int* counters, long long O, long long R,        \
        long long I, long long so, long long sr, long long si, long long S, long long chunk,   \
        int by_cols, int lanes, int vec, int lowest) {                                         \
        const hipk::MaxOp<T_> op = {part ? part : y, lowest, part != 0};                       \
        const hipk::MaxOp<T_> finish = {y, lowest, 0};                                         \
        const hipk::Layout l = HIPK_LAYOUT_VALUE;                                              \
        hipk::reduce_split(op, finish, x, part, counters, l, by_cols, vec);                    \
    }
HIPK_ALL_TYPES(HIPK_REDUCE_MAX)
