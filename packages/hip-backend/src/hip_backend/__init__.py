"""hip-backend: every layer of the stack (hip-ffi, hip-core, hip-runtime) in one import.

    import hip_backend as hb

    with hb.HipBackend() as backend:             # hip_runtime.HipBackend
        y = backend.rmsnorm(backend.from_numpy(x), eps=1e-6).to_numpy()
    hb.Device(0).properties                      # hip_core.Device
    hb.describe()                                # hip_ffi.describe: platform, libraries, devices

Every public name of every layer (its `__all__`) is reachable here under its own name, and
the layer packages themselves are `hip_backend.ffi`, `hip_backend.core` and
`hip_backend.runtime` (also importable as `import hip_backend.core`). The names are listed
explicitly below so that type checkers and editors see them; a name a layer adds to its
`__all__` later is still reachable at once, through the module `__getattr__`, before it is
added to the list. The layers' names do not collide (a test checks it), so the flat namespace
is unambiguous. The `hip-backend` command line lives in `hip_backend.cli`.
"""

from __future__ import annotations

import sys
from types import ModuleType

import hip_core as core
import hip_ffi as ffi
import hip_runtime as runtime
from hip_backend._version import __version__
from hip_core import (
    ClosedError,
    Device,
    DeviceBuffer,
    DevicePointer,
    DeviceProperties,
    Event,
    Graph,
    GraphExec,
    HipblasError,
    HipCompileError,
    HipError,
    HipInvalidValueError,
    HipLaunchError,
    HipNoDeviceError,
    HipNotReadyError,
    HipOutOfMemoryError,
    Kernel,
    MemoryPool,
    Module,
    PinnedBuffer,
    PoolStats,
    Program,
    Stream,
    capture,
    devices,
    hip_api,
)
from hip_ffi import (
    PLATFORMS,
    FunctionUnavailableError,
    HipFfiError,
    LibraryNotFoundError,
    PlatformUnavailableError,
    describe,
    load,
    requested_platform,
)
from hip_ffi.api import HipApi
from hip_runtime import (
    AsyncLoader,
    Blas,
    Checkpoint,
    ChecksumError,
    DeviceTensor,
    FormatError,
    Gemm,
    HipBackend,
    KernelCache,
    KVCache,
    LoadCancelledError,
    LoadJob,
    LoadReport,
    LoadResult,
    ModelRuntime,
    ScratchArena,
    StagedCopier,
    TensorRecord,
    bfloat16,
    float16,
    float32,
    open_checkpoint,
)

#: The layer packages, bottom to top, under the names hip_backend gives them.
LAYERS: dict[str, ModuleType] = {"ffi": ffi, "core": core, "runtime": runtime}

# `import hip_backend.core` finds the layer itself (the same module object, not a copy).
for _alias, _module in LAYERS.items():
    sys.modules.setdefault(f"{__name__}.{_alias}", _module)


def _layer_names() -> dict[str, ModuleType]:
    """Every public name of every layer (dunders aside) -> the layer that exports it; the
    highest layer wins should two ever export the same name."""
    found: dict[str, ModuleType] = {}
    for module in LAYERS.values():
        for name in getattr(module, "__all__", ()):
            if not name.startswith("__"):
                found[name] = module
    return found


def __getattr__(name: str) -> object:
    # Only reached for names not bound above: a layer's public name added after this list.
    module = _layer_names().get(name)
    if module is None:
        raise AttributeError(f"module 'hip_backend' has no attribute {name!r}")
    return getattr(module, name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_layer_names()))


__all__ = [  # noqa: RUF022 - grouped by layer, as the imports above
    "__version__",
    "LAYERS",
    "core",
    "ffi",
    "runtime",
    # hip_ffi
    "PLATFORMS",
    "FunctionUnavailableError",
    "HipApi",
    "HipFfiError",
    "LibraryNotFoundError",
    "PlatformUnavailableError",
    "describe",
    "load",
    "requested_platform",
    # hip_core
    "ClosedError",
    "Device",
    "DeviceBuffer",
    "DevicePointer",
    "DeviceProperties",
    "Event",
    "Graph",
    "GraphExec",
    "HipCompileError",
    "HipError",
    "HipInvalidValueError",
    "HipLaunchError",
    "HipNoDeviceError",
    "HipNotReadyError",
    "HipOutOfMemoryError",
    "HipblasError",
    "Kernel",
    "MemoryPool",
    "Module",
    "PinnedBuffer",
    "PoolStats",
    "Program",
    "Stream",
    "capture",
    "devices",
    "hip_api",
    # hip_runtime
    "AsyncLoader",
    "Blas",
    "Checkpoint",
    "ChecksumError",
    "DeviceTensor",
    "FormatError",
    "Gemm",
    "HipBackend",
    "KVCache",
    "KernelCache",
    "LoadCancelledError",
    "LoadJob",
    "LoadReport",
    "LoadResult",
    "ModelRuntime",
    "ScratchArena",
    "StagedCopier",
    "TensorRecord",
    "bfloat16",
    "float16",
    "float32",
    "open_checkpoint",
]
# Names a layer exported after this list was written: reachable through __getattr__ above, and
# listed here so that `from hip_backend import *` brings them too.
__all__ += sorted(set(_layer_names()) - set(__all__))
