"""hip-runtime's device tests run on the cpu platform (CI) and, marked `gpu`, on nvidia (H200).

As in hip-core's tests, the platform fixture is parametrized at session scope, so pytest runs
every test of one platform, then every test of the next, switching hip-core's process-wide
HipApi in between. Kernel programs are compiled once per platform into a private program cache.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import hip_ffi
from hip_core import Device, Module, _hip
from hip_ffi.errors import LibraryNotFoundError
from hip_runtime import kernel_sources

PLATFORMS = [
    pytest.param("cpu", id="cpu"),
    pytest.param("nvidia", id="nvidia", marks=pytest.mark.gpu),
]
ROCM_PACKAGES = "libamdhip64-5 libamd-comgr2 rocm-device-libs libhiprtc-builtins5"


@pytest.fixture(scope="session")
def program_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A private hip-core program cache: every session compiles the sources as they are now."""
    path = tmp_path_factory.mktemp("program-cache")
    saved = {name: os.environ.get(name) for name in ("HIP_CORE_CACHE_DIR", "HIP_CORE_CACHE")}
    os.environ["HIP_CORE_CACHE_DIR"] = str(path)
    os.environ.pop("HIP_CORE_CACHE", None)
    yield path
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="session", params=PLATFORMS)
def platform(request: pytest.FixtureRequest) -> Iterator[str]:
    name: str = request.param
    previous = _hip._api
    _hip._api = hip_ffi.load(name)
    yield name
    _hip._api = previous


@pytest.fixture(scope="session")
def device(platform: str) -> Device:
    return Device(0)


@pytest.fixture(scope="session")
def kernel_module(device: Device, program_cache: Path) -> Callable[[str], Module]:
    """Loads a kernel source (e.g. "norms.hip") on the device, once per platform."""
    loaded: dict[str, Module] = {}

    def load(name: str) -> Module:
        if name not in loaded:
            loaded[name] = kernel_sources.program(name).load(device)
        return loaded[name]

    return load


@pytest.fixture(scope="session")
def amd() -> Any:
    """The amd platform over the real ROCm libraries (Debian's ROCm 5.2 in CI, no device).

    Skipped with the reason where ROCm is not installed, except when HIP_FFI_REQUIRE_ROCM=1
    (set by .ci/run): then that is a failure.
    """
    try:
        return hip_ffi.load("amd")
    except LibraryNotFoundError as error:
        if os.environ.get("HIP_FFI_REQUIRE_ROCM") == "1":
            pytest.fail(f"ROCm is required here: {error}")
        pytest.skip(f"ROCm runtime not installed (apt-get install {ROCM_PACKAGES}): {error}")
