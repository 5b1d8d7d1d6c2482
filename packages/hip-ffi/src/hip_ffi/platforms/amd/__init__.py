"""The amd platform: the ROCm libraries (libamdhip64, hiprtc, hipBLAS) of ROCm 5, 6 or 7.

Functions are the cffi function objects themselves wherever the C ABI already matches the
surface; wrappers exist only where a release differs:
- hipGetDeviceProperties binds hipGetDevicePropertiesR0600 from ROCm 6.0 (the plain name keeps
  the old R0000 layout there); on 5.x the plain name is the R0000 layout.
- hipPointerGetAttributes on 5.x renumbers hipMemoryType to the ROCm 6 values.
- hipblasGemmEx / hipblasGemmStridedBatchedEx take hipDataType and hipblasComputeType_t: the
  plain names on hipBLAS 3, the `_v2` names on hipBLAS 2, translated to the older
  hipblasDatatype_t on hipBLAS 0 and 1.
- hipDrvLaunchKernelEx, where the release lacks it, goes through hipModuleLaunchKernel.
ROCm 7 also changed some launch error codes and hipGetLastError (it returns the last error of
any call, not only launches); those are HIP's own codes and reach the caller unchanged.
"""
