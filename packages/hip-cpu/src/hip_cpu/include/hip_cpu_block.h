/* A block's threads as the executor keeps them, and the fast paths of its waits (part of the
 * prelude, so that __syncthreads() and the warp functions inline into kernels).
 *
 * A wait hands the OS thread to the next thread of the same warp when that one has not
 * arrived yet: a few stores and one fiber switch (hip_cpu_fiber.h), inlined where the kernel
 * waits, so the compiler keeps only the kernel's live values across it. It reaches the block
 * without a thread_local of the code object: those are dynamic TLS (the code object is
 * dlopened), one __tls_get_addr call each, and the switch, which clobbers every register,
 * made the compiler call it again after every wait. Everything else (the end of a warp or of
 * a round, the first wait of a block, a thread's end) takes the slow path, hip_cpu_sched.h,
 * which is compiled after the program with the executor.
 */
#ifndef HIP_CPU_BLOCK_H
#define HIP_CPU_BLOCK_H

#include "hip_cpu_abi.h"
#include "hip_cpu_fiber.h"

/* The most threads of a block (the platform's limit, launch.py): the states array's size. */
#define HIPCPU_MAX_BLOCK_THREADS 1024

namespace hipcpu {

enum : unsigned char { RUN = 0, AT_WARP = 1, AT_BLOCK = 2, DONE = 3 };

struct lane_slots {
    alignas(16) unsigned char v[2][16];  // a lane's shuffle values, by its warp's round parity
};

struct warp_state {
    unsigned round;
    unsigned live;                        // lanes not DONE
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
    /* This OS thread's bad-access record while the block runs. First: the runtime's fault slot
     * points at it, and current_block() reads the block from that slot. */
    hipcpu_fault fault{};
    uint3* tid = nullptr;     // this OS thread's threadIdx (x86-64: set_thread_idx)
    unsigned n = 1;           // threads in the block
    unsigned warps = 1;       // warps in the block
    unsigned cur = 0;         // thread now running (meaningful once `fibers`)
    unsigned first = 0;       // no thread before it is live
    unsigned live_warps = 0;  // warps with a live lane
    unsigned complete = 0;    // of those, warps whose live lanes all wait at the block barrier
    bool fibers = false;      // the threads run as fibers (from the first wait on)
    bool waits = false;       // a block waited: later ones start as fibers (run_fibers)
    unsigned made = 0;        // fibers of threads [made, n) are parked, ready to start again
    bool grid_sync = false;   // the barrier round in progress is a grid sync
    unsigned acc = 0, result = 0;
    warp_state* w = nullptr;
    lane_slots* s = nullptr;
    void* sched_sp = nullptr;  // the plain loop, waiting for the last fiber
    char* stacks = nullptr;    // this OS thread's fiber stacks (the runtime's)
    unsigned long long stride = 0;
    void (*thunk)(void*) = nullptr;
    void* grid = nullptr;
    grid_state* state = nullptr;
    const hipcpu_runtime* rt = nullptr;
    bool unwound_in_fiber = false;  // the last unwind came from a fiber (past a barrier)
    bool split = false;    // the kernel was split at its barriers (hip_cpu_fission.h)
    bool indexed = false;  // idx holds every thread's index (this launch's blockDim)
    bool fenced = false;   // a split kernel stores each thread's index first (a fault's rerun)
    void* jmp[5];                   // __builtin_setjmp buffer: unwinds a failing block
    /* Per thread, at fixed offsets from the block (a wait loads no pointer to find them):
     * its RUN/AT_WARP/AT_BLOCK/DONE, DONE from [n] on (a wait needs no bound check, a warp's
     * states are read whole); bytes side by side: the end of a round resets them as vectors. */
    unsigned char st[HIPCPU_MAX_BLOCK_THREADS + 64];
    void* sp[HIPCPU_MAX_BLOCK_THREADS + 1];  // its context: stack pointer (asm), ucontext_t*
    uint3 idx[HIPCPU_MAX_BLOCK_THREADS];     // its threadIdx
};

static thread_local block* tl_block;  // this OS thread's block (the executor's cold paths)

#if defined(__x86_64__)
/* The runtime's fault slot (hipcpu_runtime.fault_slot) is an initial-exec thread-local: at
 * the same offset from the thread pointer on every thread. While a block runs it points at
 * block::fault, so one %fs-relative load finds the block. */
static long g_fault_slot_offset;

/* The block this OS thread runs. Not volatile: it cannot change while a kernel runs (its
 * fibers all stay on the OS thread), so the compiler may reuse it. */
static inline __attribute__((always_inline)) block& current_block() {
    block* b;
    asm("movq %%fs:(%1), %0" : "=r"(b) : "r"(g_fault_slot_offset));
    return *b;
}
/* Records the slot's offset (the first thread to run a block of this code object stores it,
 * the others race to store the same value); false when this thread's differs. */
static bool track_fault_slot(hipcpu_fault** slot) {
    char* tp;
    asm("movq %%fs:0, %0" : "=r"(tp));
    long known = 0, offset = (char*)slot - tp;
    __atomic_compare_exchange_n(&g_fault_slot_offset, &known, offset, false, __ATOMIC_RELAXED,
                                __ATOMIC_RELAXED);
    return known == 0 || known == offset;
}
#else
static inline block& current_block() { return *tl_block; }
static bool track_fault_slot(hipcpu_fault**) { return true; }
#endif

#ifndef HIPCPU_FIBER_ASM
static thread_local ucontext_t* tl_contexts;  // [n] per block thread, then one for the loop
static thread_local unsigned tl_context_capacity;
#endif

/* The slow paths (hip_cpu_sched.h). `wait_target`: thread c waits (its state recorded) and
 * c + 1 cannot run: the thread to run next (c itself when the round c waits for is complete).
 * `convert` turns a plain-loop block into fibers. */
__attribute__((noinline)) unsigned wait_target(block& b, unsigned c);
__attribute__((noinline)) void convert(block& b);

/* threadIdx becomes thread t's. x86-64: through the address the executor keeps in the block
 * (thread_idx_address): an assignment to the code object's thread_local is a __tls_get_addr
 * call, once a switch. */
static inline __attribute__((always_inline)) void set_thread_idx(block& b, unsigned t) {
#if defined(__x86_64__)
    *b.tid = b.idx[t];
#else
    threadIdx = b.idx[t];
#endif
}

/* Thread c has recorded its wait: run c + 1 when it is of the same warp and has not arrived,
 * else the thread the slow path picks. One switch site, whichever it is: the kernel's code
 * after a wait then has one way in, and the compiler reloads its values once. */
static inline __attribute__((always_inline)) void wait(block& b, unsigned c) {
    unsigned to = c + 1;
    if (__builtin_expect(to % HIPCPU_WARP_SIZE == 0 || b.st[to] != RUN, 0)) to = wait_target(b, c);
    // The thread after `to` most likely runs next: fetch the top of its stack (what its
    // switch pops and its kernel reloads first) while `to` runs. (sp[n] is null: any address
    // may be fetched.)
    __builtin_prefetch(b.sp[to + 1]);
    b.cur = to;
    set_thread_idx(b, to);
    switch_fiber(&b.sp[c], &b.sp[to]);
}

/* __syncthreads_count(count != 0) and friends: waits until every live thread of the block
 * has arrived; returns how many passed a nonzero count. */
static inline __attribute__((always_inline)) int block_barrier(int count) {
    block& b = current_block();
    if (__builtin_expect(!b.fibers, 0)) {
        if (b.n == 1 && !b.grid_sync) return count;
        convert(b);
    }
    unsigned c = b.cur;
    b.acc += (unsigned)count;
    b.st[c] = AT_BLOCK;
    wait(b, c);
    return (int)b.result;
}

/* Leaves `size` bytes (at most 16) of `value` and a predicate for the lanes of this warp and
 * waits until every live lane of the warp waits too. */
static inline __attribute__((always_inline)) warp_view warp_exchange(const void* value, unsigned size,
                                                                   int predicate) {
    block& b = current_block();
    if (__builtin_expect(!b.fibers, 0)) convert(b);
    unsigned c = b.cur, w = c / HIPCPU_WARP_SIZE, lane = c % HIPCPU_WARP_SIZE;
    warp_state& ws = b.w[w];
    unsigned p = ws.round & 1;
    if (size) std::memcpy(b.s[c].v[p], value, size);
    ws.mask[p] |= 1ull << lane;
    if (predicate) ws.bits[p] |= 1ull << lane;
    b.st[c] = AT_WARP;
    wait(b, c);
    return warp_view{&b.s[w * HIPCPU_WARP_SIZE].v[p][0], (unsigned)sizeof(lane_slots), ws.mask[p],
                     ws.bits[p], lane};
}

}  // namespace hipcpu

#endif /* HIP_CPU_BLOCK_H */
