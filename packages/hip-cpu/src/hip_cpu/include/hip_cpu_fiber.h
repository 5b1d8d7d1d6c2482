/* Fibers: user-space threads of one OS thread, each with its own stack (part of the executor,
 * hip_cpu_executor.h). A block's GPU threads become fibers at their first barrier or warp
 * operation (hip_cpu_sched.h); switching between them costs a few instructions and no kernel
 * call.
 *
 * x86-64: the switch is inline asm at each switch point. It declares every register clobbered,
 * so the compiler keeps across it only the values the kernel still needs (a reduction's index
 * and stride), on the fiber's own stack, instead of the whole callee-saved set; it resumes the
 * next fiber with an indirect jump, which the branch predictor gets right when every fiber
 * waits at the same place (a barrier round), where a `ret` to an address the call did not
 * push would always miss. The SSE/x87 control words are not switched: every fiber of a block
 * runs the same kernel on the same OS thread, and device code cannot change the rounding mode.
 * Elsewhere (or with -DHIPCPU_FIBER_UCONTEXT): ucontext, portable and slower (swapcontext
 * saves the signal mask with a system call).
 */
#ifndef HIP_CPU_FIBER_H
#define HIP_CPU_FIBER_H

/* The vector and mask registers past xmm15 (AVX-512), for asm that clobbers every register. */
#if defined(__x86_64__) && defined(__AVX512F__)
#define HIPCPU_CLOBBER_AVX512                                                                   \
    , "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", \
        "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31", "k1", "k2", "k3", "k4", "k5", "k6", "k7"
#else
#define HIPCPU_CLOBBER_AVX512
#endif

#if defined(__x86_64__) && !defined(HIPCPU_FIBER_UCONTEXT)
/* A new fiber's first switch lands here with [entry, argument] on its stack: it calls
 * entry(argument), which never returns (a fiber runs a thread of each block in turn, and
 * switches away at each thread's end). The section
 * is pushed and popped: the compiler does not know that a top-level asm switched it, and at
 * -O0 it would emit the next variable (a thread-local) into .text. */
asm(R"(
    .pushsection .text
    .globl hipcpu_fiber_start
    .hidden hipcpu_fiber_start
    .type hipcpu_fiber_start, @function
hipcpu_fiber_start:
    popq %rax
    popq %rdi
    callq *%rax
    ud2
    .size hipcpu_fiber_start, .-hipcpu_fiber_start
    .popsection
)");
extern "C" void hipcpu_fiber_start() __attribute__((visibility("hidden")));
#define HIPCPU_FIBER_ASM 1
#endif

namespace hipcpu {

#ifdef HIPCPU_FIBER_ASM
/* Saves the current fiber's context (its stack pointer) in *save and resumes the one in
 * *load, read after the save: save == load resumes the current fiber. Returns when something
 * switches back. It pushes right under the stack pointer: code objects are built with
 * -mno-red-zone (toolchain.py), so nothing lives there. rbp is saved by hand (it may be the
 * frame pointer, which asm cannot clobber). */
static inline __attribute__((always_inline)) void switch_fiber(void** save, void** load) {
    asm volatile(
        "pushq %%rbp\n\t"
        "leaq 1f(%%rip), %%rax\n\t"
        "pushq %%rax\n\t"
        "movq %%rsp, (%0)\n\t"
        "movq (%1), %%rsp\n\t"
        "popq %%rax\n\t"
        "jmpq *%%rax\n"
        "1:\n\t"
        "popq %%rbp"
        : "+D"(save), "+S"(load)
        :
        : "rax", "rbx", "rcx", "rdx", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15",
          "memory", "cc", "st", "st(1)", "st(2)", "st(3)", "st(4)", "st(5)", "st(6)", "st(7)",
          "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
          "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15" HIPCPU_CLOBBER_AVX512);
}
/* A fiber that will call entry(arg) on the stack that ends at `stack_high`; returns the
 * stack pointer to switch to. */
static inline void* make_fiber(char* stack_high, void (*entry)(void*), void* arg) {
    unsigned long long* sp = (unsigned long long*)((unsigned long long)stack_high & ~15ull);
    *--sp = (unsigned long long)arg;                  // popped into rdi
    *--sp = (unsigned long long)entry;                // popped into rax, then called
    *--sp = (unsigned long long)&hipcpu_fiber_start;  // the first switch jumps here
    return sp;  // three pops later rsp is 16-byte aligned again, as a call needs
}
#else
/* With ucontext a fiber's context is a ucontext_t: *save points at the one to fill, *load at
 * the one to resume. */
static inline void switch_fiber(void** save, void** load) {
    if (save != load) swapcontext((ucontext_t*)*save, (ucontext_t*)*load);
}
#endif

}  // namespace hipcpu

#endif /* HIP_CPU_FIBER_H */
