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
// The build HIPK_GEMV_SB_X_SHARED=1 (bench_quant's `xs`) stages one row of x as f32 in shared
// memory for the rows-1 entry points instead (run_x_shared).
//
// Quants become floats without int-to-float instructions (a quarter-rate pipe on NVIDIA): the
// quant, offset to be non-negative, is written into the mantissa of 2^23 and 2^23 plus the
// offset subtracted (exact: both are integers below 2^24). AMD has a full-rate byte-to-float
// instruction (v_cvt_f32_ubyte<n>), which the plain conversion compiles to.
#include "common.h"
#include "dtypes.h"

#ifndef HIPK_GEMV_SB_THREADS
#define HIPK_GEMV_SB_THREADS 256  // threads per block (the host's launch; bench: 128)
#endif
#ifndef HIPK_GEMV_SB_X_SHARED
#define HIPK_GEMV_SB_X_SHARED 0  // 1: one row of x staged as f32 in shared memory (bench: 1)
#endif
#ifndef HIPK_GEMV_SB_X_TILE
#define HIPK_GEMV_SB_X_TILE 4096  // elements of x per shared tile (a multiple of 256)
#endif
#ifndef HIPK_GEMV_SB_MIN_BLOCKS
// __launch_bounds__'s blocks per multiprocessor: 2 holds a thread to 128 registers on NVIDIA,
// so two blocks share a multiprocessor (H100, bench_quant: q8_0 4096x4096 rows 1 at 0.60 of
// copy, not 0.45; rows 16 0.065-0.105, not 0.048-0.066; the other rows-1 shapes within 0.01).
#define HIPK_GEMV_SB_MIN_BLOCKS 2
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

// One superblock's products with `rows` rows of x into acc: row r's 256 elements of the
// superblock from xb + r * xs (16-byte aligned). Each block's 32 products summed in order.
template <typename Q, typename X, int R>
HIPK_DEVICE void dot_super(const unsigned int (&word)[Q::words], const X* xb, long long xs,
                           int rows, float (&acc)[R]) {
    constexpr int N = Lanes16<X>::value;
    HIPK_SB_UNROLL
    for (int b = 0; b < 8; ++b) {
        float q[32];
        const float d = Q::decode(word, b, q);
        HIPK_SB_UNROLL
        for (int r = 0; r < R; ++r) {
            if (r < rows) {
                float dot = 0.0f;
                HIPK_SB_UNROLL
                for (int v = 0; v < 32 / N; ++v) {
                    float xv[N];
                    load_floats<X, N>(xb + r * xs + b * 32 + v * N, xv);
                    HIPK_SB_UNROLL
                    for (int e = 0; e < N; ++e) dot += q[v * N + e] * xv[e];
                }
                acc[r] += d * dot;
            }
        }
    }
}

// The slices' sums of the block's `group` rows meet in shared memory; one output each.
template <typename T, int R>
HIPK_DEVICE void finish(float* partial, const float (&acc)[R], T* y, int n, int rows, int group,
                        long long ys) {
    const int t = (int)threadIdx.x, slices = HIPK_GEMV_SB_THREADS / group;
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

template <typename Q, typename T, int R>
HIPK_DEVICE void run(const unsigned char* w, const T* x, T* y, int n, int k, int rows, int group,
                     long long xs, long long ys) {
    __shared__ float partial[R * HIPK_GEMV_SB_THREADS];  // partial[r * THREADS + t]
    const int t = (int)threadIdx.x;
    const int slice = t / group, slices = HIPK_GEMV_SB_THREADS / group;
    const int row = (int)blockIdx.x * group + t % group;
    const int supers = k / 256;  // superblocks per weight row
    float acc[R];
    HIPK_SB_UNROLL
    for (int r = 0; r < R; ++r) acc[r] = 0.0f;
    if (row < n) {
        const Chunk* src = reinterpret_cast<const Chunk*>(w) + (long long)row * supers * (Q::words / 4);
        for (int s = slice; s < supers; s += slices) {
            unsigned int word[Q::words];  // all loads issued before any is used
            load_super<Q>(src, s, word);
            dot_super<Q, T, R>(word, x + (long long)s * 256, xs, rows, acc);
        }
    }
    finish<T, R>(partial, acc, y, n, rows, group, ys);
}

#if HIPK_GEMV_SB_X_SHARED
// One row of x (R = 1): x is converted to f32 once per block into shared memory, a tile of
// HIPK_GEMV_SB_X_TILE elements at a time, so the products read it with one 16-byte shared load
// per 4 weights and no conversion (on NVIDIA the conversions and the quants' byte permutes share
// the half-rate integer pipe). Each thread's first superblock of a tile is loaded before x is
// staged, so the weight loads are in flight across the staging and its barrier. Same f32 x
// values, same order of the sums: the same results as run().
template <typename Q, typename T>
HIPK_DEVICE void run_x_shared(const unsigned char* w, const T* x, T* y, int n, int k, int rows,
                              int group, long long ys) {
    constexpr int TILE_SUPERS = HIPK_GEMV_SB_X_TILE / 256;
    constexpr int NT = Lanes16<T>::value;
    __shared__ Vec<float, 4> tile[HIPK_GEMV_SB_X_TILE / 4];  // x[base * 256 ..) as f32
    __shared__ float partial[HIPK_GEMV_SB_THREADS];
    float* xf = reinterpret_cast<float*>(tile);
    const int t = (int)threadIdx.x;
    const int slice = t / group, slices = HIPK_GEMV_SB_THREADS / group;
    const int row = (int)blockIdx.x * group + t % group;
    const int supers = k / 256;
    const Chunk* src = reinterpret_cast<const Chunk*>(w) +
                       (long long)(row < n ? row : n - 1) * supers * (Q::words / 4);
    float acc[1] = {0.0f};
    for (int base = 0; base < supers; base += TILE_SUPERS) {
        const int end = supers < base + TILE_SUPERS ? supers : base + TILE_SUPERS;
        const bool mine = row < n && base + slice < end;
        unsigned int word[Q::words];
        if (mine) load_super<Q>(src, base + slice, word);
        if (base > 0) __syncthreads();  // the previous tile's readers are done
        for (int i = t * NT; i < (end - base) * 256; i += HIPK_GEMV_SB_THREADS * NT) {
            float v[NT];
            load_floats<T, NT>(x + (long long)base * 256 + i, v);
            HIPK_SB_UNROLL
            for (int e = 0; e < NT; ++e) xf[i + e] = v[e];
        }
        __syncthreads();
        if (mine) {
            for (int s = base + slice;;) {
                dot_super<Q, float, 1>(word, xf + (s - base) * 256, 0, 1, acc);
                s += slices;
                if (s >= end) break;
                load_super<Q>(src, s, word);
            }
        }
    }
    finish<T, 1>(partial, acc, y, n, rows, group, ys);
}
#endif

// The one-row entry: x through shared memory where that build is chosen.
template <typename Q, typename T>
HIPK_DEVICE void run_r1(const unsigned char* w, const T* x, T* y, int n, int k, int rows,
                        int group, long long xs, long long ys) {
#if HIPK_GEMV_SB_X_SHARED
    (void)xs;
    run_x_shared<Q, T>(w, x, y, n, k, rows, group, ys);
#else
    run<Q, T, 1>(w, x, y, n, k, rows, group, xs, ys);
#endif
}

}  // namespace gemv_sb
}  // namespace hipk

// Entry points: per quantization and row tile R, for each storage type T (written out: hip-core
// reads the parameter types from the text).
#define HIPK_GEMV_SB(S, T) \
    extern "C" __global__ __launch_bounds__(HIPK_GEMV_SB_THREADS, HIPK_GEMV_SB_MIN_BLOCKS) void gemv_sb_q8_0_r1_##S(const unsigned char* w, \
        const T* x, T* y, int n, int k, int rows, int group, long long xs, long long ys) { \
        hipk::gemv_sb::run_r1<hipk::gemv_sb::Q8, T>(w, x, y, n, k, rows, group, xs, ys); \
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
        hipk::gemv_sb::run_r1<hipk::gemv_sb::Q4, T>(w, x, y, n, k, rows, group, xs, ys); \
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
