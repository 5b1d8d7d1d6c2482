"""hip-runtime's device tests run on the cpu platform (CI) and, marked `gpu`, on nvidia (H200).

As in hip-core's tests, the platform fixture is parametrized at session scope, so pytest runs
every test of one platform, then every test of the next, switching hip-core's process-wide
HipApi in between. Kernel programs are compiled once per platform into a private program cache.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import hip_ffi
from hip_core import Device, DeviceBuffer, Kernel, Module, use_platform
from hip_ffi.errors import LibraryNotFoundError
from hip_runtime import testing
from hip_runtime.libraries import kernel_sources
from hip_runtime.loading.formats import safetensors as safetensors_format

PLATFORMS = [
    pytest.param("cpu", id="cpu"),
    pytest.param("nvidia", id="nvidia", marks=pytest.mark.gpu),
]
ROCM_PACKAGES = "libamdhip64-5 libamd-comgr2 rocm-device-libs libhiprtc-builtins5"


@pytest.fixture(scope="session")
def program_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A private hip-core program cache: every session compiles the sources as they are now.
    pytest-xdist's workers share one (their base temp's parent is the run's): a kernel one of
    them compiled is not compiled again by another (entries are written atomically)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        path = tmp_path_factory.getbasetemp().parent / "program-cache"
        path.mkdir(exist_ok=True)
    else:
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
    with use_platform(request.param):
        yield request.param


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
    """What a kernel test needs: the device, the kernels, fresh random inputs and poisoned
    outputs (the references and comparisons are hip_runtime.testing's). A fixture, because test
    modules cannot import conftest under --import-mode=importlib."""

    def __init__(self, device: Device, load: Callable[[str], Module]) -> None:
        self.device = device
        self._load = load
        seed = secrets.randbits(64)
        print(f"random seed {seed}")  # shown with a failure
        self.rng = np.random.default_rng(seed)

    def kernel(self, source: str, name: str) -> Kernel:
        return self._load(source).get_kernel(name)

    def random(self, shape: Any, dtype: str, scale: float = 1.0, shift: float = 0.0) -> np.ndarray:
        """testing.random from this harness's seeded generator."""
        return testing.random(self.rng, shape, dtype, scale=scale, shift=shift)

    def upload(self, array: np.ndarray) -> DeviceBuffer:
        data = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        buffer = self.device.allocate(max(data.size, 1))
        buffer.copy_from(data)
        return buffer

    def output(self, shape: Any, dtype: str) -> Output:
        return Output(self.device, shape, testing.DTYPES[dtype])


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


def write_shards(folder: Path, weight_map: dict[str, str] | None = None) -> dict[str, np.ndarray]:
    """A checkpoint of two safetensors shards and its `model.safetensors.index.json` in
    `folder` (the index lists `weight_map`, by default where each tensor is); returns the
    tensors by name. Shapes are odd and larger than 4 KiB, so small staging chunks split them."""
    rng = np.random.default_rng()
    shards = {
        "model-00001-of-00002.safetensors": {"a": rng.standard_normal((33, 65)).astype(np.float16)},
        "model-00002-of-00002.safetensors": {
            "b": rng.standard_normal(4097).astype(np.float32),
            "c": np.arange(10, dtype=np.int64),
        },
    }
    for file, tensors in shards.items():
        write_safetensors(folder / file, tensors)
    if weight_map is None:
        weight_map = {name: file for file, tensors in shards.items() for name in tensors}
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map})
    )
    return {name: array for tensors in shards.values() for name, array in tensors.items()}


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


@pytest.fixture
def sharded_checkpoint() -> Callable[..., dict[str, np.ndarray]]:
    """`write_shards` as a fixture."""
    return write_shards


class Layouts:
    """Device tensors holding a given host array in a random layout, for op tests under
    hypothesis: C-contiguous, permuted (a transpose of a contiguous upload), stepped (a slice
    with steps of a larger upload, at an offset), reversed (negative strides), or broadcast
    (one axis of stride 0; the host array is changed to match, so compare against the array
    returned). Every op that takes strided inputs is tested through these."""

    KINDS = ("contiguous", "permuted", "stepped", "reversed", "broadcast")

    @staticmethod
    def make(data: Any, backend: Any, array: np.ndarray) -> tuple[Any, np.ndarray]:
        """(tensor, array): `data` is hypothesis's `st.data()` object; `backend` a HipBackend
        whose stream orders the upload. The tensor's values equal the returned array's."""
        from hypothesis import strategies as st

        ndim = array.ndim
        kind = data.draw(st.sampled_from(Layouts.KINDS if ndim else ("contiguous",)))
        if kind == "permuted":
            order = tuple(data.draw(st.permutations(range(ndim))))
            inverse = tuple(int(i) for i in np.argsort(order))
            base = backend.from_numpy(array.transpose(order).copy(order="C"))
            return base.permute(*inverse), array
        if kind == "stepped":
            steps = [data.draw(st.integers(1, 3)) for _ in range(ndim)]
            starts = [data.draw(st.integers(0, 2)) for _ in range(ndim)]
            axes = list(zip(starts, array.shape, steps, strict=True))
            big = np.zeros([s + d * k for s, d, k in axes], array.dtype)
            key = tuple(slice(s, s + d * k, k) for s, d, k in axes)
            big[key] = array
            return backend.from_numpy(big)[key], array
        if kind == "reversed":
            flips = [data.draw(st.booleans()) for _ in range(ndim)]
            key = tuple(slice(None, None, -1) if f else slice(None) for f in flips)
            return backend.from_numpy(array[key].copy(order="C"))[key], array
        if kind == "broadcast":
            axis = data.draw(st.integers(0, ndim - 1))
            first = np.take(array, [0] if array.shape[axis] else [], axis=axis)
            array = np.broadcast_to(first, array.shape).copy(order="C")
            return backend.from_numpy(first).expand(*array.shape), array
        return backend.from_numpy(array.copy(order="C")), array


@pytest.fixture(scope="session")
def layouts() -> type[Layouts]:
    """The Layouts helper (test modules cannot import conftest)."""
    return Layouts


@pytest.fixture(scope="session", autouse=True)
def ctrl_c_raises() -> None:
    """Ctrl-C raises KeyboardInterrupt in this process and in the interpreters it starts, as in
    a terminal. A shell starts a background job (`cmd &`, nohup) with SIGINT ignored, and
    Python then installs no handler, so the interrupt tests would see nothing; a handler set
    here is reset to the default on exec, so each child installs Python's own."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def recorded_launches(monkeypatch: pytest.MonkeyPatch, prefix: str) -> list[str]:
    """The names (starting with `prefix`) of the kernels launched from now on by
    `Kernel.launch` (they still run); a plan's prepared launches are not seen."""
    seen: list[str] = []
    launch = Kernel.launch

    def record(self: Kernel, *args: Any, **kwargs: Any) -> None:
        if self.name.startswith(prefix):
            seen.append(self.name)
        launch(self, *args, **kwargs)

    monkeypatch.setattr(Kernel, "launch", record)
    return seen


@pytest.fixture
def gemv_launches(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the gemv kernels launched from now on (they still run)."""
    return recorded_launches(monkeypatch, "gemv_")


@pytest.fixture
def kernel_launches(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of every kernel launched from now on by `Kernel.launch`."""
    return recorded_launches(monkeypatch, "")
