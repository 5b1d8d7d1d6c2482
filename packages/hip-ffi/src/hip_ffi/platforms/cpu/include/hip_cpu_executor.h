/* The grid executor, compiled into every code object after the program (hip_ffi's cpu hiprtc
 * appends it together with one HIPCPU_KERNEL(name) line per __global__ function it found).
 *
 * A launch runs its blocks in parallel on the runtime library's worker threads (one per core;
 * blocks are work items taken in chunks). A block runs start to finish on one OS thread:
 *
 * - It starts as a plain loop: thread (x, y, z) is an ordinary call of the kernel, the next
 *   starting when the previous returns. A kernel without barriers therefore runs as a C loop
 *   over its threads, with the kernel body inlined into it.
 * - The first __syncthreads() turns the block into fibers (user-space threads with their own
 *   stacks, switched by a few instructions; no OS thread per GPU thread, which would cost a
 *   kernel round trip per barrier and per thread). The thread that called it keeps the OS
 *   thread's stack; every thread after it gets a fiber that starts at the beginning of the
 *   kernel. The threads before it have already returned without reaching a barrier: on a GPU
 *   they are threads that exited, which barriers do not wait for. (A block whose threads
 *   disagree about a barrier is undefined behaviour on a GPU; here it cannot deadlock.)
 * - A barrier is a round: fibers run in thread order, each up to its next barrier or its end;
 *   when the last live one arrives the round is complete and the first live one resumes. A
 *   fiber switches straight to the next one (one switch per thread per barrier).
 *
 * __trap(), a failed assert() and hipcpu::fail() end the launch: the block unwinds to its
 * start (__builtin_longjmp), the remaining blocks are skipped, and the launch returns the error
 * code with a message.
 *
 * A bad access ends the launch the same way: while a block runs, its OS thread's fault record
 * (hip_cpu_abi.h, hipcpu_fault) points at the block's jump buffer, and the runtime library's
 * SIGSEGV/SIGBUS/SIGFPE handler unwinds there; the launch returns hipErrorIllegalAddress
 * (hipErrorLaunchFailure for an arithmetic trap) with the address, block and thread. The
 * handler runs on an alternate signal stack, so a stack overflow is caught too (a fiber's stack
 * has a guard page). Checked launches also protect the dynamic shared buffer past the launch's
 * size, so that an overrun of it faults (a page's granularity).
 */
#ifndef HIP_CPU_EXECUTOR_H
#define HIP_CPU_EXECUTOR_H

#include "hip_cpu_abi.h"  // (<atomic> and <ucontext.h> come with the prelude, before any macro)

const int warpSize = 1;

/* All extern __shared__ arrays alias this buffer (see HIPCPU_DYNAMIC_SHARED). */
extern "C" {
alignas(256) thread_local unsigned char
    __hipcpu_dynamic_shared[HIPCPU_MAX_DYNAMIC_SHARED + HIPCPU_SHARED_GUARD];
}

#if defined(__x86_64__) && !defined(HIPCPU_FIBER_UCONTEXT)
/* hipcpu_fiber_switch(save, load): saves the callee-saved registers on the current stack,
 * stores the stack pointer in *save, and resumes the fiber whose stack pointer is `load`.
 * The SSE/x87 control words are not switched: every fiber of a block runs the same kernel on
 * the same OS thread, and device code has no way to change the rounding mode. A new fiber's
 * first switch returns to hipcpu_fiber_start, which calls r12(rbx). The section is pushed and
 * popped: the compiler does not know that a top-level asm switched it, and at -O0 it would
 * emit the next variable (a thread-local) into .text. */
asm(R"(
    .pushsection .text
    .globl hipcpu_fiber_switch
    .hidden hipcpu_fiber_switch
    .type hipcpu_fiber_switch, @function
hipcpu_fiber_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size hipcpu_fiber_switch, .-hipcpu_fiber_switch
    .globl hipcpu_fiber_start
    .hidden hipcpu_fiber_start
    .type hipcpu_fiber_start, @function
hipcpu_fiber_start:
    movq %rbx, %rdi
    callq *%r12
    ud2
    .size hipcpu_fiber_start, .-hipcpu_fiber_start
    .popsection
)");
extern "C" void hipcpu_fiber_switch(void** save, void* load) __attribute__((visibility("hidden")));
extern "C" void hipcpu_fiber_start() __attribute__((visibility("hidden")));
#define HIPCPU_FIBER_ASM 1
#endif  // else ucontext (portable, slower: swapcontext also saves the signal mask)

namespace hipcpu {

struct fiber {
    void* sp;        // saved stack pointer (asm) or ucontext_t* (fallback)
    int next, prev;  // circular list of live fibers, in thread order
    uint3 idx;
};

struct grid_state {
    std::atomic<int> status{0};  // first failure's hipError_t
    std::atomic<bool> abort{false};
    char* message;
    unsigned long long message_size;
};

struct block {
    fiber* f = nullptr;
    unsigned n = 1;         // threads in the block
    unsigned cur = 0;       // thread now running (meaningful once `fibers`)
    int head = 0, live = 0;
    bool fibers = false;    // converted from the plain loop
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
#endif

static inline uint3 unlinear(unsigned t, uint3 d) {
    return uint3{t % d.x, (t / d.x) % d.y, t / (d.x * d.y)};
}

/* Fiber contexts. With the asm switch a context is a saved stack pointer: `save` is where to
 * store the current one, `load` the one to resume. With ucontext a context is a ucontext_t:
 * *save points at the one to fill, `load` is the one to resume. */
#ifdef HIPCPU_FIBER_ASM
static inline void switch_fiber(void** save, void* load) {
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    hipcpu_fiber_switch(save, load);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}
static inline void* make_fiber(char* stack_high, void (*entry)(void*), void* arg) {
    unsigned long long* sp = (unsigned long long*)((unsigned long long)stack_high & ~15ull);
    *--sp = (unsigned long long)&hipcpu_fiber_start;  // `ret` lands here, rsp 16-aligned
    *--sp = 0;                                        // rbp
    *--sp = (unsigned long long)arg;                  // rbx: the argument
    *--sp = (unsigned long long)entry;                // r12: the function
    *--sp = 0;                                        // r13
    *--sp = 0;                                        // r14
    *--sp = 0;                                        // r15
    return sp;
}
#else
static inline void switch_fiber(void** save, void* load) {
    swapcontext((ucontext_t*)*save, (ucontext_t*)load);
}
static thread_local ucontext_t* tl_contexts;  // [n] per block thread, then one for the loop
static thread_local unsigned tl_context_capacity;
#endif

static inline void resume(block& b, void** save, int to) {
    b.cur = (unsigned)to;
    threadIdx = b.f[to].idx;
    switch_fiber(save, b.f[to].sp);
}

/* Remove fiber c from the live list; returns the fiber to run next (or -1: none left). Sets
 * the barrier result when c's leaving completes a round. */
static inline int leave(block& b, int c) {
    fiber& f = b.f[c];
    if (--b.live == 0) return -1;
    b.f[f.prev].next = f.next;
    b.f[f.next].prev = f.prev;
    if (b.head == c) b.head = f.next;
    if (f.next > c) return f.next;
    b.result = b.acc;  // wrapped around: everyone else has arrived
    b.acc = 0;
    return b.head;
}

static void fiber_main(void*) {
    block& b = *tl_block;
    b.thunk(b.grid);
    int to = leave(b, (int)b.cur);
    void* dead = b.f[b.cur].sp;  // this fiber's context is never resumed: scribble on it
    if (to < 0) switch_fiber(&dead, b.sched_sp);
    resume(b, &dead, to);
    __builtin_unreachable();
}
#ifndef HIPCPU_FIBER_ASM
static void fiber_main_uc() { fiber_main(nullptr); }
#endif

/* The running thread (on the OS thread's own stack) reached the first barrier of its block. */
static void convert(block& b) {
    unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    unsigned long long stride = 0;
    char* stacks = b.rt->fiber_stacks(b.n, &stride);
    b.f = (fiber*)b.rt->scratch((unsigned long long)b.n * sizeof(fiber));
    if (stacks == nullptr || b.f == nullptr)
        fail(2 /* hipErrorOutOfMemory */, "no memory for the fiber stacks of a block");
#ifndef HIPCPU_FIBER_ASM
    if (tl_context_capacity < b.n + 1) {
        free(tl_contexts);
        tl_contexts = (ucontext_t*)calloc(b.n + 1, sizeof(ucontext_t));
        tl_context_capacity = tl_contexts ? b.n + 1 : 0;
        if (tl_contexts == nullptr) fail(2, "no memory for the fiber contexts of a block");
    }
    b.sched_sp = &tl_contexts[b.n];
#endif
    for (unsigned j = t; j < b.n; ++j) {
        fiber& f = b.f[j];
        f.next = (int)(j + 1 < b.n ? j + 1 : t);
        f.prev = (int)(j > t ? j - 1 : b.n - 1);
        f.idx = unlinear(j, blockDim);
        char* low = stacks + j * stride;
        // Stagger the stack tops by a cache line per fiber: with equal strides they would all
        // sit at the same page offset, hence in one L1 set, and every switch would miss.
        char* high = low + stride - (j % 64) * 64;
#ifdef HIPCPU_FIBER_ASM
        if (j != t) f.sp = make_fiber(high, &fiber_main, &f);  // t keeps its stack
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
    b.head = (int)t;
    b.live = (int)(b.n - t);
    b.acc = 0;
    b.fibers = true;
}

__attribute__((noinline)) int barrier(int count) {
    block& b = *tl_block;
    if (!b.fibers) {
        if (b.n == 1) return count;
        convert(b);
    }
    int c = (int)b.cur;
    b.acc += (unsigned)count;
    int to = b.f[c].next;
    if (to <= c) {  // c is the last live thread of the round
        b.result = b.acc;
        b.acc = 0;
        to = b.head;
        if (to == c) return (int)b.result;
    }
    void* self = b.f[c].sp;  // ucontext: the context to fill; asm: overwritten with the sp
    resume(b, HIPCPU_SAVE_SLOT(b.f[c].sp, self), to);
    return (int)b.result;
}

/* The thread that converted the block returned into the plain loop: run the other fibers to
 * their ends; returns when the last of them has. */
static void finish_fibers(block& b) {
    int to = leave(b, (int)b.cur);
    if (to >= 0) {
        void* self = b.sched_sp;
        resume(b, HIPCPU_SAVE_SLOT(b.sched_sp, self), to);
    }
    b.fibers = false;
}

/* The launch fails with `code` (the first failure of a grid wins: true for that one) and its
 * blocks stop. */
static bool claim(grid_state& state, int code) {
    int expected = 0;
    bool first = state.status.compare_exchange_strong(expected, code);
    state.abort.store(true);
    return first;
}
static void record(grid_state& state, int code, const char* message) {
    if (claim(state, code)) snprintf(state.message, state.message_size, "%s", message);
}

[[noreturn]] __attribute__((noinline)) void fail(int code, const char* message) {
    block* b = tl_block;
    if (b == nullptr) {  // not inside a launch: nothing to unwind to
        fprintf(stderr, "hip-ffi cpu: %s\n", message);
        abort();
    }
    record(*b->state, code, message);
    __builtin_longjmp(b->jmp, 1);
}

/* The message of bad access `f` of the GPU thread (blockIdx, threadIdx). */
static void describe_fault(const hipcpu_fault& f, bool thread_known, char* text, size_t size) {
    char thread[48] = "unknown: it did not fault when run again";
    if (thread_known) snprintf(thread, sizeof thread, "%u,%u,%u", threadIdx.x, threadIdx.y, threadIdx.z);
    if (f.signal == 8 /* SIGFPE */) {
        snprintf(text, size, "arithmetic exception (%s) in block [%u,%u,%u], thread [%s]",
                 f.code == 1 ? "integer divide by zero" : f.code == 2 ? "integer overflow" : "SIGFPE",
                 blockIdx.x, blockIdx.y, blockIdx.z, thread);
        return;
    }
    char where[48];  // x86 gives no address for one outside the address space
    if (f.address == ~0ull) snprintf(where, sizeof where, "outside the address space");
    else snprintf(where, sizeof where, "0x%llx", f.address);
    const char* kind = f.access == 1 ? "write" : f.access == 0 ? "read" : "access";
    snprintf(text, size, "illegal address %s (%s, %s) in block [%u,%u,%u], thread [%s]", where,
             kind, f.signal == 7 ? "SIGBUS" : "SIGSEGV", blockIdx.x, blockIdx.y, blockIdx.z, thread);
}

/* ---- launching ------------------------------------------------------------------------- */
template <class F> struct signature;
template <class... A> struct signature<void (*)(A...)> {
    using args = std::tuple<std::decay_t<A>...>;
    static constexpr unsigned count = sizeof...(A);
    static constexpr unsigned long long sizes[sizeof...(A) + 1] = {sizeof(std::decay_t<A>)..., 0};
    static constexpr unsigned long long aligns[sizeof...(A) + 1] = {alignof(std::decay_t<A>)..., 1};
    static constexpr unsigned long long offset(unsigned i) {
        unsigned long long at = 0;
        for (unsigned j = 0; j <= i; ++j) {
            at = (at + aligns[j] - 1) / aligns[j] * aligns[j];
            if (j < i) at += sizes[j];
        }
        return at;
    }
};

template <class T> static inline T load_arg(const char* p) {
    static_assert(std::is_trivially_copyable<T>::value, "kernel arguments must be trivially copyable");
    union slot {
        T value;
        unsigned char bytes[sizeof(T)];
        slot() {}
    } s;
    std::memcpy(s.bytes, p, sizeof(T));
    return s.value;
}

template <auto K> struct grid {
    using sig = signature<decltype(K)>;
    typename sig::args args;
    uint3 gdim, bdim;
    const hipcpu_runtime* rt;
    grid_state state;
    unsigned long long dynamic_shared;  // bytes the launch asked for
    bool checked;                       // HIPCPU_LAUNCH_CHECKED

    template <size_t... I> static typename sig::args unpack(const char* p, std::index_sequence<I...>) {
        return typename sig::args{
            load_arg<std::tuple_element_t<I, typename sig::args>>(p + sig::offset(I))...};
    }
    static void thunk(void* g) { std::apply(K, static_cast<grid*>(g)->args); }

    /* One block as a plain loop over its threads (noinline: it is not the function that
     * calls __builtin_setjmp, which keeps everything in memory). The compiler may keep
     * threadIdx in registers across the loop (and vectorize it); `Fenced` stores it before
     * each thread's code, so that a fault finds the faulting thread's index in memory. */
    template <bool Fenced> __attribute__((noinline)) static void plain(grid& g, block& b) {
        for (unsigned z = 0; z < g.bdim.z; ++z)
            for (unsigned y = 0; y < g.bdim.y; ++y)
                for (unsigned x = 0; x < g.bdim.x; ++x) {
                    threadIdx = uint3{x, y, z};
                    if (Fenced) __atomic_signal_fence(__ATOMIC_SEQ_CST);
                    std::apply(K, g.args);
                    if (__builtin_expect(b.fibers, 0)) {
                        finish_fibers(b);
                        return;
                    }
                }
    }
    /* Run block b with `Fenced`; false when it was unwound (fail(), or a fault: b.fault). */
    template <bool Fenced> __attribute__((noinline)) static bool attempt(grid& g, block& b) {
        if (__builtin_setjmp(b.jmp)) {
            b.fault->jmp = nullptr;
            b.unwound_in_fiber = b.fibers;
            b.fibers = false;
            return false;
        }
        b.fault->jmp = b.jmp;  // from here a fault is this block's
        plain<Fenced>(g, b);
        b.fault->jmp = nullptr;
        return true;
    }
    /* Block b faulted. The launch fails with the first failure of the grid; if that is this
     * fault, find the faulting thread and say where: a fault in a fiber (past a barrier) knows
     * it (switching fibers stores threadIdx), one in the plain loop is found by running the
     * block again with threadIdx stored before each thread, up to the fault. (That runs the
     * block's threads before the faulting one twice: the outputs of a failed launch are
     * undefined, as on a GPU.) */
    __attribute__((noinline, cold)) static void report(grid& g, block& b) {
        hipcpu_fault first = *b.fault;
        b.fault->signal = 0;
        int code = first.signal == 8 /* SIGFPE */ ? 719 /* hipErrorLaunchFailure */
                                                 : 700 /* hipErrorIllegalAddress */;
        if (!claim(g.state, code)) return;
        bool known = b.unwound_in_fiber || (!attempt<true>(g, b) && b.fault->signal == first.signal);
        b.fault->signal = 0;
        describe_fault(first, known, g.state.message, g.state.message_size);
    }
    /* Run block b; false when it failed (the launch's status says how). */
    static bool guarded(grid& g, block& b) {
        if (attempt<false>(g, b)) return true;
        if (b.fault->signal) report(g, b);
        return false;
    }
    static void run_range(void* gp, unsigned long long begin, unsigned long long end) {
        grid& g = *static_cast<grid*>(gp);
        block b;
        b.n = g.bdim.x * g.bdim.y * g.bdim.z;
        b.thunk = &thunk;
        b.grid = gp;
        b.state = &g.state;
        b.rt = g.rt;
        hipcpu_fault fault{};
        hipcpu_fault** slot = g.rt->fault_slot();
        hipcpu_fault* outer_fault = *slot;
        *slot = b.fault = &fault;
        block* outer = tl_block;
        tl_block = &b;
        blockDim = g.bdim;
        gridDim = g.gdim;
        unsigned char* shared = __hipcpu_dynamic_shared;
        unsigned long long spare = sizeof __hipcpu_dynamic_shared - g.dynamic_shared;
        if (g.checked) g.rt->protect(shared + g.dynamic_shared, spare, 0);
        unsigned long long plane = (unsigned long long)g.gdim.x * g.gdim.y;
        for (unsigned long long i = begin; i < end; ++i) {
            if (g.state.abort.load(std::memory_order_relaxed)) break;
            blockIdx = uint3{(unsigned)(i % g.gdim.x), (unsigned)(i / g.gdim.x % g.gdim.y),
                             (unsigned)(i / plane)};
            if (!guarded(g, b)) break;
        }
        if (g.checked) g.rt->protect(shared + g.dynamic_shared, spare, 1);
        tl_block = outer;
        *slot = outer_fault;
    }
};

template <auto K> int launch(const unsigned long long* s) {
    if (s[HIPCPU_SLOT_ABI] != HIPCPU_ABI_VERSION) return 98;  // hipErrorInvalidDeviceFunction
    using G = grid<K>;
    G g{G::unpack((const char*)s[HIPCPU_SLOT_ARGS], std::make_index_sequence<G::sig::count>{}),
        uint3{(unsigned)s[HIPCPU_SLOT_GRID], (unsigned)s[HIPCPU_SLOT_GRID + 1],
              (unsigned)s[HIPCPU_SLOT_GRID + 2]},
        uint3{(unsigned)s[HIPCPU_SLOT_BLOCK], (unsigned)s[HIPCPU_SLOT_BLOCK + 1],
              (unsigned)s[HIPCPU_SLOT_BLOCK + 2]},
        (const hipcpu_runtime*)s[HIPCPU_SLOT_RUNTIME],
        {},
        0,
        false};
    g.state.message = (char*)s[HIPCPU_SLOT_MESSAGE];
    g.state.message_size = s[HIPCPU_SLOT_MESSAGE_SIZE];
    g.dynamic_shared = s[HIPCPU_SLOT_DYN_SHARED];
    g.checked = (s[HIPCPU_SLOT_FLAGS] & HIPCPU_LAUNCH_CHECKED) != 0;
    unsigned long long blocks = (unsigned long long)g.gdim.x * g.gdim.y * g.gdim.z;
    g.rt->parallel_for(blocks, &G::run_range, &g);
    return g.state.status.load();
}

/* The packed-argument layout of kernel K: [size, alignment] per parameter; returns the count. */
template <auto K> int describe(unsigned long long* out, int capacity) {
    using sig = typename grid<K>::sig;
    for (unsigned i = 0; i < sig::count && (int)i < capacity; ++i) {
        out[2 * i] = sig::sizes[i];
        out[2 * i + 1] = sig::aligns[i];
    }
    return (int)sig::count;
}

}  // namespace hipcpu

/* A failed device-side assert(): glibc's assert calls this; the definition in the code object
 * (hidden) takes precedence over libc's for the kernels, so it ends the launch instead of the
 * process, with the message a GPU prints. */
extern "C" [[noreturn]] void __assert_fail(const char* assertion, const char* file, unsigned int line,
                                           const char* function) noexcept {
    char text[512];
    snprintf(text, sizeof text, "%s:%u: %s: block [%u,%u,%u], thread [%u,%u,%u] Assertion `%s' failed.",
             file, line, function, blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x, threadIdx.y,
             threadIdx.z, assertion);
    fprintf(stderr, "%s\n", text);
    ::hipcpu::fail(710 /* hipErrorAssert */, text);
}

extern "C" __attribute__((visibility("default"), used)) const unsigned __hipcpu_abi_version =
    HIPCPU_ABI_VERSION;

#define HIPCPU_KERNEL(name)                                                                     \
    extern "C" __attribute__((visibility("default"), used)) int __hipcpu_launch_##name(        \
        const unsigned long long* slots) {                                                     \
        return ::hipcpu::launch<&name>(slots);                                                 \
    }                                                                                          \
    extern "C" __attribute__((visibility("default"), used)) int __hipcpu_describe_##name(      \
        unsigned long long* out, int capacity) {                                               \
        return ::hipcpu::describe<&name>(out, capacity);                                       \
    }

/* Makes the program's `extern __shared__ T name[];` an alias of the dynamic shared buffer. */
#define HIPCPU_DYNAMIC_SHARED(name)                                                             \
    asm(".globl " #name "\n.hidden " #name "\n.type " #name ", @tls_object\n.set " #name        \
        ", __hipcpu_dynamic_shared\n.size " #name ", 65536\n");

#endif /* HIP_CPU_EXECUTOR_H */
