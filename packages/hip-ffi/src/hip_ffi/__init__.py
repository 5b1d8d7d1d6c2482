"""hip_ffi: one HIP API (runtime, hiprtc, hipBLAS) over three platforms, through CFFI.

    import hip_ffi
    hip = hip_ffi.load()            # HIP_PLATFORM=amd|nvidia|cpu, else detected
    count = hip.ffi.new("int*")
    rc = hip.hipGetDeviceCount(count)   # a hipError_t, HIP numbering on every platform

Platforms: **amd** (ROCm 5/6/7 libraries), **nvidia** (CUDA libraries under the HIP names) and
**cpu** (a HIP runtime on the host: the hip-cpu distribution, found through the
`hip_ffi.platforms` entry point). Importing this package opens no library and never
imports numpy; `load()` opens the libraries on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hip_ffi._version import __version__
from hip_ffi.devices import DeviceProperties, device_count, device_properties
from hip_ffi.errors import (
    FunctionUnavailableError,
    HipFfiError,
    HipStatusError,
    LibraryNotFoundError,
    PlatformNotInstalledError,
    PlatformUnavailableError,
)
from hip_ffi.selection import PLATFORMS, requested_platform

if TYPE_CHECKING:
    from hip_ffi.api import HipApi, PlatformTraits

__all__ = [
    "PLATFORMS",
    "DeviceProperties",
    "FunctionUnavailableError",
    "HipApi",
    "HipFfiError",
    "HipStatusError",
    "LibraryNotFoundError",
    "PlatformNotInstalledError",
    "PlatformTraits",
    "PlatformUnavailableError",
    "__version__",
    "describe",
    "device_count",
    "device_properties",
    "load",
    "requested_platform",
]


def load(platform: str | None = None) -> HipApi:
    """The HipApi of `platform`, of `HIP_PLATFORM`, or of the first platform detected."""
    from hip_ffi.selection import select

    return select(platform)


def describe(platform: str | None = None) -> str:
    """A short report of the selected platform, its libraries and its devices."""
    from hip_ffi.report import describe as _describe

    return _describe(load(platform))


def __getattr__(name: str) -> object:
    # The classes of api.py, without importing api.py (and surface.py) at package import.
    if name in ("HipApi", "PlatformTraits"):
        from hip_ffi import api

        return getattr(api, name)
    raise AttributeError(f"module 'hip_ffi' has no attribute {name!r}")
