"""The portable kernel cases (../kernel_cases.py, ../kernels/*.hip) on a real GPU through the
nvidia platform: the same sources and checks as test_cpu_kernels.py runs on the cpu platform in
CI. Run on the H200 with `pytest -m gpu`.
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

pytestmark = pytest.mark.gpu


def _load_cases() -> Any:
    name = "hip_ffi_test_kernel_cases"
    if name not in sys.modules:  # by path: pytest's importlib mode puts no test dir on sys.path
        path = Path(__file__).resolve().parent.parent / "kernel_cases.py"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        sys.modules[name] = module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules[name]


cases = _load_cases()


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
