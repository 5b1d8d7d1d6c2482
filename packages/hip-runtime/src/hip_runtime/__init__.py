"""hip-runtime: HipBackend, DeviceTensor, ModelRuntime and AsyncLoader on top of hip-core."""

from hip_runtime._version import __version__

__all__ = ["__version__"]
