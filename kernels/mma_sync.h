// NVIDIA's warp-wide matrix tiles (mma.sync), sm_80 and later: HIPK_MMA_SYNC is 1 where they
// are compiled, 0 elsewhere (AMD, older NVIDIA GPUs, the cpu platform), where the kernels that
// use them run a portable path instead (attention_decode_mma.h, gemv_mma.h).
#pragma once

#include "dtypes.h"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define HIPK_MMA_SYNC 1
#else
#define HIPK_MMA_SYNC 0
#endif

namespace hipk {

#if HIPK_MMA_SYNC

// c += A B for one m16n8k16 tile with f32 accumulators, in PTX's fragment layouts: lane
// (g, t) = (lane / 4, lane % 4) holds a0 = A[g][2t..2t+1], a1 = A[g+8][2t..], a2 =
// A[g][2t+8..], a3 = A[g+8][2t+8..], b0 = B[2t..2t+1][g], b1 = B[2t+8..][g], and c0..c3 =
// C[g][2t], C[g][2t+1], C[g+8][2t], C[g+8][2t+1]; two 16-bit values a register, the lower k
// in the low half. The last argument picks the input type.
#define HIPK_MMA16816(T, NAME)                                                                     \
    HIPK_DEVICE void mma16816(float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,   \
                              unsigned b0, unsigned b1, const T*) {                                \
        asm("mma.sync.aligned.m16n8k16.row.col.f32." NAME "." NAME ".f32 {%0, %1, %2, %3}, "       \
            "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"                                        \
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                                       \
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));                               \
    }
HIPK_MMA16816(bf16, "bf16")
HIPK_MMA16816(f16, "f16")
#undef HIPK_MMA16816

#endif  // HIPK_MMA_SYNC

}  // namespace hipk
