"""Fixtures shared by hip-cpu's tests (the cpu platform; amd where a test compiles the same
source for both)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

import pytest

import hip_ffi
from hip_ffi.errors import LibraryNotFoundError


def _register_kernel_cases() -> None:
    """Make kernel_cases.py importable as `hip_ffi_test_kernel_cases`: pytest's importlib mode
    puts no test folder on sys.path, and conftest.py is imported before any test module."""
    name = "hip_ffi_test_kernel_cases"
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("kernel_cases.py"))
    assert spec is not None and spec.loader is not None
    sys.modules[name] = module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


_register_kernel_cases()

ROCM_PACKAGES = "libamdhip64-5 libamd-comgr2 rocm-device-libs libhiprtc-builtins5"


@pytest.fixture(scope="session")
def amd() -> Any:
    """The amd platform over the real ROCm libraries (Debian's ROCm 5.2 in CI, no device).

    Where ROCm is not installed the tests that need it are skipped with the reason shown,
    except when HIP_FFI_REQUIRE_ROCM=1 (set by .ci/run): then that is a failure.
    """
    try:
        return hip_ffi.load("amd")
    except LibraryNotFoundError as error:
        if os.environ.get("HIP_FFI_REQUIRE_ROCM") == "1":
            pytest.fail(f"ROCm is required here: {error}")
        pytest.skip(f"ROCm runtime not installed (apt-get install {ROCM_PACKAGES}): {error}")
