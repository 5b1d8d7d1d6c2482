// The GEMV kernel's rope-and-cache epilogue (gemv.hip's gemv_norm_rope_r1_<t>): a decode
// step's fused QKV product for one row of x, whose outputs leave as rope.hip's
// rope_and_cache_half would leave them, in the same launch.
//
// y = [q | k | v] of heads, kv_heads and kv_heads heads of head_dim (even) columns. Output i of
// the launch (block b's group g: i = b · groups + g) is column rope_column(i): i and i ^ 1 are
// the rotate-half pair (e, e + head_dim / 2) of one head, so a block (groups even) holds both
// columns of each of its pairs. Once the block's outputs are in y (rounded to T, as the
// unfused product leaves them), each pair is rotated by position positions[0] over the whole
// head (cos, sin: [max_position, head_dim / 2] f32; a position outside the table reads zeros,
// as rope.hip), q and k in y, and k and v stored at row rows[0] of k_table and v_table
// [table_rows, kv_heads, head_dim] (a row outside the table stores nothing). The arithmetic
// is rope.hip's rotate_pair on the same rounded values.
#pragma once

#include "common.h"
#include "dtypes.h"

namespace hipk {
namespace gemv {

template <typename T> struct RopeCache {
    const float* cos;
    const float* sin;
    const int* positions;
    const int* rows;
    T* k_table;
    T* v_table;
    int heads, kv_heads, head_dim, max_position, table_rows;
};

// The column of output i: pairs (2 m, 2 m + 1) of a head are its columns m and m + half.
HIPK_DEVICE int rope_column(int i, int head_dim) {
    const int within = i % head_dim;
    return i - within + (within & 1) * (head_dim / 2) + within / 2;
}

// The block's `groups` outputs (block `block`), rotated and stored by threads t < groups. Every
// thread of the block calls it (two barriers).
template <typename T>
HIPK_DEVICE void rope_epilogue(const RopeCache<T>& a, T* y, int n, int block, int groups, int t) {
    const int d = a.head_dim, half = d / 2, i = block * groups + t;
    const bool mine = t < groups && i < n;
    int j = 0;
    float own = 0.0f, other = 0.0f;
    __syncthreads();  // the block's outputs are in y (visible to the block after the barrier)
    if (mine) {
        j = rope_column(i, d);
        own = to_float(y[j]);
        other = to_float(y[rope_column(i ^ 1, d)]);
    }
    __syncthreads();  // a pair's threads read each other's column before either writes
    if (!mine) return;
    const int q_end = a.heads * d, k_end = q_end + a.kv_heads * d, e = j % d;
    float out = own;
    if (j < k_end) {  // q and k: rotated (rope.hip's rotate_pair, from either side of the pair)
        const long long p = a.positions ? (long long)a.positions[0] : 0;
        const bool inside = 0 <= p && p < a.max_position;
        const int m = e < half ? e : e - half;
        const float c = inside ? a.cos[p * half + m] : 0.0f;
        const float s = inside ? a.sin[p * half + m] : 0.0f;
        out = e < half ? own * c - other * s : own * c + other * s;
    }
    const T value = from_float<T>(out);
    y[j] = value;
    const long long row = a.rows[0];
    if (j >= q_end && 0 <= row && row < a.table_rows) {
        T* table = j < k_end ? a.k_table : a.v_table;
        table[row * a.kv_heads * d + (j - (j < k_end ? q_end : k_end))] = value;
    }
}

}  // namespace gemv
}  // namespace hipk
