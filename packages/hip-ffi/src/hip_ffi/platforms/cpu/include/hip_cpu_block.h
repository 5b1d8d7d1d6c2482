/* A block's threads as the executor keeps them, and the fast paths of its waits (part of the
 * prelude, so that __syncthreads() and the warp functions inline into kernels).
 *
 * A wait hands the OS thread to the next thread of the same warp when that one has not
 * arrived yet: a few stores and one fiber switch (hip_cpu_fiber.h), inlined where the kernel
 * waits, so the compiler keeps only the kernel's live values across it, and a prefetch of the
 * stack top of the thread after it (a round visits every thread's stack: without it each
 * switch waits for L2). Everything else (the
 * end of a warp or of a round, the first wait of a block, a thread's end) takes the slow path,
 * hip_cpu_sched.h, which is compiled after the program with the executor.
 */
#ifndef HIP_CPU_BLOCK_H
#define HIP_CPU_BLOCK_H

#include "hip_cpu_abi.h"
#include "hip_cpu_fiber.h"

namespace hipcpu {

enum : unsigned char { RUN = 0, AT_WARP = 1, AT_BLOCK = 2, DONE = 3 };

/* What a barrier round reads of each thread: kept small (24 bytes), so that a round over a
 * block stays in L1 with the threads' stack tops. */
struct fiber {
    void* sp;  // saved stack pointer (asm) or ucontext_t* (fallback)
    uint3 idx;
    unsigned char state;
};
struct lane_slots {
    alignas(16) unsigned char v[2][16];  // a lane's shuffle values, by its warp's round parity
};

struct warp_state {
    unsigned round;
    unsigned long long mask[2], bits[2];  // lanes at the sync and their predicates, by parity
};

/* One launch's shared state: its first failure, and the grid barrier of a cooperative one. */
struct grid_state {
    std::atomic<int> status{0};  // first failure's hipError_t
    std::atomic<bool> abort{false};
    char* message;
    unsigned long long message_size;
    bool cooperative = false;
    unsigned long long blocks = 0;
    std::atomic<unsigned long long> arrived{0};
    std::atomic<unsigned> generation{0};
};

struct block {
    fiber* f = nullptr;
    warp_state* w = nullptr;
    lane_slots* s = nullptr;
    unsigned n = 1;          // threads in the block
    unsigned warps = 1;      // warps in the block
    unsigned cur = 0;        // thread now running (meaningful once `fibers`)
    int live = 0;            // fibers not DONE
    bool fibers = false;     // converted from the plain loop
    bool grid_sync = false;  // the barrier round in progress is a grid sync
    unsigned acc = 0, result = 0;
    void* sched_sp = nullptr;  // the plain loop, waiting for the last fiber
    void (*thunk)(void*) = nullptr;
    void* grid = nullptr;
    grid_state* state = nullptr;
    const hipcpu_runtime* rt = nullptr;
    hipcpu_fault* fault = nullptr;  // this OS thread's bad-access record
    bool unwound_in_fiber = false;  // the last unwind came from a fiber (past a barrier)
    void* jmp[5];  // __builtin_setjmp buffer: unwinds a failing block
};

static thread_local block* tl_block;

/* Where switch_fiber saves the current context: the asm switch stores the stack pointer into
 * `slot` itself; ucontext fills the ucontext_t that `copy` (a copy of `slot`) points at. */
#ifdef HIPCPU_FIBER_ASM
#define HIPCPU_SAVE_SLOT(slot, copy) (&(slot))
#else
#define HIPCPU_SAVE_SLOT(slot, copy) (&(copy))
static thread_local ucontext_t* tl_contexts;  // [n] per block thread, then one for the loop
static thread_local unsigned tl_context_capacity;
#endif

/* The slow paths (hip_cpu_sched.h): thread c waits in the state already recorded; returns
 * when it runs again. `wait_first` also converts a plain-loop block into fibers. */
__attribute__((noinline)) void wait_slow(block& b, unsigned c);
__attribute__((noinline)) void convert(block& b);

/* Thread c has recorded its wait: run c + 1 when it is of the same warp and has not arrived. */
static inline __attribute__((always_inline)) void wait(block& b, unsigned c) {
    unsigned to = c + 1;
    fiber* f = b.f;
    if (__builtin_expect(to % HIPCPU_WARP_SIZE != 0 && to < b.n && f[to].state == RUN, 1)) {
        // The thread after `to` most likely runs next: fetch the top of its stack (what its
        // switch pops and its kernel reloads) while `to` runs. (Any address may be fetched.)
        const char* later = (const char*)f[to + 1 < b.n ? to + 1 : to].sp;
        __builtin_prefetch(later);
        __builtin_prefetch(later + 64);
        b.cur = to;
        threadIdx = f[to].idx;
        void* self = f[c].sp;  // ucontext: the context to fill; asm: overwritten with the sp
        switch_fiber(HIPCPU_SAVE_SLOT(f[c].sp, self), f[to].sp);
        return;
    }
    wait_slow(b, c);
}

/* __syncthreads_count(count != 0) and friends: waits until every live thread of the block
 * has arrived; returns how many passed a nonzero count. */
static inline __attribute__((always_inline)) int block_barrier(int count) {
    block& b = *tl_block;
    if (__builtin_expect(!b.fibers, 0)) {
        if (b.n == 1 && !b.grid_sync) return count;
        convert(b);
    }
    unsigned c = b.cur;
    b.acc += (unsigned)count;
    b.f[c].state = AT_BLOCK;
    wait(b, c);
    return (int)b.result;
}

/* Leaves `size` bytes (at most 16) of `value` and a predicate for the lanes of this warp and
 * waits until every live lane of the warp waits too. */
static inline __attribute__((always_inline)) warp_view warp_exchange(const void* value, unsigned size,
                                                                   int predicate) {
    block& b = *tl_block;
    if (__builtin_expect(!b.fibers, 0)) convert(b);
    unsigned c = b.cur, w = c / HIPCPU_WARP_SIZE, lane = c % HIPCPU_WARP_SIZE;
    warp_state& ws = b.w[w];
    unsigned p = ws.round & 1;
    if (size) std::memcpy(b.s[c].v[p], value, size);
    ws.mask[p] |= 1ull << lane;
    if (predicate) ws.bits[p] |= 1ull << lane;
    b.f[c].state = AT_WARP;
    wait(b, c);
    return warp_view{&b.s[w * HIPCPU_WARP_SIZE].v[p][0], (unsigned)sizeof(lane_slots), ws.mask[p],
                     ws.bits[p], lane};
}

}  // namespace hipcpu

#endif /* HIP_CPU_BLOCK_H */
