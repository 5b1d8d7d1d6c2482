/* The grid executor, compiled into every code object after the program (hip_ffi's cpu hiprtc
 * appends it together with one HIPCPU_KERNEL(name) line per __global__ function it found).
 *
 * A launch runs its blocks in parallel on the runtime library's worker threads (one per core;
 * blocks are work items taken in chunks). A block runs start to finish on one OS thread:
 *
 * - Its threads run as a plain loop, or as fibers once they must meet (a barrier, a warp
 *   operation): hip_cpu_sched.h; the fiber switch is in hip_cpu_fiber.h.
 * - A cooperative launch (HIPCPU_LAUNCH_COOPERATIVE: hipModuleLaunchCooperativeKernel) runs
 *   every block on an OS thread of its own, all at once, so that this_grid().sync() can wait
 *   for all of them (grid_barrier); the host allows at most one block per core.
 *
 * __trap(), abort(), a failed assert() and hipcpu::fail() end the launch: the block unwinds to
 * its start (__builtin_longjmp), the remaining blocks are skipped, and the launch returns the
 * error code with a message (hipErrorLaunchFailure for a trap or abort(), as HIP's device
 * abort() is a trap; hipErrorAssert for an assert).
 *
 * A bad access ends the launch the same way: while a block runs, its OS thread's fault record
 * (hip_cpu_abi.h, hipcpu_fault) points at the block's jump buffer, and the runtime library's
 * SIGSEGV/SIGBUS/SIGFPE/SIGILL handler unwinds there; the launch returns hipErrorIllegalAddress
 * (hipErrorLaunchFailure for an arithmetic trap or an illegal instruction: __builtin_trap())
 * with the address, block and thread. The
 * handler runs on an alternate signal stack, so a stack overflow is caught too (a fiber's stack
 * has a guard page). Checked launches also protect the dynamic shared buffer past the launch's
 * size, so that an overrun of it faults (a page's granularity).
 */
#ifndef HIP_CPU_EXECUTOR_H
#define HIP_CPU_EXECUTOR_H

#include "hip_cpu_abi.h"  // (<atomic> and <ucontext.h> come with the prelude, before any macro)
#include "hip_cpu_sched.h"

const int warpSize = HIPCPU_WARP_SIZE;

/* All extern __shared__ arrays alias this buffer (see HIPCPU_DYNAMIC_SHARED). */
extern "C" {
alignas(256) thread_local unsigned char
    __hipcpu_dynamic_shared[HIPCPU_MAX_DYNAMIC_SHARED + HIPCPU_SHARED_GUARD];
}

namespace hipcpu {

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
    if (b == nullptr) {  // not inside a launch: nothing to unwind to, the process dies
        fprintf(stderr, "hip-ffi cpu: %s\n", message);
        __builtin_trap();  // (SIGILL, not abort(): the code object's abort() comes back here)
    }
    record(*b->state, code, message);
    __builtin_longjmp(b->jmp, 1);
}

/* __trap() or abort() in a kernel: the launch fails as a GPU's trap does, saying where. */
[[noreturn]] __attribute__((noinline, cold)) void trapped(const char* what) {
    char text[160];
    snprintf(text, sizeof text, "%s in block [%u,%u,%u], thread [%u,%u,%u]", what, blockIdx.x,
             blockIdx.y, blockIdx.z, threadIdx.x, threadIdx.y, threadIdx.z);
    fail(719 /* hipErrorLaunchFailure */, text);
}

#if defined(__x86_64__)
/* This OS thread's threadIdx, for set_thread_idx. By the symbol's name (the prelude's static
 * thread_local, mangled _ZL9threadIdx), not &threadIdx: once its address is taken anywhere in
 * the program, the compiler no longer keeps threadIdx in registers across the plain loop, and
 * stores it for every thread through a __tls_get_addr call (a small kernel without waits ran
 * 5x slower). The stack is aligned for the call by hand: the asm does not know its frame. */
__attribute__((noinline)) static uint3* thread_idx_address() {
    uint3* address;
    asm volatile(
        "pushq %%rbp\n\t"
        "movq %%rsp, %%rbp\n\t"
        "andq $-16, %%rsp\n\t"
        "leaq _ZL9threadIdx@tlsld(%%rip), %%rdi\n\t"
        "call __tls_get_addr@PLT\n\t"
        "leaq _ZL9threadIdx@dtpoff(%%rax), %%rax\n\t"
        "movq %%rbp, %%rsp\n\t"
        "popq %%rbp"
        : "=a"(address)
        :
        : "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "memory", "cc", "xmm0", "xmm1",
          "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",
          "xmm12", "xmm13", "xmm14", "xmm15" HIPCPU_CLOBBER_AVX512);
    return address;
}
#endif

/* A fault's kind: 0 a bad access (SIGSEGV or SIGBUS: which one depends on the register that
 * held an address outside the address space), else its signal (SIGFPE 8, SIGILL 4). */
static int fault_kind(int signal) { return signal == 7 || signal == 11 ? 0 : signal; }

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
    if (f.signal == 4 /* SIGILL */) {
        snprintf(text, size, "trap: illegal instruction (SIGILL, as __builtin_trap() raises) in "
                 "block [%u,%u,%u], thread [%s]", blockIdx.x, blockIdx.y, blockIdx.z, thread);
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
    bool cooperative;                   // HIPCPU_LAUNCH_COOPERATIVE

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
        if constexpr (runs_blocks<K>::value) {  // split at its barriers: one call a block
            b.fenced = Fenced;
            std::apply(K, g.args);
            return;
        }
        if (b.waits) {
            run_fibers(b);
            return;
        }
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
            b.fault.jmp = nullptr;
            b.unwound_in_fiber = b.fibers;
            b.fibers = false;
            b.made = b.n;  // the fibers stopped mid-thread: none can start again
            return false;
        }
        b.fault.jmp = b.jmp;  // from here a fault is this block's
        plain<Fenced>(g, b);
        b.fault.jmp = nullptr;
        return true;
    }
    /* Block b faulted. The launch fails with the first failure of the grid; if that is this
     * fault, find the faulting thread and say where: a fault in a fiber (past a barrier) knows
     * it (switching fibers stores threadIdx), one in the plain loop is found by running the
     * block again with threadIdx stored before each thread, up to the fault. (That runs the
     * block's threads before the faulting one twice: the outputs of a failed launch are
     * undefined, as on a GPU.) */
    __attribute__((noinline, cold)) static void report(grid& g, block& b) {
        hipcpu_fault first = b.fault;
        b.fault.signal = 0;
        int code = fault_kind(first.signal) ? 719 /* hipErrorLaunchFailure */
                                            : 700 /* hipErrorIllegalAddress */;
        if (!claim(g.state, code)) return;
        // The rerun's fault matches by kind, not signal: its code differs (it stores threadIdx),
        // and an address outside the address space is SIGSEGV or SIGBUS by the register that
        // holds it (x86's #GP, or #SS through rsp/rbp).
        bool known = b.unwound_in_fiber ||
                     (!attempt<true>(g, b) && fault_kind(b.fault.signal) == fault_kind(first.signal));
        b.fault.signal = 0;
        describe_fault(first, known, g.state.message, g.state.message_size);
    }
    /* Run block b; false when it failed (the launch's status says how). */
    static bool guarded(grid& g, block& b) {
        if (attempt<false>(g, b)) return true;
        if (b.fault.signal) report(g, b);
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
#if defined(__x86_64__)
        b.tid = thread_idx_address();
#endif
        hipcpu_fault** slot = g.rt->fault_slot();
        if (!track_fault_slot(slot)) {  // current_block() could not find the block
            record(g.state, 719 /* hipErrorLaunchFailure */,
                   "the runtime's fault slot is not at the same offset on every thread");
            return;
        }
        hipcpu_fault* outer_fault = *slot;
        *slot = &b.fault;
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
            b.grid_sync = false;
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
        false,
        false};
    g.state.message = (char*)s[HIPCPU_SLOT_MESSAGE];
    g.state.message_size = s[HIPCPU_SLOT_MESSAGE_SIZE];
    g.dynamic_shared = s[HIPCPU_SLOT_DYN_SHARED];
    g.checked = (s[HIPCPU_SLOT_FLAGS] & HIPCPU_LAUNCH_CHECKED) != 0;
    g.cooperative = (s[HIPCPU_SLOT_FLAGS] & HIPCPU_LAUNCH_COOPERATIVE) != 0;
    unsigned long long blocks = (unsigned long long)g.gdim.x * g.gdim.y * g.gdim.z;
    g.state.cooperative = g.cooperative;
    g.state.blocks = blocks;
    if (!g.cooperative) {
        g.rt->parallel_for(blocks, &G::run_range, &g);
    } else if (g.rt->run_threads(blocks, &G::run_range, &g) != 0) {
        snprintf(g.state.message, g.state.message_size, "no OS thread for every block of a "
                 "cooperative launch of %llu blocks", blocks);
        return 720;  // hipErrorCooperativeLaunchTooLarge
    }
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

/* abort() (std::abort, __builtin_abort) in a kernel: HIP's device abort() is a trap, so it ends
 * the launch, not the process. Defined here (hidden) for the same reason as __assert_fail: the
 * runtime's signal handler does not take SIGABRT (hip_cpu_runtime.cpp says why). */
extern "C" [[noreturn]] void abort() noexcept { ::hipcpu::trapped("abort() was called"); }

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
