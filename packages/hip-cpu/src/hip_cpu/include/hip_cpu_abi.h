/* The contract between hip_ffi's cpu platform (Python), its runtime library and the code
 * objects that its hiprtc produces. Bump HIPCPU_ABI_VERSION whenever anything here changes:
 * a code object built for another version is refused at load (hipErrorNoBinaryForGpu), and the
 * version is part of every disk-cache key, so stale objects are never picked up.
 */
#ifndef HIP_CPU_ABI_H
#define HIP_CPU_ABI_H

#define HIPCPU_ABI_VERSION 3u

/* A launch is described by an array of unsigned long long "slots" (no struct: the Python side
 * builds it with cffi without declaring a new C type). */
#define HIPCPU_SLOT_ABI 0          /* HIPCPU_ABI_VERSION */
#define HIPCPU_SLOT_GRID 1         /* 1, 2, 3: gridDim.x, .y, .z (blocks) */
#define HIPCPU_SLOT_BLOCK 4        /* 4, 5, 6: blockDim.x, .y, .z (threads) */
#define HIPCPU_SLOT_DYN_SHARED 7   /* dynamic shared memory, bytes */
#define HIPCPU_SLOT_ARGS 8         /* address of the packed kernel arguments */
#define HIPCPU_SLOT_RUNTIME 9      /* address of the runtime's hipcpu_runtime table */
#define HIPCPU_SLOT_MESSAGE 10     /* address of a char buffer for a failure message */
#define HIPCPU_SLOT_MESSAGE_SIZE 11
#define HIPCPU_SLOT_FLAGS 12       /* HIPCPU_LAUNCH_* bits */
#define HIPCPU_SLOT_COUNT 13

/* Checked mode (HIP_FFI_CPU_CHECKED=1): the dynamic shared buffer's pages past the launch's
 * dynamic shared size are made inaccessible while its blocks run, so an overrun faults. */
#define HIPCPU_LAUNCH_CHECKED 1u
/* A cooperative launch: every block at once, on an OS thread of its own (grid syncs). */
#define HIPCPU_LAUNCH_COOPERATIVE 2u

/* Dynamic shared memory available to every block (bytes): the size of the thread-local buffer
 * that all `extern __shared__` arrays of a module alias. The buffer is HIPCPU_SHARED_GUARD
 * bytes longer, so that a checked launch always has a whole page to protect past the end. */
#define HIPCPU_MAX_DYNAMIC_SHARED 65536
#define HIPCPU_SHARED_GUARD 8192

#ifdef __cplusplus
extern "C" {
#endif

typedef void (*hipcpu_range_fn)(void* context, unsigned long long begin, unsigned long long end);

/* A thread's bad-access record. While the thread runs a block, `jmp` is that block's
 * __builtin_setjmp buffer: a SIGSEGV, SIGBUS, SIGFPE or SIGILL raised by its code is recorded
 * here and unwinds to it (the runtime's signal handler), and the launch fails with
 * hipErrorIllegalAddress (or hipErrorLaunchFailure) instead of the process dying. A fault while
 * `jmp` is null is not the kernel's: it gets the signal's previous action. */
typedef struct hipcpu_fault {
    void** jmp;
    int signal;                  /* SIGSEGV, SIGBUS, SIGFPE or SIGILL; 0: no fault */
    int code;                    /* the signal's si_code */
    unsigned long long address;  /* the faulting address (si_addr) */
    int access;                  /* 1 a write, 0 a read, -1 unknown */
} hipcpu_fault;

/* What the runtime library lends to code objects (it owns the threads and the fiber stacks). */
typedef struct hipcpu_runtime {
    unsigned abi_version;
    unsigned threads; /* worker threads including the launching one */
    /* Run fn over [0, n) in chunks on every worker; returns when all chunks are done. */
    void (*parallel_for)(unsigned long long n, hipcpu_range_fn fn, void* context);
    /* `count` fiber stacks of the calling OS thread: stack i is [base + i*stride + guard,
     * base + (i+1)*stride); its lowest page is a guard page. Valid until the next call. */
    char* (*fiber_stacks)(unsigned count, unsigned long long* stride);
    /* Scratch memory of the calling OS thread, at least `bytes`, 64-byte aligned. */
    void* (*scratch)(unsigned long long bytes);
    /* The calling OS thread's bad-access slot (its record while it runs blocks), once the
     * thread has an alternate signal stack (so that a stack overflow is caught too). An
     * initial-exec thread-local: code objects find their block through its offset from the
     * thread pointer (hip_cpu_block.h), the same on every thread. */
    hipcpu_fault** (*fault_slot)(void);
    /* Make the whole pages inside [start, start + bytes) inaccessible (0) or read-write (1). */
    void (*protect)(void* start, unsigned long long bytes, int accessible);
    /* Run fn(context, i, i + 1) for every i in [0, n), each on an OS thread of its own, all at
     * the same time; returns when all are done, or nonzero (having run none) when the threads
     * cannot be made. */
    int (*run_threads)(unsigned long long n, hipcpu_range_fn fn, void* context);
} hipcpu_runtime;

#ifdef __cplusplus
}
#endif

#endif /* HIP_CPU_ABI_H */
