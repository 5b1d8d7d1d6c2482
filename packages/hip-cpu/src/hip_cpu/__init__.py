"""hip-cpu, the cpu platform of hip-ffi: a HIP runtime on the host (HIP_PLATFORM=cpu, or when
no GPU is found). hip-ffi finds it through the `hip_ffi.platforms` entry point (`cpu =
hip_cpu.loader:load`); nothing here is imported until the platform is loaded.

One device, the host (device.py), or several (HIP_FFI_CPU_DEVICES, ordinals.py) that are each
the host with a share of its memory and peer access to the others (peers.py); their memory is
host memory (memory.py, pools.py, copies.py), device memory in a memfd mapping that other
processes can map (arena.py, free_ranges.py: hipIpc*, ipc.py); streams are ordered queues run
by worker threads, events carry timestamps or, for interprocess ones, shared state
(streams.py, stream_api.py, shared_events.py); hiprtc is the host C++ compiler with a prelude
that makes HIP kernels plain C++ (compiler.py, include/hip_cpu_prelude.h); a code object is the
shared object it builds (modules.py); a launch runs the grid's blocks on every core, with GPU
barrier semantics through fibers (launch.py, include/hip_cpu_executor.h); hipBLAS GEMM runs on
the host (blas.py). Warps of 32 lanes (HIP_FFI_CPU_WARP_SIZE: 64 or 1) with real shuffles and
votes. Native helpers are compiled on first use and cached on disk (toolchain.py). Linux only
(it relies on /proc, memfd and ELF).

loader.py builds the HipApi; shared_objects.py dlopens native code (libc, the runtime library,
code objects); include/ and native/ hold the C++ headers and runtime source that toolchain.py
compiles.
"""

from hip_cpu._version import __version__

__all__ = ["__version__"]
