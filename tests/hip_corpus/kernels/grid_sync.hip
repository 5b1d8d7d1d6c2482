// HIP corpus: a two-phase reduction in one cooperative launch. Every block sums its slice
// into partials[], the whole grid waits at this_grid().sync(), then block 0 adds the partials.
#include <hip/hip_runtime.h>
#include <hip/hip_cooperative_groups.h>

namespace cg = cooperative_groups;

__global__ void two_phase_sum(const float* in, float* partials, float* out, int n) {
    __shared__ float scratch[1024];
    cg::grid_group grid = cg::this_grid();
    cg::thread_block block = cg::this_thread_block();
    float v = 0.0f;
    for (unsigned long long i = grid.thread_rank(); i < (unsigned long long)n; i += grid.size())
        v += in[i];
    scratch[block.thread_rank()] = v;
    block.sync();
    for (unsigned stride = block.size() / 2; stride > 0; stride /= 2) {
        if (block.thread_rank() < stride) scratch[block.thread_rank()] += scratch[block.thread_rank() + stride];
        block.sync();
    }
    if (block.thread_rank() == 0) partials[blockIdx.x] = scratch[0];
    grid.sync();
    if (blockIdx.x == 0 && block.thread_rank() == 0) {
        float total = 0.0f;
        for (unsigned b = 0; b < gridDim.x; ++b) total += partials[b];
        *out = total;
    }
}
