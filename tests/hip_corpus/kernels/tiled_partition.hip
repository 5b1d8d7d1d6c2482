// HIP corpus: cooperative groups inside a block. Tiles of 16 threads reduce with shfl_down,
// a tile of 4 broadcasts with shfl and votes with ballot/any/all, and the block syncs through
// its group handle before thread 0 adds the tile sums.
#include <hip/hip_runtime.h>
#include <hip/hip_cooperative_groups.h>

namespace cg = cooperative_groups;

__global__ void tile_sums(const float* in, float* tile_out, float* block_out,
                          unsigned int* quad_info, int n) {
    __shared__ float sums[64];
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<16> tile = cg::tiled_partition<16>(block);
    const unsigned i = block.group_index().x * block.size() + block.thread_rank();
    float v = i < (unsigned)n ? in[i] : 0.0f;
    for (unsigned offset = tile.size() / 2; offset > 0; offset /= 2) v += tile.shfl_down(v, offset);
    if (tile.thread_rank() == 0) {
        tile_out[i / 16] = v;
        sums[tile.meta_group_rank()] = v;
    }
    block.sync();
    if (block.thread_rank() == 0) {
        float total = 0.0f;
        for (unsigned t = 0; t < tile.meta_group_size(); ++t) total += sums[t];
        block_out[block.group_index().x] = total;
    }

    cg::thread_block_tile<4> quad = cg::tiled_partition<4>(block);
    const int positive = i < (unsigned)n && in[i] > 0.0f;
    unsigned long long votes = quad.ballot(positive);
    int any = quad.any(positive), all = quad.all(positive);
    unsigned first = quad.shfl(block.thread_rank(), 0);
    if (i < (unsigned)n)
        quad_info[i] = (unsigned)votes | (any << 4) | (all << 5) | ((block.thread_rank() - first) << 6);
    cg::thread_group eight = cg::tiled_partition(block, 8);
    eight.sync();
}
