/* What a kernel split at its barriers needs (part of the prelude; fission.py writes the split).
 *
 * A split kernel runs a whole block in one call: each stretch of code between two barriers
 * becomes a loop over the block's threads, and a barrier is the end of one loop and the start
 * of the next. Its variables that live across a barrier are arrays with one element per thread,
 * in storage the block takes from the runtime's per-OS-thread scratch (reused by the next block).
 * The executor calls such a kernel once per block (runs_blocks, hip_cpu_executor.h), never as
 * fibers: a barrier is no fiber switch, only the next loop.
 */
#ifndef HIP_CPU_FISSION_H
#define HIP_CPU_FISSION_H

#include <new>  // placement new: an inlined function's parameters, per thread

#include "hip_cpu_block.h"

namespace hipcpu {

/* True for a kernel that fission.py split: the executor runs each block with one call. */
template <auto K> struct runs_blocks {
    static constexpr bool value = false;
};

/* The block this OS thread runs, its threads' indices filled (once a launch: the indices
 * depend only on blockDim). */
static inline block& fission_begin() {
    block& b = current_block();
    b.split = true;
    if (__builtin_expect(!b.indexed, 0)) {
        uint3 idx{0, 0, 0};
        for (unsigned j = 0; j < b.n; ++j) {
            b.idx[j] = idx;
            if (++idx.x == blockDim.x) {
                idx.x = 0;
                if (++idx.y == blockDim.y) idx.y = 0, ++idx.z;
            }
        }
        b.indexed = true;
    }
    return b;
}

/* Offsets of the per-thread arrays in the block's storage: `add<T>(n)` is the offset of an
 * array of n T; `bytes` the storage's size. Arrays start on cache lines (no two share one). */
struct fission_layout {
    unsigned long long bytes = 0;
    template <class T> unsigned long long add(unsigned n) {
        unsigned long long at = (bytes + 63) / 64 * 64;
        bytes = at + (unsigned long long)n * sizeof(T);
        return at;
    }
};

/* The block's storage for its per-thread arrays, `bytes` long. */
static inline char* fission_storage(block& b, unsigned long long bytes) {
    void* memory = b.rt->scratch(bytes ? bytes : 1);
    if (memory == nullptr) fail(2 /* hipErrorOutOfMemory */, "no memory for a block's per-thread variables");
    return (char*)memory;
}

/* Thread t's index, for the stretch's own `threadIdx`: in a 1-D block (`flat`) {t, 0, 0},
 * which the compiler then knows, so that a loop over the block's threads is a loop over
 * threadIdx.x (consecutive elements, vectorized where the stretch allows); else the table's. */
static inline __attribute__((always_inline)) uint3 fission_index(const block& b, unsigned t,
                                                                  bool flat) {
    return flat ? uint3{t, 0, 0} : b.idx[t];
}

/* Thread t of the block runs the next stretch. The stretch reads its index from a local
 * (fission_threads.py); the thread_local threadIdx is stored only when a function it calls
 * may read it (`Store`), or when the executor runs the block again to find the thread of a
 * bad access (`fenced`: stored, and before the thread's first access). Assigned directly, not
 * through the block's pointer (set_thread_idx): the program never takes threadIdx's address,
 * so the compiler would take that store for one that cannot change it, and read threadIdx
 * once for the whole loop. */
template <bool Store>
static inline __attribute__((always_inline)) void fission_thread(block& b, unsigned t, bool fenced) {
    if (Store || __builtin_expect(fenced, 0)) {
        threadIdx = b.idx[t];
        if (fenced) __atomic_signal_fence(__ATOMIC_SEQ_CST);
    }
}

/* `v` (a `__shared__` variable: a thread_local of the dlopened code object) through a pointer
 * the compiler cannot trace back to it: else it computes the address again, a __tls_get_addr
 * call, for every thread of every stretch. (The asm takes the address, so the compiler also
 * knows `v` may change through any pointer.) */
template <class T> static inline __attribute__((always_inline)) T& fission_opaque(T& v) {
    T* p = &v;
    asm("" : "+r"(p));
    return *p;
}

/* Threads of one block disagreed on a condition that decides whether a barrier is reached:
 * a kernel that a GPU does not run either (a barrier in divergent code is undefined). */
[[noreturn]] __attribute__((noinline, cold)) static void fission_divergent(const char* where) {
    char text[256];
    snprintf(text, sizeof text,
             "threads of block [%u,%u,%u] disagree on the condition at %s, which decides "
             "whether they reach a __syncthreads(): a barrier in divergent code",
             blockIdx.x, blockIdx.y, blockIdx.z, where);
    fail(719 /* hipErrorLaunchFailure */, text);
}

}  // namespace hipcpu

#endif /* HIP_CPU_FISSION_H */
