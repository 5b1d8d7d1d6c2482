/* The threads of one block: the plain loop, and fibers once they must meet (part of the
 * executor, hip_cpu_executor.h).
 *
 * A block starts as a plain loop: thread (x, y, z) is an ordinary call of the kernel, the
 * next starting when the previous returns, so a kernel without barriers or warp operations
 * runs as a C loop over its threads. The first __syncthreads(), warp operation (shuffle, vote,
 * __syncwarp) or grid sync turns the block into fibers (hip_cpu_fiber.h): the thread that got
 * there keeps the OS thread's stack, every thread after it gets a fiber that starts at the
 * beginning of the kernel, and the threads before it have already returned without meeting
 * anyone (threads that exited, which barriers do not wait for). From then on the launch's
 * later blocks on this OS thread start as fibers: a fiber whose thread ended parks, and runs
 * the same thread of the next block (no stack to set up again, no plain-loop thread to
 * convert).
 *
 * Threads are grouped in warps of HIPCPU_WARP_SIZE consecutive linear ids. Fibers run in
 * thread order, each until it waits:
 * - at a warp sync (a shuffle or vote): its value goes in its slot; when every live lane of
 *   the warp waits, the lanes at the warp sync resume (in lane order) and read each other's
 *   slots. Two slot sets alternate (by the warp's round parity): a lane that runs ahead to the
 *   next shuffle writes the other set, while later lanes still read this one;
 * - at a block barrier: the warp's next lane runs; when the whole warp waits there, the next
 *   warp; when every live thread waits, all resume (the barrier's count is then known).
 *   Counted, not searched: a warp whose lanes all wait there is `complete`, and the round
 *   ends when every warp with a live lane is.
 * Each wait is one fiber switch; a barrier round over a block of n threads is n switches, a
 * shuffle round over a warp is warpSize switches. Lanes that wait at different places (a
 * shuffle inside a branch that some lanes skip) never deadlock: a warp sync completes with
 * the lanes that reached one (its ballot mask), as on a GPU with independent thread scheduling.
 */
#ifndef HIP_CPU_SCHED_H
#define HIP_CPU_SCHED_H

#include "hip_cpu_block.h"

namespace hipcpu {

/* Switch from the fiber whose context goes to *save to fiber `to`. */
static inline __attribute__((always_inline)) void resume(block& b, void** save, unsigned to) {
    b.cur = to;
    set_thread_idx(b, to);
    switch_fiber(save, &b.sp[to]);
}

/* The lanes of warp w that have not arrived (RUN), as a mask (lane l: bit l), from all of
 * its states at once. The states are DONE from [n] on: lanes past the block never show. */
static inline unsigned long long running(const block& b, unsigned w) {
    static_assert(RUN == 0, "a search for RUN is a search for zero bytes");
    const unsigned char* st = b.st + w * HIPCPU_WARP_SIZE;
    unsigned long long mask = 0;
#if defined(__AVX2__) && defined(__GNUC__) && HIPCPU_WARP_SIZE >= 32
    typedef char bytes32 __attribute__((vector_size(32)));
    for (unsigned g = 0; g < HIPCPU_WARP_SIZE; g += 32) {  // 32 states a compare
        bytes32 x;
        std::memcpy(&x, st + g, 32);
        mask |= (unsigned long long)(unsigned)__builtin_ia32_pmovmskb256(x == 0) << g;
    }
#elif __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && HIPCPU_WARP_SIZE >= 8
    const unsigned long long low7 = 0x7f7f7f7f7f7f7f7full;
    for (unsigned g = 0; g < HIPCPU_WARP_SIZE; g += 8) {  // 8 states a word
        unsigned long long x;
        std::memcpy(&x, st + g, 8);
        unsigned long long zero = ~(((x & low7) + low7) | x | low7);  // 0x80 in zero bytes
        mask |= ((zero >> 7) * 0x0102040810204080ull) >> 56 << g;      // their bits, gathered
    }
#else
    for (unsigned l = 0; l < HIPCPU_WARP_SIZE; ++l)
        mask |= (unsigned long long)(st[l] == RUN) << l;
#endif
    return mask;
}

/* The threads of st[0, count) that wait at `where` run again: branch-free, so that the
 * compiler makes it a few vector compares (a block's, or a warp's, states side by side). */
static inline void wake(unsigned char* st, unsigned count, unsigned char where) {
    for (unsigned t = 0; t < count; ++t) st[t] = st[t] == where ? (unsigned char)RUN : st[t];
}

/* Every live lane of warp w waits and some at a warp sync (exactly the lanes of its mask):
 * they run again. */
static __attribute__((noinline)) unsigned release_warp(block& b, unsigned w) {
    warp_state& ws = b.w[w];
    unsigned long long at = ws.mask[ws.round & 1];
    unsigned next = (++ws.round) & 1;
    ws.mask[next] = ws.bits[next] = 0;  // every lane has read the round before this one
    wake(b.st + w * HIPCPU_WARP_SIZE, HIPCPU_WARP_SIZE, AT_WARP);
    return w * HIPCPU_WARP_SIZE + (unsigned)__builtin_ctzll(at);
}

static void grid_barrier(block& b);

/* Every live thread waits at the block barrier: the round is complete, all run again. */
static __attribute__((noinline)) unsigned release_block(block& b) {
    b.result = b.acc;
    b.acc = 0;
    b.complete = 0;
    if (b.grid_sync) {
        b.grid_sync = false;
        grid_barrier(b);
    }
    unsigned first = b.first;
    wake(b.st + first, b.n - first, AT_BLOCK);
    for (unsigned w = first / HIPCPU_WARP_SIZE;; ++w) {  // threads only ever end: it moves up
        unsigned long long m = running(b, w);
        if (m) return b.first = w * HIPCPU_WARP_SIZE + (unsigned)__builtin_ctzll(m);
    }
}

/* Thread c stopped running (it waits, or it is done): the thread to run next, ~0u when none
 * is left. May be c itself (the round it waits for is complete). Usually c ended its warp's
 * round: the next warp's first lane runs. */
static inline unsigned next_thread(block& b, unsigned c) {
    unsigned w = c / HIPCPU_WARP_SIZE, lane = c % HIPCPU_WARP_SIZE;
    unsigned long long run = running(b, w);
    if (run) {  // the first lane after c that has not arrived, else one before it (released
        unsigned long long after = run & (~1ull << lane);  // by a warp sync, say)
        return w * HIPCPU_WARP_SIZE + (unsigned)__builtin_ctzll(after ? after : run);
    }
    warp_state& ws = b.w[w];
    if (ws.mask[ws.round & 1]) return release_warp(b, w);
    // Warp w is through this round: its live lanes all wait at the block barrier, and stay
    // there until the round ends, so each warp gets here once a round.
    if (ws.live == 0) b.live_warps -= 1;
    else b.complete += 1;
    if (b.complete < b.live_warps) {  // some other warp still runs: the next one after w
        for (unsigned k = 1; k < b.warps; ++k) {
            unsigned v = w + k < b.warps ? w + k : w + k - b.warps;
            unsigned long long m = running(b, v);
            if (m) return v * HIPCPU_WARP_SIZE + (unsigned)__builtin_ctzll(m);
        }
    }
    if (b.live_warps == 0) return ~0u;
    return release_block(b);
}

/* Thread c is done: the thread to run next, ~0u when none is left. */
static inline unsigned after_end(block& b, unsigned c) {
    b.st[c] = DONE;
    b.w[c / HIPCPU_WARP_SIZE].live -= 1;
    unsigned to = c + 1;
    return to % HIPCPU_WARP_SIZE != 0 && b.st[to] == RUN ? to : next_thread(b, c);
}

/* The running fiber's thread ended: the next one runs, or, after the last, the scheduler
 * (finish_fibers, run_fibers). The fiber parks here: the next block of the launch resumes it
 * to run its thread there. */
static void end_thread(block& b) {
    unsigned c = b.cur, to = after_end(b, c);
    if (to == ~0u) switch_fiber(&b.sp[c], &b.sched_sp);
    else resume(b, &b.sp[c], to);
}

static void fiber_main(void*) {
    for (;;) {  // one GPU thread of each block
        block& b = current_block();
        b.thunk(b.grid);
        end_thread(b);
    }
}
#ifndef HIPCPU_FIBER_ASM
static void fiber_main_uc() { fiber_main(nullptr); }
#endif

/* The first wait of the launch on this OS thread: the memory of its fibers. */
static void setup_fibers(block& b) {
    b.stacks = b.rt->fiber_stacks(b.n, &b.stride);
    b.warps = (b.n + HIPCPU_WARP_SIZE - 1) / HIPCPU_WARP_SIZE;
    unsigned long long slots_bytes = (unsigned long long)b.n * sizeof(lane_slots);
    char* memory = (char*)b.rt->scratch(slots_bytes + b.warps * sizeof(warp_state));
    if (b.stacks == nullptr || memory == nullptr)
        fail(2 /* hipErrorOutOfMemory */, "no memory for the fiber stacks of a block");
    b.s = (lane_slots*)memory;
    b.w = (warp_state*)(memory + slots_bytes);
#ifndef HIPCPU_FIBER_ASM
    if (tl_context_capacity < b.n + 1) {
        free(tl_contexts);
        tl_contexts = (ucontext_t*)calloc(b.n + 1, sizeof(ucontext_t));
        tl_context_capacity = tl_contexts ? b.n + 1 : 0;
        if (tl_contexts == nullptr) fail(2, "no memory for the fiber contexts of a block");
    }
    b.sched_sp = &tl_contexts[b.n];
#endif
    uint3 idx{0, 0, 0};
    for (unsigned j = 0; j < b.n; ++j) {
#ifndef HIPCPU_FIBER_ASM
        b.sp[j] = &tl_contexts[j];  // the converting thread's too: its wait fills it
#endif
        b.idx[j] = idx;
        if (++idx.x == blockDim.x) {  // the next thread's index, without dividing
            idx.x = 0;
            if (++idx.y == blockDim.y) idx.y = 0, ++idx.z;
        }
    }
    b.sp[b.n] = nullptr;
    b.made = b.n;
}

/* Fibers that start threads [lo, b.made) at the kernel's entry. */
static void make_fibers(block& b, unsigned lo) {
    for (unsigned j = lo; j < b.made; ++j) {
        char* low = b.stacks + j * b.stride;
        // Stagger the stack tops by a cache line per fiber: with equal strides they would all
        // sit at the same page offset, hence in one L1 set, and every switch would miss.
        char* high = low + b.stride - (j % 64) * 64;
#ifdef HIPCPU_FIBER_ASM
        b.sp[j] = make_fiber(high, &fiber_main, nullptr);
#else
        ucontext_t* uc = &tl_contexts[j];
        getcontext(uc);
        uc->uc_stack.ss_sp = low + 4096;  // above the guard page
        uc->uc_stack.ss_size = (size_t)(high - low) - 4096;
        uc->uc_link = nullptr;
        makecontext(uc, &fiber_main_uc, 0);
#endif
    }
    b.made = lo < b.made ? lo : b.made;
}

/* The block's threads from t on are live and have not arrived anywhere; t runs. */
static void start_round(block& b, unsigned t) {
    std::memset(b.st, DONE, t);
    std::memset(b.st + t, RUN, b.n - t);
    std::memset(b.st + b.n, DONE, 64);  // the rest of the last warp, and the sentinel
    for (unsigned w = 0; w < b.warps; ++w) {
        unsigned low = w * HIPCPU_WARP_SIZE, high = low + HIPCPU_WARP_SIZE;
        high = high < b.n ? high : b.n;
        b.w[w] = warp_state{0, high > t ? high - (low > t ? low : t) : 0, {0, 0}, {0, 0}};
    }
    b.first = t;
    b.live_warps = b.warps - t / HIPCPU_WARP_SIZE;
    b.complete = 0;
    b.acc = 0;
    b.cur = t;
    b.fibers = true;
}

/* The running thread t (on the OS thread's own stack) is the first of its block to wait: the
 * threads after it become fibers, and so will every thread of the launch's later blocks on
 * this OS thread (run_fibers). */
__attribute__((noinline)) void convert(block& b) {
    if (b.split)  // fission.py found no wait here: it is wrong, and says so rather than corrupt
        fail(719 /* hipErrorLaunchFailure */,
             "a kernel split at its barriers waited where its split did not expect (report "
             "it; HIP_FFI_CPU_SPLIT=0 runs kernels unsplit)");
    unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    if (b.stacks == nullptr) setup_fibers(b);
    make_fibers(b, t + 1);
    start_round(b, t);
    b.waits = true;
}

/* A block of a launch that waits: every thread starts as a fiber (those of earlier blocks,
 * parked at their ends, start again); returns when the last has ended. */
static void run_fibers(block& b) {
    make_fibers(b, 0);  // the converting thread and those before it had none
    start_round(b, 0);
    resume(b, &b.sched_sp, 0);
    b.fibers = false;
}

__attribute__((noinline)) unsigned wait_target(block& b, unsigned c) { return next_thread(b, c); }

/* The thread that converted the block returned into the plain loop: run the other fibers to
 * their ends; returns when the last of them has. */
static void finish_fibers(block& b) {
    unsigned to = after_end(b, b.cur);
    if (to != ~0u) resume(b, &b.sched_sp, to);
    b.fibers = false;
}

/* ---- the grid barrier (cooperative launches: one OS thread per block) ---------------------- */
static void grid_barrier(block& b) {
    grid_state& g = *b.state;
    if (!g.cooperative)
        fail(719 /* hipErrorLaunchFailure */,
             "this_grid().sync() needs a cooperative launch (hipModuleLaunchCooperativeKernel)");
    unsigned generation = g.generation.load(std::memory_order_acquire);
    if (g.arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == g.blocks) {
        g.arrived.store(0, std::memory_order_relaxed);
        g.generation.fetch_add(1, std::memory_order_acq_rel);
        return;
    }
    for (unsigned spins = 0; g.generation.load(std::memory_order_acquire) == generation; ++spins) {
        if (g.abort.load(std::memory_order_relaxed))  // another block failed: this one stops
            fail(719, "the grid stopped: another block failed");
        if (spins > 64) sched_yield();
    }
}

__attribute__((noinline)) void grid_sync() {
    block& b = current_block();
    b.grid_sync = true;
    (void)block_barrier(0);
    if (b.grid_sync) {  // a one-thread block: no round to end
        b.grid_sync = false;
        grid_barrier(b);
    }
}

}  // namespace hipcpu

#endif /* HIP_CPU_SCHED_H */
