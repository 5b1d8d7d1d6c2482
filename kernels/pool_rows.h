// What pool.hip's and pool_columns.hip's NCHW / NHWC max kernels share: the packed
// NaN-propagating max of two 16-byte runs, and a row's V / 2 outputs at column stride 2 from
// its windows' column maxima (row_outputs).
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
// max.NaN over the two 16-bit lanes of a word (the packed max of MaxRun and row_outputs).
template <typename T> HIPK_DEVICE unsigned int max_pair(unsigned int a, unsigned int b);
template <> HIPK_DEVICE unsigned int max_pair<bf16>(unsigned int a, unsigned int b) {
    asm("max.NaN.bf16x2 %0, %0, %1;" : "+r"(a) : "r"(b));
    return a;
}
template <> HIPK_DEVICE unsigned int max_pair<f16>(unsigned int a, unsigned int b) {
    asm("max.NaN.f16x2 %0, %0, %1;" : "+r"(a) : "r"(b));
    return a;
}

// 16-bit runs: two lanes an instruction (an odd run: as floats); neg_inf_bits: T's -inf.
template <typename T, int V, unsigned short neg_inf_bits> struct MaxRunPairs {
    static HIPK_DEVICE void init(Vec<T, V>& acc) {
        HIPK_UNROLL
        for (int j = 0; j < V; ++j) acc.v[j].bits = neg_inf_bits;
    }
    static HIPK_DEVICE void add(Vec<T, V>& acc, const Vec<T, V>& tap) {
        if (V % 2) return MaxRunFloats<T, V>::add(acc, tap);  // (V = 1: lanes one by one)
        unsigned int* a = reinterpret_cast<unsigned int*>(acc.v);
        const unsigned int* t = reinterpret_cast<const unsigned int*>(tap.v);
        HIPK_UNROLL
        for (int j = 0; j < V / 2; ++j) a[j] = max_pair<T>(a[j], t[j]);
    }
};
template <int V> struct MaxRun<bf16, V> : MaxRunPairs<bf16, V, 0xff80u> {};
template <int V> struct MaxRun<f16, V> : MaxRunPairs<f16, V, 0xfc00u> {};
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

// The V / 2 outputs of a row at column stride 2 from its windows' row maxima: `rows_max` holds
// input columns c0 .. c0 + V - 1 (-inf where `vector` is false), `left` column c0 - 1 (read with
// padding, pw 1), `right` column c0 + V (K = 3 without); stored at dst, `room` of them inside
// the row. In floats (row_column, store_row_outputs), or packed (below).
template <typename T, int K> struct RowOutputs {
    static HIPK_DEVICE void store(const Vec<T, Lanes16<T>::value>& rows_max, float left,
                                  float right, bool vector, int pw, T* dst, int room) {
        constexpr int V = Lanes16<T>::value;
        float column[V + 1];
        HIPK_UNROLL
        for (int k = 0; k <= V; ++k)
            column[k] = row_column<T, V>(rows_max, left, right, vector, pw, k);
        store_row_outputs<T, K>(column, dst, room);
    }
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
// 16-bit types on NVIDIA from sm_80: the four outputs in packed pairs, max.NaN on two lanes an
// instruction over column pairs gathered by byte permutes, where the float path costs about five
// instructions a compare and a conversion each way a column (ncu, H200, bf16 NCHW 3x3 / 2 pool:
// SM throughput 57 %, DRAM 48 %; then 22 µs against 25).

// w: columns c0 .. c0 + 7 in four words, column 2i in the low half of w[i]; side: with padding
// column c0 - 1 in the high half, else column c0 + 8 in the low half.
template <typename T, int K>
HIPK_DEVICE void packed_row_outputs(const unsigned int (&w)[4], unsigned int side, int pw,
                                    T* dst, int room) {
    const unsigned int even01 = __byte_perm(w[0], w[1], 0x5410);  // columns 0, 2
    const unsigned int even23 = __byte_perm(w[2], w[3], 0x5410);  // 4, 6
    const unsigned int odd01 = __byte_perm(w[0], w[1], 0x7632);   // 1, 3
    const unsigned int odd23 = __byte_perm(w[2], w[3], 0x7632);   // 5, 7
    unsigned int low, high;                                       // outputs 0, 1 and 2, 3
    if (pw > 0) {  // output j: columns 2j - 1, 2j (, 2j + 1)
        low = max_pair<T>(__byte_perm(side, w[0], 0x7632), even01);   // -1, 1
        high = max_pair<T>(__byte_perm(w[1], w[2], 0x7632), even23);  // 3, 5
        if (K == 3) {
            low = max_pair<T>(low, odd01);
            high = max_pair<T>(high, odd23);
        }
    } else {  // columns 2j, 2j + 1 (, 2j + 2)
        low = max_pair<T>(even01, odd01);
        high = max_pair<T>(even23, odd23);
        if (K == 3) {
            low = max_pair<T>(low, __byte_perm(w[1], w[2], 0x5410));    // 2, 4
            high = max_pair<T>(high, __byte_perm(w[3], side, 0x5410));  // 6, 8
        }
    }
    if (room >= 4 && aligned(dst, 8)) {
        *reinterpret_cast<uint2*>(dst) = make_uint2(low, high);
        return;
    }
    HIPK_UNROLL
    for (int j = 0; j < 4; ++j) {
        if (j < room) {
            T v;
            v.bits = (unsigned short)((j < 2 ? low : high) >> (16 * (j & 1)));
            dst[j] = v;
        }
    }
}

// The 16 bits of T of a float that came from a T (or is -inf): exact without rounding. bf16 is
// a float's upper half; f16 is converted.
template <typename T> HIPK_DEVICE unsigned int exact_bits(float v) {
    return from_float<T>(v).bits;
}
template <> HIPK_DEVICE unsigned int exact_bits<bf16>(float v) { return float_bits(v) >> 16; }

template <typename T, int K> struct PackedRowOutputs {
    static HIPK_DEVICE void store(const Vec<T, 8>& rows_max, float left, float right, bool,
                                  int pw, T* dst, int room) {
        unsigned int w[4];  // (the vector's words as they are: no unpacking and packing again)
        HIPK_UNROLL
        for (int i = 0; i < 4; ++i) w[i] = reinterpret_cast<const unsigned int*>(rows_max.v)[i];
        const unsigned int side = pw > 0 ? exact_bits<T>(left) << 16 : exact_bits<T>(right);
        packed_row_outputs<T, K>(w, side, pw, dst, room);
    }
};
template <int K> struct RowOutputs<bf16, K> : PackedRowOutputs<bf16, K> {};
template <int K> struct RowOutputs<f16, K> : PackedRowOutputs<f16, K> {};
#endif

template <typename T, int K>
HIPK_DEVICE void row_outputs(const Vec<T, Lanes16<T>::value>& rows_max, float left, float right,
                             bool vector, int pw, T* dst, int room) {
    RowOutputs<T, K>::store(rows_max, left, right, vector, pw, dst, room);
}

}  // namespace hipk
