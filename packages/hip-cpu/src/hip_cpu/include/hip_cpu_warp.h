/* Warp functions of HIP/CUDA device code (part of hip_cpu_prelude.h): shuffles, votes,
 * ballots, warp reductions and __syncwarp over warps of HIPCPU_WARP_SIZE lanes.
 *
 * Each call is a warp sync (hip_cpu_sched.h): the lane leaves its value and predicate, waits
 * until every live lane of its warp waits too, and reads the others'. The lanes that reached
 * a warp sync together are its mask (__activemask, a ballot's candidates); a shuffle from a
 * lane outside it (exited, or waiting elsewhere) returns the caller's own value. The `_sync`
 * variants' member mask is not checked. Values of up to 16 bytes shuffle whole.
 * Warp size 1 (HIP_FFI_CPU_WARP_SIZE=1): every thread is its own warp, nothing waits.
 */
#ifndef HIP_CPU_WARP_H
#define HIP_CPU_WARP_H

static inline unsigned int __lane_id() {
    return (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) % HIPCPU_WARP_SIZE;
}

#if HIPCPU_WARP_SIZE == 1
template <class T> static inline T __shfl(T var, int, int = 1) { return var; }
template <class T> static inline T __shfl_up(T var, unsigned int, int = 1) { return var; }
template <class T> static inline T __shfl_down(T var, unsigned int, int = 1) { return var; }
template <class T> static inline T __shfl_xor(T var, int, int = 1) { return var; }
static inline unsigned long long __ballot(int predicate) { return predicate != 0; }
static inline int __any(int predicate) { return predicate != 0; }
static inline int __all(int predicate) { return predicate != 0; }
static inline unsigned long long __activemask() { return 1; }
static inline void __syncwarp(unsigned long long = ~0ull) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
template <class M, class T> static inline T __reduce_add_sync(M, T value) { return value; }
template <class M, class T> static inline T __reduce_min_sync(M, T value) { return value; }
template <class M, class T> static inline T __reduce_max_sync(M, T value) { return value; }
#else
namespace hipcpu {
/* The value lane `src` left at this warp sync (`self` when that lane was not there). */
template <class T> static inline T lane_value(const warp_view& v, unsigned src, T self) {
    if (src >= HIPCPU_WARP_SIZE || !((v.mask >> src) & 1)) return self;
    T out;
    std::memcpy(&out, v.slots + (unsigned long long)src * v.stride, sizeof(T));
    return out;
}
template <class T> static inline warp_view exchange(const T& var) {
    static_assert(sizeof(T) <= 16, "hip-ffi cpu: shuffles move values of up to 16 bytes");
    static_assert(std::is_trivially_copyable<T>::value, "shuffled values must be trivially copyable");
    return warp_exchange(&var, sizeof(T), 0);
}
static inline unsigned segment(int width) {  // a power of two in [1, warpSize], as HIP needs
    return width <= 0 || width > HIPCPU_WARP_SIZE ? HIPCPU_WARP_SIZE : (unsigned)width;
}
}  // namespace hipcpu

template <class T> static inline T __shfl(T var, int src, int width = HIPCPU_WARP_SIZE) {
    hipcpu::warp_view v = hipcpu::exchange(var);
    unsigned w = hipcpu::segment(width);
    return hipcpu::lane_value(v, (v.lane & ~(w - 1)) + ((unsigned)src & (w - 1)), var);
}
template <class T> static inline T __shfl_up(T var, unsigned int delta, int width = HIPCPU_WARP_SIZE) {
    hipcpu::warp_view v = hipcpu::exchange(var);
    unsigned w = hipcpu::segment(width);
    if ((v.lane & (w - 1)) < delta) return var;
    return hipcpu::lane_value(v, v.lane - delta, var);
}
template <class T> static inline T __shfl_down(T var, unsigned int delta, int width = HIPCPU_WARP_SIZE) {
    hipcpu::warp_view v = hipcpu::exchange(var);
    unsigned w = hipcpu::segment(width);
    if ((v.lane & (w - 1)) + delta >= w) return var;
    return hipcpu::lane_value(v, v.lane + delta, var);
}
template <class T> static inline T __shfl_xor(T var, int mask, int width = HIPCPU_WARP_SIZE) {
    hipcpu::warp_view v = hipcpu::exchange(var);
    unsigned w = hipcpu::segment(width), src = v.lane ^ (unsigned)mask;
    if (src >= (v.lane & ~(w - 1)) + w) return var;  // later segments: own value (HIP, CUDA)
    return hipcpu::lane_value(v, src, var);
}
static inline unsigned long long __ballot(int predicate) {
    return hipcpu::warp_exchange(nullptr, 0, predicate != 0).bits;
}
static inline int __any(int predicate) { return __ballot(predicate) != 0; }
static inline int __all(int predicate) {
    hipcpu::warp_view v = hipcpu::warp_exchange(nullptr, 0, predicate != 0);
    return v.bits == v.mask;
}
static inline unsigned long long __activemask() { return hipcpu::warp_exchange(nullptr, 0, 1).mask; }
static inline void __syncwarp(unsigned long long = ~0ull) { (void)hipcpu::warp_exchange(nullptr, 0, 0); }

namespace hipcpu {
template <class T, class F> static inline T warp_fold(T value, F f) {
    warp_view v = exchange(value);
    T acc = value;
    bool first = true;
    for (unsigned l = 0; l < HIPCPU_WARP_SIZE; ++l) {
        if (!((v.mask >> l) & 1)) continue;
        T other = lane_value(v, l, value);
        acc = first ? other : f(acc, other);
        first = false;
    }
    return acc;
}
}  // namespace hipcpu
template <class M, class T> static inline T __reduce_add_sync(M, T value) {
    return hipcpu::warp_fold(value, [](T a, T b) { return (T)(a + b); });
}
template <class M, class T> static inline T __reduce_min_sync(M, T value) {
    return hipcpu::warp_fold(value, [](T a, T b) { return b < a ? b : a; });
}
template <class M, class T> static inline T __reduce_max_sync(M, T value) {
    return hipcpu::warp_fold(value, [](T a, T b) { return a < b ? b : a; });
}
#endif

template <class M, class T> static inline T __shfl_sync(M, T var, int src, int width = HIPCPU_WARP_SIZE) {
    return __shfl(var, src, width);
}
template <class M, class T>
static inline T __shfl_up_sync(M, T var, unsigned int delta, int width = HIPCPU_WARP_SIZE) {
    return __shfl_up(var, delta, width);
}
template <class M, class T>
static inline T __shfl_down_sync(M, T var, unsigned int delta, int width = HIPCPU_WARP_SIZE) {
    return __shfl_down(var, delta, width);
}
template <class M, class T> static inline T __shfl_xor_sync(M, T var, int mask, int width = HIPCPU_WARP_SIZE) {
    return __shfl_xor(var, mask, width);
}
template <class M> static inline unsigned long long __ballot_sync(M, int predicate) {
    return __ballot(predicate);
}
template <class M> static inline int __any_sync(M, int predicate) { return __any(predicate); }
template <class M> static inline int __all_sync(M, int predicate) { return __all(predicate); }

#endif /* HIP_CPU_WARP_H */
