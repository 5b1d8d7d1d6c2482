// The merge of attention_decode.hip's chunks: the combine kernel's block and the fused merge
// in the last block of each row group (both pass-1 blocks call merge_if_last). Included by
// attention_decode.hip after hipk::decode's Args, clamped_length and finite_or_zero.
#pragma once

#define HIPK_DECODE_MERGE_LOADS 8  // chunks whose partials one thread loads at once

namespace hipk {
namespace decode {

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

// One row's n chunks merged into o: weights w_c = exp2(m_c - max) in shared memory, then the
// block's threads split as (chunk slice, 4-column vector) sum w_c * part_c over their chunks.
// Ends with a barrier (a block may merge several rows in turn).
template <typename T>
HIPK_DEVICE void combine_row(const float* part, const float* stats, long long row, int n, int d,
                             int chunks, T* o) {
    __shared__ float weight[HIPK_DECODE_MAX_CHUNKS];
    __shared__ float sums[HIPK_DECODE_COMBINE * 4];
    __shared__ float scratch[HIPK_REDUCER_SCRATCH];
    const int tid = (int)threadIdx.x, threads = (int)blockDim.x;
    const int dp = (d + 3) & ~3;
    stats += row * chunks * 2;
    part += row * chunks * dp;
    BlockReducer reducer = {scratch, 0, tid, threads, 0};
    float top = neg_inf();
    for (int c = tid; c < n; c += threads) top = fmaxf(top, stats[2 * c]);
    Floats<1> found = {{top}};
    const float base = finite_or_zero(reducer.reduce(found, Max()).v[0]);
    float total = 0.0f;
    for (int c = tid; c < n; c += threads) {
        weight[c] = exp2f(stats[2 * c] - base);
        total += weight[c] * stats[2 * c + 1];
    }
    total = reducer.sum(total);  // its barrier also publishes weight[]
    // (slice, vector) jobs: one per thread, or (blocks narrower than a row's vectors: the
    // fused combine on the cpu platform) one slice with several vectors per thread.
    const int vectors = dp / 4, slices = threads >= vectors ? threads / vectors : 1;
    for (int job = tid; job < slices * vectors; job += threads) {
        const int vector = job % vectors, slice = job / vectors;
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        // HIPK_DECODE_MERGE_LOADS chunks per pass, their loads issued together (one latency
        // for all: the fused merge runs its rows one after another in one block, at the end).
        enum { N = HIPK_DECODE_MERGE_LOADS };
        for (int c0 = slice; c0 < n; c0 += N * slices) {
            float x[N][4], w[N];
            HIPK_UNROLL
            for (int j = 0; j < N; ++j) {  // past n: chunk c0 again (written), weighted 0
                const int c = c0 + j * slices < n ? c0 + j * slices : c0;
                w[j] = c0 + j * slices < n ? weight[c] : 0.0f;
                load_floats<float, 4>(part + (long long)c * dp + vector * 4, x[j]);
            }
            HIPK_UNROLL
            for (int j = 0; j < N; ++j) {
                HIPK_UNROLL
                for (int e = 0; e < 4; ++e) acc[e] += w[j] * x[j][e];
            }
        }
        HIPK_UNROLL
        for (int e = 0; e < 4; ++e) sums[slice * dp + vector * 4 + e] = acc[e];
    }
    __syncthreads();
    const float inverse = total > 0.0f ? 1.0f / total : 0.0f;
    for (int t = tid; t < d; t += threads) {
        float sum = 0.0f;
        for (int s = 0; s < slices; ++s) sum += sums[s * dp + t];
        o[t] = from_float<T>(sum * inverse);
    }
    __syncthreads();
}

// The chunks a sequence of length len wrote (blocks past it return at once; chunk 0 always runs).
HIPK_DEVICE int chunks_written(int len, int chunk, int chunks) {
    return len > 0 ? imin(chunks, (len + chunk - 1) / chunk) : 1;
}

// The combine kernel's block: row blockIdx.x = (b * heads + h) * sq + i.
template <typename T>
HIPK_DEVICE void combine(const float* part, const float* stats, const int* lengths, T* out,
                         int heads, int sq, int d, int smax, int chunk, int chunks, long long ob,
                         long long oh, long long os) {
    const long long row = blockIdx.x;
    const int i = (int)(row % sq), h = (int)(row / sq % heads), b = (int)(row / sq / heads);
    const int n = chunks_written(clamped_length(lengths, b, smax), chunk, chunks);
    combine_row<T>(part, stats, row, n, d, chunks, out + b * ob + h * oh + i * os);
}

// The combine fused (counters given, one per row group, kv head and batch): the last of the
// sequence's chunks to finish merges the row group's rows (reduce.h's last-block finish: each
// block's partial stores fenced before its count, the merge's loads after; the count goes
// back to 0 for the next launch). Every thread of the block calls it after its stores.
template <typename T>
HIPK_DEVICE void merge_if_last(const float* part, const float* stats, T* out,
                               unsigned int* counters, const Args& a, int len, int rg, int hk,
                               int b, int row_groups) {
    if (a.chunks == 1 || !counters) return;
    __shared__ int last;
    const int tid = (int)threadIdx.x, per_kv = a.heads / a.kv_heads;
    const int group_rows = per_kv * a.sq;
    __threadfence();
    __syncthreads();
    const int n = chunks_written(len, a.chunk, a.chunks);
    if (tid == 0) {
        unsigned int* count = counters + ((long long)b * a.kv_heads + hk) * row_groups + rg;
        last = atomicAdd(count, 1u) + 1 == (unsigned int)n;
        if (last) *count = 0;  // all n have counted
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    for (int r = 0; r < HIPK_DECODE_ROWS; ++r) {
        const int rho = rg * HIPK_DECODE_ROWS + r, g = rho / a.sq, i = rho - g * a.sq;
        const int h = hk * per_kv + g;
        if (rho >= group_rows) break;  // the whole block
        const long long row = ((long long)b * a.heads + h) * a.sq + i;
        combine_row<T>(part, stats, row, n, a.d, a.chunks, out + b * a.ob + h * a.oh + i * a.os);
    }
}

}  // namespace decode
}  // namespace hipk
