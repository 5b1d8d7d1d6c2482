"""The `device=` argument every hip-runtime entry point takes."""

from __future__ import annotations

from hip_core import Device


def as_device(device: Device | int | None) -> Device:
    """A Device from a Device, an ordinal, or None (this thread's current device)."""
    if device is None:
        return Device.current()
    if isinstance(device, int) and not isinstance(device, bool):
        return Device(device)
    if isinstance(device, Device):
        return device
    raise ValueError(f"device must be a Device, an ordinal or None, not {device!r}")
