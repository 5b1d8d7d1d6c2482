"""Devices: properties, memory info, synchronization, and the current device of each thread."""

from __future__ import annotations

from typing import Any

import hip_ffi
from hip_core import peer as _peer
from hip_core._checks import integer
from hip_core._current import _thread
from hip_core._hip import hip
from hip_core.errors import check, error_for
from hip_ffi import DeviceProperties
from hip_ffi.constants import DEVICE_ATTRIBUTES, ERROR_CODES


class Device:
    """A HIP device, by ordinal: one object per ordinal, platform and thread, as cuda.core's.

    `Device(0) is Device(0)` within a thread, so the properties are read once and the default
    stream is kept. Objects of different threads compare equal. The platform is part of the
    identity: after `use_platform` switches hip-core to another HipApi, `Device(0)` is that
    platform's device 0, never a Device of the previous one.

    `with device:` makes it the current device of this thread (hipSetDevice) for the block and
    restores the previous one after. Factories create resources on this device.
    """

    __slots__ = ("_api", "_default_stream", "_properties", "ordinal")
    _api: Any
    _default_stream: Stream | None
    _properties: DeviceProperties | None
    ordinal: int

    def __new__(cls, ordinal: int = 0) -> Device:
        api = hip()
        made = _thread.devices
        ordinal = integer(ordinal, "device ordinal")
        device = made.get((api, ordinal))
        if device is None:
            count = Device.count()
            if not 0 <= ordinal < count:
                # hipErrorNoDevice when there is none (HipNoDeviceError), else
                # hipErrorInvalidDevice (HipInvalidValueError); both are ValueErrors.
                raise error_for(
                    ERROR_CODES["hipErrorNoDevice" if count == 0 else "hipErrorInvalidDevice"],
                    "Device",
                    f"no device {ordinal}: this platform has {count} device(s)",
                )
            device = super().__new__(cls)
            device.ordinal = ordinal
            device._api = api
            device._properties = None
            device._default_stream = None
            made[(api, ordinal)] = device
        return device

    @staticmethod
    def count() -> int:
        """Number of visible devices; 0 when the runtime reports none (hipErrorNoDevice)."""
        count, error = hip_ffi.device_count(hip())
        if error and error != "hipErrorNoDevice":
            check(ERROR_CODES.get(error) or int(error), "hipGetDeviceCount")
        return count

    @staticmethod
    def current() -> Device:
        """This thread's current device (device 0 until `with device:` or `make_current`)."""
        return Device(_thread.ordinal)

    def make_current(self) -> None:
        check(self._api.hipSetDevice(self.ordinal), "hipSetDevice")
        _thread.ordinal = self.ordinal

    def __enter__(self) -> Device:
        stack = _thread.stack
        stack.append(_thread.ordinal)
        if stack[-1] != self.ordinal:
            self.make_current()
        return self

    def __exit__(self, *exc: object) -> None:
        previous = _thread.stack.pop()
        if previous != self.ordinal:
            check(self._api.hipSetDevice(previous), "hipSetDevice")
            _thread.ordinal = previous

    def attribute(self, name: str) -> int:
        """hipDeviceGetAttribute by name without its prefix, e.g. "WarpSize"."""
        api = self._api
        value = api.ffi.new("int*")
        check(api.hipDeviceGetAttribute(value, DEVICE_ATTRIBUTES[name], self.ordinal), name)
        return int(value[0])

    @property
    def properties(self) -> DeviceProperties:
        """What the device is (read from the runtime on first use, then kept)."""
        if self._properties is None:
            try:
                self._properties = hip_ffi.device_properties(self._api, self.ordinal)
            except hip_ffi.HipStatusError as error:
                raise error_for(error.code, error.call) from None
        return self._properties

    # Convenience views of the properties.
    @property
    def name(self) -> str:
        return self.properties.name

    @property
    def arch(self) -> str:
        return self.properties.arch

    def mem_info(self) -> tuple[int, int]:
        """(free, total) device memory in bytes."""
        api = self._api
        free, total = api.ffi.new("size_t*"), api.ffi.new("size_t*")
        with self:
            check(api.hipMemGetInfo(free, total), "hipMemGetInfo")
        return int(free[0]), int(total[0])

    def synchronize(self) -> None:
        """Wait for all work on every stream of this device (hipDeviceSynchronize)."""
        stream = self._default_stream
        if stream is None:
            self._synchronize()
        else:  # the wait covers the default stream too: let go of what it keeps
            stream._release_kept_after(self._synchronize)

    def _synchronize(self) -> None:
        # This device's own platform, never the process's current one: a pool or stream
        # collected while another platform is being loaded (tests switch them) must not
        # load one from its finalizer (the loader's lock is held: it would wait forever).
        with self:
            check(self._api.hipDeviceSynchronize(), "hipDeviceSynchronize")

    # Factories: resources are created on this device.
    # (The classes are imported at the end of this module: they import it.)
    def create_stream(self, *, non_blocking: bool = False, priority: int = 0) -> Stream:
        return Stream(self, non_blocking=non_blocking, priority=priority)

    def create_event(self, *, timing: bool = True, interprocess: bool = False) -> Event:
        """An event on this device; `interprocess=True` (with `timing=False`) for one that
        other processes can open (`Event.ipc_handle`)."""
        return Event(self, timing=timing, interprocess=interprocess)

    def allocate(self, size: int) -> DeviceBuffer:
        """`size` bytes of device memory (hipMalloc; synchronous, not stream-ordered)."""
        return DeviceBuffer.allocate(self, size)

    def allocate_pinned(self, size: int) -> PinnedBuffer:
        """`size` bytes of page-locked host memory (hipHostMalloc)."""
        return PinnedBuffer.allocate(size)

    # Peers (hip_core.peer).
    def can_access_peer(self, peer: Device) -> bool:
        """Whether kernels on this device can access `peer`'s memory once peer access is
        enabled (hipDeviceCanAccessPeer); False for the device itself."""
        return _peer.can_access_peer(self, peer)

    def enable_peer_access(self, peer: Device) -> None:
        """Let kernels on this device read and write `peer`'s memory (one way;
        hipDeviceEnablePeerAccess). Idempotent; HipError where the pair cannot be linked."""
        _peer.enable_peer_access(self, peer)

    def disable_peer_access(self, peer: Device) -> None:
        """Undo `enable_peer_access` (hipDeviceDisablePeerAccess); idempotent."""
        _peer.disable_peer_access(self, peer)

    @property
    def default_stream(self) -> Stream:
        """The null stream of this device, one object per Device (not owned: closing it does
        nothing). Host objects handed to copies on it stay referenced until its next `sync()`
        or this device's `synchronize()`."""
        if self._default_stream is None or self._default_stream.closed:  # closed by a user
            self._default_stream = Stream.null(self)
        return self._default_stream

    def __eq__(self, other: object) -> bool:
        # One object per ordinal, platform and thread: identity answers nearly every check an
        # op makes of its operands' devices.
        return other is self or (
            isinstance(other, Device) and other.ordinal == self.ordinal and other._api is self._api
        )

    def __hash__(self) -> int:
        return hash(("Device", self.ordinal))

    def __repr__(self) -> str:
        return f"<Device {self.ordinal}: {self._api.platform}>"


def current_ordinal() -> int:
    """The ordinal of this thread's current device, as `with device:` tracks it (no call)."""
    return _thread.ordinal


def devices() -> list[Device]:
    """Every visible device."""
    return [Device(i) for i in range(Device.count())]


# At the end, not the top: these modules import this one (current_ordinal). Importing them
# here, once, spares each factory call a function-level import (0.3 µs of issue 15's budget).
from hip_core.event import Event  # noqa: E402
from hip_core.memory import DeviceBuffer, PinnedBuffer  # noqa: E402
from hip_core.stream import Stream  # noqa: E402
