// Matrix-vector products over ggml's Q8_0 / Q4_0 blocks as GGUF stores them, for rows whose
// length K is a multiple of 256 (every Llama shape): y[r, n] = sum_k x[r, k] * W[n, k].
//
//   gemv_sb_<q>_r<R>_<t>(const unsigned char* w, const T* x, T* y, int n, int k, int rows,
//                        int group, long long xs, long long ys)
//
// w: n rows of k / 32 packed blocks (q8_0: 34 bytes = f16 scale d + 32 int8, value d * q;
// q4_0: 18 bytes = d + 16 bytes of nibbles, value d * (nibble - 8), low nibbles are elements
// 0..15), 16-byte aligned, k a multiple of 256. x: `rows` rows of k elements, row r at
// x + r * xs, each 16-byte aligned; y: row r at y + r * ys. rows <= R (R = 1, 4 or 16: the
// accumulators are registers); each block's 32 products summed in f32 in order, times d, into
// an f32 accumulator; each output rounded once to T.
//
// Why "superblocks": a block is 34 (18) bytes, so blocks are only 2-byte aligned, but 8 of them
// are 272 (144) bytes, a whole number of 16-byte chunks. A thread loads one superblock (8 blocks,
// 256 weights of one row) with 17 (9) independent 16-byte loads straight into registers and
// decodes it there: every byte's position is a compile-time constant once the loops unroll, so
// no shared memory, no barrier and no 2-byte reads are needed (kernels/gemv_quant.hip, which
// stages the blocks through shared memory, serves the other shapes).
//
// Layout of the work: a block of HIPK_GEMV_SB_THREADS threads takes `group` consecutive weight
// rows (8, 16, 32 or 64); thread t takes row t % group and the superblocks s = t / group,
// + slices, ... (slices = THREADS / group) of it. Neighbouring lanes thus read the same x
// elements (one broadcast load per warp instead of one per lane, which is what makes 16 rows of
// x cheap) and different weight rows. The slices' sums meet in shared memory at the end.
// Launch: 1-D blocks of HIPK_GEMV_SB_THREADS threads, grid ceil(n / group).
//
// Quants become floats without int-to-float instructions (a quarter-rate pipe on NVIDIA): the
// quant, offset to be non-negative, is written into the mantissa of 2^23 and 2^23 plus the
// offset subtracted (exact: both are integers below 2^24). AMD has a full-rate byte-to-float
// instruction (v_cvt_f32_ubyte<n>), which the plain conversion compiles to.
#include "common.h"
#include "dtypes.h"

#define HIPK_GEMV_SB_THREADS 256  // threads per block (the host's launch)
#ifndef HIPK_GEMV_SB_PREFETCH
#define HIPK_GEMV_SB_PREFETCH 0  // 1: load superblock s + slices while s is computed (bench: 1)
#endif
#ifndef HIPK_GEMV_SB_MIN_BLOCKS
#define HIPK_GEMV_SB_MIN_BLOCKS 1  // __launch_bounds__'s blocks per multiprocessor (bench: 2)
#endif

// The GPUs unroll everything (the superblock is indexed by constants, in registers); the cpu
// platform's g++ compiles loops (unrolling 18 entry points there costs minutes of g++).
#if HIPK_GPU
#define HIPK_SB_UNROLL HIPK_UNROLL
#else
#define HIPK_SB_UNROLL
#endif

namespace hipk {
namespace gemv_sb {

struct alignas(16) Chunk { unsigned int v[4]; };

// The byte at offset `at` of the words (little-endian), in the low 8 bits.
template <int W> HIPK_DEVICE unsigned int byte_at(const unsigned int (&word)[W], int at) {
    return (word[at >> 2] >> (8 * (at & 3))) & 0xffu;
}

// The f16 scale at the even offset `at` as a float.
template <int W> HIPK_DEVICE float scale_at(const unsigned int (&word)[W], int at) {
    return half_bits_to_float((unsigned short)(word[at >> 2] >> (8 * (at & 3))));
}

// The int8 quant at offset `at` as a float (exact).
template <int W> HIPK_DEVICE float int8_at(const unsigned int (&word)[W], int at) {
#if defined(__CUDA_ARCH__)
    // byte ^ 0x80 = q + 128 into 2^23's mantissa (PRMT picks the byte and the exponent bits).
    const unsigned int biased = __byte_perm(word[at >> 2] ^ 0x80808080u, 0x4B000000u,
                                            0x7650u | (unsigned int)(at & 3));
    return __int_as_float((int)biased) - 8388736.0f;  // 2^23 + 128
#else
    return (float)(byte_at(word, at) ^ 0x80u) - 128.0f;
#endif
}

// A nibble (0..15) minus 8 as a float (exact).
HIPK_DEVICE float nibble_value(unsigned int nibble) {
    return bits_float(0x4B000000u | nibble) - 8388616.0f;  // 2^23 + 8
}

// One superblock: 8 blocks of `bytes` bytes in `words` 32-bit words (a multiple of 4).
struct Q8 {
    enum { bytes = 34, words = 68 };
    // Block b's 32 quants as floats, and its scale.
    static HIPK_DEVICE float decode(const unsigned int (&word)[words], int b, float (&q)[32]) {
        const int at = b * bytes;
        HIPK_SB_UNROLL
        for (int i = 0; i < 32; ++i) q[i] = int8_at(word, at + 2 + i);
        return scale_at(word, at);
    }
};

struct Q4 {
    enum { bytes = 18, words = 36 };
    static HIPK_DEVICE float decode(const unsigned int (&word)[words], int b, float (&q)[32]) {
        const int at = b * bytes;
        HIPK_SB_UNROLL
        for (int i = 0; i < 16; ++i) {  // byte i: element i (low nibble) and i + 16 (high)
            const unsigned int pair = byte_at(word, at + 2 + i);
            q[i] = nibble_value(pair & 0xfu);
            q[i + 16] = nibble_value(pair >> 4);
        }
        return scale_at(word, at);
    }
};

// Superblock s of a weight row (its 16-byte chunks from `row`) into registers.
template <typename Q>
HIPK_DEVICE void load_super(const Chunk* row, int s, unsigned int (&word)[Q::words]) {
    HIPK_SB_UNROLL
    for (int c = 0; c < Q::words / 4; ++c) {
        const Chunk chunk = row[(long long)s * (Q::words / 4) + c];
        HIPK_SB_UNROLL
        for (int i = 0; i < 4; ++i) word[4 * c + i] = chunk.v[i];
    }
}

template <typename Q, typename T, int R>
HIPK_DEVICE void run(const unsigned char* w, const T* x, T* y, int n, int k, int rows, int group,
                     long long xs, long long ys) {
    __shared__ float partial[R * HIPK_GEMV_SB_THREADS];  // partial[r * THREADS + t]
    const int t = (int)threadIdx.x;
    const int g = t % group, slice = t / group, slices = HIPK_GEMV_SB_THREADS / group;
    const int row = (int)blockIdx.x * group + g;
    const int supers = k / 256;  // superblocks per weight row
    constexpr int CHUNKS = Q::words / 4;
    constexpr int N = Lanes16<T>::value;

    float acc[R];
    HIPK_SB_UNROLL
    for (int r = 0; r < R; ++r) acc[r] = 0.0f;
    if (row < n) {
        const Chunk* src = reinterpret_cast<const Chunk*>(w) + (long long)row * supers * CHUNKS;
        unsigned int word[Q::words];  // all loads issued before any is used
#if HIPK_GEMV_SB_PREFETCH
        unsigned int next[Q::words];  // the next superblock's loads, in flight meanwhile
        if (slice < supers) load_super<Q>(src, slice, word);
#endif
        for (int s = slice; s < supers; s += slices) {
#if HIPK_GEMV_SB_PREFETCH
            if (s + slices < supers) load_super<Q>(src, s + slices, next);
#else
            load_super<Q>(src, s, word);
#endif
            HIPK_SB_UNROLL
            for (int b = 0; b < 8; ++b) {
                float q[32];
                const float d = Q::decode(word, b, q);
                const T* xb = x + (long long)s * 256 + b * 32;
                HIPK_SB_UNROLL
                for (int r = 0; r < R; ++r) {
                    if (r < rows) {
                        float dot = 0.0f;
                        HIPK_SB_UNROLL
                        for (int v = 0; v < 32 / N; ++v) {
                            float xv[N];
                            load_floats<T, N>(xb + r * xs + v * N, xv);
                            HIPK_SB_UNROLL
                            for (int e = 0; e < N; ++e) dot += q[v * N + e] * xv[e];
                        }
                        acc[r] += d * dot;
                    }
                }
            }
#if HIPK_GEMV_SB_PREFETCH
            HIPK_SB_UNROLL
            for (int i = 0; i < Q::words; ++i) word[i] = next[i];
#endif
        }
    }
    HIPK_SB_UNROLL
    for (int r = 0; r < R; ++r) partial[r * HIPK_GEMV_SB_THREADS + t] = acc[r];
    __syncthreads();
    for (int o = t; o < group * R; o += HIPK_GEMV_SB_THREADS) {
        const int gg = o % group, r = o / group, out_row = (int)blockIdx.x * group + gg;
        if (r < rows && out_row < n) {
            float sum = 0.0f;
            for (int p = 0; p < slices; ++p) sum += partial[r * HIPK_GEMV_SB_THREADS + p * group + gg];
            y[r * ys + out_row] = from_float<T>(sum);
        }
    }
}

}  // namespace gemv_sb
}  // namespace hipk

// Entry points: per quantization and row tile R, for each storage type T (written out: hip-core
// reads the parameter types from the text).
#define HIPK_GEMV_SB(S, T) \
    extern "C" __global__ __launch_bounds__(HIPK_GEMV_SB_THREADS, HIPK_GEMV_SB_MIN_BLOCKS) void gemv_sb_q8_0_r1_##S(const unsigned char* w, \
        const T* x, T* y, int n, int k, int rows, int group, long long xs, long long ys) { \
        hipk::gemv_sb::run<hipk::gemv_sb::Q8, T, 1>(w, x, y, n, k, rows, group, xs, ys); \
    } \
    extern "C" __global__ __launch_bounds__(HIPK_GEMV_SB_THREADS, HIPK_GEMV_SB_MIN_BLOCKS) void gemv_sb_q8_0_r4_##S(const unsigned char* w, \
        const T* x, T* y, int n, int k, int rows, int group, long long xs, long long ys) { \
        hipk::gemv_sb::run<hipk::gemv_sb::Q8, T, 4>(w, x, y, n, k, rows, group, xs, ys); \
    } \
    extern "C" __global__ __launch_bounds__(HIPK_GEMV_SB_THREADS, HIPK_GEMV_SB_MIN_BLOCKS) void gemv_sb_q8_0_r16_##S(const unsigned char* w, \
        const T* x, T* y, int n, int k, int rows, int group, long long xs, long long ys) { \
        hipk::gemv_sb::run<hipk::gemv_sb::Q8, T, 16>(w, x, y, n, k, rows, group, xs, ys); \
    } \
    extern "C" __global__ __launch_bounds__(HIPK_GEMV_SB_THREADS, HIPK_GEMV_SB_MIN_BLOCKS) void gemv_sb_q4_0_r1_##S(const unsigned char* w, \
        const T* x, T* y, int n, int k, int rows, int group, long long xs, long long ys) { \
        hipk::gemv_sb::run<hipk::gemv_sb::Q4, T, 1>(w, x, y, n, k, rows, group, xs, ys); \
    } \
    extern "C" __global__ __launch_bounds__(HIPK_GEMV_SB_THREADS, HIPK_GEMV_SB_MIN_BLOCKS) void gemv_sb_q4_0_r4_##S(const unsigned char* w, \
        const T* x, T* y, int n, int k, int rows, int group, long long xs, long long ys) { \
        hipk::gemv_sb::run<hipk::gemv_sb::Q4, T, 4>(w, x, y, n, k, rows, group, xs, ys); \
    } \
    extern "C" __global__ __launch_bounds__(HIPK_GEMV_SB_THREADS, HIPK_GEMV_SB_MIN_BLOCKS) void gemv_sb_q4_0_r16_##S(const unsigned char* w, \
        const T* x, T* y, int n, int k, int rows, int group, long long xs, long long ys) { \
        hipk::gemv_sb::run<hipk::gemv_sb::Q4, T, 16>(w, x, y, n, k, rows, group, xs, ys); \
    }
HIPK_F32_AND_16BIT_TYPES(HIPK_GEMV_SB)
