"""hip-core: errors, devices, streams, events, memory, programs and typed kernel launches.

Built on hip-ffi; never imports the layers above it.
"""

from hip_core._version import __version__

__all__ = ["__version__"]
