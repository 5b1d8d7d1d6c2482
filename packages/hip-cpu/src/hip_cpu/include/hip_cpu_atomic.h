/* HIP/CUDA atomics on the host (part of hip_cpu_prelude.h): real atomic read-modify-writes
 * (GCC/clang __atomic builtins, lock-free for 4- and 8-byte types on every 64-bit host), with
 * relaxed ordering like GPU atomics; __threadfence() orders them. They are atomic across
 * blocks running on different cores and between the fibers of one block alike. Floating-point
 * add/min/max are compare-and-swap loops. Each returns the old value.
 */
#ifndef HIP_CPU_ATOMIC_H
#define HIP_CPU_ATOMIC_H

namespace hipcpu {
template <class T> struct same_type { using type = T; };
/* T deduced from the pointer only, so `atomicAdd(&unsigned_counter, 1)` converts the 1. */
template <class T> using operand = typename same_type<T>::type;
template <class T> using if_integer = std::enable_if_t<std::is_integral<T>::value, T>;

template <class T, class F> static inline T atomic_update(T* address, F update) {
    T old, next;
    __atomic_load(address, &old, __ATOMIC_RELAXED);
    do {
        next = update(old);
    } while (!__atomic_compare_exchange(address, &old, &next, true, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED));
    return old;
}
}  // namespace hipcpu

#define HIPCPU_ATOMIC_INT(NAME, BUILTIN)                                                     \
    template <class T>                                                                       \
    static inline hipcpu::if_integer<T> NAME(T* address, hipcpu::operand<T> value) {         \
        return BUILTIN(address, value, __ATOMIC_RELAXED);                                    \
    }
HIPCPU_ATOMIC_INT(atomicAdd, __atomic_fetch_add)
HIPCPU_ATOMIC_INT(atomicSub, __atomic_fetch_sub)
HIPCPU_ATOMIC_INT(atomicAnd, __atomic_fetch_and)
HIPCPU_ATOMIC_INT(atomicOr, __atomic_fetch_or)
HIPCPU_ATOMIC_INT(atomicXor, __atomic_fetch_xor)
HIPCPU_ATOMIC_INT(atomicExch, __atomic_exchange_n)
#undef HIPCPU_ATOMIC_INT

template <class T> static inline hipcpu::if_integer<T> atomicMin(T* address, hipcpu::operand<T> v) {
    return hipcpu::atomic_update(address, [v](T old) { return v < old ? v : old; });
}
template <class T> static inline hipcpu::if_integer<T> atomicMax(T* address, hipcpu::operand<T> v) {
    return hipcpu::atomic_update(address, [v](T old) { return old < v ? v : old; });
}
template <class T>
static inline hipcpu::if_integer<T> atomicCAS(T* address, hipcpu::operand<T> compare,
                                              hipcpu::operand<T> value) {
    __atomic_compare_exchange_n(address, &compare, value, false, __ATOMIC_RELAXED,
                                __ATOMIC_RELAXED);
    return compare;  // the old value, whether or not the swap happened
}
static inline unsigned int atomicInc(unsigned int* address, unsigned int limit) {
    return hipcpu::atomic_update(address,
                                 [limit](unsigned int old) { return old >= limit ? 0u : old + 1u; });
}
static inline unsigned int atomicDec(unsigned int* address, unsigned int limit) {
    return hipcpu::atomic_update(
        address, [limit](unsigned int old) { return (old == 0u || old > limit) ? limit : old - 1u; });
}

#define HIPCPU_ATOMIC_FLOAT(T)                                                               \
    static inline T atomicAdd(T* address, T v) {                                             \
        return hipcpu::atomic_update(address, [v](T old) { return old + v; });               \
    }                                                                                        \
    static inline T atomicSub(T* address, T v) {                                             \
        return hipcpu::atomic_update(address, [v](T old) { return old - v; });               \
    }                                                                                        \
    static inline T atomicMin(T* address, T v) {                                             \
        return hipcpu::atomic_update(address, [v](T old) { return v < old ? v : old; });     \
    }                                                                                        \
    static inline T atomicMax(T* address, T v) {                                             \
        return hipcpu::atomic_update(address, [v](T old) { return old < v ? v : old; });     \
    }                                                                                        \
    static inline T atomicExch(T* address, T v) {                                           \
        T old;                                                                               \
        __atomic_exchange(address, &v, &old, __ATOMIC_RELAXED);                              \
        return old;                                                                          \
    }
HIPCPU_ATOMIC_FLOAT(float)
HIPCPU_ATOMIC_FLOAT(double)
#undef HIPCPU_ATOMIC_FLOAT

/* Scoped and "unsafe" spellings: every scope is the whole host here. */
#define HIPCPU_ATOMIC_ALIASES(NAME)                                                          \
    template <class... A> static inline auto NAME##_system(A... a) { return NAME(a...); }   \
    template <class... A> static inline auto NAME##_block(A... a) { return NAME(a...); }
HIPCPU_ATOMIC_ALIASES(atomicAdd)
HIPCPU_ATOMIC_ALIASES(atomicSub)
HIPCPU_ATOMIC_ALIASES(atomicAnd)
HIPCPU_ATOMIC_ALIASES(atomicOr)
HIPCPU_ATOMIC_ALIASES(atomicXor)
HIPCPU_ATOMIC_ALIASES(atomicExch)
HIPCPU_ATOMIC_ALIASES(atomicMin)
HIPCPU_ATOMIC_ALIASES(atomicMax)
HIPCPU_ATOMIC_ALIASES(atomicCAS)
HIPCPU_ATOMIC_ALIASES(atomicInc)
HIPCPU_ATOMIC_ALIASES(atomicDec)
#undef HIPCPU_ATOMIC_ALIASES
template <class T, class U> static inline T unsafeAtomicAdd(T* address, U v) {
    return atomicAdd(address, (T)v);
}
template <class T, class U> static inline T safeAtomicAdd(T* address, U v) {
    return atomicAdd(address, (T)v);
}

#endif /* HIP_CPU_ATOMIC_H */
