"""A platform with no device: asking for one is HipNoDeviceError, through every layer.

ROCm 5.2's libraries are installed in CI with no AMD device, so the amd platform answers
hipErrorNoDevice. `Device(0)` and `HipBackend()` raised a plain ValueError before; they now
raise HipNoDeviceError, which is also a ValueError so that old `except ValueError` still works.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import hip_ffi
from hip_core import Device, HipError, HipNoDeviceError, use_platform


def _backend() -> Any:
    from hip_runtime import HipBackend

    return HipBackend()


@pytest.mark.parametrize(
    "make",
    [lambda: Device(0), lambda: Device(3), _backend],
    ids=["Device(0)", "Device(3)", "HipBackend"],
)
def test_no_device_raises_hip_no_device_error(make: Callable[[], Any]) -> None:
    try:
        hip_ffi.load("amd")
    except hip_ffi.LibraryNotFoundError as error:
        pytest.skip(f"no ROCm runtime here to answer hipErrorNoDevice: {error}")
    with use_platform("amd"):
        assert Device.count() == 0
        with pytest.raises(HipNoDeviceError, match="this platform has 0 device") as caught:
            make()
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, HipError)
    assert caught.value.name == "hipErrorNoDevice"
