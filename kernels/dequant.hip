// ggml's Q8_0 and Q4_0 blocks to floats: dequant_<q>_<t>(blocks, y, long long nblocks); the
// split row layout (gemv_quant_split.hip) made from them, split_rows_<q>(blocks, out, int k,
// long long nblocks), and to floats, dequant_split_<q>_<t>(w, y, int k, long long nblocks).
//
// A block holds 32 elements: an f16 scale d, then the quants (ggml-common.h).
//   q8_0: 34 bytes, d and 32 int8 q:           y[j] = d * q[j]
//   q4_0: 18 bytes, d and 16 bytes of nibbles: y[j] = d * ((q[j] & 0xF) - 8),
//                                              y[j + 16] = d * ((q[j] >> 4) - 8)   (j < 16)
// Each value is one f32 product of two exact numbers (rounded once, as gguf's numpy reference
// computes it), then rounded once to T (nearest even). Block i becomes y[32 i .. 32 i + 32).
//
// Blocks are 34 or 18 bytes, so within a packed array the scale and the quants are only 2-byte
// aligned: `blocks` must be 2-byte aligned, and every read is an unsigned short (the scale's
// bits; two quants, little-endian). y must not overlap the blocks.
//
// Work item: one 16-byte run of a block's output (4 f32 or 8 16-bit values). Consecutive
// threads write consecutive runs (fully coalesced 16-byte stores when y is 16-byte aligned;
// element stores otherwise) and read neighbouring quant bytes.
// Launch: any 1-D grid and block (grid-stride over nblocks * 32 / run runs); for full bandwidth
// block 256 and one run per thread, or a grid capped at a few blocks per multiprocessor.
#include "common.h"
#include "dtypes.h"

namespace hipk {

// The signed value of a byte (two's complement), without an implementation-defined cast.
HIPK_DEVICE int signed_byte(unsigned int b) { return (int)(b ^ 0x80u) - 128; }

HIPK_DEVICE float block_scale(const unsigned short* block) { return half_bits_to_float(block[0]); }

// Values [first, first + N) of one block, first a multiple of N (N = 4 or 8, so a run never
// straddles the two nibble halves of a Q4_0 block).
struct Q8_0 {
    enum { bytes = 34 };
    template <int N>
    static HIPK_DEVICE void decode(const unsigned short* block, int first, float (&v)[N]) {
        const float d = block_scale(block);
        const unsigned short* q = block + 1 + first / 2;
        HIPK_UNROLL
        for (int i = 0; i < N / 2; ++i) {
            const unsigned int pair = q[i];
            v[2 * i] = d * (float)signed_byte(pair & 0xffu);
            v[2 * i + 1] = d * (float)signed_byte(pair >> 8);
        }
    }
};

struct Q4_0 {
    enum { bytes = 18 };
    template <int N>
    static HIPK_DEVICE void decode(const unsigned short* block, int first, float (&v)[N]) {
        const float d = block_scale(block);
        const unsigned int shift = first < 16 ? 0u : 4u;  // low nibbles, then high nibbles
        const unsigned short* q = block + 1 + (first & 15) / 2;
        HIPK_UNROLL
        for (int i = 0; i < N / 2; ++i) {
            const unsigned int pair = (unsigned int)q[i] >> shift;
            v[2 * i] = d * (float)((int)(pair & 0xfu) - 8);
            v[2 * i + 1] = d * (float)((int)((pair >> 8) & 0xfu) - 8);
        }
    }
};

template <typename Q, typename T>
HIPK_DEVICE void dequantize(const unsigned char* blocks, T* y, long long nblocks) {
    const int N = Lanes16<T>::value;    // elements per 16-byte run
    const int RUNS = 32 / N;            // runs per block
    const long long runs = nblocks * RUNS;
    const bool vector = aligned(y, 16);  // then every run is 16-byte aligned as well
    for (long long r = global_thread(); r < runs; r += grid_threads()) {
        const long long b = r / RUNS;
        const int first = (int)(r % RUNS) * N;
        float v[N];
        Q::template decode<N>(reinterpret_cast<const unsigned short*>(blocks + b * Q::bytes),
                              first, v);
        T* out = y + b * 32 + first;
        if (vector) {
            store_floats<T, N>(out, v);
        } else {
            HIPK_UNROLL
            for (int i = 0; i < N; ++i) out[i] = from_float<T>(v[i]);
        }
    }
}


// --- the split row layout (gemv_quant_split.hip's header) ----------------------------------------
// A row of k elements (k a multiple of 256; rows 16-byte aligned): its k / 32 f16 scales, then
// its quants (q8_0: element j at byte j; q4_0: 16-byte runs, one per block, in ggml's nibble
// order). The same bytes per row as ggml's blocks.

// Element j's run of N values (j a multiple of N) from a split row of k elements.
struct SplitQ8_0 {
    enum { bytes = 34, quant_bytes = 32 };
    template <int N>
    static HIPK_DEVICE void decode(const unsigned char* row, int k, int j, float (&v)[N]) {
        const float d = block_scale(reinterpret_cast<const unsigned short*>(row) + j / 32);
        const unsigned char* q = row + k / 16 + j;
        HIPK_UNROLL
        for (int i = 0; i < N; ++i) v[i] = d * (float)signed_byte(q[i]);
    }
};

struct SplitQ4_0 {
    enum { bytes = 18, quant_bytes = 16 };
    template <int N>
    static HIPK_DEVICE void decode(const unsigned char* row, int k, int j, float (&v)[N]) {
        const float d = block_scale(reinterpret_cast<const unsigned short*>(row) + j / 32);
        const int within = j % 32;
        const unsigned int shift = within < 16 ? 0u : 4u;  // low nibbles, then high nibbles
        const unsigned char* q = row + k / 16 + (j / 32) * 16 + (within & 15);
        HIPK_UNROLL
        for (int i = 0; i < N; ++i) v[i] = d * (float)((int)((q[i] >> shift) & 0xfu) - 8);
    }
};

// ggml's blocks (2-byte aligned) rearranged into split rows of k elements: one thread a block.
template <typename S>
HIPK_DEVICE void split_rows(const unsigned char* blocks, unsigned char* out, int k,
                            long long nblocks) {
    const int per_row = k / 32;
    for (long long b = global_thread(); b < nblocks; b += grid_threads()) {
        const unsigned short* from = reinterpret_cast<const unsigned short*>(blocks + b * S::bytes);
        unsigned char* row = out + (b / per_row) * per_row * S::bytes;
        const int j = (int)(b % per_row);
        reinterpret_cast<unsigned short*>(row)[j] = from[0];
        unsigned short* quants = reinterpret_cast<unsigned short*>(row + k / 16 + j * S::quant_bytes);
        HIPK_UNROLL
        for (int i = 0; i < S::quant_bytes / 2; ++i) quants[i] = from[1 + i];
    }
}

// Split rows of k elements to floats: one 16-byte run of output per work item, as above.
template <typename S, typename T>
HIPK_DEVICE void dequantize_split(const unsigned char* w, T* y, int k, long long nblocks) {
    const int N = Lanes16<T>::value;
    const long long runs = nblocks * (32 / N);
    const int row_runs = k / N;
    const bool vector = aligned(y, 16);
    for (long long r = global_thread(); r < runs; r += grid_threads()) {
        const long long row = r / row_runs;
        const int j = (int)(r % row_runs) * N;
        float v[N];
        S::template decode<N>(w + row * (k / 32) * S::bytes, k, j, v);
        T* out = y + row * k + j;
        if (vector) {
            store_floats<T, N>(out, v);
        } else {
            HIPK_UNROLL
            for (int i = 0; i < N; ++i) out[i] = from_float<T>(v[i]);
        }
    }
}

}  // namespace hipk

extern "C" __global__ void dequant_q8_0_f32(const unsigned char* blocks, float* y,
                                            long long nblocks) {
    hipk::dequantize<hipk::Q8_0>(blocks, y, nblocks);
}
extern "C" __global__ void dequant_q8_0_f16(const unsigned char* blocks, hipk::f16* y,
                                            long long nblocks) {
    hipk::dequantize<hipk::Q8_0>(blocks, y, nblocks);
}
extern "C" __global__ void dequant_q8_0_bf16(const unsigned char* blocks, hipk::bf16* y,
                                             long long nblocks) {
    hipk::dequantize<hipk::Q8_0>(blocks, y, nblocks);
}
extern "C" __global__ void dequant_q4_0_f32(const unsigned char* blocks, float* y,
                                            long long nblocks) {
    hipk::dequantize<hipk::Q4_0>(blocks, y, nblocks);
}
extern "C" __global__ void dequant_q4_0_f16(const unsigned char* blocks, hipk::f16* y,
                                            long long nblocks) {
    hipk::dequantize<hipk::Q4_0>(blocks, y, nblocks);
}
extern "C" __global__ void dequant_q4_0_bf16(const unsigned char* blocks, hipk::bf16* y,
                                             long long nblocks) {
    hipk::dequantize<hipk::Q4_0>(blocks, y, nblocks);
}

// The split layout: split_rows_<q> (ggml's blocks -> split rows) and dequant_split_<q>_<t>.
extern "C" __global__ void split_rows_q8_0(const unsigned char* blocks, unsigned char* out, int k,
                                           long long nblocks) {
    hipk::split_rows<hipk::SplitQ8_0>(blocks, out, k, nblocks);
}
extern "C" __global__ void split_rows_q4_0(const unsigned char* blocks, unsigned char* out, int k,
                                           long long nblocks) {
    hipk::split_rows<hipk::SplitQ4_0>(blocks, out, k, nblocks);
}
#define HIPK_DEQUANT_SPLIT(S, T) \
    extern "C" __global__ void dequant_split_q8_0_##S(const unsigned char* w, T* y, int k, \
                                                      long long nblocks) { \
        hipk::dequantize_split<hipk::SplitQ8_0>(w, y, k, nblocks); \
    } \
    extern "C" __global__ void dequant_split_q4_0_##S(const unsigned char* w, T* y, int k, \
                                                      long long nblocks) { \
        hipk::dequantize_split<hipk::SplitQ4_0>(w, y, k, nblocks); \
    }
HIPK_F32_AND_16BIT_TYPES(HIPK_DEQUANT_SPLIT)
