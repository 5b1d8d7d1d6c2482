// Reductions along one merged axis: sum (and mean), max/min, argmax/argmin, of every dtype.
// The entry points are in reduce.hip (sum, mean) and reduce_arg.hip (max, min, argmax, argmin):
// two sources, so that neither takes long to compile.
//
// The host (hip_runtime.ops.reductions) merges the reduced axes and the kept ones so that the
// input is x[o * so + r * sr + i * si] for o < O, r < R, i < I (strides in elements, any sign)
// and the result y[o * I + i] (C-contiguous). Two layouts of threads:
//
// - rows (cols = 0, I = 1): `lanes` threads (a power of two) per output, blockDim / lanes
//   outputs per block, grid.x = ceil(O / outputs per block). With vec = 1 (sr = 1, so and R
//   multiples of N = 16 bytes / sizeof(T), x 16-byte aligned) each thread reads 16 bytes at a
//   time. A group reduces with shuffles (lanes <= warpSize) or through shared memory.
// - cols (cols = 1): blockDim = lanes * (256 / lanes) threads, `lanes` across i (N consecutive
//   i per thread with vec = 1: si = 1, so, sr and I multiples of N, 16-byte aligned; coalesced
//   along i), the others across r; grid.x = O * ceil(I / (lanes * N)) tiles.
//
// Split: grid.y = S > 1 blocks share each output, block y taking r in [y * chunk, (y + 1) *
// chunk) (rows: chunk a multiple of N), and write partial results to `part` laid out
// [O, S, I] instead of y; then either the last of the S blocks merges them in the same
// launch (sum and max/min of float types, with `counters`: reduce_split.h) or the host
// reduces `part` over S with a second launch (cols layout, or rows when I = 1), which writes
// y. The host sends rows that cannot take 16-byte loads to the cols layout too (I = 1 with
// one block per output, or outputs as i when rows are short). The partials are in the
// accumulator type (sum: f32 for 16-bit floats, f64, i64 for integers and bool; max/min: the
// value; arg: value and index), so the second pass of a 16-bit sum is reduce_sum2_<t> (reads
// f32, writes <t>).
//
// Semantics (numpy's): sum of integers and bool accumulates and returns i64; mean (mean = 1)
// divides by `count` at the end (0 / 0 = NaN for an empty axis); max/min (reduce_max.hip,
// values only) propagate NaN: the result is NaN when any element is; argmax/argmin give the
// first index of the extreme value, a NaN counting as the extreme one.
//
// Speed (all of it is memory traffic): rows keep one accumulator per vector element (sum and
// max/min; arg one), so the adds of a thread form N short dependency chains instead of one
// long one; cols merge the block's rows of threads through shared memory in one pass (one
// barrier), and max/min carry no index and no branch (a compare, a NaN test, a select).
// R = 0: sum writes 0 and mean NaN (max and arg are refused by the host).
// Launch: block 256 (rows: `lanes` when it is 64 or more, else 256; lanes <= 256).
#pragma once

#include "dtypes.h"

#if HIPK_GPU
#define HIPK_REDUCE_SLOTS 256
#ifndef HIPK_REDUCE_LOADS    // (bench_opset.py --sweep compiles other values)
#define HIPK_REDUCE_LOADS 4  // loads in flight per thread in the rows loop (arg: half)
#endif
#ifndef HIPK_REDUCE_COLS_LOADS  // the same in the cols loop (H100, 8192^2 bf16 sum over the
#define HIPK_REDUCE_COLS_LOADS 2  // first axis: 89.3% of copy at 2, 82.3 at 4; f32 92.8 / 95.4)
#endif
#ifndef HIPK_REDUCE_FINISH  // loads in flight per thread walking the partials of a split (or
#define HIPK_REDUCE_FINISH 16  // scalar columns): the last block's walk is all latency (H200:
#endif                         // 4 left a 16-way split's finish a few microseconds long)
#define HIPK_PRAGMA(x) _Pragma(#x)
#define HIPK_UNROLL_BY(n) HIPK_PRAGMA(unroll n)
#define HIPK_UNROLL4 HIPK_UNROLL_BY(HIPK_REDUCE_FINISH)
#else
#define HIPK_REDUCE_SLOTS 1024  // one slot per thread: no shuffles on the CPU platform
#define HIPK_REDUCE_LOADS 1     // (the unrolled loops only slow the host compiler down)
#define HIPK_REDUCE_COLS_LOADS 1
#define HIPK_UNROLL4
// At -O3 g++ took 6 s over reduce.hip and 10 s over reduce_arg.hip, at -O1 2.5 and 3 s (the
// tests use small shapes on the CPU platform).
#pragma GCC optimize("O1")
#endif

namespace hipk {

template <typename T> HIPK_DEVICE bool is_nan(T) { return false; }
template <> HIPK_DEVICE bool is_nan<float>(float v) { return v != v; }
template <> HIPK_DEVICE bool is_nan<double>(double v) { return v != v; }

// Any plain value shifted down `offset` lanes, moved as 32-bit words (pairs, bytes, doubles).
template <typename V> HIPK_DEVICE V shuffle_down(V v, int offset) {
#if HIPK_GPU
    union Words {
        V v;
        int w[(sizeof(V) + 3) / 4];
    } u;
    u.v = v;
    HIPK_UNROLL
    for (int k = 0; k < (int)(sizeof(V) + 3) / 4; ++k) {
#if defined(__CUDA_ARCH__)
        u.w[k] = __shfl_down_sync(0xffffffffu, u.w[k], offset);
#else
        u.w[k] = __shfl_down(u.w[k], offset);
#endif
    }
    return u.v;
#else
    (void)offset;
    return v;
#endif
}

// Thread 0 of each group of `lanes` consecutive threads (a power of two) ends with the
// merge of the group's values. Every thread of the block calls it (barriers). `slots`: shared
// memory for HIPK_REDUCE_SLOTS values.
template <typename V, typename Op>
HIPK_DEVICE V group_reduce(V v, const Op& op, V* slots, int lanes) {
    const int t = (int)threadIdx.x;
#if HIPK_GPU
    if (lanes <= warpSize) {  // within one warp: lane l merges lane l + offset
        for (int offset = lanes / 2; offset > 0; offset /= 2)
            v = op.merge(v, shuffle_down(v, offset));
        return v;
    }
    // One group per block: warps by shuffles, then thread 0 merges the warps' results.
    for (int offset = warpSize / 2; offset > 0; offset /= 2)
        v = op.merge(v, shuffle_down(v, offset));
    if (t % warpSize == 0) slots[t / warpSize] = v;
    __syncthreads();
    if (t == 0)
        for (int w = 1; w < lanes / warpSize; ++w) v = op.merge(v, slots[w]);
    return v;
#else
    slots[t] = v;
    for (int offset = lanes / 2; offset > 0; offset /= 2) {
        __syncthreads();
        if (t % lanes < offset) slots[t] = op.merge(slots[t], slots[t + offset]);
    }
    __syncthreads();
    return slots[t];
#endif
}

// --- the operations: Acc init(), add(acc, value, index), merge(a, b), write(acc, at, part) ---

// The float types: the big tensors whose reductions the unrolled loops (several loads in
// flight, one accumulator per vector element) are for. Integers and bool take the plain
// loops (still 16-byte loads): half the code to compile, for reductions of masks and ids.
template <typename T> struct Unrolled { enum { value = 0 }; };
template <> struct Unrolled<float> { enum { value = 1 }; };
template <> struct Unrolled<double> { enum { value = 1 }; };
template <> struct Unrolled<f16> { enum { value = 1 }; };
template <> struct Unrolled<bf16> { enum { value = 1 }; };

template <typename T> struct SumAcc { typedef long long type; };  // integers and bool
template <> struct SumAcc<float> { typedef float type; };
template <> struct SumAcc<double> { typedef double type; };
template <> struct SumAcc<f16> { typedef float type; };
template <> struct SumAcc<bf16> { typedef float type; };

template <typename T> struct SumOut { typedef long long type; };
template <> struct SumOut<float> { typedef float type; };
template <> struct SumOut<double> { typedef double type; };
template <> struct SumOut<f16> { typedef f16 type; };
template <> struct SumOut<bf16> { typedef bf16 type; };

template <typename A, typename O> HIPK_DEVICE O store_sum(A a) { return (O)a; }
template <> HIPK_DEVICE f16 store_sum<float, f16>(float a) { return from_float<f16>(a); }
template <> HIPK_DEVICE bf16 store_sum<float, bf16>(float a) { return from_float<bf16>(a); }

// In: what x holds (T, or the accumulator in a second pass); Out: y's type.
template <typename In, typename Acc, typename Out> struct SumOp {
    typedef In in_type;
    typedef Acc acc_type;
    enum { loads = Unrolled<In>::value ? HIPK_REDUCE_LOADS : 1, wide_cols = 1,
           spread = Unrolled<In>::value,
           cols_loads = Unrolled<In>::value ? HIPK_REDUCE_COLS_LOADS : 1 };
    Out* y;
    Acc* part;
    long long count;  // mean: divide by it at the end
    int mean;

    HIPK_DEVICE Acc init() const { return (Acc)0; }
    HIPK_DEVICE void add(Acc& a, In v, long long, long long) const { a += (Acc)load_value(v); }
    HIPK_DEVICE Acc merge(Acc a, Acc b) const { return a + b; }
    HIPK_DEVICE void write(Acc a, long long at, long long part_at) const {
        if (part) {
            part[part_at] = a;
        } else {
            y[at] = store_sum<Acc, Out>(mean ? a / (Acc)count : a);
        }
    }
};

// The best value so far and its index (-1: none yet).
template <typename V> struct Best {
    V v;
    long long i;
};

// max/min and argmax/argmin: `lowest` picks min. A second pass of arg reads the indices of
// the partials from `index` (null otherwise: the index is r).
template <typename T> struct ExtremeOp {
    typedef T in_type;
    typedef Best<typename Compute<T>::type> acc_type;
    // branchy, and 3 registers an accumulator: fewer loads in flight, one accumulator per row
    enum { loads = Unrolled<T>::value ? (HIPK_REDUCE_LOADS + 1) / 2 : 1, wide_cols = 0,
           spread = 0, cols_loads = Unrolled<T>::value ? (HIPK_REDUCE_COLS_LOADS + 1) / 2 : 1 };
    typedef typename Compute<T>::type V;
    T* y;                 // the values (results or partials), or null
    long long* y_index;   // the indices (results or partials), or null
    const long long* index;
    int lowest;
    int partial;

    HIPK_DEVICE acc_type init() const {
        acc_type a;
        a.v = V();
        a.i = -1;
        return a;
    }
    // Whether b replaces a: a NaN beats every number, otherwise the larger (smaller) value.
    HIPK_DEVICE bool beats(V b, V a) const {
        if (is_nan(a)) return false;
        if (is_nan(b)) return true;
        return lowest ? b < a : b > a;
    }
    HIPK_DEVICE void add(acc_type& a, T v, long long at, long long r) const {
        const V value = load_value(v);
        if (a.i < 0 || beats(value, a.v)) {
            a.v = value;
            a.i = index ? index[at] : r;
        }
    }
    // Ties (equal, or both NaN) go to the smaller index: the first occurrence.
    HIPK_DEVICE acc_type merge(acc_type a, acc_type b) const {
        if (b.i < 0) return a;
        if (a.i < 0 || beats(b.v, a.v)) return b;
        if (!beats(a.v, b.v) && b.i < a.i) return b;
        return a;
    }
    HIPK_DEVICE void write(acc_type a, long long at, long long part_at) const {
        const long long k = partial ? part_at : at;
        if (y) y[k] = store_value<T>(a.v);
        if (y_index) y_index[k] = a.i;
    }
};

// max/min without an index (reduce_max.hip): what an element does to the running extreme.
// Integers and bool compare; floats (f16/bf16 in f32) negate for min, so max and min are the
// same compare, and a NaN, once taken, stays (x > NaN is false): NaN propagates.
template <typename V> struct Extreme {
    HIPK_DEVICE static V identity(int lowest) {  // what every element beats or ties
        const unsigned long long top = 1ull << (8 * sizeof(V) - 1);
        const bool is_signed = (V)-1 < (V)0;
        if (lowest) return is_signed ? (V)(top - 1) : (V)~0ull;
        return is_signed ? (V)top : (V)0;
    }
    HIPK_DEVICE static V in(V x, int) { return x; }
    HIPK_DEVICE static V take(V a, V x, int lowest) { return (lowest ? x < a : x > a) ? x : a; }
    HIPK_DEVICE static V out(V a, int) { return a; }
};
template <typename F> struct ExtremeFloat {
    HIPK_DEVICE static F identity(int) { return (F)neg_inf(); }  // of max(±x): min negates
    HIPK_DEVICE static F in(F x, int lowest) { return lowest ? -x : x; }
    HIPK_DEVICE static F take(F a, F x, int) { return x > a || x != x ? x : a; }
    HIPK_DEVICE static F out(F a, int lowest) { return lowest ? -a : a; }
};
template <> HIPK_DEVICE bool Extreme<bool>::identity(int lowest) { return lowest != 0; }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
// sm_80's max.NaN: the compare, the NaN test and the select in one instruction (the same
// result: NaN once any element is NaN).
template <> struct Extreme<float> : ExtremeFloat<float> {
    HIPK_DEVICE static float take(float a, float x, int) {
        float m;
        asm("max.NaN.f32 %0, %1, %2;" : "=f"(m) : "f"(a), "f"(x));
        return m;
    }
};
#else
template <> struct Extreme<float> : ExtremeFloat<float> {};
#endif
template <> struct Extreme<double> : ExtremeFloat<double> {};

template <typename T> struct MaxOp {
    typedef T in_type;
    typedef typename Compute<T>::type acc_type;
    typedef Extreme<acc_type> E;
    enum { loads = Unrolled<T>::value ? HIPK_REDUCE_LOADS : 1, wide_cols = 1,
           spread = Unrolled<T>::value,
           cols_loads = Unrolled<T>::value ? HIPK_REDUCE_COLS_LOADS : 1 };
    T* y;  // results, or partials (part_at) when `partial`
    int lowest;
    int partial;

    HIPK_DEVICE acc_type init() const { return E::identity(lowest); }
    HIPK_DEVICE void add(acc_type& a, T v, long long, long long) const {
        a = E::take(a, E::in(load_value(v), lowest), lowest);
    }
    HIPK_DEVICE acc_type merge(acc_type a, acc_type b) const { return E::take(a, b, lowest); }
    HIPK_DEVICE void write(acc_type a, long long at, long long part_at) const {
        y[partial ? part_at : at] = store_value<T>(E::out(a, lowest));
    }
};

// --- the two layouts -------------------------------------------------------------------------

struct Layout {
    long long O, R, I, so, sr, si, S, chunk;
    int lanes;
};

template <int N, typename Op>
HIPK_DEVICE void rows(const Op& op, const typename Op::in_type* x, const Layout& l,
                      typename Op::acc_type* slots, long long bx, long long by) {
    typedef typename Op::in_type In;
    typedef typename Op::acc_type Acc;
    enum { A = Op::spread ? N : 1 };  // accumulators: one per vector element where it may
    const int t = (int)threadIdx.x, lane = t % l.lanes;
    const long long o = bx * (blockDim.x / l.lanes) + t / l.lanes;
    const long long s = by;
    const long long r0 = s * l.chunk, r1 = l.R < r0 + l.chunk ? l.R : r0 + l.chunk;
    Acc a[A];
    HIPK_UNROLL
    for (int k = 0; k < A; ++k) a[k] = op.init();
    if (o < l.O) {  // sr = 1; base, r0 and r1 multiples of N
        const long long base = o * l.so;
        long long v = r0 / N + lane;
        const long long end = r1 / N, step = l.lanes;
        const int U = Op::loads;
        for (; v + (U - 1) * step < end; v += U * step) {  // U loads in flight
            Vec<In, N> p[U];
            HIPK_UNROLL
            for (int u = 0; u < U; ++u)
                p[u] = *reinterpret_cast<const Vec<In, N>*>(x + base + (v + u * step) * N);
            HIPK_UNROLL
            for (int u = 0; u < U; ++u)
                HIPK_UNROLL
                for (int k = 0; k < N; ++k) {
                    const long long r = (v + u * step) * N + k;
                    op.add(a[k % A], p[u].v[k], base + r, r);
                }
        }
        for (; v < end; v += step) {
            const Vec<In, N> p = *reinterpret_cast<const Vec<In, N>*>(x + base + v * N);
            HIPK_UNROLL
            for (int k = 0; k < N; ++k) op.add(a[k % A], p.v[k], base + v * N + k, v * N + k);
        }
    }
    HIPK_UNROLL
    for (int k = 1; k < A; ++k) a[0] = op.merge(a[0], a[k]);
    a[0] = group_reduce(a[0], op, slots, l.lanes);
    if (o < l.O && lane == 0) op.write(a[0], o, o * l.S + s);
}

// U: loads in flight per thread with vectors (Op::cols_loads in a first pass).
template <int N, int U, typename Op>
HIPK_DEVICE void cols(const Op& op, const typename Op::in_type* x, const Layout& l,
                      typename Op::acc_type* slots, long long bx, long long by) {
    typedef typename Op::in_type In;
    typedef typename Op::acc_type Acc;
    const int t = (int)threadIdx.x, across = t % l.lanes, down = t / l.lanes;
    const int height = (int)blockDim.x / l.lanes, width = l.lanes * N;  // the block's columns
    const long long tiles = (l.I + width - 1) / width;
    const long long o = bx / tiles;
    const long long first = bx % tiles * width, i0 = first + across * N;
    const long long s = by;
    const long long r0 = s * l.chunk, r1 = l.R < r0 + l.chunk ? l.R : r0 + l.chunk;
    Acc a[N];
    HIPK_UNROLL
    for (int k = 0; k < N; ++k) a[k] = op.init();
    if (i0 < l.I) {
        const long long base = o * l.so + i0 * l.si;
        if (N > 1) {  // si = 1; i0, so, sr multiples of N
            long long r = r0 + down;
            for (; r + (U - 1) * height < r1; r += U * height) {  // U loads in flight
                Vec<In, N> p[U];
                HIPK_UNROLL
                for (int u = 0; u < U; ++u)
                    p[u] = *reinterpret_cast<const Vec<In, N>*>(x + base + (r + u * height) * l.sr);
                HIPK_UNROLL
                for (int u = 0; u < U; ++u)
                    HIPK_UNROLL
                    for (int k = 0; k < N; ++k)
                        op.add(a[k], p[u].v[k], base + (r + u * height) * l.sr + k, r + u * height);
            }
            // This thread's last rows (fewer than U) in one batch of guarded loads, in flight
            // together: a split's last block walks up to U * height partials in one round trip.
            if (U > 1 && r < r1) {
                Vec<In, N> p[U > 1 ? U - 1 : 1];
                HIPK_UNROLL
                for (int u = 0; u < U - 1; ++u) {
                    const long long at = base + (r + u * height) * l.sr;
                    if (r + u * height < r1) p[u] = *reinterpret_cast<const Vec<In, N>*>(x + at);
                }
                HIPK_UNROLL
                for (int u = 0; u < U - 1; ++u) {
                    if (r + u * height < r1) {
                        HIPK_UNROLL
                        for (int k = 0; k < N; ++k)
                            op.add(a[k], p[u].v[k], base + (r + u * height) * l.sr + k,
                                   r + u * height);
                    }
                }
            }
        } else {  // (4 loads in flight: the last block's walk down the partials, too)
            HIPK_UNROLL4
            for (long long r = r0 + down; r < r1; r += height) {
                const long long at = base + r * l.sr;
                op.add(a[0], x[at], at, r);
            }
        }
    }
    // Merge down the block's rows of threads in one pass: every thread parks its N values
    // ([down][column]), then thread c merges column c over the rows, in order (deterministic).
    HIPK_UNROLL
    for (int k = 0; k < N; ++k) slots[down * width + across * N + k] = a[k];
    __syncthreads();
    for (int c = t; c < width; c += (int)blockDim.x) {
        Acc m = slots[c];
        for (int d = 1; d < height; ++d) m = op.merge(m, slots[d * width + c]);
        const long long i = first + c;
        if (i < l.I) op.write(m, o * l.I + i, (o * l.S + s) * l.I + i);
    }
}

// The widths the host chose: rows read 16 bytes (at most 8 elements) per load; cols 16 bytes
// too where the accumulators are 4 bytes or less (8 for 16-bit types), else at most 4
// elements (arg: 16-byte accumulators; 64-bit sums of 1-byte integers).
template <typename Op> struct Widths {
    typedef typename Op::in_type In;
    enum {
        N = Lanes16<In>::value > 8 ? 8 : Lanes16<In>::value,
        NC = Op::wide_cols && sizeof(In) == 2 ? 8 : N > 4 ? 4 : N,
        // cols park 256 threads x NC values; rows' group_reduce one per thread (CPU) or warp
        SLOTS = 256 * NC > HIPK_REDUCE_SLOTS ? 256 * NC : HIPK_REDUCE_SLOTS
    };
};

// One pass of the layout the host chose, as block (bx, by).
template <typename Op>
HIPK_DEVICE void reduce_block(const Op& op, const typename Op::in_type* x, const Layout& l,
                              int by_cols, int vec, typename Op::acc_type* slots, long long bx,
                              long long by) {
    typedef Widths<Op> W;
    if (!by_cols) rows<W::N>(op, x, l, slots, bx, by);  // (the host sends scalar rows to cols)
    else if (vec) cols<W::NC, Op::cols_loads>(op, x, l, slots, bx, by);
    else cols<1, 1>(op, x, l, slots, bx, by);
}

template <typename Op>
HIPK_DEVICE void reduce(const Op& op, const typename Op::in_type* x, const Layout& l, int by_cols,
                        int vec) {
    __shared__ typename Op::acc_type slots[Widths<Op>::SLOTS];
    reduce_block(op, x, l, by_cols, vec, slots, blockIdx.x, blockIdx.y);
}

}  // namespace hipk

// The Layout of an entry point's parameters (named as in every entry point).
#define HIPK_LAYOUT_VALUE {O, R, I, so, sr, si, S, chunk, lanes}
