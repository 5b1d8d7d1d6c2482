// What pool.hip's and pool_columns.hip's NCHW / NHWC max kernels share: the packed
// NaN-propagating max of two 16-byte runs, and a row's V / 2 outputs at column stride 2 from
// its windows' column maxima.
#pragma once

#include "spatial.h"

namespace hipk {

// The NaN-propagating max of each lane of two 16-byte runs into `acc` (a NaN wins and stays, as
// torch's max pooling): on NVIDIA from sm_80 one max.NaN instruction per two 16-bit lanes or per
// float (the compare-and-select of floats below costs about five instructions a lane, and made
// the NHWC 3x3 pool bound by its instructions on an H100: SM throughput 63 %, DRAM 47 %). A NaN
// comes out as the canonical NaN there, keeping its payload elsewhere.
template <typename T, int V> struct MaxRunFloats {
    static HIPK_DEVICE void init(Vec<T, V>& acc) {
        HIPK_UNROLL
        for (int j = 0; j < V; ++j) acc.v[j] = from_float<T>(neg_inf());
    }
    static HIPK_DEVICE void add(Vec<T, V>& acc, const Vec<T, V>& tap) {
        HIPK_UNROLL
        for (int j = 0; j < V; ++j) {
            const float v = to_float(tap.v[j]), a = to_float(acc.v[j]);
            if (v > a || v != v) acc.v[j] = tap.v[j];
        }
    }
};
template <typename T, int V> struct MaxRun : MaxRunFloats<T, V> {};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
template <int V> struct MaxRun<bf16, V> {  // two lanes an instruction (an odd run: as floats)
    static HIPK_DEVICE void init(Vec<bf16, V>& acc) {
        HIPK_UNROLL
        for (int j = 0; j < V; ++j) acc.v[j].bits = 0xff80u;
    }
    static HIPK_DEVICE void add(Vec<bf16, V>& acc, const Vec<bf16, V>& tap) {
        if (V % 2) return MaxRunFloats<bf16, V>::add(acc, tap);  // (V = 1: lanes one by one)
        unsigned int* a = reinterpret_cast<unsigned int*>(acc.v);
        const unsigned int* t = reinterpret_cast<const unsigned int*>(tap.v);
        HIPK_UNROLL
        for (int j = 0; j < V / 2; ++j) asm("max.NaN.bf16x2 %0, %0, %1;" : "+r"(a[j]) : "r"(t[j]));
    }
};
template <int V> struct MaxRun<f16, V> {
    static HIPK_DEVICE void init(Vec<f16, V>& acc) {
        HIPK_UNROLL
        for (int j = 0; j < V; ++j) acc.v[j].bits = 0xfc00u;
    }
    static HIPK_DEVICE void add(Vec<f16, V>& acc, const Vec<f16, V>& tap) {
        if (V % 2) return MaxRunFloats<f16, V>::add(acc, tap);  // (V = 1: lanes one by one)
        unsigned int* a = reinterpret_cast<unsigned int*>(acc.v);
        const unsigned int* t = reinterpret_cast<const unsigned int*>(tap.v);
        HIPK_UNROLL
        for (int j = 0; j < V / 2; ++j) asm("max.NaN.f16x2 %0, %0, %1;" : "+r"(a[j]) : "r"(t[j]));
    }
};
template <int V> struct MaxRun<float, V> {
    static HIPK_DEVICE void init(Vec<float, V>& acc) {
        HIPK_UNROLL
        for (int j = 0; j < V; ++j) acc.v[j] = neg_inf();
    }
    static HIPK_DEVICE void add(Vec<float, V>& acc, const Vec<float, V>& tap) {
        HIPK_UNROLL
        for (int j = 0; j < V; ++j) asm("max.NaN.f32 %0, %0, %1;" : "+f"(acc.v[j]) : "f"(tap.v[j]));
    }
};
#endif

// Input column c0 - pw + k of a window row: `middle` holds columns c0 .. c0 + V - 1 (when
// `vector`), `left` column c0 - 1, `right` column c0 + V. k is a constant once unrolled and pw
// (0 or 1) picks between two registers (an index of pw would put the vector in memory).
template <typename T, int V>
HIPK_DEVICE float row_column(const Vec<T, V>& middle, float left, float right, bool vector,
                             int pw, int k) {
    const float unpadded =
        k < V ? (vector ? to_float(middle.v[k < V ? k : 0]) : neg_inf()) : right;
    const float padded =
        k == 0 ? left : (vector ? to_float(middle.v[k > 0 ? k - 1 : 0]) : neg_inf());
    return pw > 0 ? padded : unpadded;
}

// The V / 2 outputs of a row from its windows' column maxima (column[k]: input column c0 - pw
// + k), stored at dst: one 8-byte store (16-bit) where all are inside the row (`room` outputs
// left in it) and dst allows, else one by one.
template <typename T, int K>
HIPK_DEVICE void store_row_outputs(const float (&column)[Lanes16<T>::value + 1], T* dst,
                                   int room) {
    constexpr int OW = Lanes16<T>::value / 2;
    float out[OW];
    HIPK_UNROLL
    for (int j = 0; j < OW; ++j) {
        out[j] = column[2 * j];
        HIPK_UNROLL
        for (int s = 1; s < K; ++s) {
            const float v = column[2 * j + s];
            out[j] = v > out[j] || v != v ? v : out[j];
        }
    }
    if (room >= OW && aligned(dst, sizeof(Vec<T, OW>))) {
        store_floats<T, OW>(dst, out);
    } else {
        HIPK_UNROLL
        for (int j = 0; j < OW; ++j)
            if (j < room) dst[j] = from_float<T>(out[j]);
    }
}

}  // namespace hipk
