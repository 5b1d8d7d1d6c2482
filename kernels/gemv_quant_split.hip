// Matrix-vector products over Q8_0 / Q4_0 weights in the split row layout, for a decode step's
// few rows of x: y[r, n] = sum_k x[r, k] * W[n, k].
//
//   gemv_split_<q>_r<R>_<t>(const unsigned char* w, const T* x, T* y, int n, int k, int rows,
//                           int slices, long long xs, long long ys)
//
// The split layout (ops/quantized_matmul.py, QuantizedWeight.layout "split"; dequant.hip's
// split_rows_<q> makes it from ggml's blocks) holds a row's bytes rearranged: first its k / 32
// f16 scales (k / 16 bytes), then its quants. q8_0: k int8, element j at byte j, value
// d[j / 32] * q. q4_0: k / 32 runs of 16 bytes, byte i of run b holding element 32 b + i in its
// low nibble and 32 b + 16 + i in its high one, value d[b] * (nibble - 8). A row is k / 32 * 34
// (18) bytes, as in ggml's layout; k is a multiple of 256, so every row and its quants start
// 16-byte aligned (w itself must be).
//
// Why the layout: ggml's 34 (18) byte blocks put a scale every 32 elements, so a 16-byte load
// never holds whole quants of one block only and lanes cannot read neighbouring 16-byte chunks.
// Split, the quants are a plain byte array: the 32 lanes of a team read 512 consecutive bytes
// per load instruction, fully coalesced, as a bf16 GEMV reads its weights (H100, Q8_0 rows 1:
// 0.81-0.83 of the copy rate at Llama's mid shapes, against 0.60-0.64 for one thread reading
// its own eight ggml blocks).
//
// Work: a block of 256 threads is 8 teams of 32 lanes; `slices` consecutive teams (1, 2, 4 or 8)
// share a weight row, so a block takes 8 / slices rows (grid ceil(n / (8 / slices))). Lane l of
// slice s takes the row's chunks c = 32 s + l + 32 slices i, i = 0, 1, ...; a chunk is 16 bytes
// of quants (16 q8_0 elements, or one q4_0 run of 32), its scale, and the x elements it
// multiplies (HIPK_GEMV_SPLIT_AHEAD chunks' loads issued before any is used: 1 was the best of
// 1-4 on an H100, the compiler overlapping the iterations itself). A chunk's products are
// summed in f32 in order, times its scale, into the lane's f32 accumulator of each row of x
// (rows <= R of them: R = 1, 4 or 16, registers). The lanes' sums meet (shuffles within the team
// on a GPU, where a team is 32 lanes of one warp or half a 64-lane wavefront; shared memory) and
// one thread per output sums its row's slices in order and rounds once to T.
// x: row r at x + r * xs, 16-byte aligned; y: row r at y + r * ys.
//
// Quants become floats without int-to-float instructions on NVIDIA (a quarter-rate pipe): the
// quant, offset to be non-negative, is written into the mantissa of 2^23, and 2^23 plus the
// offset subtracted (exact: both are integers below 2^24). AMD converts bytes at full rate
// (v_cvt_f32_ubyte<n>), which the plain conversion compiles to.
#include "common.h"
#include "dtypes.h"

#define HIPK_GEMV_SPLIT_THREADS 256  // threads per block (the host's launch)
#define HIPK_GEMV_SPLIT_TEAM 32      // lanes per team
#ifndef HIPK_GEMV_SPLIT_AHEAD
#define HIPK_GEMV_SPLIT_AHEAD 1  // chunks a lane loads before using them (H100: 1 beat 2-4)
#endif
#ifndef HIPK_GEMV_SPLIT_LDG
#define HIPK_GEMV_SPLIT_LDG 1  // NVIDIA: the weight bytes through the read-only data path
#endif
#ifndef HIPK_GEMV_SPLIT_SHUFFLE_FINISH
#define HIPK_GEMV_SPLIT_SHUFFLE_FINISH 1  // one team a row: lane 0 writes, no barrier (a GPU)
#endif

namespace hipk {
namespace gemv_split {

struct alignas(16) Chunk { unsigned int v[4]; };

// A chunk and a scale of the weight (read-only for the kernel's whole life).
HIPK_DEVICE Chunk load_chunk(const Chunk* p) {
#if defined(__CUDA_ARCH__) && HIPK_GEMV_SPLIT_LDG
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
    Chunk chunk = {{v.x, v.y, v.z, v.w}};
    return chunk;
#else
    return *p;
#endif
}

HIPK_DEVICE unsigned short load_scale(const unsigned short* p) {
#if defined(__CUDA_ARCH__) && HIPK_GEMV_SPLIT_LDG
    return __ldg(p);
#else
    return *p;
#endif
}

// Byte `at` (0..15) of a chunk, in the low 8 bits.
HIPK_DEVICE unsigned int byte_at(const Chunk& chunk, int at) {
    return (chunk.v[at >> 2] >> (8 * (at & 3))) & 0xffu;
}

// Byte `at` of a chunk read as an int8, as a float (exact).
HIPK_DEVICE float int8_at(const Chunk& chunk, int at) {
#if defined(__CUDA_ARCH__)
    // byte ^ 0x80 = q + 128 into 2^23's mantissa (PRMT picks the byte and the exponent bits).
    const unsigned int biased = __byte_perm(chunk.v[at >> 2] ^ 0x80808080u, 0x4B000000u,
                                            0x7650u | (unsigned int)(at & 3));
    return __int_as_float((int)biased) - 8388736.0f;  // 2^23 + 128
#else
    return (float)(byte_at(chunk, at) ^ 0x80u) - 128.0f;
#endif
}

// A nibble (0..15) minus 8 as a float (exact).
HIPK_DEVICE float nibble_value(unsigned int nibble) {
    return bits_float(0x4B000000u | nibble) - 8388616.0f;  // 2^23 + 8
}

// An encoding's chunk: `elements` quants in 16 bytes; the index of its scale in the row's
// scales; its quants as floats.
struct Q8 {
    enum { block_bytes = 34, elements = 16 };
    static HIPK_DEVICE int scale_index(int chunk) { return chunk >> 1; }
    static HIPK_DEVICE void decode(const Chunk& chunk, float (&q)[elements]) {
        HIPK_UNROLL
        for (int i = 0; i < 16; ++i) q[i] = int8_at(chunk, i);
    }
};

struct Q4 {
    enum { block_bytes = 18, elements = 32 };
    static HIPK_DEVICE int scale_index(int chunk) { return chunk; }
    static HIPK_DEVICE void decode(const Chunk& chunk, float (&q)[elements]) {
        HIPK_UNROLL
        for (int i = 0; i < 16; ++i) {  // byte i: element i (low nibble) and i + 16 (high)
            const unsigned int pair = byte_at(chunk, i);
            q[i] = nibble_value(pair & 0xfu);
            q[i + 16] = nibble_value(pair >> 4);
        }
    }
};

// sum_e q[e] * x[e] over one chunk's elements, in order (x 16-byte aligned).
template <typename Q, typename X>
HIPK_DEVICE float chunk_dot(const float (&q)[Q::elements], const X* x) {
    constexpr int N = Lanes16<X>::value;
    float dot = 0.0f;
    HIPK_UNROLL
    for (int v = 0; v < Q::elements / N; ++v) {
        float xv[N];
        load_floats<X, N>(x + v * N, xv);
        HIPK_UNROLL
        for (int e = 0; e < N; ++e) dot += q[v * N + e] * xv[e];
    }
    return dot;
}

// The sum over a team's 32 lanes, in lane 0 (a GPU); elsewhere each thread keeps its own.
HIPK_DEVICE float team_sum(float v) {
#if defined(__CUDA_ARCH__)
    HIPK_UNROLL
    for (int offset = HIPK_GEMV_SPLIT_TEAM / 2; offset > 0; offset /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, offset);
#elif HIPK_GPU
    HIPK_UNROLL
    for (int offset = HIPK_GEMV_SPLIT_TEAM / 2; offset > 0; offset /= 2) v += __shfl_xor(v, offset);
#endif
    return v;
}

template <typename Q, typename T, int R>
HIPK_DEVICE void run(const unsigned char* w, const T* x, T* y, int n, int k, int rows, int slices,
                     long long xs, long long ys) {
    constexpr int THREADS = HIPK_GEMV_SPLIT_THREADS, TEAM = HIPK_GEMV_SPLIT_TEAM;
    constexpr int AHEAD = HIPK_GEMV_SPLIT_AHEAD;
    __shared__ float partial[R * THREADS];  // partial[r * THREADS + t]
    const int t = (int)threadIdx.x, lane = t % TEAM, team = t / TEAM;
    const int per_block = THREADS / TEAM / slices;  // weight rows of this block
    const int row = (int)blockIdx.x * per_block + team / slices;
    const int chunks = k / Q::elements, step = TEAM * slices;
    float acc[R];
    HIPK_UNROLL
    for (int r = 0; r < R; ++r) acc[r] = 0.0f;
    if (row < n) {
        const unsigned char* base = w + (long long)row * (k / 32) * Q::block_bytes;
        const unsigned short* scales = reinterpret_cast<const unsigned short*>(base);
        const Chunk* quants = reinterpret_cast<const Chunk*>(base + k / 16);
        for (int first = (team % slices) * TEAM + lane; first < chunks; first += AHEAD * step) {
            Chunk chunk[AHEAD];
            unsigned short scale[AHEAD];
            HIPK_UNROLL
            for (int a = 0; a < AHEAD; ++a) {  // every load issued before any is used
                const int c = first + a * step;
                chunk[a] = c < chunks ? load_chunk(quants + c) : Chunk();
                scale[a] = c < chunks ? load_scale(scales + Q::scale_index(c)) : (unsigned short)0;
            }
            HIPK_UNROLL
            for (int a = 0; a < AHEAD; ++a) {
                const int c = first + a * step;
                if (c < chunks) {
                    float q[Q::elements];
                    Q::decode(chunk[a], q);
                    const float d = half_bits_to_float(scale[a]);
                    const T* xc = x + (long long)c * Q::elements;
                    HIPK_UNROLL
                    for (int r = 0; r < R; ++r) {
                        if (r < rows) acc[r] += d * chunk_dot<Q, T>(q, xc + r * xs);
                    }
                }
            }
        }
    }
#if HIPK_GPU && HIPK_GEMV_SPLIT_SHUFFLE_FINISH
    if (slices == 1) {  // (the same for the whole block: no thread waits at the barrier below)
        HIPK_UNROLL
        for (int r = 0; r < R; ++r) acc[r] = team_sum(acc[r]);
        if (lane == 0 && row < n) {
            HIPK_UNROLL
            for (int r = 0; r < R; ++r) {
                if (r < rows) y[r * ys + row] = from_float<T>(acc[r]);
            }
        }
        return;
    }
#endif
    HIPK_UNROLL
    for (int r = 0; r < R; ++r) partial[r * THREADS + t] = team_sum(acc[r]);
    __syncthreads();
    // One thread per output: the row's slices (lane 0 of each team on a GPU, every thread of
    // them elsewhere) summed in order.
    const int stride = HIPK_GPU ? TEAM : 1, parts = HIPK_GPU ? slices : TEAM * slices;
    for (int o = t; o < per_block * R; o += THREADS) {
        const int g = o % per_block, r = o / per_block;
        const int out_row = (int)blockIdx.x * per_block + g;
        if (r < rows && out_row < n) {
            const float* from = partial + r * THREADS + g * slices * TEAM;
            float sum = 0.0f;
            for (int p = 0; p < parts; ++p) sum += from[p * stride];
            y[r * ys + out_row] = from_float<T>(sum);
        }
    }
}

}  // namespace gemv_split
}  // namespace hipk

// Entry points: per encoding and row tile R, for each storage type T (written out: hip-core
// reads the parameter types from the text).
#define HIPK_GEMV_SPLIT(S, T) \
    extern "C" __global__ __launch_bounds__(HIPK_GEMV_SPLIT_THREADS) void gemv_split_q8_0_r1_##S( \
        const unsigned char* w, const T* x, T* y, int n, int k, int rows, int slices, long long xs, \
        long long ys) { \
        hipk::gemv_split::run<hipk::gemv_split::Q8, T, 1>(w, x, y, n, k, rows, slices, xs, ys); \
    } \
    extern "C" __global__ __launch_bounds__(HIPK_GEMV_SPLIT_THREADS) void gemv_split_q8_0_r4_##S( \
        const unsigned char* w, const T* x, T* y, int n, int k, int rows, int slices, long long xs, \
        long long ys) { \
        hipk::gemv_split::run<hipk::gemv_split::Q8, T, 4>(w, x, y, n, k, rows, slices, xs, ys); \
    } \
    extern "C" __global__ __launch_bounds__(HIPK_GEMV_SPLIT_THREADS) void gemv_split_q8_0_r16_##S( \
        const unsigned char* w, const T* x, T* y, int n, int k, int rows, int slices, long long xs, \
        long long ys) { \
        hipk::gemv_split::run<hipk::gemv_split::Q8, T, 16>(w, x, y, n, k, rows, slices, xs, ys); \
    } \
    extern "C" __global__ __launch_bounds__(HIPK_GEMV_SPLIT_THREADS) void gemv_split_q4_0_r1_##S( \
        const unsigned char* w, const T* x, T* y, int n, int k, int rows, int slices, long long xs, \
        long long ys) { \
        hipk::gemv_split::run<hipk::gemv_split::Q4, T, 1>(w, x, y, n, k, rows, slices, xs, ys); \
    } \
    extern "C" __global__ __launch_bounds__(HIPK_GEMV_SPLIT_THREADS) void gemv_split_q4_0_r4_##S( \
        const unsigned char* w, const T* x, T* y, int n, int k, int rows, int slices, long long xs, \
        long long ys) { \
        hipk::gemv_split::run<hipk::gemv_split::Q4, T, 4>(w, x, y, n, k, rows, slices, xs, ys); \
    } \
    extern "C" __global__ __launch_bounds__(HIPK_GEMV_SPLIT_THREADS) void gemv_split_q4_0_r16_##S( \
        const unsigned char* w, const T* x, T* y, int n, int k, int rows, int slices, long long xs, \
        long long ys) { \
        hipk::gemv_split::run<hipk::gemv_split::Q4, T, 16>(w, x, y, n, k, rows, slices, xs, ys); \
    }
HIPK_F32_AND_16BIT_TYPES(HIPK_GEMV_SPLIT)
