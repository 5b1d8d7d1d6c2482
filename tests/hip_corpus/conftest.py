"""The HIP corpus: realistic kernels in the style of public HIP samples, run unmodified.

`kernels/*.hip` are the sources; a `// name_expressions: a<1> b<2>` line in a source names the
template instantiations to compile. Every source runs on the cpu platform (CI) and, marked
`gpu`, on nvidia (the H200), with results checked against numpy; test_corpus_amd.py compiles
them with the real ROCm hiprtc. Programs are compiled into a private cache once per platform.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hip_core import Device, DeviceBuffer, Module, Program, use_platform

KERNELS = Path(__file__).resolve().parent / "kernels"


def upload(device: Device, array: np.ndarray) -> DeviceBuffer:
    data = np.ascontiguousarray(array)
    buffer = device.allocate(max(data.nbytes, 1))
    buffer.copy_from(data.reshape(-1).view(np.uint8))
    return buffer


def download(device: Device, buffer: DeviceBuffer, dtype: Any, shape: Any) -> np.ndarray:
    device.synchronize()
    out = np.empty(shape, dtype)
    buffer.copy_to(out.reshape(-1).view(np.uint8))
    return out


# The test modules import the two helpers above as `hip_corpus_io`: pytest's importlib mode
# puts no test folder on sys.path, and conftest.py is imported before any test module.
sys.modules["hip_corpus_io"] = sys.modules[__name__]


def corpus_program(name: str, **given: Any) -> Program:
    """The Program of kernels/`name` with the name expressions its header lists."""
    text = (KERNELS / name).read_text()
    listed = re.search(r"^// name_expressions:(.*)$", text, re.M)
    expressions = listed.group(1).split() if listed else []
    return Program(text, name=name, name_expressions=expressions, **given)


@pytest.fixture(scope="session")
def corpus_programs() -> Callable[..., Program]:
    """corpus_program, for test modules (which cannot import this file)."""
    return corpus_program


@pytest.fixture(scope="module")
def corpus_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A private hip-core program cache: every module compiles the corpus as it is now."""
    path = tmp_path_factory.mktemp("corpus-programs")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HIP_CORE_CACHE_DIR", str(path))
        patch.delenv("HIP_CORE_CACHE", raising=False)
        yield path


@pytest.fixture(
    scope="module",
    params=[pytest.param("cpu"), pytest.param("nvidia", marks=pytest.mark.gpu)],
)
def device(request: pytest.FixtureRequest, corpus_cache: Path) -> Iterator[Device]:
    with use_platform(request.param):
        yield Device(0)


@pytest.fixture(scope="module")
def load(device: Device) -> Callable[..., Module]:
    """load("saxpy.hip", options=..., types=...) -> the Module on the device, once each."""
    loaded: dict[str, Module] = {}

    def load_one(name: str, **given: Any) -> Module:
        if name not in loaded:
            loaded[name] = corpus_program(name, **given).load(device)
        return loaded[name]

    return load_one
