"""The amd platform against the real ROCm runtime and hiprtc (Debian's ROCm 5.2 in CI).

There is no AMD device on these machines: the runtime loads, answers hipErrorNoDevice, and
hiprtc still compiles real code objects for gfx90a and gfx1030.
"""

from __future__ import annotations

import ctypes
import struct
from typing import Any

import pytest

from hip_ffi import constants, surface
from hip_ffi.errors import FunctionUnavailableError
from hip_ffi.platforms.amd import loader as amd_loader
from hip_ffi.rtc import compile_source

EM_AMDGPU = 224  # ELF e_machine of AMD GPU code objects
KERNEL = rb"""
extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""


def _release(amd: Any) -> tuple[int, int, int]:
    return amd_loader.split_version(amd.runtime_version)


def test_every_function_for_this_release_resolves(amd: Any) -> None:
    # Only hipBLAS and MIOpen may be missing (Debian ships neither for ROCm 5.2), and the
    # cooperative launch, which nothing older can stand in for; functions newer
    # than the release are served by shims over older calls, and are listed with the release
    # they need.
    optional = set(surface.HIPBLAS) | set(surface.MIOPEN) | {"hipModuleLaunchCooperativeKernel"}
    assert set(amd.unavailable()) <= optional
    for name in set(surface.ALL) - optional:
        assert amd.has(name), name
    native = ctypes.CDLL(amd.libraries["hip runtime"])
    for name, release in amd_loader._INTRODUCED.items():
        present = hasattr(native, name)
        needed = tuple(int(p) for p in release.removeprefix("ROCm ").split("."))
        assert present == (_release(amd)[:2] >= needed), (name, release)


def test_missing_hipblas_fails_clearly_when_used(amd: Any) -> None:
    if "hipblas" in amd.libraries:
        pytest.skip(f"hipBLAS is installed here ({amd.libraries['hipblas']})")
    with pytest.raises(FunctionUnavailableError, match=r"hipblasCreate.*no hipBLAS"):
        amd.hipblasCreate(amd.ffi.new("hipblasHandle_t*"))


def test_runtime_version_is_read_from_the_library(amd: Any) -> None:
    native = ctypes.CDLL(amd.libraries["hip runtime"])
    version = ctypes.c_int()
    assert native.hipRuntimeGetVersion(ctypes.byref(version)) == 0
    assert amd.runtime_version == version.value
    major, minor, patch = _release(amd)
    assert major >= 5
    assert amd.platform_version == f"ROCm {major}.{minor}.{patch}"
    assert amd.device_prop_type == (
        "hipDeviceProp_tR0600" if major >= 6 else "hipDeviceProp_tR0000"
    )


def test_error_names_and_strings_match_the_library(amd: Any) -> None:
    native = ctypes.CDLL(amd.libraries["hip runtime"])
    native.hipGetErrorName.restype = native.hipGetErrorString.restype = ctypes.c_char_p
    unknown = native.hipGetErrorName(987654)
    for code, name in constants.ERROR_NAMES.items():
        library_name = native.hipGetErrorName(code)
        if library_name == unknown and name != "hipErrorUnknown":
            continue  # a code newer than this release (e.g. 911, 912 before ROCm 6)
        assert library_name.decode() == name, code
        assert amd.ffi.string(amd.hipGetErrorName(code)) == library_name
        assert amd.ffi.string(amd.hipGetErrorString(code)) == native.hipGetErrorString(code)


def test_device_count_answers_no_device(amd: Any) -> None:
    count = amd.ffi.new("int*", 12345)
    status = amd.hipGetDeviceCount(count)
    assert status == constants.ERROR_CODES["hipErrorNoDevice"]
    assert count[0] == 0
    assert amd.ffi.string(amd.hipGetErrorName(status)) == b"hipErrorNoDevice"


def test_detection_passes_over_amd_with_the_no_device_reason(
    amd: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hip_ffi import selection
    from hip_ffi.errors import PlatformUnavailableError

    monkeypatch.delenv("HIP_PLATFORM", raising=False)
    monkeypatch.setattr(selection, "DETECTION_ORDER", ("amd",))
    with pytest.raises(PlatformUnavailableError, match=r"amd: ROCm .* loaded but sees no device"):
        selection.select()


@pytest.mark.parametrize("arch", ["gfx90a", "gfx1030"])
def test_hiprtc_compiles_an_amdgpu_code_object(amd: Any, arch: str) -> None:
    result = compile_source(amd, KERNEL, name="axpy.hip", options=[f"--offload-arch={arch}", "-O3"])
    assert result.ok, result.log
    code = result.code
    assert code[:4] == b"\x7fELF"
    (machine,) = struct.unpack_from("<H", code, 18)
    assert machine == EM_AMDGPU
    assert b"axpy" in code  # the kernel's symbol


def test_hiprtc_compile_error_comes_back_in_the_log(amd: Any) -> None:
    broken = 'extern "C" __global__ void k() { undeclared(); }'
    result = compile_source(amd, broken, options=["--offload-arch=gfx90a"])
    assert result.status == constants.HIPRTC_RESULTS["HIPRTC_ERROR_COMPILATION"]
    assert result.step == "hiprtcCompileProgram"
    assert "undeclared" in result.log and "error" in result.log
    assert result.code == b""


def test_hiprtc_version(amd: Any) -> None:
    major, minor = amd.ffi.new("int*"), amd.ffi.new("int*")
    assert amd.hiprtcVersion(major, minor) == 0
    assert major[0] >= 5


def test_fast_entry_points_fall_back_to_the_surface(amd: Any) -> None:
    # amd has no separate native launch: the hot path gets the surface function itself.
    assert amd.fast("hipDrvLaunchKernelEx") is amd.hipDrvLaunchKernelEx
    assert amd.fast("hipMalloc") is amd.hipMalloc
