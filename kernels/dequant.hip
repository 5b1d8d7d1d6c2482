// ggml's Q8_0 and Q4_0 blocks to floats: dequant_<q>_<t>(blocks, y, long long nblocks).
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
