// Rotary position embedding on [tokens, heads, head_dim] tensors (queries or keys).
//
//   rope_half_<t>(x, cos, sin, positions, y, tokens, heads, head_dim, rot_dim, max_position)
//       rotate-half pairing, as Llama and GPT-NeoX: element i pairs with i + rot_dim/2
//   rope_interleaved_<t>(x, cos, sin, positions, y, tokens, heads, head_dim, rot_dim,
//                        max_position)
//       interleaved pairing, as GPT-J: element 2i pairs with 2i + 1
//
// Pair k (k < rot_dim/2) of token t turns by the angle of position p = positions[t]:
//       (a, b) -> (a cos - b sin, b cos + a sin),  cos = cos[p * rot_dim/2 + k] (same for sin)
// cos and sin are f32 tables [max_position, rot_dim/2] for every type (one angle per pair,
// not the [.., rot_dim] duplicated layout). positions: int32 per token, or null for
// p = t. A position outside [0, max_position) reads cos = sin = 0, so its rotated pairs become
// 0 (as embedding gives an id outside the table a row of zeros) and nothing is read outside
// the tables: positions stay on the device, so the host cannot check them. rot_dim is even
// and <= head_dim; elements from rot_dim on are copied (partial rotary, as GPT-NeoX and
// GPT-J). y may be x (each work item reads its elements before writing them).
// Launch: any 1-D grid and block (grid-stride over pairs).
//
//   rope_and_cache_half_<t>(q, k, v, cos, sin, positions, rows, k_table, v_table, tokens,
//                           heads, kv_heads, head_dim, rot_dim, max_position, table_rows,
//                           q_token, q_head, k_token, k_head, v_token, v_head)
//   rope_and_cache_interleaved_<t>(... the same ...)
//       a transformer layer's queries and keys rotated in place (q [tokens, heads, head_dim],
//       k [tokens, kv_heads, head_dim], any token and head strides in elements, the last axis
//       contiguous: views of one fused QKV projection) and the rotated keys and the values
//       v [tokens, kv_heads, head_dim] stored at row rows[t] of the KV cache's tables
//       k_table, v_table [table_rows, kv_heads, head_dim] (C-contiguous). A row outside
//       [0, table_rows) (-1: a padding token) stores nothing. One launch for what two ropes
//       and two scatters did: the per-op host cost of a decode step is what this saves.
//       Launch: any 1-D grid and block (grid-stride over a token's q pairs, k pairs, then v).
//   rope_and_cache_rms_half_<t>(... the same ..., x, x_token, hidden, eps)
//   rope_and_cache_rms_interleaved_<t>(... the same ..., x, x_token, hidden, eps)
//       the same for q, k and v that are products of rows x[t] (x_token elements apart,
//       `hidden` long) not yet RMS-normalized (row_rms.h: the norm weight folded into the
//       QKV weight): each token's q, k and v are first multiplied by
//       1 / sqrt(mean(x[t]^2) + eps), as if the product had read rmsnorm(x); v is scaled in
//       place too (v is written: not const).
//       Launch: 1-D blocks, 2-D grid (items, tokens): a block takes tokens blockIdx.y,
//       + gridDim.y, ..., and of each the items blockIdx.x * blockDim.x + threadIdx.x,
//       + gridDim.x * blockDim.x, ...
//
// Every entry point may be started early (early_start.h): each block waits for the kernel
// ahead before it reads anything.
#include "common.h"
#include "early_start.h"
#include "row_rms.h"

namespace hipk {

// A work item's inputs: a pair (a, b) at offsets (i, j) of a head and its angle's (c, s), or a
// lone element a at i (j < 0, b = 0, c = 1, s = 0: a copied tail element or a value). Loading
// them apart from the arithmetic lets a kernel put its loads in flight before other work
// (rope_and_cache_rms: before the row's factor).
struct PairValues {
    float a, b, c, s;
    int i, j;
};

// Pair k (or tail element k - half) of the head at `in`, loaded.
template <typename T, bool INTERLEAVED>
HIPK_DEVICE PairValues load_pair(const T* in, int k, int half, int rot_dim, long long p,
                                 const float* cos, const float* sin, int max_position) {
    PairValues v = {0.0f, 0.0f, 1.0f, 0.0f, rot_dim + (k - half), -1};
    if (k < half) {
        const bool inside = 0 <= p && p < max_position;
        v.c = inside ? cos[p * half + k] : 0.0f;
        v.s = inside ? sin[p * half + k] : 0.0f;
        v.i = INTERLEAVED ? 2 * k : k;
        v.j = INTERLEAVED ? 2 * k + 1 : k + half;
        v.b = to_float(in[v.j]);
    }
    v.a = to_float(in[v.i]);
    return v;
}

// The loaded item times `scale`, rotated, written to `out` and `stored` (each when not null).
// A lone element is a * scale (exact for scale 1).
template <typename T>
HIPK_DEVICE void store_pair(const PairValues& v, float scale, T* out, T* stored) {
    const float a = v.a * scale, b = v.b * scale;
    const T ri = v.j < 0 ? from_float<T>(a) : from_float<T>(a * v.c - b * v.s);
    if (out) out[v.i] = ri;
    if (stored) stored[v.i] = ri;
    if (v.j >= 0) {
        const T rj = from_float<T>(b * v.c + a * v.s);
        if (out) out[v.j] = rj;
        if (stored) stored[v.j] = rj;
    }
}

template <typename T, bool INTERLEAVED>
HIPK_DEVICE void rope(const T* x, const float* cos, const float* sin, const int* positions, T* y,
                      int tokens, int heads, int head_dim, int rot_dim, int max_position) {
    start_after_previous_grid();
    const int half = rot_dim / 2;
    // Work items per head: the rotated pairs, then the copied tail.
    const int per_head = half + (head_dim - rot_dim);
    const long long total = (long long)tokens * heads * per_head;
    for (long long w = global_thread(); w < total; w += grid_threads()) {
        const long long head = w / per_head;  // (token, head) flattened
        const int k = (int)(w - head * per_head);
        const long long token = head / heads;
        const long long p = positions ? (long long)positions[token] : token;
        const PairValues v =
            load_pair<T, INTERLEAVED>(x + head * head_dim, k, half, rot_dim, p, cos, sin,
                                      max_position);
        store_pair<T>(v, 1.0f, y + head * head_dim, (T*)nullptr);
    }
}

// rope_and_cache's arguments, and one work item of a token: a pair of q or k rotated (k's
// stored too), or an element of v stored (and, NORMED, scaled in place).
template <typename T> struct CacheItems {
    T* q;
    T* k;
    T* v;  // (written only by the _rms entry points, whose v is not const)
    const float* cos;
    const float* sin;
    const int* positions;
    const int* rows;
    T* k_table;
    T* v_table;
    int heads, kv_heads, head_dim, rot_dim, max_position, table_rows;
    long long q_token, q_head, k_token, k_head, v_token, v_head;

    HIPK_DEVICE int per_head() const { return rot_dim / 2 + (head_dim - rot_dim); }
    // A token's work items: q's pairs, k's pairs, then v's elements.
    HIPK_DEVICE long long per_token() const {
        return (long long)(heads + kv_heads) * per_head() + (long long)kv_heads * head_dim;
    }

    // A work item's inputs, and where its results go (`finish`).
    struct Item {
        PairValues v;
        T* out;     // q's or k's head, rotated in place; v's head (NORMED: scaled in place)
        T* stored;  // the KV table's row of k's or v's head, or null (nothing stored)
    };

    template <bool INTERLEAVED, bool NORMED>
    HIPK_DEVICE Item load(long long token, long long r) const {
        const int half = rot_dim / 2, each = per_head();
        const long long q_items = (long long)heads * each, k_items = (long long)kv_heads * each;
        const long long row = rows[token];
        const bool store = 0 <= row && row < table_rows;
        Item item = {};
        if (r < q_items + k_items) {
            const bool is_q = r < q_items;
            if (!is_q) r -= q_items;
            const long long head = r / each;
            const int pair = (int)(r - head * each);
            item.out =
                is_q ? q + token * q_token + head * q_head : k + token * k_token + head * k_head;
            item.stored =
                (!is_q && store) ? k_table + (row * kv_heads + head) * head_dim : nullptr;
            const long long p = positions ? (long long)positions[token] : token;
            item.v = load_pair<T, INTERLEAVED>(item.out, pair, half, rot_dim, p, cos, sin,
                                               max_position);
        } else {
            r -= q_items + k_items;
            const long long head = r / head_dim;
            const int i = (int)(r - head * head_dim);
            T* from = v + token * v_token + head * v_head;
            const PairValues lone = {to_float(from[i]), 0.0f, 1.0f, 0.0f, i, -1};
            item.v = lone;
            item.out = NORMED ? from : nullptr;
            item.stored = store ? v_table + (row * kv_heads + head) * head_dim : nullptr;
        }
        return item;
    }

    HIPK_DEVICE void finish(const Item& item, float scale) const {
        store_pair<T>(item.v, scale, item.out, item.stored);
    }
};

template <typename T, bool INTERLEAVED>
HIPK_DEVICE void rope_and_cache(const CacheItems<T>& items, int tokens) {
    start_after_previous_grid();
    const long long per_token = items.per_token();
    const long long total = (long long)tokens * per_token;
    for (long long w = global_thread(); w < total; w += grid_threads()) {
        const long long token = w / per_token;
        items.finish(items.template load<INTERLEAVED, false>(token, w - token * per_token), 1.0f);
    }
}

// 1: rope_and_cache_rms loads a thread's first item before the row's factor (0: after it; a
// bench variant, `-DHIPK_ROPE_LOADS_FIRST=0`).
#ifndef HIPK_ROPE_LOADS_FIRST
#define HIPK_ROPE_LOADS_FIRST 1
#endif

// rope_and_cache of products of rows x[t] not yet normalized (row_rms.h): blockIdx.y picks the
// token (+ gridDim.y, ...), blockIdx.x its items (one a thread when the grid covers them; each
// block computes the token's factor itself: a row of L2-resident x, where a loop over a
// token's items would chain their loads); v is scaled in place too (a prefill's attention
// reads q, k and v themselves).
template <typename T, bool INTERLEAVED>
HIPK_DEVICE void rope_and_cache_rms(const CacheItems<T>& items, int tokens, const T* x,
                                    long long x_token, int hidden, float eps) {
    start_after_previous_grid();
    __shared__ float scratch[HIPK_REDUCER_SCRATCH];
    BlockReducer reduce = whole_block_reducer(scratch);
    const long long per_token = items.per_token();
    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long step = (long long)gridDim.x * blockDim.x;
    const bool early = HIPK_ROPE_LOADS_FIRST && first < per_token;
    for (long long token = blockIdx.y; token < tokens; token += gridDim.y) {
        // The first item's loads in flight while the block reduces the factor.
        typename CacheItems<T>::Item item = {};
        if (early) item = items.template load<INTERLEAVED, true>(token, first);
        const float scale = block_row_rrms(reduce, x + token * x_token, hidden, eps);
        if (early) items.finish(item, scale);
        for (long long r = early ? first + step : first; r < per_token; r += step)
            items.finish(items.template load<INTERLEAVED, true>(token, r), scale);
    }
}

}  // namespace hipk

// --- entry points: one per type (hip-core reads the parameter types from these lines) -------

extern "C" __global__ void rope_half_f32(const float* x, const float* cos, const float* sin,
                                         const int* positions, float* y, int tokens, int heads,
                                         int head_dim, int rot_dim, int max_position) {
    hipk::rope<float, false>(x, cos, sin, positions, y, tokens, heads, head_dim, rot_dim,
                             max_position);
}
extern "C" __global__ void rope_half_f16(const hipk::f16* x, const float* cos, const float* sin,
                                         const int* positions, hipk::f16* y, int tokens, int heads,
                                         int head_dim, int rot_dim, int max_position) {
    hipk::rope<hipk::f16, false>(x, cos, sin, positions, y, tokens, heads, head_dim, rot_dim,
                                 max_position);
}
extern "C" __global__ void rope_half_bf16(const hipk::bf16* x, const float* cos, const float* sin,
                                          const int* positions, hipk::bf16* y, int tokens,
                                          int heads, int head_dim, int rot_dim, int max_position) {
    hipk::rope<hipk::bf16, false>(x, cos, sin, positions, y, tokens, heads, head_dim, rot_dim,
                                  max_position);
}

extern "C" __global__ void rope_interleaved_f32(const float* x, const float* cos, const float* sin,
                                                const int* positions, float* y, int tokens,
                                                int heads, int head_dim, int rot_dim,
                                                int max_position) {
    hipk::rope<float, true>(x, cos, sin, positions, y, tokens, heads, head_dim, rot_dim,
                            max_position);
}
extern "C" __global__ void rope_interleaved_f16(const hipk::f16* x, const float* cos,
                                                const float* sin, const int* positions,
                                                hipk::f16* y, int tokens, int heads, int head_dim,
                                                int rot_dim, int max_position) {
    hipk::rope<hipk::f16, true>(x, cos, sin, positions, y, tokens, heads, head_dim, rot_dim,
                                max_position);
}
extern "C" __global__ void rope_interleaved_bf16(const hipk::bf16* x, const float* cos,
                                                 const float* sin, const int* positions,
                                                 hipk::bf16* y, int tokens, int heads,
                                                 int head_dim, int rot_dim, int max_position) {
    hipk::rope<hipk::bf16, true>(x, cos, sin, positions, y, tokens, heads, head_dim, rot_dim,
                                 max_position);
}

// The entry points of rope_and_cache: rotate-half and interleaved pairing, per type, plain and
// of un-normalized products (_rms). (Written out: hip-core reads their parameters from the text
// with only the type list expanded.)
#define HIPK_CACHE_ITEMS(T)                                                                        \
    const hipk::CacheItems<T> items = {q, k, const_cast<T*>(v), cos, sin, positions, rows,         \
                                       k_table, v_table, heads, kv_heads, head_dim, rot_dim,       \
                                       max_position, table_rows, q_token, q_head, k_token,         \
                                       k_head, v_token, v_head}
#define HIPK_ROPE_AND_CACHE(S, T)                                                                  \
    extern "C" __global__ void rope_and_cache_half_##S(                                            \
        T* q, T* k, const T* v, const float* cos, const float* sin, const int* positions,          \
        const int* rows, T* k_table, T* v_table, int tokens, int heads, int kv_heads,              \
        int head_dim, int rot_dim, int max_position, int table_rows, long long q_token,            \
        long long q_head, long long k_token, long long k_head, long long v_token,                  \
        long long v_head) {                                                                        \
        HIPK_CACHE_ITEMS(T);                                                                       \
        hipk::rope_and_cache<T, false>(items, tokens);                                             \
    }                                                                                              \
    extern "C" __global__ void rope_and_cache_rms_half_##S(                                        \
        T* q, T* k, T* v, const float* cos, const float* sin, const int* positions,                \
        const int* rows, T* k_table, T* v_table, int tokens, int heads, int kv_heads,              \
        int head_dim, int rot_dim, int max_position, int table_rows, long long q_token,            \
        long long q_head, long long k_token, long long k_head, long long v_token,                  \
        long long v_head, const T* x, long long x_token, int hidden, float eps) {                  \
        HIPK_CACHE_ITEMS(T);                                                                       \
        hipk::rope_and_cache_rms<T, false>(items, tokens, x, x_token, hidden, eps);                \
    }                                                                                              \
    extern "C" __global__ void rope_and_cache_interleaved_##S(                                     \
        T* q, T* k, const T* v, const float* cos, const float* sin, const int* positions,          \
        const int* rows, T* k_table, T* v_table, int tokens, int heads, int kv_heads,              \
        int head_dim, int rot_dim, int max_position, int table_rows, long long q_token,            \
        long long q_head, long long k_token, long long k_head, long long v_token,                  \
        long long v_head) {                                                                        \
        HIPK_CACHE_ITEMS(T);                                                                       \
        hipk::rope_and_cache<T, true>(items, tokens);                                              \
    }                                                                                              \
    extern "C" __global__ void rope_and_cache_rms_interleaved_##S(                                 \
        T* q, T* k, T* v, const float* cos, const float* sin, const int* positions,                \
        const int* rows, T* k_table, T* v_table, int tokens, int heads, int kv_heads,              \
        int head_dim, int rot_dim, int max_position, int table_rows, long long q_token,            \
        long long q_head, long long k_token, long long k_head, long long v_token,                  \
        long long v_head, const T* x, long long x_token, int hidden, float eps) {                  \
        HIPK_CACHE_ITEMS(T);                                                                       \
        hipk::rope_and_cache_rms<T, true>(items, tokens, x, x_token, hidden, eps);                 \
    }
HIPK_F32_AND_16BIT_TYPES(HIPK_ROPE_AND_CACHE)
