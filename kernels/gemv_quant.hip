// Matrix-vector products that read ggml's Q8_0 / Q4_0 blocks as they are stored (decode-time
// linear layers of a quantized model): y[r, n] = sum_k x[r, k] * W[n, k] for a few rows r.
//
//   gemv_<q>_r<R>_<t>(const unsigned char* w, const T* x, T* y, int n, int k, int rows,
//                     int tpr, long long xs, long long ys)
//
// w: n rows of k / 32 packed blocks each (q8_0: 34 bytes = f16 scale d + 32 int8; q4_0: 18 bytes
// = d + 16 bytes of nibbles, value d * (nibble - 8), low nibbles are elements 0..15), at least
// 2-byte aligned. x: `rows` rows of k elements, row r at x + r * xs, each 16-byte aligned (the
// host passes contiguous rows); y: rows r at y + r * ys, n elements each. rows <= R (R = 1, 4
// or 16: the accumulators are registers); f32 accumulation, each output rounded once to T.
//
// Why the blocks go through shared memory: a 34- or 18-byte block is only 2-byte aligned, and
// reading it from global memory 2 bytes at a time costs ~10x the load instructions of a copy
// (the L1 then limits the stream far below the memory's bandwidth). Instead the block streams
// the bytes of its weight rows with 16-byte loads (contiguous, fully coalesced) into shared
// memory, and each thread decodes whole blocks from there with 2-byte reads, in registers.
//
// Launch: 1-D blocks of HIPK_GEMV_THREADS threads, grid ceil(n / G), G = HIPK_GEMV_THREADS / tpr
// weight rows per block, `tpr` threads per weight row (32, 64, 128 or 256). The rows advance
// together in pieces of P = HIPK_GEMV_BPT * tpr blocks: the block copies the G row segments of
// a piece to shared memory, each thread decodes HIPK_GEMV_BPT blocks of its row and dots them
// with the x rows (every weight block is read once and reused for all rows), and the next
// piece's 16-byte loads are issued before the current piece is computed (in flight meanwhile).
// The row's threads are then summed: shuffles within a warp on a GPU (warpSize at run time),
// shared memory across warps and on the CPU platform (one-lane warps).
// When a row's bytes (k / 32 * block bytes) or w are not 16-byte aligned, the copy uses 2-byte
// loads instead (correct, slower; Llama's shapes are multiples of 256 and never need it).
#include "common.h"
#include "dtypes.h"

#define HIPK_GEMV_THREADS 256  // threads per block (the host's launch)
#ifndef HIPK_GEMV_BPT
#define HIPK_GEMV_BPT 2  // blocks each thread decodes per piece (bench_quant.py compiles others)
#endif
#ifndef HIPK_GEMV_WR
#define HIPK_GEMV_WR 1  // weight rows each thread takes (x loads shared by them; bench: 2)
#endif
#ifndef HIPK_GEMV_MIN_BLOCKS
#define HIPK_GEMV_MIN_BLOCKS 1  // __launch_bounds__'s blocks per multiprocessor (bench: others)
#endif
// The dot products unroll on GPUs (registers); the cpu platform's g++ compiles them as loops
// (fully unrolled, 18 entry points took ~40 s of g++).
#if HIPK_GPU
#define HIPK_GEMV_UNROLL HIPK_UNROLL
#else
#define HIPK_GEMV_UNROLL
#endif

namespace hipk {
namespace gemv {

struct alignas(16) Chunk { unsigned int v[4]; };

HIPK_DEVICE int signed_byte(unsigned int b) { return (int)(b ^ 0x80u) - 128; }

// One block's 32 quants (as floats, without the scale) and its scale, from 2-byte reads.
struct Q8 {
    enum { bytes = 34 };
    static HIPK_DEVICE float decode(const unsigned short* block, float (&q)[32]) {
        HIPK_UNROLL
        for (int i = 0; i < 16; ++i) {
            const unsigned int pair = block[1 + i];
            q[2 * i] = (float)signed_byte(pair & 0xffu);
            q[2 * i + 1] = (float)signed_byte(pair >> 8);
        }
        return half_bits_to_float(block[0]);
    }
};

struct Q4 {
    enum { bytes = 18 };
    static HIPK_DEVICE float decode(const unsigned short* block, float (&q)[32]) {
        HIPK_UNROLL
        for (int i = 0; i < 8; ++i) {  // bytes 2i, 2i + 1: elements 2i, 2i + 1 and + 16
            const unsigned int pair = block[1 + i];
            q[2 * i] = (float)((int)(pair & 0xfu) - 8);
            q[2 * i + 16] = (float)((int)((pair >> 4) & 0xfu) - 8);
            q[2 * i + 1] = (float)((int)((pair >> 8) & 0xfu) - 8);
            q[2 * i + 17] = (float)((int)(pair >> 12) - 8);
        }
        return half_bits_to_float(block[0]);
    }
};

HIPK_DEVICE float xor_shuffle(float v, int mask) {
#if defined(__CUDA_ARCH__)
    return __shfl_xor_sync(0xffffffffu, v, mask);
#elif HIPK_GPU
    return __shfl_xor(v, mask);
#else
    (void)mask;
    return v;
#endif
}

// 16-byte chunks per thread per piece: a piece of G rows holds THREADS * BPT blocks.
template <typename Q> struct Piece {
    enum {
        bytes = HIPK_GEMV_THREADS * HIPK_GEMV_BPT * HIPK_GEMV_WR * Q::bytes,
        loads = (HIPK_GEMV_BPT * HIPK_GEMV_WR * Q::bytes + 15) / 16,
    };
};

// Thread t's 16-byte chunks of the piece of `pb` blocks from block b0 of `live` rows (row g at
// base + g * row_bytes): chunk c = t + u * THREADS is chunk c % chunks of row c / chunks.
template <typename Q>
HIPK_DEVICE void fetch(Chunk (&held)[Piece<Q>::loads], const unsigned char* base,
                       long long row_bytes, int b0, int pb, int live, int t) {
    const int chunks = pb * Q::bytes / 16;
    const unsigned char* start = base + (long long)b0 * Q::bytes;
    HIPK_UNROLL
    for (int u = 0; u < Piece<Q>::loads; ++u) {
        const int c = t + u * HIPK_GEMV_THREADS;
        const int g = c / chunks;
        if (g < live)
            held[u] =
                *reinterpret_cast<const Chunk*>(start + g * row_bytes + (c - g * chunks) * 16);
    }
}

template <typename Q, typename T, int R, int WR = HIPK_GEMV_WR>
HIPK_DEVICE void run(const unsigned char* w, const T* x, T* y, int n, int k, int rows, int tpr,
                     long long xs, long long ys) {
    __shared__ Chunk stage[Piece<Q>::bytes / 16];
#if HIPK_GPU
    __shared__ float partial[HIPK_GEMV_THREADS / 32 * R * WR];  // warps hold >= 32 lanes
#else
    __shared__ float partial[HIPK_GEMV_THREADS * R * WR];
#endif
    const int G = WR * HIPK_GEMV_THREADS / tpr;  // weight rows of this block
    const int P = HIPK_GEMV_BPT * tpr;      // blocks per row per piece (a multiple of 8)
    const int t = (int)threadIdx.x, g = t / tpr, j = t - g * tpr;
    const int row0 = (int)blockIdx.x * G;
    const int nb = k / 32;
    const long long row_bytes = (long long)nb * Q::bytes;
    const int seg_chunks = P * Q::bytes / 16;  // 16-byte chunks of a full segment in `stage`
    const unsigned char* base = w + (long long)row0 * row_bytes;
    const bool vec = row_bytes % 16 == 0 && aligned(w, 16);
    const int my_row = row0 + g * WR;  // the first of this thread's WR weight rows
    constexpr int N = Lanes16<T>::value;

    float acc[WR * R];  // acc[w * R + r]: weight row my_row + w, x row r
    HIPK_GEMV_UNROLL
    for (int a = 0; a < WR * R; ++a) acc[a] = 0.0f;

    Chunk held[Piece<Q>::loads];  // the next piece's 16-byte chunks, in flight
    const int live = imin(G, n - row0);   // weight rows of this block that exist
    if (vec) fetch<Q>(held, base, row_bytes, 0, imin(P, nb), live, t);
    for (int b0 = 0; b0 < nb; b0 += P) {
        const int pb = imin(P, nb - b0);  // blocks of this piece, per row
        if (vec) {
            const int chunks = pb * Q::bytes / 16;  // whole: row_bytes and b0 * bytes are too
            HIPK_GEMV_UNROLL
            for (int u = 0; u < Piece<Q>::loads; ++u) {
                const int c = t + u * HIPK_GEMV_THREADS;
                const int gg = c / chunks;
                if (gg < live) stage[gg * seg_chunks + c - gg * chunks] = held[u];
            }
        } else {  // 2-byte copy: a row's blocks are not 16-byte aligned
            const int halves = pb * Q::bytes / 2;
            unsigned short* to = reinterpret_cast<unsigned short*>(stage);
            for (int c = t; c < live * halves; c += HIPK_GEMV_THREADS) {
                const int gg = c / halves, cc = c - gg * halves;
                to[gg * seg_chunks * 8 + cc] = reinterpret_cast<const unsigned short*>(
                    base + gg * row_bytes + (long long)b0 * Q::bytes)[cc];
            }
        }
        __syncthreads();
        if (vec && b0 + P < nb)  // the next piece's loads are in flight while this one is computed
            fetch<Q>(held, base, row_bytes, b0 + P, imin(P, nb - b0 - P), live, t);
        if (my_row < n) {  // (rows past n of the last block: stale stage bytes, never stored)
            for (int i = j; i < pb; i += tpr) {
                float q[WR][32], d[WR];
                HIPK_GEMV_UNROLL
                for (int wr = 0; wr < WR; ++wr) {
                    const unsigned short* segment = reinterpret_cast<const unsigned short*>(
                        stage + (g * WR + wr) * seg_chunks);
                    d[wr] = Q::decode(segment + i * (Q::bytes / 2), q[wr]);
                }
                const long long e0 = (long long)(b0 + i) * 32;
                HIPK_GEMV_UNROLL
                for (int r = 0; r < R; ++r) {
                    if (r < rows) {
                        float dot[WR];
                        HIPK_GEMV_UNROLL
                        for (int wr = 0; wr < WR; ++wr) dot[wr] = 0.0f;
                        HIPK_GEMV_UNROLL
                        for (int v = 0; v < 32 / N; ++v) {
                            float xv[N];
                            load_floats<T, N>(x + r * xs + e0 + v * N, xv);
                            HIPK_GEMV_UNROLL
                            for (int wr = 0; wr < WR; ++wr) {
                                HIPK_GEMV_UNROLL
                                for (int e = 0; e < N; ++e) dot[wr] += q[wr][v * N + e] * xv[e];
                            }
                        }
                        HIPK_GEMV_UNROLL
                        for (int wr = 0; wr < WR; ++wr) acc[wr * R + r] += d[wr] * dot[wr];
                    }
                }
            }
        }
        __syncthreads();  // before the next piece overwrites `stage`
    }

    // Sum the tpr partial sums of each weight row: shuffles within a warp, then shared memory.
#if HIPK_GPU
    const int lanes = imin(tpr, warpSize);
#else
    const int lanes = 1;
#endif
    for (int offset = lanes / 2; offset > 0; offset /= 2) {
        HIPK_GEMV_UNROLL
        for (int a = 0; a < WR * R; ++a) acc[a] += xor_shuffle(acc[a], offset);
    }
    const int parts = tpr / lanes;
    if (j % lanes == 0) {
        HIPK_GEMV_UNROLL
        for (int a = 0; a < WR * R; ++a)  // weight row g * WR + a / R of the block
            partial[((g * WR + a / R) * parts + j / lanes) * R + a % R] = acc[a];
    }
    __syncthreads();
    for (int o = t; o < G * R; o += HIPK_GEMV_THREADS) {
        const int gg = o / R, r = o - gg * R;
        if (r < rows && row0 + gg < n) {
            float sum = 0.0f;
            for (int p = 0; p < parts; ++p) sum += partial[(gg * parts + p) * R + r];
            y[r * ys + row0 + gg] = from_float<T>(sum);
        }
    }
}

}  // namespace gemv
}  // namespace hipk

// Entry points: per quantization and row tile R, for each storage type T (written out: hip-core
// reads the parameter types from the text).
#define HIPK_GEMV(S, T) \
    extern "C" __global__ __launch_bounds__(HIPK_GEMV_THREADS, HIPK_GEMV_MIN_BLOCKS) void gemv_q8_0_r1_##S(const unsigned char* w, \
        const T* x, T* y, int n, int k, int rows, int tpr, long long xs, long long ys) { \
        hipk::gemv::run<hipk::gemv::Q8, T, 1>(w, x, y, n, k, rows, tpr, xs, ys); \
    } \
    extern "C" __global__ __launch_bounds__(HIPK_GEMV_THREADS, HIPK_GEMV_MIN_BLOCKS) void gemv_q8_0_r4_##S(const unsigned char* w, \
        const T* x, T* y, int n, int k, int rows, int tpr, long long xs, long long ys) { \
        hipk::gemv::run<hipk::gemv::Q8, T, 4>(w, x, y, n, k, rows, tpr, xs, ys); \
    } \
    extern "C" __global__ __launch_bounds__(HIPK_GEMV_THREADS, HIPK_GEMV_MIN_BLOCKS) void gemv_q8_0_r16_##S(const unsigned char* w, \
        const T* x, T* y, int n, int k, int rows, int tpr, long long xs, long long ys) { \
        hipk::gemv::run<hipk::gemv::Q8, T, 16>(w, x, y, n, k, rows, tpr, xs, ys); \
    } \
    extern "C" __global__ __launch_bounds__(HIPK_GEMV_THREADS, HIPK_GEMV_MIN_BLOCKS) void gemv_q4_0_r1_##S(const unsigned char* w, \
        const T* x, T* y, int n, int k, int rows, int tpr, long long xs, long long ys) { \
        hipk::gemv::run<hipk::gemv::Q4, T, 1>(w, x, y, n, k, rows, tpr, xs, ys); \
    } \
    extern "C" __global__ __launch_bounds__(HIPK_GEMV_THREADS, HIPK_GEMV_MIN_BLOCKS) void gemv_q4_0_r4_##S(const unsigned char* w, \
        const T* x, T* y, int n, int k, int rows, int tpr, long long xs, long long ys) { \
        hipk::gemv::run<hipk::gemv::Q4, T, 4>(w, x, y, n, k, rows, tpr, xs, ys); \
    } \
    extern "C" __global__ __launch_bounds__(HIPK_GEMV_THREADS, HIPK_GEMV_MIN_BLOCKS) void gemv_q4_0_r16_##S(const unsigned char* w, \
        const T* x, T* y, int n, int k, int rows, int tpr, long long xs, long long ys) { \
        hipk::gemv::run<hipk::gemv::Q4, T, 16>(w, x, y, n, k, rows, tpr, xs, ys); \
    }
HIPK_F32_AND_16BIT_TYPES(HIPK_GEMV)
