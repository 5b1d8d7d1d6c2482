"""The handles on device libraries and compiled kernels a backend holds.

`blas` (the BLAS handle bound to a stream, GEMM), `small_gemm` (small products as one launch of
a portable kernel, `Blas`'s calling convention), `dnn` (the DNN library: MIOpen / cuDNN / the
host), `kernel_cache` (compiled kernels per device) and `kernel_sources` (the shipped `kernels/`
sources). Importing this folder imports none of them.
"""
