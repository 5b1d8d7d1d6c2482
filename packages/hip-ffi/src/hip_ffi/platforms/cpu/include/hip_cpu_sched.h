/* The threads of one block: the plain loop, and fibers once they must meet (part of the
 * executor, hip_cpu_executor.h).
 *
 * A block starts as a plain loop: thread (x, y, z) is an ordinary call of the kernel, the
 * next starting when the previous returns, so a kernel without barriers or warp operations
 * runs as a C loop over its threads. The first __syncthreads(), warp operation (shuffle, vote,
 * __syncwarp) or grid sync turns the block into fibers (hip_cpu_fiber.h): the thread that got
 * there keeps the OS thread's stack, every thread after it gets a fiber that starts at the
 * beginning of the kernel, and the threads before it have already returned without meeting
 * anyone (threads that exited, which barriers do not wait for).
 *
 * Threads are grouped in warps of HIPCPU_WARP_SIZE consecutive linear ids. Fibers run in
 * thread order, each until it waits:
 * - at a warp sync (a shuffle or vote): its value goes in its slot; when every live lane of
 *   the warp waits, the lanes at the warp sync resume (in lane order) and read each other's
 *   slots. Two slot sets alternate (by the warp's round parity): a lane that runs ahead to the
 *   next shuffle writes the other set, while later lanes still read this one;
 * - at a block barrier: the warp's next lane runs; when the whole warp waits there, the next
 *   warp; when every live thread waits, all resume (the barrier's count is then known).
 * Each wait is one fiber switch; a barrier round over a block of n threads is n switches, a
 * shuffle round over a warp is warpSize switches. Lanes that wait at different places (a
 * shuffle inside a branch that some lanes skip) never deadlock: a warp sync completes with
 * the lanes that reached one (its ballot mask), as on a GPU with independent thread scheduling.
 */
#ifndef HIP_CPU_SCHED_H
#define HIP_CPU_SCHED_H

#include "hip_cpu_block.h"

namespace hipcpu {

static inline uint3 unlinear(unsigned t, uint3 d) {
    return uint3{t % d.x, (t / d.x) % d.y, t / (d.x * d.y)};
}

/* Switch from fiber `from` (its context saved in *save) to fiber `to`. */
static inline __attribute__((always_inline)) void resume(block& b, void** save, unsigned to) {
    b.cur = to;
    threadIdx = b.f[to].idx;
    switch_fiber(save, b.f[to].sp);
}

static inline unsigned first_in_block(const block& b) {
    for (unsigned t = 0; t < b.n; ++t)
        if (b.f[t].state == RUN) return t;
    return ~0u;
}
static inline unsigned first_in(const block& b, unsigned w, unsigned char state) {
    unsigned end = (w + 1) * HIPCPU_WARP_SIZE < b.n ? (w + 1) * HIPCPU_WARP_SIZE : b.n;
    for (unsigned l = w * HIPCPU_WARP_SIZE; l < end; ++l)
        if (b.f[l].state == state) return l;
    return ~0u;
}

/* Every live lane of warp w waits and some at a warp sync: they run again. */
static __attribute__((noinline)) unsigned release_warp(block& b, unsigned w) {
    warp_state& ws = b.w[w];
    unsigned next = (++ws.round) & 1;
    ws.mask[next] = ws.bits[next] = 0;  // every lane has read the round before this one
    unsigned end = (w + 1) * HIPCPU_WARP_SIZE < b.n ? (w + 1) * HIPCPU_WARP_SIZE : b.n;
    for (unsigned l = w * HIPCPU_WARP_SIZE; l < end; ++l)
        if (b.f[l].state == AT_WARP) b.f[l].state = RUN;
    return first_in(b, w, RUN);
}

static void grid_barrier(block& b);

/* Every live thread waits at the block barrier: the round is complete, all run again. */
static __attribute__((noinline)) unsigned release_block(block& b) {
    b.result = b.acc;
    b.acc = 0;
    if (b.grid_sync) {
        b.grid_sync = false;
        grid_barrier(b);
    }
    fiber* f = b.f;
    for (unsigned t = 0; t < b.n; ++t)  // branch-free: the states are all AT_BLOCK or DONE
        f[t].state = f[t].state == AT_BLOCK ? (unsigned char)RUN : f[t].state;
    return first_in_block(b);
}

/* Thread c stopped running (it waits, or it is done): the thread to run next, ~0u when none
 * is left. May be c itself (the round it waits for is complete). */
static inline unsigned next_thread(block& b, unsigned c) {
    unsigned w = c / HIPCPU_WARP_SIZE, base = w * HIPCPU_WARP_SIZE;
    unsigned end = base + HIPCPU_WARP_SIZE < b.n ? base + HIPCPU_WARP_SIZE : b.n;
    for (unsigned l = c + 1; l < end; ++l)  // usually the next lane (a thread's end, say)
        if (b.f[l].state == RUN) return l;
    bool at_warp = false;  // some lane of the warp waits at a warp sync
    for (unsigned l = base; l < end; ++l) {  // any lane of the warp that has not arrived
        unsigned char state = b.f[l].state;
        if (state == RUN) return l;
        at_warp |= state == AT_WARP;
    }
    if (at_warp) return release_warp(b, w);
    if (b.live == 0) return ~0u;
    for (unsigned v = w + 1; v < b.warps; ++v) {  // the next warp with work to do
        unsigned l = first_in(b, v, RUN);
        if (l != ~0u) return l;
    }
    for (unsigned v = 0; v < w; ++v) {
        unsigned l = first_in(b, v, RUN);
        if (l != ~0u) return l;
    }
    return release_block(b);
}

static void fiber_main(void*) {
    block& b = *tl_block;
    b.thunk(b.grid);
    unsigned c = b.cur;
    b.f[c].state = DONE;
    b.live -= 1;
    unsigned to = next_thread(b, c);
    void* dead = b.f[c].sp;  // this fiber's context is never resumed: scribble on it
    if (to == ~0u) switch_fiber(&dead, b.sched_sp);
    resume(b, &dead, to);
    __builtin_unreachable();
}
#ifndef HIPCPU_FIBER_ASM
static void fiber_main_uc() { fiber_main(nullptr); }
#endif

/* The running thread (on the OS thread's own stack) is the first of its block to wait. */
__attribute__((noinline)) void convert(block& b) {
    unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    unsigned long long stride = 0;
    char* stacks = b.rt->fiber_stacks(b.n, &stride);
    b.warps = (b.n + HIPCPU_WARP_SIZE - 1) / HIPCPU_WARP_SIZE;
    unsigned long long fibers_bytes = ((unsigned long long)b.n * sizeof(fiber) + 63) / 64 * 64;
    unsigned long long slots_bytes = (unsigned long long)b.n * sizeof(lane_slots);
    char* memory = (char*)b.rt->scratch(fibers_bytes + slots_bytes + b.warps * sizeof(warp_state));
    if (stacks == nullptr || memory == nullptr)
        fail(2 /* hipErrorOutOfMemory */, "no memory for the fiber stacks of a block");
    b.f = (fiber*)memory;
    b.s = (lane_slots*)(memory + fibers_bytes);
    b.w = (warp_state*)(memory + fibers_bytes + slots_bytes);
    for (unsigned w = 0; w < b.warps; ++w) b.w[w] = warp_state{0, {0, 0}, {0, 0}};
#ifndef HIPCPU_FIBER_ASM
    if (tl_context_capacity < b.n + 1) {
        free(tl_contexts);
        tl_contexts = (ucontext_t*)calloc(b.n + 1, sizeof(ucontext_t));
        tl_context_capacity = tl_contexts ? b.n + 1 : 0;
        if (tl_contexts == nullptr) fail(2, "no memory for the fiber contexts of a block");
    }
    b.sched_sp = &tl_contexts[b.n];
#endif
    for (unsigned j = 0; j < b.n; ++j) {
        fiber& f = b.f[j];
        f.state = j < t ? DONE : RUN;
        f.idx = unlinear(j, blockDim);
        if (j < t) continue;
        char* low = stacks + j * stride;
        // Stagger the stack tops by a cache line per fiber: with equal strides they would all
        // sit at the same page offset, hence in one L1 set, and every switch would miss.
        char* high = low + stride - (j % 64) * 64;
#ifdef HIPCPU_FIBER_ASM
        if (j != t) f.sp = make_fiber(high, &fiber_main, nullptr);  // t keeps its stack
#else
        ucontext_t* uc = &tl_contexts[j];
        f.sp = uc;
        if (j == t) continue;
        getcontext(uc);
        uc->uc_stack.ss_sp = low + 4096;  // above the guard page
        uc->uc_stack.ss_size = (size_t)(high - low) - 4096;
        uc->uc_link = nullptr;
        makecontext(uc, &fiber_main_uc, 0);
#endif
    }
    b.cur = t;
    b.live = (int)(b.n - t);
    b.acc = 0;
    b.fibers = true;
}

/* Thread c waits (its state recorded) and the fast path of hip_cpu_block.h did not apply. */
__attribute__((noinline)) void wait_slow(block& b, unsigned c) {
    unsigned to = next_thread(b, c);
    if (to == c) return;
    void* self = b.f[c].sp;  // ucontext: the context to fill; asm: overwritten with the sp
    resume(b, HIPCPU_SAVE_SLOT(b.f[c].sp, self), to);
}

/* The thread that converted the block returned into the plain loop: run the other fibers to
 * their ends; returns when the last of them has. */
static void finish_fibers(block& b) {
    unsigned c = b.cur;
    b.f[c].state = DONE;
    b.live -= 1;
    unsigned to = next_thread(b, c);
    if (to != ~0u) {
        void* self = b.sched_sp;
        resume(b, HIPCPU_SAVE_SLOT(b.sched_sp, self), to);
    }
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
    block& b = *tl_block;
    b.grid_sync = true;
    (void)block_barrier(0);
    if (b.grid_sync) {  // a one-thread block: no round to end
        b.grid_sync = false;
        grid_barrier(b);
    }
}

}  // namespace hipcpu

#endif /* HIP_CPU_SCHED_H */
