"""Which platform serves the HIP API: `HIP_PLATFORM`, else detection.

Detection order (docs/architecture.md, Platforms): amd if a ROCm runtime loads and sees a
device, then nvidia if the CUDA libraries load and see a device, then cpu. A platform that
loads but sees no device is passed over, with the reason kept for the error message.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from hip_ffi.devices import device_count
from hip_ffi.errors import HipFfiError, PlatformUnavailableError

if TYPE_CHECKING:
    from hip_ffi.api import HipApi

PLATFORMS = ("amd", "nvidia", "cpu")
DETECTION_ORDER = PLATFORMS
#: HIP_PLATFORM spellings HIP itself accepts, mapped to ours.
_ALIASES = {"amd": "amd", "hcc": "amd", "nvidia": "nvidia", "nvcc": "nvidia", "cpu": "cpu"}
#: Module implementing each platform (hip_ffi/platforms/<name>/loader.py); each has
#: `load() -> HipApi`.
_MODULES = {name: f"hip_ffi.platforms.{name}.loader" for name in PLATFORMS}

_lock = threading.Lock()
_loaded: dict[str, HipApi] = {}


def requested_platform() -> str | None:
    """The platform named by `HIP_PLATFORM`, or None when it is unset or empty."""
    value = os.environ.get("HIP_PLATFORM", "").strip().lower()
    if not value:
        return None
    if value not in _ALIASES:
        accepted = ", ".join(sorted(_ALIASES))
        raise ValueError(f"HIP_PLATFORM={value!r} is not a platform; use one of: {accepted}")
    return _ALIASES[value]


def load_platform(name: str) -> HipApi:
    """Load (once per process) and return the named platform's HipApi."""
    if name not in _MODULES:
        raise ValueError(f"unknown platform {name!r}; platforms are {', '.join(PLATFORMS)}")
    with _lock:
        if name not in _loaded:
            loader: Callable[[], HipApi] = importlib.import_module(_MODULES[name]).load
            _loaded[name] = loader()
        return _loaded[name]


def select(platform: str | None = None) -> HipApi:
    """The HipApi for `platform`, for `HIP_PLATFORM`, or the first detected one with a device.

    An explicit choice is loaded even when it sees no device (hipGetDeviceCount then answers
    hipErrorNoDevice, as HIP does). Detection raises PlatformUnavailableError with the reason
    each platform was passed over.
    """
    chosen = platform or requested_platform()
    if chosen is not None:
        return load_platform(_ALIASES.get(chosen, chosen))
    reasons: dict[str, str] = {}
    for name in DETECTION_ORDER:
        try:
            api = load_platform(name)
        except (HipFfiError, OSError, ImportError) as error:
            reasons[name] = str(error).replace("\n", "\n    ")
            continue
        if name == "cpu" or device_count(api)[0] > 0:
            return api
        reasons[name] = f"{api.platform_version} loaded but sees no device"
    raise PlatformUnavailableError(reasons)
