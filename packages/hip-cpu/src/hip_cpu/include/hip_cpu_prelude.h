/* The HIP device-side language on the host: what hip_ffi's cpu hiprtc puts in front of every
 * program (g++/clang++ `-include`), so that portable HIP kernel source compiles unchanged.
 *
 * How the HIP constructs map to C++ on the host:
 * - `__global__`, `__device__`, `__host__`, `__constant__` vanish: kernels and device functions
 *   are ordinary functions, `__constant__`/`__device__` variables ordinary globals.
 * - `__shared__` is `thread_local`: a block runs start to finish on one OS thread (its GPU
 *   threads are fibers of that OS thread, see hip_cpu_executor.h) and an OS thread runs one
 *   block at a time, so a thread_local is exactly "one instance per running block". At block
 *   scope `thread_local` implies `static`, so `__shared__ float s[256];` needs no rewriting.
 *   `extern __shared__` arrays are aliases of one HIPCPU_MAX_DYNAMIC_SHARED-byte thread-local
 *   buffer (they all start at the same address, as on a GPU).
 * - threadIdx, blockIdx, blockDim and gridDim are thread-locals that the executor sets.
 * - warpSize is HIPCPU_WARP_SIZE: 32 (as NVIDIA), or 64 (AMD's wavefronts) or 1 (every thread
 *   its own warp), chosen with HIP_FFI_CPU_WARP_SIZE or a program's -mwavefrontsize64 (the
 *   cpu hiprtc passes -DHIPCPU_WARP_SIZE). Shuffles and votes are real: the lanes of a warp
 *   meet at each one (hip_cpu_warp.h, hip_cpu_sched.h). Like CUDA's (not ROCm 5's) warpSize
 *   is not a constant expression.
 */
#ifndef HIP_CPU_PRELUDE_H
#define HIP_CPU_PRELUDE_H

#define __HIP_PLATFORM_CPU__ 1
#define __HIPCC_RTC__ 1
#ifndef HIPCPU_WARP_SIZE
#define HIPCPU_WARP_SIZE 32
#endif
#if HIPCPU_WARP_SIZE != 1 && HIPCPU_WARP_SIZE != 32 && HIPCPU_WARP_SIZE != 64
#error "hip-ffi cpu: the warp size (HIPCPU_WARP_SIZE) must be 1, 32 or 64"
#endif

#include <atomic>
#include <cassert>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <limits>
#include <math.h>
#include <sched.h>  // sched_yield: a grid barrier's wait
#include <tuple>
#include <type_traits>
#include <utility>
#if !defined(__x86_64__) || defined(HIPCPU_FIBER_UCONTEXT)
#include <ucontext.h>  // the executor's portable fiber switch
#endif

#ifdef HIPCPU_SCAN
/* The first compiler pass only preprocesses, to find the kernels and the extern shared
 * arrays after macros and #if; these markers survive preprocessing. */
#define __global__ __hipcpu_global__
#define __shared__ __hipcpu_shared__
#else
#define __global__
#define __shared__ thread_local
#endif
#define __device__
#define __host__
#define __constant__
#define __managed__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
#define HIP_DYNAMIC_SHARED(type, var) extern __shared__ type var[];
#define HIP_DYNAMIC_SHARED_ATTRIBUTE

/* ---- vector types (CUDA/HIP layouts and alignments) ---------------------------------- */
#define HIPCPU_VEC_ALIGN4(T) (sizeof(T) * 4 > 16 ? 16 : sizeof(T) * 4)
#define HIPCPU_VECTOR_TYPES(T, N)                                                            \
    struct __attribute__((aligned(sizeof(T)))) N##1 { T x; };                                \
    struct __attribute__((aligned(sizeof(T) * 2))) N##2 { T x, y; };                         \
    struct N##3 { T x, y, z; };                                                              \
    struct __attribute__((aligned(HIPCPU_VEC_ALIGN4(T)))) N##4 { T x, y, z, w; };            \
    static inline N##1 make_##N##1(T x) { return N##1{x}; }                                  \
    static inline N##2 make_##N##2(T x, T y) { return N##2{x, y}; }                          \
    static inline N##3 make_##N##3(T x, T y, T z) { return N##3{x, y, z}; }                  \
    static inline N##4 make_##N##4(T x, T y, T z, T w) { return N##4{x, y, z, w}; }
HIPCPU_VECTOR_TYPES(signed char, char)
HIPCPU_VECTOR_TYPES(unsigned char, uchar)
HIPCPU_VECTOR_TYPES(short, short)
HIPCPU_VECTOR_TYPES(unsigned short, ushort)
HIPCPU_VECTOR_TYPES(int, int)
HIPCPU_VECTOR_TYPES(unsigned int, uint)
HIPCPU_VECTOR_TYPES(long, long)
HIPCPU_VECTOR_TYPES(unsigned long, ulong)
HIPCPU_VECTOR_TYPES(long long, longlong)
HIPCPU_VECTOR_TYPES(unsigned long long, ulonglong)
HIPCPU_VECTOR_TYPES(float, float)
HIPCPU_VECTOR_TYPES(double, double)
#undef HIPCPU_VECTOR_TYPES

struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1)
        : x(x_), y(y_), z(z_) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const { return uint3{x, y, z}; }
};

/* ---- built-in variables --------------------------------------------------------------- */
/* Set by the executor; `static` keeps them local to the code object, which lets the compiler
 * use the cheap local-dynamic TLS model and hoist their address out of loops. */
static thread_local uint3 threadIdx;
static thread_local uint3 blockIdx;
static thread_local uint3 blockDim;
static thread_local uint3 gridDim;
/* Defined (as HIPCPU_WARP_SIZE) after the program by hip_cpu_executor.h: declared here without its value so
 * that, as on CUDA, `__shared__ float s[warpSize]` does not compile. */
extern const int warpSize __attribute__((visibility("hidden")));

/* ---- block barrier, warp sync and failure (hip_cpu_block.h, hip_cpu_sched.h) ---------- */
namespace hipcpu {
/* What a lane sees after a warp sync: the lanes that reached it (`mask`), their predicates
 * (`bits`), and lane l's value at slots + l * stride. */
struct warp_view {
    const unsigned char* slots;
    unsigned stride;
    unsigned long long mask, bits;
    unsigned lane;
};
/* Waits until every thread of the grid has arrived (a cooperative launch's this_grid().sync()). */
__attribute__((noinline)) void grid_sync();
/* Ends the launch with `code` (a hipError_t) and `message`; never returns. */
[[noreturn]] __attribute__((noinline)) void fail(int code, const char* message);
/* fail() with hipErrorLaunchFailure and "`what` in block [..], thread [..]": a trap. */
[[noreturn]] __attribute__((noinline, cold)) void trapped(const char* what);
}  // namespace hipcpu

#include "hip_cpu_block.h"
#include "hip_cpu_fission.h"

static inline void __syncthreads() { (void)::hipcpu::block_barrier(0); }
static inline int __syncthreads_count(int predicate) { return ::hipcpu::block_barrier(predicate != 0); }
static inline int __syncthreads_and(int predicate) { return ::hipcpu::block_barrier(predicate == 0) == 0; }
static inline int __syncthreads_or(int predicate) { return ::hipcpu::block_barrier(predicate != 0) != 0; }

#include "hip_cpu_warp.h"

/* ---- fences, clocks, loads, traps ----------------------------------------------------- */
static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline long long wall_clock64() {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000ll + t.tv_nsec;  // nanoseconds
}
static inline long long clock64() {
#if defined(__x86_64__) || defined(__i386__)
    return (long long)__builtin_ia32_rdtsc();
#else
    return wall_clock64();
#endif
}
static inline void __nanosleep(unsigned int) {}
template <class T> static inline T __ldg(const T* p) { return *p; }
[[noreturn]] static inline void __trap() {
    ::hipcpu::trapped("__trap() was called");
}

/* ---- texture objects: not supported (docs/porting.md); a use says so at compile time --- */
struct __hipcpu_texture_object;
typedef __hipcpu_texture_object* hipTextureObject_t;
namespace hipcpu {
template <class T> struct no_textures : std::false_type {};
}  // namespace hipcpu
#define HIPCPU_NO_TEXTURES(name)                                                              \
    template <class T, class... A> static inline T name(hipTextureObject_t, A...) {           \
        static_assert(::hipcpu::no_textures<T>::value,                                       \
                      "hip-ffi cpu: texture objects (tex1Dfetch, tex2D) are not supported");  \
        return T();                                                                           \
    }
HIPCPU_NO_TEXTURES(tex1Dfetch)
HIPCPU_NO_TEXTURES(tex1D)
HIPCPU_NO_TEXTURES(tex2D)
HIPCPU_NO_TEXTURES(tex3D)
#undef HIPCPU_NO_TEXTURES

#include "hip_cpu_math.h"
#include "hip_cpu_atomic.h"
#include "hip_cpu_fp16.h"

#endif /* HIP_CPU_PRELUDE_H */
