// The chunks of attention_decode.hip: the keys each takes (split_keys, which pass 1's blocks
// use too) and their merge, by the combine kernel's block or fused in the last block of each
// row group (both pass-1 blocks call merge_if_last). Included by attention_decode.hip after
// hipk::decode's Args, clamped_length and finite_or_zero.
#pragma once

#define HIPK_DECODE_MERGE_LOADS 8  // chunks whose partials one thread loads at once
#ifndef HIPK_DECODE_MERGE_TOGETHER  // 0: the fused merge takes a row group's rows one by one
#define HIPK_DECODE_MERGE_TOGETHER 1  // (bench sweeps compile both)
#endif

namespace hipk {
namespace decode {

// How a sequence of len keys (clamped) splits over the launch's chunks: the one computation
// that pass 1's blocks (portable and tensor-core), the fused merge and the combine kernel
// share, so that they agree on which chunks wrote partials. keys: ceil(len / chunks) rounded
// up to whole chunk_steps, at least chunk_min, at most len; used: the chunks holding keys
// (<= chunks; 1 for an empty sequence, whose chunk 0 writes its zeros). Chunk c < used takes
// keys [begin(c), end(c)), together [0, len) once; chunks c >= used take none and return.
// Long long inside: a length near INT_MAX in one chunk must not wrap.
struct KeySplit {
    int len, keys, used;
    HIPK_DEVICE int begin(int c) const { return c * keys; }  // c < used: below len
    HIPK_DEVICE int end(int c) const { return begin(c) + imin(keys, len - begin(c)); }
};

HIPK_DEVICE KeySplit split_keys(int len, int chunk_min, int chunk_step, int chunks) {
    KeySplit s = {len, 1, 1};
    if (len <= 0) return s;
    const long long share = (len - 1) / chunks + 1;  // ceil(len / chunks)
    long long keys = (share + chunk_step - 1) / chunk_step * chunk_step;
    keys = keys < chunk_min ? chunk_min : keys;
    s.keys = (int)(keys < len ? keys : len);
    s.used = (len - 1) / s.keys + 1;
    return s;
}

HIPK_DEVICE KeySplit split_keys(int len, const Args& a) {
    return split_keys(len, a.chunk_min, a.chunk_step, a.chunks);
}

struct Max {
    HIPK_DEVICE Floats<1> identity() const {
        Floats<1> s = {{neg_inf()}};
        return s;
    }
    HIPK_DEVICE Floats<1> operator()(Floats<1> x, Floats<1> y) const {
        x.v[0] = fmaxf(x.v[0], y.v[0]);
        return x;
    }
};

// `count` rows (rows[r] -> o[r], r < count <= HIPK_DECODE_ROWS), each of n chunks, merged at
// once: every load of the merge (the chunks' statistics, then their partial sums) is issued
// for all the rows together, so the merge costs two rounds of load latency however many rows
// it has (row after row, the last block's merge of a row group was 4 x that, on the critical
// path of the whole launch: H100, B1 Hq32/Hkv8 KV32768 D128). count * n <= HIPK_DECODE_MAX_CHUNKS
// (the caller passes one row at a time otherwise). Steps: the rows' maxima and the weights
// w_c = exp2(m_c - max) in shared memory; then the block's threads split as (chunk slice, row,
// 4-column vector) and sum w_c * part_c over their chunks. Ends with a barrier (a block may
// merge several groups of rows in turn).
template <typename T>
HIPK_DEVICE void combine_rows(const float* part, const float* stats, const long long* rows,
                              T* const* o, int count, int n, int d, int chunks) {
    enum { R = HIPK_DECODE_ROWS };
    __shared__ float weight[HIPK_DECODE_MAX_CHUNKS], sum_of[HIPK_DECODE_MAX_CHUNKS];
    __shared__ float sums[HIPK_DECODE_COMBINE * 4];
    __shared__ float scratch[HIPK_REDUCER_SCRATCH];
    const int tid = (int)threadIdx.x, threads = (int)blockDim.x;
    const int dp = (d + 3) & ~3;
    BlockReducer reducer = {scratch, 0, tid, threads, 0};
    float top[R], total[R];
    HIPK_UNROLL
    for (int r = 0; r < R; ++r) {
        top[r] = neg_inf();
        total[r] = 0.0f;
    }
    for (int j = tid; j < count * n; j += threads) {  // j = r * n + c
        const int r = j / n, c = j - r * n;
        const float* at = stats + (rows[r] * chunks + c) * 2;
        weight[j] = at[0];
        sum_of[j] = at[1];
        HIPK_UNROLL
        for (int q = 0; q < R; ++q)
            if (q == r) top[q] = fmaxf(top[q], at[0]);
    }
    // (`if`, not `break`: a loop of barriers that breaks has no constant trip count, and
    // hiprtc then cannot unroll it, so top[] and total[] would leave the registers.)
    HIPK_UNROLL
    for (int r = 0; r < R; ++r) {
        if (r < count) {  // (block-uniform)
            Floats<1> found = {{top[r]}};
            top[r] = finite_or_zero(reducer.reduce(found, Max()).v[0]);  // the row's base
        }
    }
    for (int j = tid; j < count * n; j += threads) {
        const int r = j / n;
        float base = 0.0f;
        HIPK_UNROLL
        for (int q = 0; q < R; ++q)
            if (q == r) base = top[q];
        const float w = exp2f(weight[j] - base);
        weight[j] = w;
        HIPK_UNROLL
        for (int q = 0; q < R; ++q)
            if (q == r) total[q] += w * sum_of[j];
    }
    HIPK_UNROLL
    for (int r = 0; r < R; ++r)
        if (r < count) total[r] = reducer.sum(total[r]);  // the barriers also publish weight[]
    // (slice, row, vector) jobs: one per thread, or (blocks narrower than the rows' vectors:
    // the fused combine on the cpu platform) one slice with several jobs per thread.
    const int vectors = dp / 4, jobs = count * vectors;
    const int slices = threads >= jobs ? threads / jobs : 1;
    for (int job = tid; job < slices * jobs; job += threads) {
        const int vector = job % vectors, r = job / vectors % count, slice = job / jobs;
        const float* p = part + rows[r] * chunks * dp + vector * 4;
        const float* w_of = weight + r * n;
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        // HIPK_DECODE_MERGE_LOADS chunks per pass, their loads issued together.
        enum { N = HIPK_DECODE_MERGE_LOADS };
        for (int c0 = slice; c0 < n; c0 += N * slices) {
            float x[N][4], w[N];
            HIPK_UNROLL
            for (int j = 0; j < N; ++j) {  // past n: chunk c0 again (written), weighted 0
                const int c = c0 + j * slices < n ? c0 + j * slices : c0;
                w[j] = c0 + j * slices < n ? w_of[c] : 0.0f;
                load_floats<float, 4>(p + (long long)c * dp, x[j]);
            }
            HIPK_UNROLL
            for (int j = 0; j < N; ++j) {
                HIPK_UNROLL
                for (int e = 0; e < 4; ++e) acc[e] += w[j] * x[j][e];
            }
        }
        HIPK_UNROLL
        for (int e = 0; e < 4; ++e) sums[(slice * count + r) * dp + vector * 4 + e] = acc[e];
    }
    __syncthreads();
    for (int t = tid; t < count * d; t += threads) {
        const int r = t / d, col = t - r * d;
        float inverse = 0.0f;
        HIPK_UNROLL
        for (int q = 0; q < R; ++q)
            if (q == r) inverse = total[q] > 0.0f ? 1.0f / total[q] : 0.0f;
        float sum = 0.0f;
        for (int s = 0; s < slices; ++s) sum += sums[(s * count + r) * dp + col];
        o[r][col] = from_float<T>(sum * inverse);
    }
    __syncthreads();
}

// The combine kernel's block: row blockIdx.x = (b * heads + h) * sq + i. A sequence that used
// one chunk has its rows written by pass 1 already (no partials): the block returns.
template <typename T>
HIPK_DEVICE void combine(const float* part, const float* stats, const int* lengths, T* out,
                         int heads, int sq, int d, int smax, int chunk_min, int chunk_step,
                         int chunks, long long ob, long long oh, long long os) {
    const long long row = blockIdx.x;
    const int i = (int)(row % sq), h = (int)(row / sq % heads), b = (int)(row / sq / heads);
    const int len = clamped_length(lengths, b, smax);
    const int n = split_keys(len, chunk_min, chunk_step, chunks).used;
    if (n == 1) return;  // the whole block
    T* const o = out + b * ob + h * oh + i * os;
    combine_rows<T>(part, stats, &row, &o, 1, n, d, chunks);
}

// The combine fused (counters given, one per row group, kv head and batch): the last of the
// sequence's n used chunks (split_keys) to finish merges the row group's rows (reduce.h's
// last-block finish: each block's partial stores fenced before its count, the merge's loads
// after; the count goes back to 0 for the next launch). Every thread of the block calls it
// after its stores; n == 1: the block wrote out itself, nothing to merge or count.
template <typename T>
HIPK_DEVICE void merge_if_last(const float* part, const float* stats, T* out,
                               unsigned int* counters, const Args& a, int n, int rg, int hk,
                               int b, int row_groups) {
    if (n == 1 || !counters) return;
    __shared__ int last;
    const int tid = (int)threadIdx.x, per_kv = a.heads / a.kv_heads;
    const int group_rows = per_kv * a.sq;
    __threadfence();
    __syncthreads();
    if (tid == 0) {
        unsigned int* count = counters + ((long long)b * a.kv_heads + hk) * row_groups + rg;
        last = atomicAdd(count, 1u) + 1 == (unsigned int)n;
        if (last) *count = 0;  // all n have counted
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    long long rows[HIPK_DECODE_ROWS];
    T* outs[HIPK_DECODE_ROWS];
    int count = 0;
    for (int r = 0; r < HIPK_DECODE_ROWS; ++r) {
        const int rho = rg * HIPK_DECODE_ROWS + r, g = rho / a.sq, i = rho - g * a.sq;
        const int h = hk * per_kv + g;
        if (rho >= group_rows) break;  // rows in order: the rest are absent too
        rows[count] = ((long long)b * a.heads + h) * a.sq + i;
        outs[count++] = out + b * a.ob + h * a.oh + i * a.os;
    }
    // All the rows at once where their chunks' weights fit the shared array, else one by one.
    const int together = HIPK_DECODE_MERGE_TOGETHER && count * n <= HIPK_DECODE_MAX_CHUNKS;
    const int step = together ? count : 1;
    for (int r = 0; r < count; r += step)
        combine_rows<T>(part, stats, rows + r, outs + r, step, n, a.d, a.chunks);
}

}  // namespace decode
}  // namespace hipk
