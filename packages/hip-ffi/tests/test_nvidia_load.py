"""The whole nvidia platform loaded over a fake CUDA: one shared library, built here with the C
compiler, that exports every function cdef/cuda.h declares and answers like a machine whose
CUDA 13 sees no GPU. This checks symbol names, the binding of the whole surface and the
translated codes, without a GPU."""

from __future__ import annotations

import re
import shutil
import subprocess
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

import hip_ffi
from hip_ffi import constants, surface
from hip_ffi.api import HipApi, PlatformTraits, Unavailable
from hip_ffi.errors import FunctionUnavailableError, LibraryNotFoundError
from hip_ffi.platforms.nvidia import loader as nvidia_loader

ENV = ("HIP_FFI_CUDART_PATH", "HIP_FFI_LIBCUDA_PATH", "HIP_FFI_NVRTC_PATH", "HIP_FFI_CUBLAS_PATH",
       "HIP_FFI_CUDNN_PATH")  # fmt: skip
#: What the fake answers: the status of every function not named in SPECIAL, by prefix, longest
#: first (CUBLAS_STATUS_NOT_INITIALIZED, cudaErrorNoDevice, NVRTC_ERROR_COMPILATION,
#: CUDA_ERROR_NO_DEVICE).
STATUS_BY_PREFIX = (("cublas", 1), ("cudnn", 1001), ("cuda", 100), ("nvrtc", 6), ("cu", 100))
SPECIAL = {
    "cudaRuntimeGetVersion": (
        "int cudaRuntimeGetVersion(int* v) {"
        ' const char* s = getenv("FAKE_CUDART_VERSION"); *v = s ? atoi(s) : 13000; return 0; }'
    ),
    "cudaDriverGetVersion": "int cudaDriverGetVersion(int* v) { *v = 13000; return 0; }",
    "cudaGetLastError": "int cudaGetLastError(void) { return 0; }",
    "cudaPeekAtLastError": "int cudaPeekAtLastError(void) { return 0; }",
    "cuModuleLoadData": "int cuModuleLoadData() { return 201; }",  # no current context
    "nvrtcVersion": "int nvrtcVersion(int* a, int* b) { *a = 13; *b = 0; return 0; }",
    "cudnnGetVersion": "size_t cudnnGetVersion(void) { return 92801; }",
}


def _fake_source() -> str:
    cdef = "".join(
        (resources.files("hip_ffi") / "cdef" / f).read_text() for f in ("cuda.h", "cudnn.h")
    )
    lines = ["#include <stdlib.h>"]
    declaration = re.compile(r"^((?:const\s+)?\w+\s*\**)\s*\b(\w+)\s*\(", flags=re.MULTILINE)
    for returns, name in declaration.findall(cdef):
        if name in SPECIAL:
            lines.append(SPECIAL[name])
        elif "char" in returns:  # the error-string functions
            lines.append(f'const char* {name}() {{ return "fake"; }}')
        else:
            status = next(code for prefix, code in STATUS_BY_PREFIX if name.startswith(prefix))
            lines.append(f"int {name}() {{ return {status}; }}")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def fake_cuda(tmp_path_factory: pytest.TempPathFactory) -> Path:
    compiler = next(
        (shutil.which(c) for c in ("cc", "gcc", "clang", "g++") if shutil.which(c)), None
    )
    if compiler is None:
        pytest.skip("no C compiler to build the fake CUDA library")
    folder = tmp_path_factory.mktemp("fake_cuda")
    source, library = folder / "fake_cuda.c", folder / "libfakecuda.so"
    source.write_text(_fake_source())
    command = [compiler, "-x", "c", "-shared", "-fPIC", "-w", str(source), "-o", str(library)]
    subprocess.run(command, check=True, capture_output=True)
    return library


@pytest.fixture
def api(fake_cuda: Path, monkeypatch: pytest.MonkeyPatch) -> HipApi:
    for name in ENV:
        monkeypatch.setenv(name, str(fake_cuda))
    return nvidia_loader.load()


def test_every_surface_function_is_bound(api: HipApi, fake_cuda: Path) -> None:
    assert api.platform == "nvidia"
    assert api.platform_version == "CUDA 13.0 (driver 13.0)"
    assert api.runtime_version == 13000
    assert api.device_prop_type == "hipDeviceProp_tR0600"
    assert api.unavailable() == {}
    assert set(api.libraries) == {"cuda runtime", "cuda driver", "nvrtc", "cublas", "cudnn"}
    assert set(api.libraries.values()) == {str(fake_cuda)}
    assert all(callable(getattr(api, name)) for name in surface.ALL)


def test_traits_and_the_device_count(api: HipApi) -> None:
    assert api.traits == PlatformTraits(
        dlpack_device_type=2,  # kDLCUDA
        default_stream_handle=1,  # CUDA's legacy default stream
        cuda_array_interface=True,
        host_memory_is_device_memory=False,
        blas_chooses_on_host=True,  # cuBLAS
    )
    assert hip_ffi.device_count(api) == (0, "hipErrorNoDevice")


def test_codes_come_back_in_hip_numbering(api: HipApi) -> None:
    ffi = api.ffi
    count = ffi.new("int*")
    assert api.hipGetDeviceCount(count) == constants.ERROR_CODES["hipErrorNoDevice"]
    assert ffi.string(api.hipGetErrorName(100)) == b"hipErrorNoDevice"
    device_ptr = ffi.cast("void*", 4096)
    assert api.hipMemsetD8(device_ptr, 7, 16) == constants.ERROR_CODES["hipErrorNoDevice"]
    blas = constants.HIPBLAS_STATUSES["HIPBLAS_STATUS_NOT_INITIALIZED"]
    assert api.hipblasCreate(ffi.new("hipblasHandle_t*")) == blas
    major, minor = ffi.new("int*"), ffi.new("int*")
    assert api.hiprtcVersion(major, minor) == 0 and (major[0], minor[0]) == (13, 0)


def test_driver_errors_reach_hip_get_last_error(api: HipApi) -> None:
    ffi = api.ffi
    api.hipGetLastError()
    # cuModuleLoadData answers "no context"; making one current fails (no device): no retry.
    status = api.hipModuleLoadData(ffi.new("hipModule_t*"), b"\0")
    assert status == constants.ERROR_CODES["hipErrorInvalidContext"]
    assert api.hipPeekAtLastError() == status
    assert api.hipGetLastError() == status
    assert api.hipGetLastError() == 0


def test_missing_cublas_makes_only_hipblas_unavailable(
    fake_cuda: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ENV:
        monkeypatch.setenv(name, str(fake_cuda))
    monkeypatch.setenv("HIP_FFI_CUBLAS_PATH", str(tmp_path / "libcublas.so.13"))
    api = nvidia_loader.load()
    missing: dict[str, Any] = api.unavailable()
    assert set(missing) == set(surface.HIPBLAS)
    reason = missing["hipblasGemmEx"]
    assert str(tmp_path / "libcublas.so.13") in reason and "HIP_FFI_CUBLAS_PATH" in reason
    assert isinstance(api.hipblasCreate, Unavailable) and not api.has("hipblasCreate")
    with pytest.raises(FunctionUnavailableError, match="no cuBLAS library"):
        api.hipblasCreate(api.ffi.new("hipblasHandle_t*"))
    assert "cublas" not in api.libraries and api.has("hipMalloc")


def test_cuda_11_is_refused_with_the_reason(
    fake_cuda: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ENV:
        monkeypatch.setenv(name, str(fake_cuda))
    monkeypatch.setenv("FAKE_CUDART_VERSION", "11080")
    with pytest.raises(LibraryNotFoundError, match=r"CUDA 11\.8 runtime; hip_ffi needs CUDA >= 12"):
        nvidia_loader.load()
