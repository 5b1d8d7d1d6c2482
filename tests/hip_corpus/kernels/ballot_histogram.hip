// HIP corpus: warp votes. Each warp counts its positive elements with a ballot and a population
// count (64-bit ballots on AMD's 64-lane wavefronts), flags warps where any / all elements are
// positive, and records __activemask() of a full warp.
#include <hip/hip_runtime.h>

// ROCm's hiprtc before 6 has no __activemask; on a converged wavefront __ballot(1) is the same.
#if defined(__HIP_PLATFORM_AMD__)
#define ACTIVE_MASK() __ballot(1)
#else
#define ACTIVE_MASK() __activemask()
#endif

__global__ void vote_counts(const float* in, int n, unsigned int* positives, int* any_flags,
                            int* all_flags, unsigned long long* masks) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int lane = threadIdx.x % warpSize;
    const int warp = i / warpSize;  // blocks hold whole warps
    const int predicate = i < n && in[i] > 0.0f;
    unsigned long long votes = __ballot(predicate);
    int any = __any(predicate), all = __all(predicate);
    unsigned long long active = ACTIVE_MASK();
    if (lane == 0) {
        atomicAdd(positives, (unsigned int)__popcll(votes));
        any_flags[warp] = any;
        all_flags[warp] = all;
        masks[warp] = active;
    }
}
