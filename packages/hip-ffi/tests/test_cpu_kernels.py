"""The portable kernel cases (kernel_cases.py, kernels/*.hip) on the cpu platform.

The same cases run on the H200 through the nvidia platform (gpu/test_kernels_gpu.py), and
test_cpu_kernels_amd.py compiles the same files with ROCm's hiprtc for gfx90a.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import hip_ffi


def _load_cases() -> Any:
    name = "hip_ffi_test_kernel_cases"
    if name not in sys.modules:  # by path: pytest's importlib mode puts no test dir on sys.path
        spec = importlib.util.spec_from_file_location(
            name, Path(__file__).with_name("kernel_cases.py")
        )
        assert spec is not None and spec.loader is not None
        sys.modules[name] = module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules[name]


cases = _load_cases()


@pytest.fixture(scope="module")
def run() -> Iterator[Any]:
    yield from cases.runner(hip_ffi.load("cpu"))


@pytest.mark.parametrize("case", cases.CASES, ids=lambda case: case.__name__)
def test_kernel_case_on_cpu(run: Any, case: Any) -> None:
    seed = np.random.SeedSequence().entropy
    print(f"numpy seed: {seed}")  # shown with a failure, to replay it
    case(run, np.random.default_rng(seed))
