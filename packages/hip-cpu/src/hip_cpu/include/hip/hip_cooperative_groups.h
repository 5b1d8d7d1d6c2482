/* hip_ffi cpu platform: HIP's cooperative groups (hip/hip_cooperative_groups.h) over the
 * executor's block barrier, warp syncs and grid barrier (hip_cpu_sched.h).
 *
 * - this_thread_block(): sync, thread_rank, size/num_threads, group_index, thread_index,
 *   group_dim/dim_threads.
 * - tiled_partition<N>(block) (N a power of two up to warpSize): thread_rank, size,
 *   meta_group_rank, meta_group_size, sync, shfl, shfl_up, shfl_down, shfl_xor, any, all,
 *   ballot (the tile's lanes as bits from 0). A tile's sync is a warp sync.
 * - tiled_partition(group, n): a thread_group of n threads (thread_rank, size, sync; a sync of
 *   a tile wider than a warp is a block barrier).
 * - this_grid(): size, thread_rank, block_rank, num_blocks, sync. grid.sync() needs a
 *   cooperative launch (hipModuleLaunchCooperativeKernel); elsewhere it fails the launch.
 */
#pragma once
#include "../hip_cpu_prelude.h"

namespace cooperative_groups {

namespace detail {
static inline unsigned block_rank() {
    return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
static inline unsigned block_size() { return blockDim.x * blockDim.y * blockDim.z; }
}  // namespace detail

/* A group of threads of any kind, as hip's type-erased thread_group. */
class thread_group {
  public:
    enum kind_t { block_kind, grid_kind, tile_kind };
    unsigned long long size() const {
        if (kind_ == grid_kind)
            return (unsigned long long)detail::block_size() * gridDim.x * gridDim.y * gridDim.z;
        return kind_ == block_kind ? detail::block_size() : tile_;
    }
    unsigned long long num_threads() const { return size(); }
    unsigned long long thread_rank() const {
        if (kind_ == grid_kind) {
            unsigned long long b = blockIdx.x + gridDim.x * (blockIdx.y + (unsigned long long)gridDim.y * blockIdx.z);
            return b * detail::block_size() + detail::block_rank();
        }
        return kind_ == block_kind ? detail::block_rank() : detail::block_rank() % tile_;
    }
    bool is_valid() const { return true; }
    void sync() const {
        if (kind_ == grid_kind) ::hipcpu::grid_sync();
        else if (kind_ == tile_kind && tile_ <= (unsigned)HIPCPU_WARP_SIZE) __syncwarp();
        else __syncthreads();
    }

  protected:
    thread_group(kind_t kind, unsigned tile) : kind_(kind), tile_(tile) {}
    kind_t kind_;
    unsigned tile_;
    friend thread_group tiled_partition(const thread_group& parent, unsigned tile_size);
};

class thread_block : public thread_group {
  public:
    thread_block() : thread_group(block_kind, 0) {}
    dim3 group_index() const { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
    dim3 thread_index() const { return dim3(threadIdx.x, threadIdx.y, threadIdx.z); }
    dim3 group_dim() const { return dim3(blockDim.x, blockDim.y, blockDim.z); }
    dim3 dim_threads() const { return group_dim(); }
    unsigned size() const { return detail::block_size(); }
    unsigned num_threads() const { return size(); }
    unsigned thread_rank() const { return detail::block_rank(); }
    void sync() const { __syncthreads(); }
};
static inline thread_block this_thread_block() { return thread_block(); }

class grid_group : public thread_group {
  public:
    grid_group() : thread_group(grid_kind, 0) {}
    unsigned long long block_rank() const {
        return blockIdx.x + gridDim.x * (blockIdx.y + (unsigned long long)gridDim.y * blockIdx.z);
    }
    unsigned long long num_blocks() const {
        return (unsigned long long)gridDim.x * gridDim.y * gridDim.z;
    }
    dim3 group_dim() const { return dim3(gridDim.x, gridDim.y, gridDim.z); }
    void sync() const { ::hipcpu::grid_sync(); }
};
static inline grid_group this_grid() { return grid_group(); }

template <unsigned N> class thread_block_tile : public thread_group {
    static_assert(N > 0 && (N & (N - 1)) == 0 && N <= HIPCPU_WARP_SIZE,
                  "tiled_partition<N>: N must be a power of two up to warpSize");
    static unsigned long long own_bits(unsigned long long warp_bits) {
        unsigned shift = (__lane_id() / N) * N;
        unsigned long long keep = N >= 64 ? ~0ull : ((1ull << N) - 1);
        return (warp_bits >> shift) & keep;
    }

  public:
    thread_block_tile() : thread_group(tile_kind, N) {}
    static constexpr unsigned size() { return N; }
    static constexpr unsigned num_threads() { return N; }
    unsigned thread_rank() const { return detail::block_rank() % N; }
    unsigned meta_group_rank() const { return detail::block_rank() / N; }
    unsigned meta_group_size() const { return (detail::block_size() + N - 1) / N; }
    void sync() const { __syncwarp(); }
    template <class T> T shfl(T var, int src) const { return __shfl(var, src, (int)N); }
    template <class T> T shfl_up(T var, unsigned delta) const { return __shfl_up(var, delta, (int)N); }
    template <class T> T shfl_down(T var, unsigned delta) const { return __shfl_down(var, delta, (int)N); }
    template <class T> T shfl_xor(T var, int mask) const { return __shfl_xor(var, mask, (int)N); }
    unsigned long long ballot(int predicate) const { return own_bits(__ballot(predicate)); }
    int any(int predicate) const { return ballot(predicate) != 0; }
    int all(int predicate) const {
        ::hipcpu::warp_view v = ::hipcpu::warp_exchange(nullptr, 0, predicate != 0);
        return own_bits(v.bits) == own_bits(v.mask);
    }
};

template <unsigned N, class Parent> static inline thread_block_tile<N> tiled_partition(const Parent&) {
    return thread_block_tile<N>();
}
inline thread_group tiled_partition(const thread_group& parent, unsigned tile_size) {
    (void)parent;
    return thread_group(thread_group::tile_kind, tile_size);
}

template <class Group> static inline void sync(const Group& group) { group.sync(); }

}  // namespace cooperative_groups
