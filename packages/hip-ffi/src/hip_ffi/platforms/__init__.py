"""The platforms behind the one HIP surface, one folder each: amd/, nvidia/, cpu/.

Each folder's `loader.load()` returns that platform's `HipApi` (hip_ffi.selection picks which);
everything the platforms share (the surface, the cdefs, constants, shims, the hiprtc helpers)
lives beside this folder, in hip_ffi itself.
"""
