"""The portable kernel cases (kernel_cases.py, kernels/*.hip) on the cpu platform.

The same cases run on the H200 through the nvidia platform (gpu/test_kernels_gpu.py), and
test_cpu_kernels_amd.py compiles the same files with ROCm's hiprtc for gfx90a.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import hip_ffi_test_kernel_cases as cases  # registered by conftest.py
import numpy as np
import pytest

import hip_ffi


@pytest.fixture(scope="module")
def run() -> Iterator[Any]:
    yield from cases.runner(hip_ffi.load("cpu"))


@pytest.mark.parametrize("case", cases.CASES, ids=lambda case: case.__name__)
def test_kernel_case_on_cpu(run: Any, case: Any) -> None:
    seed = np.random.SeedSequence().entropy
    print(f"numpy seed: {seed}")  # shown with a failure, to replay it
    case(run, np.random.default_rng(seed))
