// Early start: kernels launched to begin before the kernel ahead of them on their stream has
// finished (hip-core's `Kernel.start_early`; CUDA's programmatic dependent launch on compute
// capability 9.0 and later). Such a kernel's every block calls `wait_for_previous_grid()`
// before it reads or writes memory that earlier work on the stream may write or read; before
// that it may only `prefetch_l2` (L2 is where every write meets, so a line prefetched early
// is still current when read after the wait). Then `let_next_grid_start()` lets the next
// early-start kernel's blocks launch as this one's retire (the wait comes first, so a chain
// of them never runs ahead of a kernel still waiting).
//
// Elsewhere (AMD, whose HIP has no such launch, older NVIDIA GPUs, the CPU platform) the
// launch itself waits for the kernel ahead and all three are no-ops.
//
// kernels/README.md lists the sources whose entry points follow this contract; the host's
// kernel cache (hip_runtime.libraries.kernel_cache.EARLY_START) starts only their kernels
// early.
#pragma once

#include "common.h"

namespace hipk {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
HIPK_DEVICE void wait_for_previous_grid() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
HIPK_DEVICE void let_next_grid_start() { asm volatile("griddepcontrol.launch_dependents;"); }
HIPK_DEVICE void prefetch_l2(const void* p) {
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}
#else
HIPK_DEVICE void wait_for_previous_grid() {}
HIPK_DEVICE void let_next_grid_start() {}
HIPK_DEVICE void prefetch_l2(const void*) {}
#endif

// The usual prologue: wait for the kernel ahead, then let the next one's blocks launch.
HIPK_DEVICE void start_after_previous_grid() {
    wait_for_previous_grid();
    let_next_grid_start();
}

}  // namespace hipk
