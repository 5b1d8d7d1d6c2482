/* The cpu platform's runtime library: the worker threads that run the blocks of every launch,
 * the fiber stacks that barrier-using blocks need, the handler that turns a kernel's bad access
 * into a launch error, and the host GEMM behind hipBLAS. Compiled once per compiler/flags/source
 * (hip_cpu/toolchain.py caches it on disk), loaded once per process, never
 * unloaded (its signal handler stays installed).
 */
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

// After the standard headers: the prelude's keyword macros (__noinline__) would break them.
#include "hip_cpu_abi.h"
#include "hip_cpu_prelude.h"  // for the f16/bf16 conversions

#define EXPORT extern "C" __attribute__((visibility("default")))

namespace {

/* ---- the pool -------------------------------------------------------------------------- */
struct job {
    hipcpu_range_fn fn;
    void* context;
    unsigned long long n, chunk, chunks;
    std::atomic<unsigned long long> next{0};
    unsigned long long done = 0;  // chunks finished (under the pool lock)
    int active = 0;               // threads working on it (under the pool lock)
};

struct pool {
    std::mutex lock;
    std::condition_variable work, finished;
    std::deque<job*> jobs;  // jobs with chunks left to claim, oldest first
    unsigned threads = 1;   // workers + the launching thread
};

pool* g_pool = nullptr;  // leaked on purpose: workers must not be joined at exit
unsigned long long g_stack_stride = 0;
long g_page = 4096;

unsigned long long run_chunks(job* j) {
    unsigned long long count = 0;
    for (;;) {
        unsigned long long c = j->next.fetch_add(1, std::memory_order_relaxed);
        if (c >= j->chunks) return count;
        unsigned long long begin = c * j->chunk, end = std::min(j->n, begin + j->chunk);
        j->fn(j->context, begin, end);
        ++count;
    }
}

/* Called with the lock held, after a thread stops working on j. */
void release(pool& p, job* j, unsigned long long count) {
    j->done += count;
    j->active -= 1;
    auto at = std::find(p.jobs.begin(), p.jobs.end(), j);
    if (at != p.jobs.end()) p.jobs.erase(at);  // no chunk left to claim
    if (j->done == j->chunks && j->active == 0) p.finished.notify_all();
}

void worker(pool* p) {
    std::unique_lock<std::mutex> held(p->lock);
    for (;;) {
        p->work.wait(held, [p] { return !p->jobs.empty(); });
        job* j = p->jobs.front();
        j->active += 1;
        held.unlock();
        unsigned long long count = run_chunks(j);
        held.lock();
        release(*p, j, count);
    }
}

void parallel_for(unsigned long long n, hipcpu_range_fn fn, void* context) {
    if (n == 0) return;
    pool& p = *g_pool;
    // Several chunks per thread balance uneven blocks; chunks of many blocks amortize the
    // claim (one atomic add per chunk).
    unsigned long long chunk = std::max(1ull, n / (8ull * p.threads));
    unsigned long long chunks = (n + chunk - 1) / chunk;
    if (chunks == 1 || p.threads == 1) {
        fn(context, 0, n);
        return;
    }
    job j;
    j.fn = fn;
    j.context = context;
    j.n = n;
    j.chunk = chunk;
    j.chunks = chunks;
    j.active = 1;  // this thread
    {
        std::lock_guard<std::mutex> held(p.lock);
        p.jobs.push_back(&j);
    }
    p.work.notify_all();
    unsigned long long count = run_chunks(&j);
    std::unique_lock<std::mutex> held(p.lock);
    release(p, &j, count);
    p.finished.wait(held, [&j] { return j.done == j.chunks && j.active == 0; });
}

/* ---- cooperative launches: one OS thread per block -------------------------------------------
 * Every thread is made first and waits for `go`: if one cannot be made, none runs (a block
 * that ran would wait forever at a grid sync for the missing ones). */
struct cohort {
    hipcpu_range_fn fn;
    void* context;
    std::atomic<int> go{0};  // 1 run, -1 cancelled
};
struct member {
    cohort* c;
    unsigned long long i;
};

void* cohort_thread(void* arg) {
    member& m = *(member*)arg;
    int go;
    while ((go = m.c->go.load(std::memory_order_acquire)) == 0) sched_yield();
    if (go > 0) m.c->fn(m.c->context, m.i, m.i + 1);
    return nullptr;
}

int run_threads(unsigned long long n, hipcpu_range_fn fn, void* context) {
    if (n == 0) return 0;
    cohort c;
    c.fn = fn;
    c.context = context;
    std::vector<member> members(n);
    std::vector<pthread_t> threads;
    threads.reserve(n);
    bool made = true;
    for (unsigned long long i = 1; i < n && made; ++i) {
        members[i] = member{&c, i};
        pthread_t t;
        made = pthread_create(&t, nullptr, &cohort_thread, &members[i]) == 0;
        if (made) threads.push_back(t);
    }
    c.go.store(made ? 1 : -1, std::memory_order_release);
    if (made) fn(context, 0, 1);
    for (pthread_t t : threads) pthread_join(t, nullptr);
    return made ? 0 : 1;
}

/* ---- per-OS-thread memory --------------------------------------------------------------- */
struct stacks {
    char* base = nullptr;
    unsigned count = 0;
    ~stacks() {
        if (base) munmap(base, (size_t)count * g_stack_stride);
    }
};
thread_local stacks tl_stacks;

char* fiber_stacks(unsigned count, unsigned long long* stride) {
    *stride = g_stack_stride;
    stacks& s = tl_stacks;
    if (s.count >= count) return s.base;
    if (s.base) munmap(s.base, (size_t)s.count * g_stack_stride);
    s.base = nullptr;
    s.count = 0;
    // Reserved, not committed: a fiber touches only the pages its frames use.
    void* base = mmap(nullptr, (size_t)count * g_stack_stride, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (base == MAP_FAILED) return nullptr;
    for (unsigned i = 0; i < count; ++i)  // the lowest page of every stack traps an overflow
        mprotect((char*)base + (size_t)i * g_stack_stride, (size_t)g_page, PROT_NONE);
    s.base = (char*)base;
    s.count = count;
    return s.base;
}

struct scratch_block {
    void* p = nullptr;
    unsigned long long size = 0;
    ~scratch_block() { free(p); }
};
thread_local scratch_block tl_scratch;

void* scratch(unsigned long long bytes) {
    scratch_block& s = tl_scratch;
    if (s.size < bytes) {
        free(s.p);
        unsigned long long size = (std::max(bytes, 2 * s.size) + 63) / 64 * 64;
        s.p = aligned_alloc(64, size);
        s.size = s.p ? size : 0;
    }
    return s.p;
}

/* ---- bad accesses and traps -----------------------------------------------------------------
 * A SIGSEGV, SIGBUS, SIGFPE or SIGILL (__builtin_trap(): ud2 on x86) on a thread whose fault
 * record has a jump buffer (it is running a block) is the kernel's: record it and unwind to the
 * block's start (the executor reports it). Any other is not ours to swallow: the previous handler gets it, or the default action
 * (the process dies of it, with the right address, as it would have without this handler).
 * The record is an initial-exec thread-local, so the handler reads it without calling into
 * the dynamic linker (safe even when the fault hit inside malloc). */
__attribute__((tls_model("initial-exec"))) __thread hipcpu_fault* tl_fault = nullptr;
__attribute__((tls_model("initial-exec"))) __thread bool tl_alternate_stack = false;

/* Not SIGABRT: a kernel's abort() never gets there (the code object defines its own,
 * hip_cpu_executor.h), and unwinding out of glibc's abort() would leave its lock held; an abort
 * raised by the C library itself (heap corruption) must still end the process. */
constexpr int kSignals[4] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};
constexpr int kHandled = sizeof kSignals / sizeof kSignals[0];
struct sigaction g_previous[kHandled];

struct alternate_stack {
    void* base = nullptr;
    size_t size = 0;
    ~alternate_stack() {  // at thread exit: the stack goes with its thread
        if (base == nullptr) return;
        stack_t off{};
        off.ss_flags = SS_DISABLE;
        sigaltstack(&off, nullptr);
        munmap(base, size);
    }
};
thread_local alternate_stack tl_stack;

void chain(int sig, siginfo_t* info, void* context) {
    int i = 0;
    while (i + 1 < kHandled && kSignals[i] != sig) ++i;
    const struct sigaction& previous = g_previous[i];
    if ((previous.sa_flags & SA_SIGINFO) && previous.sa_sigaction != nullptr) {
        previous.sa_sigaction(sig, info, context);
        return;
    }
    if (!(previous.sa_flags & SA_SIGINFO) && previous.sa_handler != SIG_DFL &&
        previous.sa_handler != SIG_IGN) {
        previous.sa_handler(sig);
        return;
    }
    // The default action: returning runs the faulting instruction again, which now kills the
    // process (core dump included); a signal sent by kill() would not come back, so re-raise it.
    struct sigaction fallback {};
    fallback.sa_handler = SIG_DFL;
    sigemptyset(&fallback.sa_mask);
    sigaction(sig, &fallback, nullptr);
    if (info->si_code <= 0) raise(sig);
}

void on_fault(int sig, siginfo_t* info, void* context) {
    hipcpu_fault* f = tl_fault;
    if (f != nullptr && f->jmp != nullptr && info->si_code > 0) {  // a fault, in a kernel
        void** jmp = f->jmp;
        f->jmp = nullptr;  // a second fault before the block is re-armed is not the kernel's
        f->signal = sig;
        f->code = info->si_code;
        f->address = (unsigned long long)info->si_addr;
        f->access = -1;
        if (info->si_code == SI_KERNEL) {  // x86: a non-canonical address, si_addr unknown
            f->address = ~0ull;
        }
#if defined(__x86_64__)
        else if (sig == SIGSEGV)  // a page fault's error code: bit 1 is set for a write
            f->access = (((ucontext_t*)context)->uc_mcontext.gregs[REG_ERR] & 2) ? 1 : 0;
#endif
        __builtin_longjmp(jmp, 1);
    }
    chain(sig, info, context);
}

void install_fault_handler() {
    for (int i = 0; i < kHandled; ++i) {
        struct sigaction action {};
        action.sa_sigaction = &on_fault;
        // SA_NODEFER: the unwind leaves the handler without sigreturn, so the signal must not
        // stay blocked; SA_ONSTACK: a stack overflow leaves no stack to run on.
        action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
        sigemptyset(&action.sa_mask);
        sigaction(kSignals[i], &action, &g_previous[i]);
    }
}

hipcpu_fault** fault_slot() {
    if (!tl_alternate_stack) {
        tl_alternate_stack = true;
        stack_t current{};
        // A thread that has one already (Python's faulthandler gives the main thread one)
        // keeps it; else 64 KiB, more than SIGSTKSZ anywhere, released at thread exit.
        if (sigaltstack(nullptr, &current) == 0 && (current.ss_flags & SS_DISABLE)) {
            size_t size = 64 * 1024;
            void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
            stack_t alternate{};
            alternate.ss_sp = base;
            alternate.ss_size = size;
            if (base != MAP_FAILED && sigaltstack(&alternate, nullptr) == 0) {
                tl_stack.base = base;
                tl_stack.size = size;
            } else if (base != MAP_FAILED) {
                munmap(base, size);
            }
        }
    }
    return &tl_fault;
}

void protect(void* start, unsigned long long bytes, int accessible) {
    unsigned long long page = (unsigned long long)g_page;
    unsigned long long low = ((unsigned long long)start + page - 1) / page * page;
    unsigned long long high = ((unsigned long long)start + bytes) / page * page;
    if (high > low) mprotect((void*)low, high - low, accessible ? PROT_READ | PROT_WRITE : PROT_NONE);
}

hipcpu_runtime g_table = {HIPCPU_ABI_VERSION, 1,           &parallel_for, &fiber_stacks,
                          &scratch,           &fault_slot, &protect,      &run_threads};

}  // namespace

/* Start the workers (threads - 1 of them: the launching thread works too). `stack_bytes` is
 * the usable size of a fiber stack. Idempotent; returns the table code objects get. */
EXPORT const hipcpu_runtime* hipcpu_init(unsigned threads, unsigned long long stack_bytes) {
    static std::once_flag once;
    std::call_once(once, [threads, stack_bytes] {
        g_page = sysconf(_SC_PAGESIZE);
        g_stack_stride = (stack_bytes + g_page - 1) / g_page * g_page + g_page;
        install_fault_handler();
        g_pool = new pool;
        g_pool->threads = std::max(1u, threads);
        g_table.threads = g_pool->threads;
        for (unsigned i = 1; i < g_pool->threads; ++i) std::thread(worker, g_pool).detach();
    });
    return &g_table;
}

/* ---- GEMM ----------------------------------------------------------------------------------
 * Column-major C = alpha * op(A) op(B) + beta * C, batched with element strides, as hipBLAS.
 * Types are hipDataType values: 0 f32, 1 f64, 2 f16, 14 bf16. Accumulates in float (double
 * when any operand is f64); beta == 0 never reads C. op(A) and op(B) are packed once into
 * contiguous rows of the accumulation type, then every C element is one contiguous dot. */
namespace {

template <class T> T load_as(const void* base, long long i, int type) {
    switch (type) {
        case 0: return (T)((const float*)base)[i];
        case 1: return (T)((const double*)base)[i];
        case 2: return (T)hipcpu::f16_to_f32(((const unsigned short*)base)[i]);
        default: return (T)hipcpu::bf16_to_f32(((const unsigned short*)base)[i]);
    }
}
template <class T> void store_as(void* base, long long i, int type, T v) {
    switch (type) {
        case 0: ((float*)base)[i] = (float)v; break;
        case 1: ((double*)base)[i] = (double)v; break;
        case 2: ((unsigned short*)base)[i] = hipcpu::f64_to_f16((double)v); break;
        default: ((unsigned short*)base)[i] = hipcpu::f32_to_bf16((float)v); break;
    }
}

template <class T> struct gemm_job {
    bool ta, tb;
    long long m, n, k;
    T alpha, beta;
    const void *A, *B;
    void* C;
    int at, bt, ct;
    long long lda, ldb, ldc;
    std::vector<T> ap, bp;  // op(A) as m rows of k, op(B) as n columns of k

    static void pack(void* self, unsigned long long begin, unsigned long long end) {
        gemm_job& g = *(gemm_job*)self;
        for (unsigned long long r = begin; r < end; ++r) {
            if ((long long)r < g.m) {  // row i of op(A): A[i, p] or A[p, i]
                long long i = (long long)r;
                for (long long p = 0; p < g.k; ++p)
                    g.ap[i * g.k + p] = load_as<T>(g.A, g.ta ? p + i * g.lda : i + p * g.lda, g.at);
            } else {  // column j of op(B): B[p, j] or B[j, p]
                long long j = (long long)r - g.m;
                for (long long p = 0; p < g.k; ++p)
                    g.bp[j * g.k + p] = load_as<T>(g.B, g.tb ? j + p * g.ldb : p + j * g.ldb, g.bt);
            }
        }
    }
    static T dot(const T* a, const T* b, long long k) {
        T lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // eight partial sums: vectorizes without -ffast-math
        long long p = 0;
        for (; p + 8 <= k; p += 8)
            for (int l = 0; l < 8; ++l) lanes[l] += a[p + l] * b[p + l];
        T sum = 0;
        for (; p < k; ++p) sum += a[p] * b[p];
        for (int l = 0; l < 8; ++l) sum += lanes[l];
        return sum;
    }
    static void columns(void* self, unsigned long long begin, unsigned long long end) {
        gemm_job& g = *(gemm_job*)self;
        for (unsigned long long jj = begin; jj < end; ++jj) {
            long long j = (long long)jj;
            const T* b = g.bp.data() + j * g.k;
            for (long long i = 0; i < g.m; ++i) {
                T v = g.alpha * dot(g.ap.data() + i * g.k, b, g.k);
                long long c = i + j * g.ldc;
                if (g.beta != T(0)) v += g.beta * load_as<T>(g.C, c, g.ct);
                store_as<T>(g.C, c, g.ct, v);
            }
        }
    }
    void run() {
        ap.assign((size_t)(m * k), T(0));
        bp.assign((size_t)(n * k), T(0));
        parallel_for((unsigned long long)(m + n), &pack, this);
        parallel_for((unsigned long long)n, &columns, this);
    }
};

size_t element_size(int type) { return type == 1 ? 8 : type == 0 ? 4 : 2; }

template <class T>
void gemm_batches(int ta, int tb, long long m, long long n, long long k, double alpha,
                  const void* A, int at, long long lda, long long sa, const void* B, int bt,
                  long long ldb, long long sb, double beta, void* C, int ct, long long ldc,
                  long long sc, int batches) {
    for (int batch = 0; batch < batches; ++batch) {
        gemm_job<T> g;
        g.ta = ta != 111;
        g.tb = tb != 111;
        g.m = m, g.n = n, g.k = k;
        g.alpha = (T)alpha, g.beta = (T)beta;
        g.A = (const char*)A + batch * sa * (long long)element_size(at);
        g.B = (const char*)B + batch * sb * (long long)element_size(bt);
        g.C = (char*)C + batch * sc * (long long)element_size(ct);
        g.at = at, g.bt = bt, g.ct = ct;
        g.lda = lda, g.ldb = ldb, g.ldc = ldc;
        g.run();
    }
}

}  // namespace

/* trans: hipblasOperation_t (111 N, 112 T, 113 C = T for real types). Strides in elements. */
EXPORT int hipcpu_gemm(int trans_a, int trans_b, long long m, long long n, long long k,
                       double alpha, const void* A, int a_type, long long lda, long long stride_a,
                       const void* B, int b_type, long long ldb, long long stride_b, double beta,
                       void* C, int c_type, long long ldc, long long stride_c, int batches) {
    if (m == 0 || n == 0 || batches == 0) return 0;
    bool wide = a_type == 1 || b_type == 1 || c_type == 1;
    if (wide)
        gemm_batches<double>(trans_a, trans_b, m, n, k, alpha, A, a_type, lda, stride_a, B, b_type,
                             ldb, stride_b, beta, C, c_type, ldc, stride_c, batches);
    else
        gemm_batches<float>(trans_a, trans_b, m, n, k, alpha, A, a_type, lda, stride_a, B, b_type,
                            ldb, stride_b, beta, C, c_type, ldc, stride_c, batches);
    return 0;
}
