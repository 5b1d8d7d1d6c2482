// Drawing one token per row of probabilities, for generation's sampling (models/sampling.py).
//
//   sample_rows(probs, ids, y, rows, n, top_p, seed, step)
//       probs: f32 [rows, n] row-major, each row a distribution (softmax output), sorted
//       largest first whenever top_p < 1 (topk's order). ids: int64 [rows, n], the token of
//       each column (topk's indices), or null: column c is token c. y: int64 [rows].
//       Row r keeps the smallest prefix of its columns whose mass reaches top_p (column c is
//       kept when the mass of columns 0..c-1 is below top_p; column 0 always is: transformers'
//       TopPLogitsWarper), then draws column c with probability probs[c] / kept mass, by
//       inverse CDF with u = hash(seed, step, r) in [0, 1): y[r] = ids[r, c] (or c).
//
// The uniform number comes from a counter-based hash (splitmix64's finalizer) of the seed, the
// step and the row, so a draw needs no generator state and the same (seed, step, row) always
// draws the same u, on every platform. Sums in f32.
// Launch: grid-stride over rows (a block per row), HIPK_SAMPLE_THREADS threads per block: each
// thread sums a contiguous chunk of the row, then thread 0 walks the chunk sums and looks inside
// at most two chunks (the top-p cut and the draw), so a 128k-column row costs 128k / threads
// additions per thread plus two chunk scans.
#include "common.h"

#define HIPK_SAMPLE_THREADS 256

namespace hipk {

HIPK_DEVICE unsigned long long mix64(unsigned long long z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

// u in [0, 1) with 24 random bits (exact in f32).
HIPK_DEVICE float uniform(long long seed, long long step, int row) {
    const unsigned long long key =
        mix64((unsigned long long)seed ^ mix64((unsigned long long)step * 0x100000001b3ULL + row));
    return (float)(key >> 40) * (1.0f / 16777216.0f);
}

// The first column whose inclusive prefix mass exceeds `target` among columns [0, limit)
// (limit - 1 when rounding leaves none), with chunk sums `sums` of `per` columns each.
HIPK_DEVICE int first_above(const float* p, const float* sums, int threads, int per, int n,
                            int limit, float target) {
    float acc = 0.0f;
    for (int c = 0; c < threads; ++c) {
        const int lo = imin(n, c * per), hi = imin(n, lo + per);
        if (lo >= limit) break;
        if (acc + sums[c] <= target) {
            acc += sums[c];
            continue;
        }
        for (int i = lo; i < hi && i < limit; ++i) {
            acc += p[i];
            if (acc > target) return i;
        }
    }
    return limit - 1;
}

}  // namespace hipk

extern "C" __global__ void sample_rows(const float* probs, const long long* ids, long long* y,
                                       int rows, int n, float top_p, long long seed,
                                       long long step) {
    __shared__ float sums[HIPK_SAMPLE_THREADS];
    const int t = threadIdx.x;
    const int threads = blockDim.x < HIPK_SAMPLE_THREADS ? blockDim.x : HIPK_SAMPLE_THREADS;
    const int per = (n + threads - 1) / threads;
    for (int row = blockIdx.x; row < rows; row += gridDim.x) {
        const float* p = probs + (long long)row * n;
        if (t < threads) {
            const int lo = hipk::imin(n, t * per), hi = hipk::imin(n, lo + per);
            float s = 0.0f;
            for (int i = lo; i < hi; ++i) s += p[i];
            sums[t] = s;
        }
        __syncthreads();
        if (t == 0) {
            // The top-p cut: `keep` columns, the first whose exclusive prefix reaches top_p
            // ends the kept set; `mass` is the kept columns' sum.
            int keep = n;
            float acc = 0.0f;
            for (int c = 0; c < threads && keep == n; ++c) {
                const int lo = hipk::imin(n, c * per), hi = hipk::imin(n, lo + per);
                if (acc + sums[c] < top_p) {  // every column of this chunk starts below top_p
                    acc += sums[c];
                    continue;
                }
                for (int i = lo; i < hi; ++i) {
                    if (i > 0 && acc >= top_p) {
                        keep = i;
                        break;
                    }
                    acc += p[i];
                }
            }
            const float target = hipk::uniform(seed, step, row) * acc;
            const int pick = hipk::first_above(p, sums, threads, per, n, keep, target);
            y[row] = ids ? ids[(long long)row * n + pick] : (long long)pick;
        }
        __syncthreads();  // sums is rewritten for the next row
    }
}
