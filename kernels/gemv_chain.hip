// Several dependent GEMV products in one launch: a chain of up to HIPK_GEMV_LINKS links, each
// one of kernels/gemv.h's products (plain, norm or swiglu, residual optional), where a link may
// read what the links before it wrote (a decode layer: the output product into the residual
// stream, the normed gate/up product with SwiGLU, the down product into the stream, the next
// layer's normed QKV product).
//
//   gemv_chain_r<R>_<t>(GemvChain c)      R = 1, 2, 4 or 8 (rows <= R), as gemv_r<R>_<t>
//
// The grid is the links' grids one after another: link l owns blocks [end[l-1], end[l]) and
// numbers them from 0 as its own launch would. A block of link l > 0 first asks the L2 for its
// weight rows (NVIDIA: prefetch.global.L2; the weights never depend on the chain), then waits
// until every block of link l - 1 has written its outputs (their count in done[l - 1]), then
// runs its product. So the weights of the next product stream in while the last one finishes:
// the ramp down and up of separate launches (2-3 us each on the H200: elapsed time in which the
// multiprocessors idle, issue 38's profile) overlap instead of adding up.
//
// The wait needs every block of link l - 1 to run to the end while link l's blocks wait: blocks
// start in increasing order (on NVIDIA and AMD dispatchers, and the cpu platform's workers take
// blocks in order), so a waiting block's producers have all started before it and wait on
// nothing later; the lowest unfinished block can always run. (The decoupled look-back of CUB's
// and rocPRIM's scans rests on the same order.) Writes are published by __threadfence before
// the count; a waiting block's thread 0 reads the count as volatile, then fences before its
// block reads the data (an acquire: on NVIDIA and AMD the fence also drops stale L1 lines).
//
// counters: 2 * HIPK_GEMV_LINKS unsigned ints, zero before the launch: done[l] (blocks of link l
// finished) and passed[l] (blocks of link l + 1 past their wait). The last block past a wait
// sets both back to zero, so the launch leaves them as it found them (a graph replays it).
#include "gemv.h"

#define HIPK_GEMV_LINKS 4

namespace hipk {

// One launch's links (field order and types: hip_runtime.libraries.kernel_structs.GEMV_CHAIN).
// Pointers are device addresses (0: none); fusion 0 plain, 1 norm, 2 swiglu (norm and pairs).
struct GemvChain {
    long long w[HIPK_GEMV_LINKS], x[HIPK_GEMV_LINKS], y[HIPK_GEMV_LINKS];
    long long residual[HIPK_GEMV_LINKS], norm[HIPK_GEMV_LINKS];
    int n[HIPK_GEMV_LINKS], k[HIPK_GEMV_LINKS], slices[HIPK_GEMV_LINKS];
    int fusion[HIPK_GEMV_LINKS], end[HIPK_GEMV_LINKS];
    int links, rows;
    float eps;
    long long counters;
};

namespace gemv {

#ifndef HIPK_GEMV_CHAIN_PREFETCH
#define HIPK_GEMV_CHAIN_PREFETCH 1  // a waiting block asks the L2 for its weight rows first
#endif
#ifndef HIPK_GEMV_CHAIN_SLEEP
#define HIPK_GEMV_CHAIN_SLEEP 1024  // ns: the longest pause between two polls of a counter
#endif

// One link's fields, read from the kernel's argument with constant indices only: a runtime
// index into a by-value argument makes nvcc copy the whole struct to each thread's stack.
struct Link {
    long long w, x, y, residual, norm;
    int n, k, slices, fusion, first, end;
};

HIPK_DEVICE Link link_of(const GemvChain& c, int l) {
    Link out = {0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0};
    HIPK_UNROLL
    for (int i = 0; i < HIPK_GEMV_LINKS; ++i) {
        if (i == l) {
            const int first = i > 0 ? c.end[i > 0 ? i - 1 : 0] : 0;  // (in bounds when unrolled)
            const Link found = {c.w[i], c.x[i], c.y[i], c.residual[i], c.norm[i], c.n[i],
                                c.k[i], c.slices[i], c.fusion[i], first, c.end[i]};
            out = found;
        }
    }
    return out;
}

// The link block b of the grid belongs to.
HIPK_DEVICE int link_index(const GemvChain& c, int b) {
    int l = 0;
    HIPK_UNROLL
    for (int i = 0; i + 1 < HIPK_GEMV_LINKS; ++i) l += (i + 1 < c.links && b >= c.end[i]) ? 1 : 0;
    return l;
}

// Pause `ns` nanoseconds or so between polls (a GPU; the cpu platform's threads just poll).
HIPK_DEVICE void spin_pause(unsigned int ns) {
#if defined(__CUDA_ARCH__)
    __nanosleep(ns);
#elif HIPK_GPU
    for (unsigned int slept = 0; slept < ns; slept += 64) __builtin_amdgcn_s_sleep(1);  // (a constant)
#else
    (void)ns;
#endif
}

// L2 hints for the weight rows block `block` of `link` will read (NVIDIA; nothing elsewhere).
template <typename T, int R> HIPK_DEVICE void prefetch_weights(const Link& link, int block) {
#if defined(__CUDA_ARCH__) && HIPK_GEMV_CHAIN_PREFETCH
    constexpr int C = Columns<R>::value, TEAMS = HIPK_GEMV_THREADS / HIPK_GEMV_TEAM;
    const int columns = TEAMS / link.slices * C, first = block * columns;
    const int last = first + columns < link.n ? first + columns : link.n;
    const char* base = reinterpret_cast<const char*>(link.w);
    const long long row_bytes = (long long)link.k * sizeof(T);
    const long long from = first * row_bytes, bytes = (last - first) * row_bytes;
    const long long up = link.fusion == 2 ? (long long)link.n * row_bytes : -1;
    for (long long at = (long long)threadIdx.x * 128; at < bytes; at += HIPK_GEMV_THREADS * 128) {
        asm volatile("prefetch.global.L2 [%0];" ::"l"(base + from + at));
        if (up >= 0) asm volatile("prefetch.global.L2 [%0];" ::"l"(base + up + from + at));
    }
#else
    (void)link, (void)block;
#endif
}

// A block's wait for the link before `link` (`producers` blocks), and the reset of that link's
// counters by the last block past the wait. Thread 0 polls with a growing pause: every waiting
// block polls the one counter its producers add to.
HIPK_DEVICE void wait_for_link(const GemvChain& c, int l, const Link& link, int producers) {
    unsigned int* done = reinterpret_cast<unsigned int*>(c.counters) + (l - 1);
    unsigned int* passed = done + HIPK_GEMV_LINKS;
    if (threadIdx.x == 0) {
        unsigned int pause = 32;
        while (*reinterpret_cast<volatile unsigned int*>(done) < (unsigned int)producers) {
            spin_pause(pause);
            pause = pause < HIPK_GEMV_CHAIN_SLEEP ? 2 * pause : pause;
        }
        __threadfence();
        if (atomicAdd(passed, 1u) + 1u == (unsigned int)(link.end - link.first)) {  // the last
            *reinterpret_cast<volatile unsigned int*>(done) = 0u;
            *reinterpret_cast<volatile unsigned int*>(passed) = 0u;
        }
    }
    __syncthreads();
}

template <typename T, int R> HIPK_DEVICE void chain(const GemvChain& c) {
    __shared__ float scratch[Scratch<R>::floats];  // (one array for the three fusions)
    const int l = link_index(c, (int)blockIdx.x);
    const Link link = link_of(c, l);
    const int block = (int)blockIdx.x - link.first;
    if (l > 0) {
        prefetch_weights<T, R>(link, block);
        wait_for_link(c, l, link, link.first - link_of(c, l - 1).first);
    }
    const T* w = reinterpret_cast<const T*>(link.w);
    const T* x = reinterpret_cast<const T*>(link.x);
    T* y = reinterpret_cast<T*>(link.y);
    const T* residual = reinterpret_cast<const T*>(link.residual);
    const T* norm = reinterpret_cast<const T*>(link.norm);
    const int n = link.n, k = link.k;
    if (link.fusion == 0)
        run<T, R, false, false>(w, x, y, residual, norm, n, k, c.rows, link.slices, c.eps, k, n,
                                n, block, scratch);
    else if (link.fusion == 1)
        run<T, R, true, false>(w, x, y, residual, norm, n, k, c.rows, link.slices, c.eps, k, n,
                               n, block, scratch);
    else
        run<T, R, true, true>(w, x, y, residual, norm, n, k, c.rows, link.slices, c.eps, k, n, n,
                              block, scratch);
    if (l + 1 < c.links) {  // publish this block's outputs to the next link
        __syncthreads();
        if (threadIdx.x == 0) {
            __threadfence();
            atomicAdd(reinterpret_cast<unsigned int*>(c.counters) + l, 1u);
        }
    }
}

}  // namespace gemv
}  // namespace hipk

// Entry points (written out: hip-core reads the parameter types from the text).
#define HIPK_GEMV_CHAIN(S, T) \
    extern "C" __global__ __launch_bounds__(HIPK_GEMV_THREADS) void gemv_chain_r1_##S( \
        hipk::GemvChain c) { \
        hipk::gemv::chain<T, 1>(c); \
    } \
    extern "C" __global__ __launch_bounds__(HIPK_GEMV_THREADS) void gemv_chain_r2_##S( \
        hipk::GemvChain c) { \
        hipk::gemv::chain<T, 2>(c); \
    } \
    extern "C" __global__ __launch_bounds__(HIPK_GEMV_THREADS) void gemv_chain_r4_##S( \
        hipk::GemvChain c) { \
        hipk::gemv::chain<T, 4>(c); \
    } \
    extern "C" __global__ __launch_bounds__(HIPK_GEMV_THREADS) void gemv_chain_r8_##S( \
        hipk::GemvChain c) { \
        hipk::gemv::chain<T, 8>(c); \
    }
HIPK_F32_AND_16BIT_TYPES(HIPK_GEMV_CHAIN)
