"""The one way to read devices (`hip_ffi.device_properties`, `hip_ffi.device_count`,
`hip_ffi.describe`) and the `PlatformTraits`, on the cpu platform loaded for real."""

from __future__ import annotations

import os
from typing import Any

import pytest

import hip_ffi
from hip_cpu import toolchain
from hip_ffi import DeviceProperties, HipStatusError, PlatformTraits, constants


@pytest.fixture(scope="module")
def cpu() -> Any:
    return hip_ffi.load("cpu")


def test_cpu_device_count_and_properties_agree_with_the_runtime(cpu: Any) -> None:
    assert hip_ffi.device_count(cpu) == (1, "")
    props = hip_ffi.device_properties(cpu, 0)
    assert isinstance(props, DeviceProperties)
    raw = cpu.ffi.new(cpu.device_prop_type + "*")
    assert cpu.hipGetDeviceProperties(raw, 0) == 0
    assert props.name == cpu.ffi.string(raw.name).decode()
    assert props.arch == os.uname().machine
    assert props.total_memory == raw.totalGlobalMem
    assert props.multiprocessors == raw.multiProcessorCount
    assert props.warp_size == raw.warpSize == toolchain.warp_size()
    assert props.max_threads_per_block == raw.maxThreadsPerBlock
    assert props.shared_memory_per_block == raw.sharedMemPerBlock
    assert props.clock_rate_khz > 0
    assert props.pci_bus_id.count(":") == 2
    assert props.platform == "cpu"
    with pytest.raises(AttributeError):
        props.name = "changed"  # type: ignore[misc]


def test_an_ordinal_out_of_range_raises_with_code_and_call(cpu: Any) -> None:
    with pytest.raises(HipStatusError, match="hipErrorInvalidDevice") as caught:
        hip_ffi.device_properties(cpu, 1)
    assert caught.value.code == constants.ERROR_CODES["hipErrorInvalidDevice"]
    assert caught.value.call == "hipGetDeviceProperties"
    assert isinstance(caught.value, hip_ffi.HipFfiError)


def test_describe_lists_the_devices(cpu: Any) -> None:
    report = hip_ffi.describe("cpu")
    props = hip_ffi.device_properties(cpu, 0)
    assert report.startswith(f"platform: cpu ({cpu.platform_version})")
    assert "devices: 1" in report and f"[0] {props.name} | {props.arch}" in report


def test_traits(cpu: Any) -> None:
    # kDLCPU; device memory is host memory, read after a synchronize
    assert cpu.traits == PlatformTraits(
        1,
        0,
        cuda_array_interface=False,
        host_memory_is_device_memory=True,
        blas_chooses_on_host=False,
    )
    assert cpu.traits is hip_ffi.load("cpu").traits
