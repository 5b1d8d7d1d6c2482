// Normalizations per channel: group_norm and batch_norm (inference), torch's semantics.
//
//   group_norm_<t>(x, weight, bias, y, int C, int G, long long inner, float eps, int vec,
//                 int passes, int hints)
//       x, y [N, C, inner] C-contiguous (inner: the spatial size); block b normalizes group
//       (n, g) = (b / G, b % G), its C / G channels' elements [C / G * inner] in a row:
//       y = (x - mean) / sqrt(var + eps) * weight[c] + bias[c], biased variance over the group.
//       weight, bias [C] may be null (1 and 0). vec: 16 bytes' worth of elements per access
//       when inner is a multiple of that and x, y are 16-byte aligned, else 1. passes: 2 (the
//       statistics in one read, Welford per vector merged by Chan's formula, then the output in
//       a second read, backwards) or 3 (the mean, the variance about it, the output: kept to
//       compare the two on a GPU). hints: the two-read kernel's cache hints, HIPK_HINT_* bits
//       (below; 0: none).
//   group_norm_deep_<t>(x, weight, bias, y, int C, int G, long long inner, float eps, int vec,
//                      int hints)
//       The two-read kernel with four vectors a thread in flight, blocks of at most 512
//       threads (the host's default: 256, 512 where the groups are few).
//   group_norm_on_chip_<t>(x, weight, bias, y, int C, int G, long long inner, float eps,
//                          int vec, int flight, long long groups)
//       The same, the group held in dynamic shared memory (the host launches with the group's
//       bytes, C / G * inner elements, where the device's opt-in limit allows): HBM reads x
//       once and writes y once. flight: 4 or 8 loads a thread issued before their first use.
//       groups: N · G; a grid of fewer blocks takes groups b, b + gridDim.x, ... (persistent).
//   batch_norm_<t>(x, mean, var, weight, bias, y, long long n, int C, long long inner, float eps)
//       y = (x - mean[c]) / sqrt(var[c] + eps) * weight[c] + bias[c], c = (i / inner) % C:
//       NCHW [N, C, inner] (inner = H * W), or channels last with inner = 1; weight, bias may be
//       null. y may be x (in place).
//
// group_norm: one block per group, 1-D blocks of any size (a multiple of the warp size is
// best), f32 accumulation, the output as (x - mean) · (rstd · weight) + bias. The later reads
// come from L2 when the group is still there: with every group in flight at once (fewer groups
// than block slots) the second read trails the first by all the groups' bytes, so it walks the
// row backwards, the last vectors read first. Two vectors a thread in flight per step; the
// entry points' __launch_bounds__(1024, 2) hold a thread to 32 registers on NVIDIA, so that two
// blocks of 1024 fit a multiprocessor: 256 groups (the host's 1024-thread case: fewer groups
// than two per multiprocessor) then run in one wave, not two. group_norm_deep: four vectors a
// thread in flight, blocks of at most 512 (two a multiprocessor at 64 registers): the two-vector
// kernel left HBM idle between a thread's round trips (H200: 32.6 against 24.4 µs).
// group_norm_on_chip: one block per group as well; each thread loads `flight` vectors before
// their use, keeps them in shared memory and adds them to its statistics, then, after the
// block's reduction, normalizes the same vectors from shared memory (its own: no barrier
// beyond the reduction's). Its entry points' __launch_bounds__(1024, 1) leave 64 registers
// a thread on NVIDIA: a large group's shared memory allows one block a multiprocessor anyway.
// batch_norm: grid-stride over any 1-D grid.
#include "dtypes.h"

namespace hipk {

// Cache hints of group_norm's 16-byte accesses (`hints`, bits; NVIDIA only, plain accesses
// elsewhere). Both reads of a group and its write pass through L2, whose capacity is below
// all groups' x and y together: 1 stores y streaming (st.global.cs, evict-first), so the writes
// push out fewer rows still to be read again; 2 reads x the second time as its last use
// (ld.global.cs); 4 reads it the first time under an L2 evict_last policy (from sm_80).
#define HIPK_HINT_STREAM_STORE 1
#define HIPK_HINT_LAST_READ 2
#define HIPK_HINT_KEEP_READ 4

// The loads' asm is pure (no "memory" clobber), so the compiler may move it among other
// memory accesses: for memory that nothing writes during the kernel, or that only the reading
// thread writes after it has read it (group_norm's in-place y = x), as here.
template <typename T, int V>
HIPK_DEVICE Vec<T, V> load_hinted(const Vec<T, V>* p, int hint) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    if (sizeof(Vec<T, V>) == 16 && hint != 0) {
        Vec<T, V> v;
        unsigned int* w = reinterpret_cast<unsigned int*>(&v);
#if __CUDA_ARCH__ >= 800
        if (hint & HIPK_HINT_KEEP_READ) {
            unsigned long long policy;
            asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
            asm("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
                : "l"(p), "l"(policy));
            return v;
        }
#endif
        if (hint & HIPK_HINT_LAST_READ) {
            asm("ld.global.cs.v4.u32 {%0, %1, %2, %3}, [%4];"
                : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
                : "l"(p));
            return v;
        }
    }
#endif
    (void)hint;
    return *p;
}

template <typename T, int V>
HIPK_DEVICE void store_hinted(Vec<T, V>* p, const Vec<T, V>& v, int hints) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    if (sizeof(Vec<T, V>) == 16 && (hints & HIPK_HINT_STREAM_STORE)) {
        const unsigned int* w = reinterpret_cast<const unsigned int*>(&v);
        asm volatile("st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};"
                     :
                     : "l"(p), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3])
                     : "memory");
        return;
    }
#endif
    (void)hints;
    *p = v;
}

// Vector j of the group's row normalized and written (c: its channel; the group's mean is
// shift + mean). (x - mean) first: x * scale - mean * scale would cancel where the spread is
// small beside the mean (a one-element group: 0 exactly, not the rounding of x * scale).
template <typename T, int V>
HIPK_DEVICE void group_norm_write(const Vec<T, V>& v, Vec<T, V>* out, long long j, int c,
                                  const T* weight, const T* bias, float shift, float mean,
                                  float rstd, int hints = 0) {
    const float scale = (weight ? to_float(weight[c]) : 1.0f) * rstd;
    const float offset = bias ? to_float(bias[c]) : 0.0f;
    Vec<T, V> o;
    HIPK_UNROLL
    for (int i = 0; i < V; ++i)
        o.v[i] = from_float<T>((to_float(v.v[i]) - shift - mean) * scale + offset);
    store_hinted<T, V>(out + j, o, hints);
}

// V elements per access: 16 bytes when the host found `inner` a multiple of V and the
// pointers aligned (a vector then never straddles two channels), else 1.
template <typename T, int V>
HIPK_DEVICE void group_norm_three_reads(const T* x, const T* weight, const T* bias, T* y, int C,
                                        int G, long long inner, float eps) {
    __shared__ float scratch[HIPK_REDUCER_SCRATCH];
    BlockReducer reduce = {scratch, 0, (int)threadIdx.x, (int)blockDim.x, 0};
    const int Cg = C / G;
    const long long count = (long long)Cg * inner;
    const long long vectors = count / V;
    const long long first = (long long)blockIdx.x * count;
    const Vec<T, V>* row = reinterpret_cast<const Vec<T, V>*>(x + first);
    float sum = 0.0f;
    for (long long j = threadIdx.x; j < vectors; j += blockDim.x) {
        const Vec<T, V> v = row[j];
        HIPK_UNROLL
        for (int i = 0; i < V; ++i) sum += to_float(v.v[i]);
    }
    const float mean = reduce.sum(sum) / (float)count;
    float squares = 0.0f;
    for (long long j = threadIdx.x; j < vectors; j += blockDim.x) {
        const Vec<T, V> v = row[j];
        HIPK_UNROLL
        for (int i = 0; i < V; ++i) {
            const float d = to_float(v.v[i]) - mean;
            squares += d * d;
        }
    }
    const float rstd = 1.0f / sqrtf(reduce.sum(squares) / (float)count + eps);
    const int c0 = (int)(blockIdx.x % G) * Cg;
    Vec<T, V>* out = reinterpret_cast<Vec<T, V>*>(y + first);
    for (long long j = threadIdx.x; j < vectors; j += blockDim.x)
        group_norm_write<T, V>(row[j], out, j, c0 + (int)(j * V / inner), weight, bias, 0.0f,
                               mean, rstd);
}

// Adds a vector's V values less `shift` to a thread's (count, mean, M2): the vector's own mean
// and squared deviations, merged by Chan's formula (one division a vector; no cancellation).
template <typename T, int V>
HIPK_DEVICE void welford_vector(const Vec<T, V>& v, float shift, float& count, float& mean,
                                float& m2) {
    float f[V], local = 0.0f;
    HIPK_UNROLL
    for (int i = 0; i < V; ++i) local += f[i] = to_float(v.v[i]) - shift;
    local *= 1.0f / (float)V;
    float squares = 0.0f;
    HIPK_UNROLL
    for (int i = 0; i < V; ++i) squares += (f[i] - local) * (f[i] - local);
    count += (float)V;
    const float d = local - mean;
    mean += d * fast_divide((float)V, count);
    m2 += squares + d * (local - mean) * (float)V;
}

// Two reads of the row: statistics, then the output (backwards; see the file's comment). F
// vectors a thread in flight, then the rest one by one.
template <typename T, int V, int F = 2>
HIPK_DEVICE void group_norm_two_reads(const T* x, const T* weight, const T* bias, T* y, int C,
                                      int G, long long inner, float eps, int hints) {
    const int first_read = hints & HIPK_HINT_KEEP_READ, last_read = hints & HIPK_HINT_LAST_READ;
    __shared__ float scratch[HIPK_REDUCER_SCRATCH];
    BlockReducer reduce = {scratch, 0, (int)threadIdx.x, (int)blockDim.x, 0};
    const int Cg = C / G;
    const long long count = (long long)Cg * inner, vectors = count / V, step = blockDim.x;
    const long long first = (long long)blockIdx.x * count;
    const Vec<T, V>* row = reinterpret_cast<const Vec<T, V>*>(x + first);
    // Statistics of x less the group's first element: the rounding of the threads' means is then
    // at the scale of the spread, not of the values (a group at 1e4 +- 1e-2 in f32 kept 2x the
    // error of the three reads without it).
    const float shift = to_float(x[first]);
    float n = 0.0f, mean = 0.0f, m2 = 0.0f;
    long long j = threadIdx.x;
    for (; j + (F - 1) * step < vectors; j += F * step) {
        Vec<T, V> v[F];
        HIPK_UNROLL
        for (int k = 0; k < F; ++k) v[k] = load_hinted<T, V>(row + j + k * step, first_read);
        HIPK_UNROLL
        for (int k = 0; k < F; ++k) welford_vector<T, V>(v[k], shift, n, mean, m2);
    }
    for (; j < vectors; j += step)
        welford_vector<T, V>(load_hinted<T, V>(row + j, first_read), shift, n, mean, m2);
    // Chan's formula over the block in two sums: the mean, then M2 about it (an empty thread
    // adds 0, not 0 · inf where the deviation overflows).
    const float total = reduce.sum(n * mean) / (float)count;
    const float d = mean - total;
    const float all = reduce.sum(n > 0.0f ? m2 + n * (d * d) : 0.0f);
    const float rstd = 1.0f / sqrtf(all / (float)count + eps);
    const int c0 = (int)(blockIdx.x % G) * Cg;
    Vec<T, V>* out = reinterpret_cast<Vec<T, V>*>(y + first);
    const long long t = threadIdx.x;
    j = t < vectors ? t + (vectors - 1 - t) / step * step : -1;  // this thread's last vector
    for (; j - (F - 1) * step >= 0; j -= F * step) {
        Vec<T, V> v[F];
        HIPK_UNROLL
        for (int k = 0; k < F; ++k) v[k] = load_hinted<T, V>(row + j - k * step, last_read);
        HIPK_UNROLL
        for (int k = 0; k < F; ++k) {
            const long long at = j - k * step;
            group_norm_write<T, V>(v[k], out, at, c0 + (int)(at * V / inner), weight, bias,
                                   shift, total, rstd, hints);
        }
    }
    for (; j >= 0; j -= step)
        group_norm_write<T, V>(load_hinted<T, V>(row + j, last_read), out, j,
                               c0 + (int)(j * V / inner), weight, bias, shift, total, rstd,
                               hints);
}

template <typename T, int V>
HIPK_DEVICE void group_norm_passes(const T* x, const T* weight, const T* bias, T* y, int C,
                                   int G, long long inner, float eps, int passes, int hints) {
    if (passes == 3) group_norm_three_reads<T, V>(x, weight, bias, y, C, G, inner, eps);
    else group_norm_two_reads<T, V>(x, weight, bias, y, C, G, inner, eps, hints);
}

// A group's row into shared memory `tile`, its statistics (of x - shift) added to the thread's
// (n, mean, m2): F vectors a thread in flight, then the rest one by one.
template <typename T, int V, int F>
HIPK_DEVICE void group_tile_load(const Vec<T, V>* row, Vec<T, V>* tile, long long vectors,
                                 float shift, float& n, float& mean, float& m2) {
    const long long step = blockDim.x;
    long long j = threadIdx.x;
    for (; j + (F - 1) * step < vectors; j += F * step) {
        Vec<T, V> v[F];
        HIPK_UNROLL
        for (int k = 0; k < F; ++k) v[k] = row[j + k * step];
        HIPK_UNROLL
        for (int k = 0; k < F; ++k) {
            tile[j + k * step] = v[k];
            welford_vector<T, V>(v[k], shift, n, mean, m2);
        }
    }
    for (; j < vectors; j += step) {
        const Vec<T, V> v = row[j];
        tile[j] = v;
        welford_vector<T, V>(v, shift, n, mean, m2);
    }
}

// Groups blockIdx.x, + gridDim.x, ... of the `groups` (N · G) held in shared memory `tile`
// (C / G * inner elements): one read of x, one write of y. With fewer blocks than groups
// (the host's persistent grid) the next group's loads are issued while the current one is
// written, F vectors at a time, into the slots just written out: HBM sees reads and writes
// together, as in a copy, instead of a block's reads, then its writes.
template <typename T, int V, int F>
HIPK_DEVICE void group_norm_on_chip(const T* x, const T* weight, const T* bias, T* y, int C,
                                    int G, long long inner, float eps, long long groups,
                                    Vec<T, V>* tile) {
    __shared__ float scratch[HIPK_REDUCER_SCRATCH];
    BlockReducer reduce = {scratch, 0, (int)threadIdx.x, (int)blockDim.x, 0};
    const int Cg = C / G;
    const long long count = (long long)Cg * inner, vectors = count / V, step = blockDim.x;
    long long g = blockIdx.x;
    float shift = to_float(x[g * count]);  // as group_norm_two_reads: statistics of x - x[0]
    float n = 0.0f, mean = 0.0f, m2 = 0.0f;
    group_tile_load<T, V, F>(reinterpret_cast<const Vec<T, V>*>(x + g * count), tile, vectors,
                             shift, n, mean, m2);
    // Each thread reads back only the slots it wrote: no barrier but the reductions'.
    for (;;) {
        const float total = reduce.sum(n * mean) / (float)count;  // Chan's, as in two_reads
        const float d = mean - total;
        const float all = reduce.sum(n > 0.0f ? m2 + n * (d * d) : 0.0f);
        const float rstd = 1.0f / sqrtf(all / (float)count + eps), at_shift = shift;
        const int c0 = (int)(g % G) * Cg;
        Vec<T, V>* out = reinterpret_cast<Vec<T, V>*>(y + g * count);
        const long long next = g + gridDim.x;
        long long j = threadIdx.x;
        if (next >= groups) {
            for (; j < vectors; j += step)
                group_norm_write<T, V>(tile[j], out, j, c0 + (int)(j * V / inner), weight, bias,
                                       at_shift, total, rstd);
            return;
        }
        const Vec<T, V>* row = reinterpret_cast<const Vec<T, V>*>(x + next * count);
        shift = to_float(x[next * count]);
        n = mean = m2 = 0.0f;
        for (; j + (F - 1) * step < vectors; j += F * step) {
            Vec<T, V> v[F];
            HIPK_UNROLL
            for (int k = 0; k < F; ++k) v[k] = row[j + k * step];
            HIPK_UNROLL
            for (int k = 0; k < F; ++k) {
                const long long at = j + k * step;
                group_norm_write<T, V>(tile[at], out, at, c0 + (int)(at * V / inner), weight,
                                       bias, at_shift, total, rstd);
                tile[at] = v[k];
                welford_vector<T, V>(v[k], shift, n, mean, m2);
            }
        }
        for (; j < vectors; j += step) {
            const Vec<T, V> v = row[j];
            group_norm_write<T, V>(tile[j], out, j, c0 + (int)(j * V / inner), weight, bias,
                                   at_shift, total, rstd);
            tile[j] = v;
            welford_vector<T, V>(v, shift, n, mean, m2);
        }
        g = next;
    }
}

template <typename T, int V>
HIPK_DEVICE void group_norm_flight(const T* x, const T* weight, const T* bias, T* y, int C,
                                   int G, long long inner, float eps, int flight,
                                   long long groups, void* tile) {
    Vec<T, V>* slots = reinterpret_cast<Vec<T, V>*>(tile);
    if (flight == 8)
        group_norm_on_chip<T, V, 8>(x, weight, bias, y, C, G, inner, eps, groups, slots);
    else group_norm_on_chip<T, V, 4>(x, weight, bias, y, C, G, inner, eps, groups, slots);
}

template <typename T>
HIPK_DEVICE void batch_norm(const T* x, const T* mean, const T* var, const T* weight,
                            const T* bias, T* y, long long n, int C, long long inner, float eps) {
    for (long long i = global_thread(); i < n; i += grid_threads()) {
        const int c = (int)(i / inner % C);
        const float w = weight ? to_float(weight[c]) : 1.0f;
        const float b = bias ? to_float(bias[c]) : 0.0f;
        const float scale = w / sqrtf(to_float(var[c]) + eps);
        y[i] = from_float<T>((to_float(x[i]) - to_float(mean[c])) * scale + b);
    }
}

}  // namespace hipk

#define HIPK_GROUP_NORM(S_, T)                                                                 \
    extern "C" __global__ void __launch_bounds__(1024, 2)                                     \
        group_norm_##S_(const T* x, const T* weight, const T* bias, T* y, int C, int G,        \
                        long long inner, float eps, int vec, int passes, int hints) {          \
        if (vec == hipk::Lanes16<T>::value)                                                    \
            hipk::group_norm_passes<T, hipk::Lanes16<T>::value>(x, weight, bias, y, C, G,      \
                                                                 inner, eps, passes, hints);   \
        else                                                                                   \
            hipk::group_norm_passes<T, 1>(x, weight, bias, y, C, G, inner, eps, passes, 0);    \
    }
HIPK_F32_AND_16BIT_TYPES(HIPK_GROUP_NORM)

// group_norm_deep_<t>: the two-read kernel with four 16-byte vectors a thread in flight per
// step instead of two, in blocks of at most 512 threads (64 registers a thread on NVIDIA, two
// blocks of 512 a multiprocessor). H200, bf16: 24.4 µs against 32.6 at [8, 512, 64, 64] and
// 32 groups; eight vectors were slower than two.
#define HIPK_GROUP_NORM_DEEP(S_, T)                                                            \
    extern "C" __global__ void __launch_bounds__(512, 2)                                      \
        group_norm_deep_##S_(const T* x, const T* weight, const T* bias, T* y, int C, int G,   \
                             long long inner, float eps, int vec, int hints) {                 \
        constexpr int L = hipk::Lanes16<T>::value;                                             \
        if (vec == L)                                                                          \
            hipk::group_norm_two_reads<T, L, 4>(x, weight, bias, y, C, G, inner, eps, hints);  \
        else                                                                                   \
            hipk::group_norm_two_reads<T, 1, 4>(x, weight, bias, y, C, G, inner, eps, 0);      \
    }
HIPK_F32_AND_16BIT_TYPES(HIPK_GROUP_NORM_DEEP)

#define HIPK_GROUP_NORM_ON_CHIP(S_, T)                                                         \
    extern "C" __global__ void __launch_bounds__(1024, 1)                                     \
        group_norm_on_chip_##S_(const T* x, const T* weight, const T* bias, T* y, int C,       \
                                int G, long long inner, float eps, int vec, int flight,        \
                                long long groups) {                                            \
        extern __shared__ __align__(16) unsigned char hipk_group_tile[];                       \
        if (vec == hipk::Lanes16<T>::value)                                                    \
            hipk::group_norm_flight<T, hipk::Lanes16<T>::value>(x, weight, bias, y, C, G,      \
                                                                 inner, eps, flight, groups,   \
                                                                 hipk_group_tile);             \
        else                                                                                   \
            hipk::group_norm_flight<T, 1>(x, weight, bias, y, C, G, inner, eps, flight,        \
                                          groups, hipk_group_tile);                            \
    }
HIPK_F32_AND_16BIT_TYPES(HIPK_GROUP_NORM_ON_CHIP)

#define HIPK_BATCH_NORM(S_, T)                                                                 \
    extern "C" __global__ void batch_norm_##S_(const T* x, const T* mean, const T* var,        \
                                               const T* weight, const T* bias, T* y,           \
                                               long long n, int C, long long inner,            \
                                               float eps) {                                    \
        hipk::batch_norm<T>(x, mean, var, weight, bias, y, n, C, inner, eps);                  \
    }
HIPK_F32_AND_16BIT_TYPES(HIPK_BATCH_NORM)
