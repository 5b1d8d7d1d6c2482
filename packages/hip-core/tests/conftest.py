"""Every hip-core test runs on the cpu platform (CI) and, marked `gpu`, on nvidia (the H200).

The `device` fixture is parametrized by platform at session scope, so pytest runs all tests of
one platform, then all of the next; hip-core's process-wide HipApi is switched in between.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from hip_core import Device, hip_api, use_platform

PLATFORMS = [
    pytest.param("cpu", id="cpu"),
    pytest.param("nvidia", id="nvidia", marks=pytest.mark.gpu),
]


@pytest.fixture(scope="session", params=PLATFORMS)
def platform(request: pytest.FixtureRequest) -> Iterator[str]:
    with use_platform(request.param):
        yield request.param


@pytest.fixture
def device(platform: str) -> Device:
    return Device(0)


@pytest.fixture
def api(platform: str) -> Any:
    return hip_api()


@pytest.fixture
def cache_dir(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A private program cache for the test."""
    path = tmp_path / "program-cache"
    monkeypatch.setenv("HIP_CORE_CACHE_DIR", str(path))
    monkeypatch.delenv("HIP_CORE_CACHE", raising=False)
    return path
