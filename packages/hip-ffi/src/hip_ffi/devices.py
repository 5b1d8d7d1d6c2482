"""The one way to read a device's facts and the device count, on every platform.

hip_ffi's report and selection, hip_core.Device and hip-backend's `info` all read devices here,
so that a fact is asked of the runtime in one place and spelled once. Each call is synchronous
and touches no stream: it only asks the runtime (hipGetDeviceCount, hipGetDeviceProperties,
hipDeviceGetAttribute, hipDeviceGetPCIBusId).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hip_ffi.constants import DEVICE_ATTRIBUTES, ERROR_NAMES
from hip_ffi.errors import HipStatusError

if TYPE_CHECKING:
    from hip_ffi.api import HipApi

#: hipDeviceGetPCIBusId's buffer: "dddd:bb:dd.f" fits with room to spare.
_PCI_BUS_ID_LENGTH = 64


@dataclass(frozen=True)
class DeviceProperties:
    """What a device is, as every platform can answer it.

    Attributes:
        name: the marketing name ("AMD Instinct MI250X", "NVIDIA H200", the host CPU's name).
        arch: the code-object architecture: gcnArchName cut at the first ":" (so "gfx90a", not
            "gfx90a:sramecc+:xnack-"), "sm_90" on nvidia, the host's architecture on cpu.
        total_memory: device memory, bytes.
        multiprocessors: compute units (amd) / streaming multiprocessors (nvidia) / cores (cpu).
        warp_size: threads per wavefront/warp.
        max_threads_per_block: the most threads one block may have.
        shared_memory_per_block: the most `__shared__` memory one block may use, bytes.
        clock_rate_khz: the peak clock, kHz.
        pci_bus_id: "domain:bus:device.function" as hipDeviceGetPCIBusId writes it.
        platform: the HipApi's platform ("amd", "nvidia" or "cpu").
        early_start: a kernel may be launched to start before the kernel ahead of it on its
            stream has finished, and wait for it inside (CUDA's programmatic dependent launch:
            nvidia devices of compute capability 9.0 and later, CUDA 12.3 drivers and later
            (which capture such launches into graphs); HIP has no such launch, so
            never on amd or cpu). See hip_core's `Kernel.start_early`.
    """

    name: str
    arch: str
    total_memory: int
    multiprocessors: int
    warp_size: int
    max_threads_per_block: int
    shared_memory_per_block: int
    clock_rate_khz: int
    pci_bus_id: str
    platform: str
    early_start: bool = False


def _check(status: int, call: str) -> None:
    if status != 0:
        raise HipStatusError(status, call)


def device_properties(api: HipApi, ordinal: int) -> DeviceProperties:
    """The properties of device `ordinal` of `api`'s platform.

    Raises HipStatusError (with `.code` and `.call`) when the runtime refuses a call, e.g.
    hipErrorInvalidDevice for an ordinal out of range.
    """
    ffi = api.ffi
    props = ffi.new(api.device_prop_type + "*")
    _check(api.hipGetDeviceProperties(props, ordinal), "hipGetDeviceProperties")
    bus_id = ffi.new(f"char[{_PCI_BUS_ID_LENGTH}]")
    status = api.hipDeviceGetPCIBusId(bus_id, _PCI_BUS_ID_LENGTH, ordinal)
    _check(status, "hipDeviceGetPCIBusId")
    value = ffi.new("int*")

    def attribute(name: str) -> int:
        # Attributes rather than struct fields: the struct's layout changed across releases
        # (R0000 vs R0600), the attribute numbering is HIP's on every platform.
        status = api.hipDeviceGetAttribute(value, DEVICE_ATTRIBUTES[name], ordinal)
        _check(status, f"hipDeviceGetAttribute({name})")
        return int(value[0])

    return DeviceProperties(
        name=ffi.string(props.name).decode(errors="replace"),
        arch=ffi.string(props.gcnArchName).decode(errors="replace").split(":")[0],
        total_memory=int(props.totalGlobalMem),
        multiprocessors=attribute("MultiprocessorCount"),
        warp_size=attribute("WarpSize"),
        max_threads_per_block=attribute("MaxThreadsPerBlock"),
        shared_memory_per_block=attribute("MaxSharedMemoryPerBlock"),
        clock_rate_khz=attribute("ClockRate"),
        pci_bus_id=ffi.string(bus_id).decode(errors="replace"),
        platform=api.platform,
        early_start=_early_start(api, attribute),
    )


#: The first CUDA driver that captures programmatic (early-start) launches into graphs as such.
_EARLY_START_DRIVER = 12030


def _early_start(api: HipApi, attribute: Callable[[str], int]) -> bool:
    """`DeviceProperties.early_start`: nvidia, compute capability 9.0 or later, CUDA 12.3's
    driver or later (HIP has no programmatic dependent launch)."""
    if api.platform != "nvidia" or attribute("ComputeCapabilityMajor") < 9:
        return False
    version = api.ffi.new("int*")
    _check(api.hipDriverGetVersion(version), "hipDriverGetVersion")
    return int(version[0]) >= _EARLY_START_DRIVER


def device_count(api: HipApi) -> tuple[int, str]:
    """(count, "") when hipGetDeviceCount succeeds, else (0, the error's name).

    No device is an answer, not a failure: a runtime without a device (or without a driver)
    answers hipErrorNoDevice / hipErrorInsufficientDriver, and the name says which.
    """
    count = api.ffi.new("int*")
    status = api.hipGetDeviceCount(count)
    if status != 0:
        return 0, ERROR_NAMES.get(status, str(status))
    return int(count[0]), ""


__all__ = ["DeviceProperties", "device_count", "device_properties"]
