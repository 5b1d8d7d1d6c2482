"""hip-core: errors, devices, streams, events, memory, programs and typed kernel launches.

    from hip_core import Device, Program

    device = Device(0)
    stream = device.create_stream()
    x = device.allocate(4 * n)
    module = Program(source).load(device)
    module.get_kernel("scale").launch(n // 256, 256, x, 2.0, n, stream=stream)
    stream.sync()

Built on hip-ffi; never imports the layers above it, never imports numpy at import time.
"""

from typing import TYPE_CHECKING

from hip_core._lazy import lazy_exports
from hip_core._version import __version__

if TYPE_CHECKING:  # what type checkers and editors read; at run time, __getattr__ below
    from hip_core._hip import hip as hip_api
    from hip_core._hip import use_platform
    from hip_core._resource import ClosedError, Resource
    from hip_core.collectives import Communicator
    from hip_core.device import Device, devices
    from hip_core.errors import (
        HipblasError,
        HipCompileError,
        HipError,
        HipInvalidValueError,
        HipLaunchError,
        HipNoDeviceError,
        HipNotReadyError,
        HipOutOfMemoryError,
    )
    from hip_core.event import Event
    from hip_core.graph import Graph, GraphExec, capture, capture_in_progress
    from hip_core.ipc import IpcEventHandle, IpcHandle
    from hip_core.kernel import Kernel
    from hip_core.launch_config import LaunchConfig
    from hip_core.memory import DeviceBuffer, PinnedBuffer
    from hip_core.module import Module
    from hip_core.nccl import NcclError, UniqueId, rendezvous_file
    from hip_core.pool import MemoryPool, PoolStats
    from hip_core.program import Program
    from hip_core.signature import DevicePointer
    from hip_core.stream import Stream
    from hip_ffi import DeviceProperties  # the one reading of device facts, hip-ffi's

#: Each public name and the module that defines it: imported on first use (PEP 562), so that
#: `import hip_core` costs a few milliseconds and a compile's modules load with the first one.
_HOMES = {
    "ClosedError": "hip_core._resource",
    "Communicator": "hip_core.collectives",
    "Device": "hip_core.device",
    "DeviceBuffer": "hip_core.memory",
    "DevicePointer": "hip_core.signature",
    "DeviceProperties": "hip_ffi",
    "Event": "hip_core.event",
    "Graph": "hip_core.graph",
    "GraphExec": "hip_core.graph",
    "HipCompileError": "hip_core.errors",
    "HipError": "hip_core.errors",
    "HipInvalidValueError": "hip_core.errors",
    "HipLaunchError": "hip_core.errors",
    "HipNoDeviceError": "hip_core.errors",
    "HipNotReadyError": "hip_core.errors",
    "HipOutOfMemoryError": "hip_core.errors",
    "HipblasError": "hip_core.errors",
    "IpcEventHandle": "hip_core.ipc",
    "IpcHandle": "hip_core.ipc",
    "Kernel": "hip_core.kernel",
    "LaunchConfig": "hip_core.launch_config",
    "MemoryPool": "hip_core.pool",
    "NcclError": "hip_core.nccl",
    "Module": "hip_core.module",
    "PinnedBuffer": "hip_core.memory",
    "PoolStats": "hip_core.pool",
    "Program": "hip_core.program",
    "Resource": "hip_core._resource",
    "Stream": "hip_core.stream",
    "UniqueId": "hip_core.nccl",
    "capture": "hip_core.graph",
    "capture_in_progress": "hip_core.graph",
    "devices": "hip_core.device",
    "rendezvous_file": "hip_core.nccl",
    "use_platform": "hip_core._hip",
}
_lazy_getattr, __dir__ = lazy_exports(__name__, _HOMES)


def __getattr__(name: str) -> object:
    if name == "hip_api":  # published under another name than its module's
        from hip_core._hip import hip

        globals()["hip_api"] = hip
        return hip
    return _lazy_getattr(name)


__all__ = [
    "ClosedError",
    "Communicator",
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
    "IpcEventHandle",
    "IpcHandle",
    "Kernel",
    "LaunchConfig",
    "MemoryPool",
    "Module",
    "NcclError",
    "PinnedBuffer",
    "PoolStats",
    "Program",
    "Resource",
    "Stream",
    "UniqueId",
    "__version__",
    "capture",
    "capture_in_progress",
    "devices",
    "hip_api",
    "rendezvous_file",
    "use_platform",
]
