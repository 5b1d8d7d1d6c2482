"""The nvidia platform: the HIP surface over libcudart, libcuda, libnvrtc and libcublas.

HIP on NVIDIA is header-only (every hip* call is an inline wrapper over CUDA), so there is no
hip library to open: this folder does what those headers do, at run time. Each HIP function is
bound to the CUDA call with the same meaning (RUNTIME_CALLS / DRIVER_CALLS in loader.py, or a
wrapper where arguments differ: wrappers.py, device.py, rtc.py, blas.py), returns HIP's codes
(error_codes.py) and takes HIP's enum values (tables.py). Requires CUDA >= 12
(cuLaunchKernelEx, the three-argument cudaGraphInstantiate). Libraries are found as
libraries.py describes; without NVRTC or cuBLAS only the hiprtc* / hipblas* functions become
unavailable, saying why.

Stream semantics are CUDA's, which HIP copied: the null stream is the legacy default stream,
hipStreamNonBlocking streams do not synchronize with it, and every *Async call is ordered on
its stream only.
"""
