"""Fixtures shared by hip-ffi's tests."""

from __future__ import annotations

import os
from typing import Any

import pytest

import hip_ffi
from hip_ffi.errors import LibraryNotFoundError

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
