// Helpers shared by every kernel source: portability, 16-bit float types, vector access and
// block reductions. The same text compiles with hiprtc (AMD), nvrtc (NVIDIA) and the CPU
// platform's g++ prelude, so it uses no system or vendor header on the GPU compilers (hiprtc
// and nvrtc provide the HIP/CUDA built-ins themselves) and no vendor f16/bf16 header at all:
// their types and names differ between HIP and CUDA, and HIP's hip_fp16.h does not even
// compile under ROCm 5.2's hiprtc.
#pragma once

// --- platform ---------------------------------------------------------------------------------

// A real GPU compile: warps of `warpSize` lanes that can exchange registers (shuffles).
// Everywhere else (the CPU platform) each thread is treated as a warp of one lane, so the
// reductions below go through shared memory only, whatever `warpSize` says there.
#if defined(__CUDA_ARCH__) || defined(__AMDGCN__)
#define HIPK_GPU 1
#else
#define HIPK_GPU 0
#include <math.h>  // expf, erff, tanhf, sqrtf, fmaxf: built in on the GPU compilers
#endif

#ifndef __forceinline__
#define __forceinline__ inline __attribute__((always_inline))
#endif
#define HIPK_DEVICE __device__ __forceinline__

// Full unrolling keeps small per-thread arrays (a row tile, a vector) in registers.
#if HIPK_GPU
#define HIPK_UNROLL _Pragma("unroll")
#else
#define HIPK_UNROLL _Pragma("GCC unroll 32")
#endif

// Warps per block the reduction scratch must hold: blocks have at most 1024 threads and GPU
// warps at least 32 lanes; on the CPU a "warp" is one thread.
#if HIPK_GPU
#define HIPK_MAX_WARPS 32
#else
#define HIPK_MAX_WARPS 1024
#endif

namespace hipk {

// --- bit casts (union punning: a plain register move in all three compilers) -------------------

HIPK_DEVICE unsigned int float_bits(float f) {
    union { float f; unsigned int u; } pun;
    pun.f = f;
    return pun.u;
}

HIPK_DEVICE float bits_float(unsigned int u) {
    union { float f; unsigned int u; } pun;
    pun.u = u;
    return pun.f;
}

HIPK_DEVICE float neg_inf() { return bits_float(0xff800000u); }

// --- 16-bit floats: storage types and conversions --------------------------------------------

// IEEE binary16 and bfloat16, stored as their bits. Distinct structs (not typedefs of the same
// integer) so templates can tell them apart. No constructors: they live in __shared__ arrays.
struct f16 { unsigned short bits; };
struct bf16 { unsigned short bits; };

HIPK_DEVICE float to_float(float x) { return x; }

HIPK_DEVICE float to_float(bf16 x) { return bits_float((unsigned int)x.bits << 16); }

// float -> bfloat16, round to nearest even; NaN stays a (quiet) NaN instead of rounding to inf.
// NVIDIA GPUs from sm_80 do it in one instruction; elsewhere a few integer operations.
HIPK_DEVICE unsigned short bf16_bits_from_float(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    unsigned short b;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(f));
    return b;
#else
    unsigned int u = float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (unsigned short)(u >> 16);
#endif
}

#if HIPK_GPU
// The hardware converts (round to nearest even, subnormals, inf and NaN handled).
HIPK_DEVICE float half_bits_to_float(unsigned short h) {
#if defined(__CUDA_ARCH__)
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
#else
    union { unsigned short u; _Float16 h; } pun;
    pun.u = h;
    return (float)pun.h;
#endif
}

HIPK_DEVICE unsigned short half_bits_from_float(float f) {
#if defined(__CUDA_ARCH__)
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
#else
    union { unsigned short u; _Float16 h; } pun;
    pun.h = (_Float16)f;
    return pun.u;
#endif
}
#else
// Software conversions for the host, exact IEEE semantics (what the GPU instructions do).
HIPK_DEVICE float half_bits_to_float(unsigned short h) {
    const unsigned int sign = (unsigned int)(h & 0x8000u) << 16;
    const unsigned int exponent = (h >> 10) & 0x1fu;
    const unsigned int mantissa = h & 0x3ffu;
    if (exponent == 0x1fu) return bits_float(sign | 0x7f800000u | (mantissa << 13));
    if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in float
        const float value = (float)mantissa * 5.9604644775390625e-8f;
        return sign ? -value : value;
    }
    return bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

HIPK_DEVICE unsigned short half_bits_from_float(float f) {
    const unsigned int u = float_bits(f);
    const unsigned int sign = (u >> 16) & 0x8000u;
    const unsigned int magnitude = u & 0x7fffffffu;
    if (magnitude >= 0x7f800000u)  // inf stays inf, NaN becomes the quiet NaN
        return (unsigned short)(sign | (magnitude > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (magnitude >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);  // >= 65520: inf
    if (magnitude <= 0x33000000u) return (unsigned short)sign;  // <= 2^-25 rounds to zero
    unsigned int result, remainder, halfway;
    if (magnitude < 0x38800000u) {  // below 2^-14: a subnormal half, in units of 2^-24
        const unsigned int shift = 126u - (magnitude >> 23);  // 14..24
        const unsigned int mantissa = (magnitude & 0x7fffffu) | 0x800000u;
        result = mantissa >> shift;
        remainder = mantissa & ((1u << shift) - 1u);
        halfway = 1u << (shift - 1u);
    } else {  // normal: rebias the exponent (127 -> 15) and drop 13 mantissa bits
        result = (magnitude - 0x38000000u) >> 13;
        remainder = magnitude & 0x1fffu;
        halfway = 0x1000u;
    }
    // Round to nearest even; a carry into the exponent field gives the right encoding.
    if (remainder > halfway || (remainder == halfway && (result & 1u))) ++result;
    return (unsigned short)(sign | result);
}
#endif

HIPK_DEVICE float to_float(f16 x) { return half_bits_to_float(x.bits); }

// from_float<T>(x): x rounded to T (nearest even).
template <typename T> HIPK_DEVICE T from_float(float x);
template <> HIPK_DEVICE float from_float<float>(float x) { return x; }
template <> HIPK_DEVICE f16 from_float<f16>(float x) {
    f16 h = {half_bits_from_float(x)};
    return h;
}
template <> HIPK_DEVICE bf16 from_float<bf16>(float x) {
    bf16 b = {bf16_bits_from_float(x)};
    return b;
}

// a / b within 2 ulp for |b| < 2^126, without IEEE division's slow path (a call on NVIDIA
// that costs registers wherever it sits).
HIPK_DEVICE float fast_divide(float a, float b) {
#if HIPK_GPU
    return __fdividef(a, b);
#else
    return a / b;
#endif
}

// --- indexing ------------------------------------------------------------------------------

HIPK_DEVICE int imin(int a, int b) { return a < b ? a : b; }

// Grid-stride loops: `for (long long i = global_thread(); i < n; i += grid_threads())`, so any
// grid size is correct and a capped grid still covers every element. 64-bit: tensors may hold
// more than 2^31 elements.
HIPK_DEVICE long long global_thread() {
    return (long long)blockIdx.x * blockDim.x + threadIdx.x;
}

HIPK_DEVICE long long grid_threads() { return (long long)gridDim.x * blockDim.x; }

// --- vector access ---------------------------------------------------------------------------

// N elements moved as one aligned load/store (16 bytes per thread is the widest access the
// hardware coalesces): 4 floats or 8 halves.
template <typename T, int N> struct alignas(sizeof(T) * N) Vec { T v[N]; };

// Elements of T in one 16-byte access.
template <typename T> struct Lanes16 { enum { value = 16 / sizeof(T) }; };

HIPK_DEVICE bool aligned(const void* p, unsigned long long bytes) {
    return ((unsigned long long)p % bytes) == 0;
}

// p[0..N) as floats. `p` must be aligned to sizeof(T) * N.
template <typename T, int N> HIPK_DEVICE void load_floats(const T* p, float (&out)[N]) {
    const Vec<T, N> packed = *reinterpret_cast<const Vec<T, N>*>(p);
    HIPK_UNROLL
    for (int i = 0; i < N; ++i) out[i] = to_float(packed.v[i]);
}

template <typename T, int N> HIPK_DEVICE void store_floats(T* p, const float (&in)[N]) {
    Vec<T, N> packed;
    HIPK_UNROLL
    for (int i = 0; i < N; ++i) packed.v[i] = from_float<T>(in[i]);
    *reinterpret_cast<Vec<T, N>*>(p) = packed;
}

// p[0..N), or `fill` everywhere when p is null (an optional weight or bias).
template <typename T, int N>
HIPK_DEVICE void load_floats_or(const T* p, float fill, float (&out)[N]) {
    if (p) {
        load_floats<T, N>(p, out);
    } else {
        HIPK_UNROLL
        for (int i = 0; i < N; ++i) out[i] = fill;
    }
}

// --- reductions -----------------------------------------------------------------------------

// A reduction's value: K floats (a sum, a max, or a pair/triple of statistics merged at once).
template <int K> struct Floats { float v[K]; };

struct Sum {
    HIPK_DEVICE Floats<1> identity() const {
        Floats<1> s = {{0.0f}};
        return s;
    }
    HIPK_DEVICE Floats<1> operator()(Floats<1> a, Floats<1> b) const {
        a.v[0] += b.v[0];
        return a;
    }
};

// Lanes per warp as the reductions see them: the real warp on a GPU, one thread elsewhere.
HIPK_DEVICE int warp_lanes() {
#if HIPK_GPU
    return warpSize;
#else
    return 1;
#endif
}

// n threads rounded up to 64, a multiple of every warp size: a kernel whose lanes exchange
// values by shuffles launches whole warps, the threads past n taking part and storing nothing.
HIPK_DEVICE long long whole_warps(long long n) { return (n + 63) / 64 * 64; }

// This thread's lane in its warp (warp_lanes()'s). NVIDIA's warps are 32 lanes, a constant
// there: nvrtc reads `warpSize` from a register and takes the remainder by it as a division.
HIPK_DEVICE int lane_id() {
#if defined(__CUDA_ARCH__)
    return (int)(threadIdx.x & 31u);
#elif HIPK_GPU
    return (int)(threadIdx.x % (unsigned int)warpSize);
#else
    return 0;
#endif
}

// Lane 0 ends with op() over lanes [0, present) of its warp; `present` is how many lanes of
// this warp exist (the last warp of a block whose size is not a multiple of warpSize is
// partial). Shuffle-down tree: lane i merges lane i + offset only when that lane exists.
template <int K, typename Op> HIPK_DEVICE Floats<K> warp_reduce(Floats<K> v, int present, Op op) {
#if HIPK_GPU
    const int lane = (int)threadIdx.x % warpSize;
#if defined(__CUDA_ARCH__)
    const unsigned int mask = present >= 32 ? 0xffffffffu : ((1u << present) - 1u);
#endif
    for (int offset = warpSize / 2; offset > 0; offset /= 2) {
        Floats<K> other;
        HIPK_UNROLL
        for (int c = 0; c < K; ++c) {
#if defined(__CUDA_ARCH__)
            other.v[c] = __shfl_down_sync(mask, v.v[c], offset);
#else
            other.v[c] = __shfl_down(v.v[c], offset);
#endif
        }
        if (lane + offset < present) v = op(v, other);
    }
#else
    (void)present;  // one lane: nothing to combine
    (void)op;
#endif
    return v;
}

// The value of lane 0, in every lane of the warp (`present` as above).
template <int K> HIPK_DEVICE Floats<K> warp_broadcast(Floats<K> v, int present) {
    HIPK_UNROLL
    for (int c = 0; c < K; ++c) {
#if defined(__CUDA_ARCH__)
        v.v[c] = __shfl_sync(present >= 32 ? 0xffffffffu : ((1u << present) - 1u), v.v[c], 0);
#elif HIPK_GPU
        v.v[c] = __shfl(v.v[c], 0);
#endif
    }
    (void)present;
    return v;
}

// Most floats one reduction's value may have.
#define HIPK_MAX_K 3
// Most rows one block of a row kernel takes (its parts: rows.h's 2-D blocks).
#define HIPK_MAX_ROW_PARTS 8
// Per half: one value per warp, plus each part's result (CPU), of HIPK_MAX_K floats each.
#define HIPK_SCRATCH (HIPK_MAX_WARPS + HIPK_MAX_ROW_PARTS)
// Floats of __shared__ scratch a BlockReducer needs.
#define HIPK_REDUCER_SCRATCH (2 * HIPK_SCRATCH * HIPK_MAX_K)


// Block-wide reductions of a 1-D block, or of each "part" of it: a block may split into parts
// of whole warps (each handling its own row), and every part reduces its own threads' values
// at the same time. op(a, b) merges two values (associative; `op.identity()` is its neutral
// value), and the merged value of the part is returned to all its threads. Every thread of the
// block must make the same sequence of calls (they synchronize it) — except that on GPUs a part
// of exactly one warp reduces by shuffles alone, with no barrier: code that relies on the
// reduction's barrier to publish other shared memory must not run one-warp parts.
//
// Each warp reduces its lanes with shuffles and parks the result in shared memory; after one
// barrier every warp folds the partials of its part (at most warpSize of them, blocks have <=
// 1024 threads) itself, so nobody waits for a broadcast. Reusing the partials' slots right
// away would let a fast warp overwrite them while a slow one still reads, so consecutive
// reductions alternate between two halves of the scratch: before writing a half again, a
// thread has passed the barrier of the reduction in between, which every reader of the half
// reached after reading. Without shuffles (the CPU platform: one-lane warps, up to 1024
// partials) thread 0 of each part folds the partials and a second barrier publishes them.
struct BlockReducer {
    float* scratch;  // __shared__ float[HIPK_REDUCER_SCRATCH]
    int turn;        // which half the next reduction uses
    int thread;      // this thread's index in its part
    int threads;     // threads of the part (a multiple of the warp width when the block has
                     // several parts)
    int part;        // which part

    template <int K, typename Op> HIPK_DEVICE Floats<K> reduce(Floats<K> v, Op op) {
        Floats<K>* partials =
            reinterpret_cast<Floats<K>*>(scratch + (turn++ & 1) * HIPK_SCRATCH * HIPK_MAX_K);
        const int width = warp_lanes();
        const int lane = (int)threadIdx.x % width, warp = thread / width;
        const int warps = (threads + width - 1) / width;  // of this part
        const int first = part * warps;                   // the part's first partial
        const int present = imin(width, threads - warp * width);  // lanes of this warp
#if HIPK_GPU
        // A part of one whole warp (rows.h's stacked and narrow rows): its shuffles are the
        // whole reduction, with no shared memory and no barrier (warps finish independently).
        if (threads == width) return warp_broadcast(warp_reduce(v, width, op), width);
#endif
        v = warp_reduce(v, present, op);
        if (lane == 0) partials[first + warp] = v;
        __syncthreads();
#if HIPK_GPU
        v = op.identity();  // usually one partial per lane; a stub last warp has fewer lanes
        for (int i = lane; i < warps; i += present) v = op(v, partials[first + i]);
        return warp_broadcast(warp_reduce(v, present, op), present);
#else
        if (thread == 0) {
            for (int i = 1; i < warps; ++i) v = op(v, partials[first + i]);
            partials[HIPK_MAX_WARPS + part] = v;
        }
        __syncthreads();
        return partials[HIPK_MAX_WARPS + part];
#endif
    }

    HIPK_DEVICE float sum(float v) {
        Floats<1> s = {{v}};
        return reduce(s, Sum()).v[0];
    }
};

}  // namespace hipk
