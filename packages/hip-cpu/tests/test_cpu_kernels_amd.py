"""The portable test kernels (kernels/*.hip) compile with the real ROCm 5.2 hiprtc for gfx90a.

So each kernel that the cpu platform runs in CI (test_cpu_kernels.py) is known to compile for
AMD too; and each code object holds exactly the kernels that the cpu platform's hiprtc found.
CI installs ROCm (no AMD device is needed to compile); elsewhere the conftest's `amd` fixture
skips with the reason, unless HIP_FFI_REQUIRE_ROCM=1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import hip_ffi_test_kernel_cases as cases  # registered by conftest.py
import pytest

import hip_ffi
from hip_cpu import elf

EM_AMDGPU = 224


FILES = cases.kernel_files()


@pytest.fixture(scope="module")
def amd_runner(amd: Any) -> Any:
    runner = cases.Runner.__new__(cases.Runner)  # no device here: only the compiler is used
    runner.hip, runner.ffi, runner.arch = amd, amd.ffi, "gfx90a"
    return runner


@pytest.fixture(scope="module")
def cpu_runner() -> Any:
    return cases.Runner(hip_ffi.load("cpu"))


def kernel_names(image: bytes, prefix: str = "", suffix: str = "") -> set[str]:
    names = elf.symbols(image)
    return {
        n[len(prefix) : len(n) - len(suffix)]
        for n in names
        if n.startswith(prefix) and n.endswith(suffix)
    }


def test_there_are_test_kernels() -> None:
    assert len(FILES) >= 7


@pytest.mark.parametrize("path", FILES, ids=lambda path: path.name)
def test_kernel_file_compiles_for_gfx90a(amd_runner: Any, cpu_runner: Any, path: Path) -> None:
    result, code, log = amd_runner.compile(path.read_bytes(), path.name)
    assert result == 0, f"ROCm hiprtc could not compile {path.name} for gfx90a:\n{log}"
    assert elf.is_elf64(code[:64]) and elf.machine(code) == EM_AMDGPU
    amd_kernels = kernel_names(code, suffix=".kd")  # every AMD kernel has a descriptor symbol
    result, cpu_code, log = cpu_runner.compile(path.read_bytes(), path.name)
    assert result == 0, log
    assert amd_kernels == kernel_names(cpu_code, prefix="__hipcpu_launch_") != set()
