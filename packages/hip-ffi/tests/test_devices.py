"""The one way to read devices (`hip_ffi.device_properties`, `hip_ffi.device_count`) and each
platform's `PlatformTraits`: amd over the real ROCm libraries (no device there). nvidia's traits
are checked where its tests load it (test_nvidia_load.py), the cpu platform's in hip-cpu
(test_cpu_device_facts.py)."""

from __future__ import annotations

from typing import Any

import pytest

import hip_ffi
from hip_ffi import HipStatusError, PlatformTraits


class _FakeApi:
    """A runtime of `platform` naming its device `name` of architecture `arch`, whose every
    device attribute is `value` (and its driver `driver`), and which records the attributes
    asked."""

    device_prop_type = "hipDeviceProp_tR0600"

    def __init__(
        self, platform: str, value: int, arch: bytes = b"sm_90", name: bytes = b"a GPU",
        driver: int = 0,
    ) -> None:  # fmt: skip
        from hip_ffi._ffi import ffi

        self.ffi, self.platform, self.value = ffi, platform, value
        self.arch, self.name, self.driver = arch, name, driver
        self.asked: list[int] = []

    def hipGetDeviceProperties(self, props: Any, ordinal: int) -> int:
        props.gcnArchName = self.arch
        props.name = self.name
        return 0

    def hipDeviceGetPCIBusId(self, out: Any, length: int, ordinal: int) -> int:
        self.ffi.memmove(out, b"0000:c1:00.0\0", 13)
        return 0

    def hipDeviceGetAttribute(self, value: Any, attribute: int, ordinal: int) -> int:
        self.asked.append(attribute)
        value[0] = self.value
        return 0

    def hipDriverGetVersion(self, version: Any) -> int:
        version[0] = self.driver
        return 0


def test_arch_is_cut_at_the_first_colon() -> None:
    # a runtime answering an AMD-style gcnArchName with target features
    api = _FakeApi("amd", 64, arch=b"gfx90a:sramecc+:xnack-", name=b"AMD Instinct MI250X")
    props = hip_ffi.device_properties(api, 0)  # type: ignore[arg-type]
    assert (props.arch, props.name, props.pci_bus_id) == (
        "gfx90a",
        "AMD Instinct MI250X",
        "0000:c1:00.0",
    )
    assert props.warp_size == 64


@pytest.mark.parametrize(
    ("platform", "major", "driver", "expected"),
    [("nvidia", 9, 12030, True), ("nvidia", 10, 13000, True), ("nvidia", 9, 12020, False),
     ("nvidia", 8, 13000, False), ("amd", 9, 70200, False), ("cpu", 9, 0, False)],
)  # fmt: skip
def test_early_start_is_nvidia_from_compute_capability_9_and_cuda_12_3(
    platform: str, major: int, driver: int, expected: bool
) -> None:
    from hip_ffi.constants import DEVICE_ATTRIBUTES

    api = _FakeApi(platform, major, driver=driver)
    props = hip_ffi.device_properties(api, 0)  # type: ignore[arg-type]
    assert props.early_start is expected
    # HIP has no programmatic dependent launch: other platforms are not even asked.
    asked_major = DEVICE_ATTRIBUTES["ComputeCapabilityMajor"] in api.asked
    assert asked_major is (platform == "nvidia")


def test_amd_without_a_device_counts_none_and_says_why(amd: Any) -> None:
    assert hip_ffi.device_count(amd) == (0, "hipErrorNoDevice")
    with pytest.raises(HipStatusError) as caught:
        hip_ffi.device_properties(amd, 0)
    assert caught.value.call == "hipGetDeviceProperties"
    assert caught.value.code != 0


@pytest.mark.parametrize(
    ("platform", "expected"),
    [
        # kDLROCM; ROCm's default stream is 0
        (
            "amd",
            PlatformTraits(
                10,
                0,
                cuda_array_interface=False,
                host_memory_is_device_memory=False,
                blas_chooses_on_host=True,
            ),
        ),
    ],
)
def test_traits(platform: str, expected: PlatformTraits, request: pytest.FixtureRequest) -> None:
    api = request.getfixturevalue(platform)  # the amd fixture skips where ROCm is missing
    assert api.traits == expected
    assert api.traits is hip_ffi.load(platform).traits
