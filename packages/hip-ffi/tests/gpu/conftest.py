"""Fixtures of the GPU tests (`pytest -m gpu`: the nvidia platform on real GPUs)."""

from __future__ import annotations

from typing import Any

import pytest

import hip_ffi


@pytest.fixture(scope="module")
def hip() -> Any:
    """The nvidia platform's HipApi; a failure (not a skip) without a GPU: these tests run
    only where one is expected."""
    api = hip_ffi.load("nvidia")
    count = api.ffi.new("int*")
    assert api.hipGetDeviceCount(count) == 0 and count[0] > 0, "the gpu tests need a GPU"
    return api
