"""Devices: properties, memory info, synchronization, and the current device of each thread."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hip_core._hip import hip
from hip_core.errors import check
from hip_ffi.constants import DEVICE_ATTRIBUTES, ERROR_CODES

if TYPE_CHECKING:
    from hip_core.event import Event
    from hip_core.memory import DeviceBuffer, PinnedBuffer
    from hip_core.stream import Stream


@dataclass(frozen=True)
class DeviceProperties:
    """What a device is. Sizes in bytes, clock in kHz."""

    name: str
    arch: str  # gfx90a / sm_90 / the host CPU's architecture on the cpu platform
    total_memory: int
    multiprocessors: int
    warp_size: int
    max_threads_per_block: int
    shared_memory_per_block: int
    clock_rate_khz: int
    pci_bus_id: str
    platform: str


_NO_DEVICE = ERROR_CODES["hipErrorNoDevice"]
_current = threading.local()  # .ordinal: this thread's current device; .stack: `with` nesting


class Device:
    """A HIP device, by ordinal. Cheap to create; compares equal by ordinal.

    `with device:` makes it the current device of this thread (hipSetDevice) for the block and
    restores the previous one after. Factories create resources on this device.
    """

    __slots__ = ("_properties", "ordinal")

    def __init__(self, ordinal: int = 0) -> None:
        count = Device.count()
        if not 0 <= ordinal < count:
            raise ValueError(f"no device {ordinal}: this platform has {count} device(s)")
        self.ordinal = ordinal
        self._properties: DeviceProperties | None = None

    @staticmethod
    def count() -> int:
        """Number of visible devices; 0 when the runtime reports none."""
        api = hip()
        count = api.ffi.new("int*")
        status = api.hipGetDeviceCount(count)
        if status == _NO_DEVICE:
            return 0
        check(status, "hipGetDeviceCount")
        return int(count[0])

    @staticmethod
    def current() -> Device:
        """This thread's current device (device 0 until `with device:` or `make_current`)."""
        return Device(getattr(_current, "ordinal", 0))

    def make_current(self) -> None:
        check(hip().hipSetDevice(self.ordinal), "hipSetDevice")
        _current.ordinal = self.ordinal

    def __enter__(self) -> Device:
        stack = _current.__dict__.setdefault("stack", [])
        stack.append(getattr(_current, "ordinal", 0))
        if stack[-1] != self.ordinal:
            self.make_current()
        return self

    def __exit__(self, *exc: object) -> None:
        previous = _current.stack.pop()
        if previous != self.ordinal:
            check(hip().hipSetDevice(previous), "hipSetDevice")
            _current.ordinal = previous

    def attribute(self, name: str) -> int:
        """hipDeviceGetAttribute by name without its prefix, e.g. "WarpSize"."""
        api = hip()
        value = api.ffi.new("int*")
        check(api.hipDeviceGetAttribute(value, DEVICE_ATTRIBUTES[name], self.ordinal), name)
        return int(value[0])

    @property
    def properties(self) -> DeviceProperties:
        if self._properties is None:
            self._properties = self._read_properties()
        return self._properties

    def _read_properties(self) -> DeviceProperties:
        api = hip()
        ffi = api.ffi
        props = ffi.new(api.device_prop_type + "*")
        check(api.hipGetDeviceProperties(props, self.ordinal), "hipGetDeviceProperties")
        bus_id = ffi.new("char[64]")
        check(api.hipDeviceGetPCIBusId(bus_id, 64, self.ordinal), "hipDeviceGetPCIBusId")
        return DeviceProperties(
            name=ffi.string(props.name).decode(errors="replace"),
            arch=ffi.string(props.gcnArchName).decode(errors="replace").split(":")[0],
            total_memory=int(props.totalGlobalMem),
            multiprocessors=self.attribute("MultiprocessorCount"),
            warp_size=self.attribute("WarpSize"),
            max_threads_per_block=self.attribute("MaxThreadsPerBlock"),
            shared_memory_per_block=self.attribute("MaxSharedMemoryPerBlock"),
            clock_rate_khz=self.attribute("ClockRate"),
            pci_bus_id=ffi.string(bus_id).decode(),
            platform=api.platform,
        )

    # Convenience views of the properties.
    @property
    def name(self) -> str:
        return self.properties.name

    @property
    def arch(self) -> str:
        return self.properties.arch

    def mem_info(self) -> tuple[int, int]:
        """(free, total) device memory in bytes."""
        api = hip()
        free, total = api.ffi.new("size_t*"), api.ffi.new("size_t*")
        with self:
            check(api.hipMemGetInfo(free, total), "hipMemGetInfo")
        return int(free[0]), int(total[0])

    def synchronize(self) -> None:
        """Wait for all work on every stream of this device (hipDeviceSynchronize)."""
        with self:
            check(hip().hipDeviceSynchronize(), "hipDeviceSynchronize")

    # Factories: resources are created on this device.
    def create_stream(self, *, non_blocking: bool = False, priority: int = 0) -> Stream:
        from hip_core.stream import Stream

        return Stream(self, non_blocking=non_blocking, priority=priority)

    def create_event(self, *, timing: bool = True) -> Event:
        from hip_core.event import Event

        return Event(self, timing=timing)

    def allocate(self, size: int) -> DeviceBuffer:
        """`size` bytes of device memory (hipMalloc; synchronous, not stream-ordered)."""
        from hip_core.memory import DeviceBuffer

        return DeviceBuffer.allocate(self, size)

    def allocate_pinned(self, size: int) -> PinnedBuffer:
        """`size` bytes of page-locked host memory (hipHostMalloc)."""
        from hip_core.memory import PinnedBuffer

        return PinnedBuffer.allocate(size)

    @property
    def default_stream(self) -> Stream:
        """The null stream of this device (not owned: closing it does nothing)."""
        from hip_core.stream import Stream

        return Stream.null(self)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Device) and other.ordinal == self.ordinal

    def __hash__(self) -> int:
        return hash(("Device", self.ordinal))

    def __repr__(self) -> str:
        return f"<Device {self.ordinal}: {hip().platform}>"


def devices() -> list[Device]:
    """Every visible device."""
    return [Device(i) for i in range(Device.count())]
