"""hip-backend: every layer of the stack (hip-ffi, hip-core, hip-runtime) in one import."""

from hip_backend._version import __version__

__all__ = ["__version__"]
