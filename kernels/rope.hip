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
#include "common.h"

namespace hipk {

template <typename T, bool INTERLEAVED>
HIPK_DEVICE void rope(const T* x, const float* cos, const float* sin, const int* positions, T* y,
                      int tokens, int heads, int head_dim, int rot_dim, int max_position) {
    const int half = rot_dim / 2;
    // Work items per head: the rotated pairs, then the copied tail.
    const int per_head = half + (head_dim - rot_dim);
    const long long total = (long long)tokens * heads * per_head;
    for (long long w = global_thread(); w < total; w += grid_threads()) {
        const long long head = w / per_head;  // (token, head) flattened
        const int k = (int)(w - head * per_head);
        const T* in = x + head * head_dim;
        T* out = y + head * head_dim;
        if (k < half) {
            const long long token = head / heads;
            const long long p = positions ? (long long)positions[token] : token;
            const bool inside = 0 <= p && p < max_position;
            const float c = inside ? cos[p * half + k] : 0.0f;
            const float s = inside ? sin[p * half + k] : 0.0f;
            const int i = INTERLEAVED ? 2 * k : k;
            const int j = INTERLEAVED ? 2 * k + 1 : k + half;
            const float a = to_float(in[i]), b = to_float(in[j]);
            out[i] = from_float<T>(a * c - b * s);
            out[j] = from_float<T>(b * c + a * s);
        } else {
            const int i = rot_dim + (k - half);
            out[i] = in[i];
        }
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
