"""hip-runtime's device tests run on the cpu platform (CI) and, marked `gpu`, on nvidia (H200).

As in hip-core's tests, the platform fixture is parametrized at session scope, so pytest runs
every test of one platform, then every test of the next, switching hip-core's process-wide
HipApi in between. Kernel programs are compiled once per platform into a private program cache.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import ml_dtypes
import numpy as np
import pytest

import hip_ffi
from hip_core import Device, DeviceBuffer, Kernel, Module, _hip
from hip_ffi.errors import LibraryNotFoundError
from hip_runtime import kernel_sources
from hip_runtime.formats import safetensors as safetensors_format

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


# --- kernel numerics harness -----------------------------------------------------------------

GUARD = 64  # poisoned bytes after every output


class Output:
    """A device array poisoned with all bits set (NaN in every float type), followed by a
    guard band that must stay poisoned: a forgotten element or a write past the end shows."""

    def __init__(self, device: Device, shape: Any, dtype: np.dtype[Any]) -> None:
        self.shape, self.dtype = tuple(np.atleast_1d(shape)), dtype
        self.nbytes = int(np.prod(self.shape)) * dtype.itemsize
        self.buffer = device.allocate(self.nbytes + GUARD)
        self.buffer.fill(0xFF)

    def read(self) -> np.ndarray:
        self.buffer.device.synchronize()
        raw = np.empty(self.nbytes + GUARD, np.uint8)
        self.buffer.copy_to(raw)
        assert (raw[self.nbytes :] == 0xFF).all(), "the kernel wrote past the end of its output"
        return raw[: self.nbytes].view(self.dtype).reshape(self.shape)


class KernelHarness:
    """What a kernel test needs: the device, the kernels, fresh random inputs, poisoned outputs
    and comparisons with a float64 reference. (A fixture, because test modules cannot import
    conftest under --import-mode=importlib.)"""

    DTYPES: ClassVar[dict[str, np.dtype[Any]]] = {
        "f32": np.dtype(np.float32),
        "f16": np.dtype(np.float16),
        "bf16": np.dtype(ml_dtypes.bfloat16),
    }
    #: (rtol, atol) per output type: twice the unit roundoff of f16 (2^-11) and bf16 (2^-8);
    #: for f32, the few ulps of expf/erff/tanhf and of f32 accumulation over long rows.
    TOLERANCE: ClassVar[dict[str, tuple[float, float]]] = {
        "f32": (1e-5, 1e-6),
        "f16": (1e-3, 1e-5),
        "bf16": (8e-3, 1e-5),
    }

    def __init__(self, device: Device, load: Callable[[str], Module]) -> None:
        self.device = device
        self._load = load
        seed = secrets.randbits(64)
        print(f"random seed {seed}")  # shown with a failure
        self.rng = np.random.default_rng(seed)

    def kernel(self, source: str, name: str) -> Kernel:
        return self._load(source).get_kernel(name)

    def random(self, shape: Any, dtype: str, scale: float = 1.0, shift: float = 0.0) -> np.ndarray:
        """Normal numbers stored as `dtype` (so the reference sees what the kernel sees)."""
        values = self.rng.standard_normal(shape) * scale + shift
        return np.asarray(values, dtype=self.DTYPES[dtype])

    def upload(self, array: np.ndarray) -> DeviceBuffer:
        data = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        buffer = self.device.allocate(max(data.size, 1))
        buffer.copy_from(data)
        return buffer

    def output(self, shape: Any, dtype: str) -> Output:
        return Output(self.device, shape, self.DTYPES[dtype])

    def assert_close(
        self, got: np.ndarray, expected: np.ndarray, dtype: str, magnitude: Any = 0.0
    ) -> None:
        """|got - expected| <= rtol * max(|expected|, magnitude) + atol, elementwise.

        `magnitude`: the size of the terms that make up each result where it exceeds the result
        (a sum that cancels), since f32 rounding errors scale with the terms."""
        assert got.dtype == self.DTYPES[dtype]
        rtol, atol = self.TOLERANCE[dtype]
        actual = got.astype(np.float64)
        bound = rtol * np.maximum(np.abs(expected), magnitude) + atol
        bad = ~(np.abs(actual - expected) <= bound)  # NaN is bad too
        if bad.any():
            where = np.unravel_index(np.argmax(bad), bad.shape)
            raise AssertionError(
                f"{np.count_nonzero(bad)} of {bad.size} elements out of tolerance; first at "
                f"{tuple(map(int, where))}: got {actual[where]!r}, expected {expected[where]!r}, "
                f"allowed error {bound[where]!r} (rtol {rtol}, atol {atol})"
            )

    @staticmethod
    def assert_bits_equal(got: np.ndarray, expected: np.ndarray) -> None:
        """Bit for bit, except that any NaN matches any NaN (payloads differ by hardware)."""
        assert got.dtype == expected.dtype
        with np.errstate(invalid="ignore"):  # converting a signalling NaN raises "invalid"
            nan = np.isnan(expected.astype(np.float64))
            np.testing.assert_array_equal(np.isnan(got.astype(np.float64)), nan)
        bits = np.dtype(f"u{got.dtype.itemsize}")
        np.testing.assert_array_equal(got.view(bits)[~nan], expected.view(bits)[~nan])


@pytest.fixture
def harness(device: Device, kernel_module: Callable[[str], Module]) -> KernelHarness:
    return KernelHarness(device, kernel_module)


# --- checkpoints ---------------------------------------------------------------------------------


def write_safetensors(
    path: Path,
    tensors: dict[str, np.ndarray],
    metadata: dict[str, str] | None = None,
    header_override: Callable[[dict[str, Any]], None] | None = None,
) -> Path:
    """`save_safetensors`, with a hook that may edit the header before it is written (corrupt
    files). Returns the path."""
    header = safetensors_format.safetensors_header(tensors, metadata)
    if header_override is not None:
        header_override(header)
    safetensors_format.save_safetensors(path, tensors, header=header)
    return path


@pytest.fixture
def checkpoint_tensors() -> dict[str, np.ndarray]:
    """Tensors of every loadable dtype and awkward shapes (scalar, empty, odd sizes), with
    fresh random values."""
    rng = np.random.default_rng(secrets.randbits(32))
    normal = rng.standard_normal
    return {
        "embed.weight": normal((7, 4097)).astype(np.float32),
        "layers.0.norm.weight": normal(1000).astype(ml_dtypes.bfloat16),
        "layers.0.proj.weight": normal((3, 1000)).astype(np.float16),
        "layers.0.proj.bias": normal(3).astype(np.float64),
        "scale": np.array(normal(), dtype=np.float32),
        "empty": np.zeros((2, 0, 3), dtype=np.float32),
        "positions": rng.integers(-(2**40), 2**40, size=33, dtype=np.int64),
        "mask": rng.integers(0, 2, size=(5, 5)).astype(bool),
        "tokens": rng.integers(0, 255, size=17, dtype=np.uint8),
        "fp8": normal(64).astype(ml_dtypes.float8_e4m3fn),
    }


@pytest.fixture
def allocations(monkeypatch: pytest.MonkeyPatch) -> list[DeviceBuffer]:
    """Every buffer `Device.allocate` hands out during the test (to prove they were freed)."""
    made: list[DeviceBuffer] = []
    original = Device.allocate

    def allocate(self: Device, size: int) -> DeviceBuffer:
        buffer = original(self, size)
        made.append(buffer)
        return buffer

    monkeypatch.setattr(Device, "allocate", allocate)
    return made


@pytest.fixture
def save_safetensors() -> Callable[..., Path]:
    """`write_safetensors` as a fixture (test modules cannot import conftest)."""
    return write_safetensors
