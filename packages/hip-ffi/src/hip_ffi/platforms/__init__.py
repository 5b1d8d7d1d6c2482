"""The platforms hip-ffi binds, one folder each: amd/, nvidia/.

Each folder's `loader.load()` returns that platform's `HipApi` (hip_ffi.selection picks which);
everything the platforms share (the surface, the cdefs, constants, shims, the hiprtc helpers,
handles) lives beside this folder, in hip_ffi itself. The cpu platform is a runtime, not
bindings: it is the hip-cpu distribution, found through the `hip_ffi.platforms` entry point.
"""
