"""The portable kernel cases (../kernel_cases.py, ../kernels/*.hip) on a real GPU through the
nvidia platform: the same sources and checks as test_cpu_kernels.py runs on the cpu platform in
CI. Run on the H200 with `pytest -m gpu`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import hip_ffi_test_kernel_cases as cases  # registered by conftest.py
import numpy as np
import pytest

import hip_ffi

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def run() -> Iterator[Any]:
    hip = hip_ffi.load("nvidia")
    count = hip.ffi.new("int*")
    assert hip.hipGetDeviceCount(count) == 0 and count[0] > 0, "the gpu tests need a GPU"
    assert hip.hipSetDevice(0) == 0
    yield from cases.runner(hip)


@pytest.mark.parametrize("case", cases.CASES, ids=lambda case: case.__name__)
def test_kernel_case_on_gpu(run: Any, case: Any) -> None:
    seed = np.random.SeedSequence().entropy
    print(f"numpy seed: {seed}")
    case(run, np.random.default_rng(seed))
