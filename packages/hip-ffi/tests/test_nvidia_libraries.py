"""Where the nvidia platform looks for the CUDA libraries, and how it fails when there are none
(plus one gpu-marked check that NVIDIA's PyPI wheels alone are enough)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hip_ffi import selection
from hip_ffi.errors import LibraryNotFoundError
from hip_ffi.platforms.nvidia import libraries as nvidia_libraries
from hip_ffi.platforms.nvidia import loader as nvidia_loader

ENV_OVERRIDES = ("HIP_FFI_CUDART_PATH", "HIP_FFI_LIBCUDA_PATH", "HIP_FFI_NVRTC_PATH")


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*ENV_OVERRIDES, "HIP_FFI_CUBLAS_PATH", "CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(name, raising=False)


def make_wheel_tree(site: Path) -> None:
    """A site-packages folder holding NVIDIA's CUDA 13 and CUDA 12 wheel layouts."""
    for folder, library in (
        ("nvidia/cu13/lib", "libcudart.so.13"),
        ("nvidia/cuda_runtime/lib", "libcudart.so.12"),
        ("nvidia/cublas/lib", "libcublas.so.12"),
    ):
        (site / folder).mkdir(parents=True)
        (site / folder / library).write_bytes(b"")
    (site / "nvidia" / "not_a_package").write_text("")


def test_wheel_folders_are_found_under_every_site_packages(tmp_path: Path) -> None:
    make_wheel_tree(tmp_path / "site")
    found = nvidia_libraries.wheel_dirs([str(tmp_path / "elsewhere"), str(tmp_path / "site")])
    assert found == [
        str(tmp_path / "site/nvidia/cu13/lib"),
        str(tmp_path / "site/nvidia/cublas/lib"),
        str(tmp_path / "site/nvidia/cuda_runtime/lib"),
    ]


def test_mapped_libraries_are_read_from_the_process_maps(tmp_path: Path) -> None:
    maps = tmp_path / "maps"
    maps.write_text(
        "7f00-7f01 r-xp 00000000 08:01 1 /opt/venv/nvidia/cu13/lib/libcudart.so.13\n"
        "7f01-7f02 r--p 00000000 08:01 1 /opt/venv/nvidia/cu13/lib/libcudart.so.13\n"
        "7f02-7f03 r-xp 00000000 08:01 2 /usr/lib/libc.so.6\n"
        "7f03-7f04 rw-p 00000000 00:00 0 [heap]\n"
    )
    found = nvidia_libraries.mapped_dirs(("libcudart.so.13",), maps=str(maps))
    assert found == ["/opt/venv/nvidia/cu13/lib"]
    assert nvidia_libraries.mapped_dirs(("x",), maps=str(tmp_path / "missing")) == []


def test_search_order_mapped_then_cuda_home_then_system_then_wheels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_wheel_tree(tmp_path / "site")
    monkeypatch.setattr(nvidia_libraries, "mapped_dirs", lambda names: ["/already/mapped"])
    monkeypatch.setattr(nvidia_libraries, "SYSTEM_CUDA", (str(tmp_path / "sys"),))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "home"))
    (tmp_path / "link").symlink_to(tmp_path / "home")
    monkeypatch.setenv("CUDA_PATH", str(tmp_path / "link"))  # the same folders again: kept once
    dirs = nvidia_libraries.toolkit_dirs(("libcudart.so.13",), [str(tmp_path / "site")])
    assert dirs[:3] == ["/already/mapped", str(tmp_path / "home/lib64"), str(tmp_path / "home/lib")]
    assert dirs.index(str(tmp_path / "sys")) < dirs.index(str(tmp_path / "site/nvidia/cu13/lib"))
    assert len({os.path.realpath(d) for d in dirs}) == len(dirs)


def test_cudart_candidates_prefer_found_files_then_the_linker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_wheel_tree(tmp_path / "site")
    monkeypatch.setattr("sys.path", [str(tmp_path / "site")])
    monkeypatch.setattr(nvidia_libraries, "SYSTEM_CUDA", ())
    monkeypatch.setattr(nvidia_libraries, "mapped_dirs", lambda names: [])
    candidates = nvidia_libraries.cudart_spec().candidates()
    assert candidates == [
        str(tmp_path / "site/nvidia/cu13/lib/libcudart.so.13"),
        str(tmp_path / "site/nvidia/cuda_runtime/lib/libcudart.so.12"),
        *nvidia_libraries.CUDART_NAMES,
    ]


def test_override_is_the_only_candidate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HIP_FFI_NVRTC_PATH", "/opt/cuda/libnvrtc.so.13")
    monkeypatch.setenv("HIP_FFI_LIBCUDA_PATH", "/drivers/libcuda.so.1")
    assert nvidia_libraries.nvrtc_spec().candidates() == ["/opt/cuda/libnvrtc.so.13"]
    assert nvidia_libraries.libcuda_spec().candidates() == ["/drivers/libcuda.so.1"]


def test_the_driver_is_looked_up_through_the_linker_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "libcuda.so.1").write_bytes(b"")
    monkeypatch.setattr(nvidia_libraries, "DRIVER_DIRS", (str(tmp_path),))
    assert nvidia_libraries.libcuda_spec().candidates() == [
        "libcuda.so.1",
        "libcuda.so",
        str(tmp_path / "libcuda.so.1"),
    ]


def test_load_without_cuda_lists_every_path_tried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.path", [str(tmp_path)])
    monkeypatch.setattr(nvidia_libraries, "SYSTEM_CUDA", (str(tmp_path),))
    monkeypatch.setattr(nvidia_libraries, "CUDART_NAMES", ("libcudart.so.99", "libcudart-x.so"))
    (tmp_path / "libcudart.so.99").write_bytes(b"not an ELF file")
    with pytest.raises(LibraryNotFoundError) as caught:
        nvidia_loader.load()
    message = str(caught.value)
    assert "could not load the CUDA runtime (libcudart)" in message
    assert [path for path, _ in caught.value.tried] == [
        str(tmp_path / "libcudart.so.99"),
        "libcudart.so.99",
        "libcudart-x.so",
    ]
    assert "HIP_FFI_CUDART_PATH" in message


def test_explicit_nvidia_platform_reports_the_missing_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    forced = tmp_path / "libcudart.so.13"
    monkeypatch.setenv("HIP_FFI_CUDART_PATH", str(forced))
    monkeypatch.setattr(selection, "_loaded", {})
    with pytest.raises(LibraryNotFoundError, match=str(forced)):
        selection.select("nvidia")


def test_cuda_headers_are_found_beside_the_library_then_under_cuda_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(nvidia_libraries, "SYSTEM_CUDA_ROOT", str(tmp_path / "none"))
    wheel = tmp_path / "nvidia/cu13"
    (wheel / "lib").mkdir(parents=True)
    (wheel / "include").mkdir()
    library = wheel / "lib/libnvrtc.so.13"
    library.write_bytes(b"")
    assert nvidia_libraries.cuda_include_dir(str(library)) is None
    (tmp_path / "home/include").mkdir(parents=True)
    (tmp_path / "home/include/cuda_fp16.h").write_text("")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "home"))
    assert nvidia_libraries.cuda_include_dir(str(library)) == str(tmp_path / "home/include")
    (wheel / "include/cuda_fp16.h").write_text("")
    assert nvidia_libraries.cuda_include_dir(str(library)) == str(wheel / "include")


HALF_SOURCE = r"""
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#include <hip/hip_bf16.h>
extern "C" __global__ void narrow(const float* x, __half* h, __hip_bfloat16* b) {
    h[threadIdx.x] = __float2half(x[threadIdx.x]);
    b[threadIdx.x] = __float2bfloat16(x[threadIdx.x]);
}
"""

WHEELS_ONLY = r"""
import json, sys
from hip_ffi.platforms.nvidia import libraries, loader
libraries.SYSTEM_CUDA, libraries.SYSTEM_CUDA_ROOT = (), "/nonexistent"  # hide the system CUDA
libraries.mapped_dirs = lambda names: []
api = loader.load()
ffi, program = api.ffi, api.ffi.new("hiprtcProgram*")
source = sys.argv[1].encode()
assert api.hiprtcCreateProgram(program, source, b"k.hip", 0, ffi.NULL, ffi.NULL) == 0
status = api.hiprtcCompileProgram(program[0], 0, ffi.NULL)
size = ffi.new("size_t*")
api.hiprtcGetProgramLogSize(program[0], size)
log = ffi.new("char[]", max(size[0], 1))
api.hiprtcGetProgramLog(program[0], log)
blas = api.hipblasCreate(ffi.new("hipblasHandle_t*"))
result = {"libraries": api.libraries, "compile": status, "blas": blas}
print(json.dumps({**result, "log": ffi.string(log).decode(errors="replace")}))
"""


@pytest.mark.gpu
def test_nvidia_wheels_alone_are_enough() -> None:
    """On a GPU machine with NVIDIA's wheels (the H200's torch): no system CUDA needed."""
    wheels = [d for d in nvidia_libraries.wheel_dirs() if any(Path(d).glob("libcudart.so.*"))]
    if not wheels:
        pytest.skip("no NVIDIA CUDA runtime wheel (nvidia/*/lib) on sys.path here")
    environment = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH")}
    command = [sys.executable, "-c", WHEELS_ONLY, HALF_SOURCE]
    out = subprocess.run(command, capture_output=True, text=True, env=environment, check=True)
    result = json.loads(out.stdout.splitlines()[-1])
    for role in ("cuda runtime", "nvrtc", "cublas"):
        assert "/nvidia/" in result["libraries"][role], result["libraries"]
    assert result["compile"] == 0, result["log"]  # hip_fp16/hip_bf16 via the wheel's headers
    assert result["blas"] == 0
