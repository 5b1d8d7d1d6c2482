// A split over the reduced axis finished by its last block, in the same launch (reduce.h has
// the layouts, the operations and the split's geometry): the entry points of reduce.hip (sum,
// mean) and reduce_max.hip (max, min) run reduce_split below.
//
// Speed: the finish is on the launch's critical path (the last block of each split starts it
// when its own loads are done, and every split ends at about the same time: one wave), so it
// is kept to a few round trips to L2: the partial stores and a fence, the count, the partials'
// loads (all of a split of up to 32 blocks in flight at once), the stores of y. H100, 8192^2
// first axis, tree 59203f8: the finish cost 2.3-2.7 us on every split, 5% of a bf16 launch.
#pragma once

#include "reduce.h"

#if HIPK_GPU
#ifndef HIPK_REDUCE_FINISH_VEC  // 1: the last block reads a split's partials in the first
#define HIPK_REDUCE_FINISH_VEC 1  // pass's vectors and rows of threads (0: one column a thread)
#endif
#ifndef HIPK_REDUCE_FINISH_LOADS  // loads in flight per thread reading them in vectors: with
#define HIPK_REDUCE_FINISH_LOADS 4  // 8 rows of threads, a 32-way split's in one round trip
#endif                              // (2 took two for splits past 16)
#ifndef HIPK_REDUCE_FENCE  // 1: on NVIDIA sm_70+ one thread orders the block's partials with
#define HIPK_REDUCE_FENCE 1  // fence.acq_rel (0: every warp's __threadfence(), a fence.sc)
#endif
#else
#define HIPK_REDUCE_FINISH_VEC 1
#define HIPK_REDUCE_FINISH_LOADS 2  // (the guarded last batch of reduce.h's cols, tested here)
#define HIPK_REDUCE_FENCE 0
#endif

namespace hipk {

// Counts the calling block in *counter (every thread of the block calls it, after its partial
// stores) and tells every thread whether this block completed the count of `blocks`; if so,
// the partials the other blocks stored before counting are visible to all of its threads.
// `flag`: a __shared__ int.
HIPK_DEVICE bool last_to_count(unsigned int* counter, unsigned int blocks, int* flag) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700 && HIPK_REDUCE_FENCE
    // The barrier puts every thread's stores before thread 0's release fence (PTX fences are
    // cumulative), and thread 0's acquire fence before the other threads' loads: the pattern
    // of CUDA's grid sync and CUTLASS's semaphores. fence.acq_rel is MEMBAR.ALL.GPU, where
    // __threadfence() is fence.sc (MEMBAR.SC.GPU: the total order of SC fences costs more).
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("fence.acq_rel.gpu;" ::: "memory");
        const int done = atomicAdd(counter, 1u) + 1 == blocks;
        if (done) asm volatile("fence.acq_rel.gpu;" ::: "memory");
        *flag = done;
    }
    __syncthreads();
    return *flag != 0;
#else
    __threadfence();  // this thread's stores before the count
    __syncthreads();
    if (threadIdx.x == 0) *flag = atomicAdd(counter, 1u) + 1 == blocks;
    __syncthreads();
    if (!*flag) return false;
    __threadfence();  // the loads that follow after it
    return true;
#endif
}

// `op` writes each block's partials [O, S, I] to `part`, then the block counts itself in
// counters[blockIdx.x]; the one that completes the count (the last of the S blocks that share
// its outputs, whichever it is) merges their S partials with `op2` (which writes y) in the
// order s = 0 .. S-1, so the result does not depend on which block came last, and sets the
// count back to 0 for the next launch. The counters start at 0 (the host zeroes them once).
// Without counters (or for integer and bool inputs) this is the first pass of two.
template <typename Op, typename Op2>
HIPK_DEVICE void reduce_split(const Op& op, const Op2& op2, const typename Op::in_type* x,
                              const typename Op2::in_type* part, unsigned int* counters,
                              const Layout& l, int by_cols, int vec) {
    typedef typename Op::acc_type Acc;
    typedef typename Op2::acc_type Acc2;
    enum { B1 = Widths<Op>::SLOTS * sizeof(Acc),
           B2 = (HIPK_REDUCE_SLOTS > 256 * Widths<Op>::NC ? HIPK_REDUCE_SLOTS
                                                          : 256 * Widths<Op>::NC) * sizeof(Acc2) };
    __shared__ long long words[((B1 > B2 ? B1 : B2) + 7) / 8];  // both passes' slots, in turn
    __shared__ int last;
    reduce_block(op, x, l, by_cols, vec, reinterpret_cast<Acc*>(words), blockIdx.x, blockIdx.y);
    if (!counters || !Unrolled<typename Op::in_type>::value) return;  // (floats only: the host)
    if (!last_to_count(counters + blockIdx.x, (unsigned int)l.S, &last)) return;
    // The partials as the input of one more pass over this block's outputs: [O, S, I] with S
    // as the reduced axis, the same tiling. Cols with vectors read them in the first pass's
    // vectors with its rows of threads, each thread walking S / rows partials (H100, 8192^2
    // first axis: one column a thread walking all S, with few loads in flight, cost ~0.3 us a
    // split on the launch's critical path); scalar cols one element per thread per row; rows
    // one output per group of lanes.
    Acc2* slots = reinterpret_cast<Acc2*>(words);
    if (by_cols && vec && HIPK_REDUCE_FINISH_VEC) {
        const Layout p = {l.O, l.S, l.I, l.S * l.I, l.I, 1, 1, l.S, l.lanes};
        cols<Widths<Op>::NC, HIPK_REDUCE_FINISH_LOADS>(op2, part, p, slots, blockIdx.x, 0);
    } else {
        const int lanes = by_cols && vec ? l.lanes * Widths<Op>::NC : l.lanes;
        const Layout p = {l.O, l.S, l.I, l.S * l.I, by_cols ? l.I : 1, by_cols ? 1 : 0, 1, l.S,
                          lanes};
        if (by_cols) cols<1, 1>(op2, part, p, slots, blockIdx.x, 0);
        else rows<1>(op2, part, p, slots, blockIdx.x, 0);
    }
    if (threadIdx.x == 0) counters[blockIdx.x] = 0;
}

}  // namespace hipk
