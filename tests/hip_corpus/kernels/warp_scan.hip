// HIP corpus: warp-level scan and butterfly. Every lane gets the inclusive prefix sum of its
// warp (Hillis-Steele with __shfl_up) and the warp's total (an __shfl_xor butterfly), with a
// __syncwarp between the two (AMD wavefronts run in lock step: older hiprtc has no __syncwarp).
#include <hip/hip_runtime.h>

#if defined(__HIP_PLATFORM_AMD__)
#define SYNC_WARP()
#else
#define SYNC_WARP() __syncwarp()
#endif

__global__ void warp_scan(const int* in, int* prefix, int* totals, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int lane = threadIdx.x % warpSize;
    int v = i < n ? in[i] : 0;
    int scan = v;
    for (int offset = 1; offset < warpSize; offset *= 2) {
        int up = __shfl_up(scan, offset);
        if (lane >= offset) scan += up;
    }
    SYNC_WARP();
    int total = v;
    for (int mask = warpSize / 2; mask > 0; mask /= 2) total += __shfl_xor(total, mask);
    if (i < n) {
        prefix[i] = scan;
        totals[i] = total;
    }
}
