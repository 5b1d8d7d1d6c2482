"""Which platform serves the HIP API: `HIP_PLATFORM`, else detection.

Detection order (docs/architecture.md, Platforms): amd if a ROCm runtime loads and sees a
device, then nvidia if the CUDA libraries load and see a device, then cpu. A platform that
loads but sees no device is passed over, with the reason kept for the error message.

amd and nvidia are bindings and live in hip-ffi (hip_ffi/platforms/<name>/). cpu is a whole
runtime, its own distribution (hip-cpu, docs/architecture.md says why), found through the
`hip_ffi.platforms` entry point group: hip-ffi never imports it by name.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from hip_ffi.devices import device_count
from hip_ffi.errors import HipFfiError, PlatformNotInstalledError, PlatformUnavailableError

if TYPE_CHECKING:
    from hip_ffi.api import HipApi

PLATFORMS = ("amd", "nvidia", "cpu")
DETECTION_ORDER = PLATFORMS
#: HIP_PLATFORM spellings HIP itself accepts, mapped to ours.
_ALIASES = {"amd": "amd", "hcc": "amd", "nvidia": "nvidia", "nvcc": "nvidia", "cpu": "cpu"}
#: The platforms hip-ffi holds itself (hip_ffi/platforms/<name>/loader.py, each with
#: `load() -> HipApi`).
_BUILT_IN = {name: f"hip_ffi.platforms.{name}.loader" for name in ("amd", "nvidia")}
#: Where installed platforms declare their `load() -> HipApi` (`cpu = "hip_cpu.loader:load"`).
ENTRY_POINT_GROUP = "hip_ffi.platforms"
#: The platforms that are distributions of their own: (distribution, loader module).
_DISTRIBUTIONS = {"cpu": ("hip-cpu", "hip_cpu.loader")}

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


def platform_loader(name: str) -> Callable[[], HipApi]:
    """The named platform's `load()`: hip-ffi's own module, else the `hip_ffi.platforms` entry
    point of the distribution that provides it. PlatformNotInstalledError when there is none."""
    if name in _BUILT_IN:
        loader: Callable[[], HipApi] = importlib.import_module(_BUILT_IN[name]).load
        return loader
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if entry.name == name:
            found: Callable[[], HipApi] = entry.load()
            return found
    distribution, module = _DISTRIBUTIONS[name]
    # A source checkout used through PYTHONPATH (packages/*/src) has no installed metadata, so
    # no entry point: there the module itself is taken when it can be imported.
    if importlib.util.find_spec(module.partition(".")[0]) is not None:
        fallback: Callable[[], HipApi] = importlib.import_module(module).load
        return fallback
    raise PlatformNotInstalledError(name, distribution)


def load_platform(name: str) -> HipApi:
    """Load (once per process) and return the named platform's HipApi."""
    if name not in PLATFORMS:
        raise ValueError(f"unknown platform {name!r}; platforms are {', '.join(PLATFORMS)}")
    with _lock:
        if name not in _loaded:
            _loaded[name] = platform_loader(name)()
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
