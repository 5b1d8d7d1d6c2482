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

from hip_core._hip import hip as hip_api
from hip_core._hip import use_platform
from hip_core._resource import ClosedError, Resource
from hip_core._version import __version__
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
from hip_core.graph import Graph, GraphExec, capture
from hip_core.kernel import Kernel
from hip_core.memory import DeviceBuffer, PinnedBuffer
from hip_core.module import Module
from hip_core.pool import MemoryPool, PoolStats
from hip_core.program import Program
from hip_core.signature import DevicePointer
from hip_core.stream import Stream
from hip_ffi import DeviceProperties  # the one reading of device facts, hip-ffi's

__all__ = [
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
    "Resource",
    "Stream",
    "__version__",
    "capture",
    "devices",
    "hip_api",
    "use_platform",
]
