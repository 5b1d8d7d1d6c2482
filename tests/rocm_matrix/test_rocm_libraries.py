"""hipBLAS, MIOpen and RCCL of one ROCm release, loaded for real inside its root.

rocBLAS, rocSOLVER and RCCL are in the root without their GPU code (tools/deb_stream.py: the
`.hip_fatbin` section reads as zeros): everything the host runs is there, and with no device
the runtime never reads device code. So these libraries load, bind and answer exactly as on a
machine without an AMD GPU; what a handle does on a device stays unproven here.
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

import pytest


def _address(function: Any, api: Any) -> int:
    return int(api.ffi.cast("uintptr_t", function))


def _exported(path: str, name: str) -> int | None:
    """dlsym's address of `name` in the (already loaded) library at `path`, None if absent."""
    try:
        return ctypes.cast(getattr(ctypes.CDLL(path), name), ctypes.c_void_p).value
    except AttributeError:
        return None


def test_hipblas_loads_with_the_release_s_gemm_entry_points(api: Any, release: Any) -> None:
    """hip-ffi binds gemm-ex by hipBLAS's major (wrappers.bind_gemm): the plain names on
    hipBLAS 3 (ROCm 7), the `_v2` exports on hipBLAS 2 (ROCm 6: its plain names keep the old
    hipblasDatatype_t ABI), a translating wrapper on hipBLAS 0 and 1 (ROCm 5)."""
    from hip_ffi.platforms.amd.wrappers import hipblas_major

    path = api.libraries["hipblas"]
    assert path.startswith(str(release.lib)), path
    major = hipblas_major(path, release.version[0])
    assert major in {5: (0, 1), 6: (2,)}.get(release.version[0], (3,)), (path, major)
    for name in ("hipblasGemmEx", "hipblasGemmStridedBatchedEx"):
        bound = getattr(api, name)
        if major >= 3:
            assert _address(bound, api) == _exported(path, name), name
        elif major == 2:
            assert _exported(path, name + "_v2") not in (None, _exported(path, name)), name
            assert _address(bound, api) == _exported(path, name + "_v2"), name
        else:  # a Python function translating hipDataType to hipblasDatatype_t
            assert _exported(path, name + "_v2") is None, name
            assert not isinstance(bound, api.ffi.CData) and callable(bound), name


def test_a_hipblas_handle_needs_a_device(api: Any) -> None:
    """hipblasCreate runs rocBLAS's handle constructor, whose first call, hipGetDevice, answers
    hipErrorNoDevice (AMD_LOG_LEVEL=3 shows it): rocBLAS reports an internal error and
    hipBLAS passes it on, on every release. No handle is made, so none is destroyed."""
    from hip_ffi import constants

    handle = api.ffi.new("hipblasHandle_t*")
    status = api.hipblasCreate(handle)
    assert status == constants.HIPBLAS_STATUSES["HIPBLAS_STATUS_INTERNAL_ERROR"], status
    assert handle[0] == api.ffi.NULL


def test_miopen_loads_and_makes_descriptors_without_a_device(api: Any, release: Any) -> None:
    """MIOpen's descriptors are host objects: made, set, read back and destroyed through the
    DNN surface hip-ffi binds. Its version is read by miopenGetVersion (not in the surface)."""
    from hip_ffi import dnn_constants as dc

    release.skip_unless_packaged("MIOpen")
    ffi, ok = api.ffi, dc.MIOPEN_STATUSES["miopenStatusSuccess"]
    path = api.libraries["miopen"]
    assert path.startswith(str(release.lib)), path
    version = [ctypes.c_size_t() for _ in range(3)]
    assert ctypes.CDLL(path).miopenGetVersion(*map(ctypes.byref, version)) == ok
    major, minor, _patch = (part.value for part in version)
    # MIOpen 3.4 came with ROCm 6.4, 3.5 with ROCm 7.0 to 7.2.
    assert (major, minor) == {(6, 4): (3, 4)}.get(release.version, (3, 5)), version

    tensor = ffi.new("miopenTensorDescriptor_t*")
    assert api.miopenCreateTensorDescriptor(tensor) == ok
    dims = ffi.new("int[4]", [2, 3, 4, 5])
    assert api.miopenSetTensorDescriptor(tensor[0], dc.MIOPEN_FLOAT, 4, dims, ffi.NULL) == ok
    kind, got, strides, count = (
        ffi.new("int*"),
        ffi.new("int[4]"),
        ffi.new("int[4]"),
        ffi.new("int*"),
    )
    assert api.miopenGetTensorDescriptorSize(tensor[0], count) == ok and count[0] == 4
    assert api.miopenGetTensorDescriptor(tensor[0], kind, got, strides) == ok
    assert (kind[0], list(got), list(strides)) == (dc.MIOPEN_FLOAT, [2, 3, 4, 5], [60, 20, 5, 1])
    assert api.miopenDestroyTensorDescriptor(tensor[0]) == ok

    conv = ffi.new("miopenConvolutionDescriptor_t*")
    assert api.miopenCreateConvolutionDescriptor(conv) == ok
    one = ffi.new("int[2]", [1, 1])
    mode = dc.MIOPEN_CONVOLUTION
    assert api.miopenInitConvolutionNdDescriptor(conv[0], 2, one, one, one, mode) == ok
    assert api.miopenSetConvolutionGroupCount(conv[0], 3) == ok
    groups = ffi.new("int*")
    assert api.miopenGetConvolutionGroupCount(conv[0], groups) == ok and groups[0] == 3
    assert api.miopenDestroyConvolutionDescriptor(conv[0]) == ok

    bad = dc.MIOPEN_STATUSES["miopenStatusBadParm"]
    assert ffi.string(api.miopenGetErrorString(bad)) == b"miopenStatusBadParm"
    handle = ffi.new("miopenHandle_t*")  # a handle needs a device: MIOpen says "No device"
    assert api.miopenCreate(handle) == dc.MIOPEN_STATUSES["miopenStatusUnknownError"]


def _mapped(stem: str) -> set[str]:
    """The files of this process's mappings whose name starts with `stem` (what was loaded)."""
    lines = Path("/proc/self/maps").read_text().splitlines()
    return {line.split()[-1] for line in lines if Path(line.split()[-1]).name.startswith(stem)}


def test_rccl_loads_through_hip_ffi_and_reads_its_version(api: Any, release: Any) -> None:
    """hip-ffi's collectives (surface.COLLECTIVES) open librccl at their first call, by the
    soname rule (librccl.so.N, newest major first; no override is set here): it must be the
    root's, export every collective entry point, and read its version with no device."""
    from hip_ffi import surface
    from hip_ffi.collective_constants import unpack_version

    release.skip_unless_packaged("RCCL")
    version = api.ffi.new("int*")
    assert api.ncclGetVersion(version) == 0  # ncclSuccess
    # RCCL numbers itself as the NCCL it follows: 2.13.4 in RCCL 5.4.3, 2.27.7 in 7.2.4.
    assert unpack_version(version[0])[0] == 2, version[0]
    (path,) = _mapped("librccl.so")
    assert path.startswith(str(release.lib)), path
    missing = [name for name in surface.COLLECTIVES if _exported(path, name) is None]
    assert not missing, missing
    assert api.ffi.string(api.ncclGetErrorString(0)) == b"no error"


def test_a_release_without_rccl_says_so_at_the_first_call(api: Any, release: Any) -> None:
    """Where the release has no RCCL, hip-ffi loads all the same and the first nccl* call
    raises, naming what it tried and the variable that picks a library."""
    from hip_ffi.errors import FunctionUnavailableError

    if "RCCL" not in release.not_checked:
        pytest.skip("this release has RCCL: the test above loads it")
    with pytest.raises(FunctionUnavailableError, match=r"no RCCL library.*HIP_FFI_RCCL_PATH"):
        api.ncclGetVersion(api.ffi.new("int*"))
    assert not _mapped("librccl.so")
