"""LaunchConfig: one checked, immutable grid/block/shared memory/stream, taken by every launch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hip_core import ClosedError, Device, Kernel, LaunchConfig, Module, Program, Stream

SOURCE = r"""
extern "C" __global__ void axpy(float a, const float* __restrict__ x, float* y, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        y[i] = a * x[i] + y[i];
    }
}

extern "C" __global__ void geometry(int* out) {
    extern __shared__ int scratch[];
    if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0 && threadIdx.y == 0) {
        scratch[0] = 1;
        out[0] = gridDim.x; out[1] = gridDim.y; out[2] = gridDim.z;
        out[3] = blockDim.x; out[4] = blockDim.y; out[5] = blockDim.z;
        out[6] = scratch[0];
    }
}
"""


@pytest.fixture
def module(device: Device, cache_dir: Path) -> Module:
    return Program(SOURCE, name="launch_config.hip").load(device)


def test_dimensions_are_normalised_to_three_ints() -> None:
    config = LaunchConfig(np.int64(4), [2, 3], shared_mem=np.uint32(256))
    assert config.grid == (4, 1, 1) and config.block == (2, 3, 1)
    assert all(type(d) is int for d in (*config.grid, *config.block, config.shared_mem))
    assert config.shared_mem == 256 and config.stream is None
    assert config.threads_per_block == 6


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"grid": 0}, ValueError, "grid dimensions"),
        ({"grid": 2**31}, ValueError, "grid dimensions"),
        ({"grid": 4.0}, TypeError, "grid must be"),
        ({"grid": True}, TypeError, "grid must be"),
        ({"grid": (1, 1, 1, 1)}, TypeError, "grid must be"),
        ({"grid": ()}, TypeError, "grid must be"),
        ({"block": None}, TypeError, "block must be"),
        ({"block": (32, 0)}, ValueError, "block dimensions"),
        ({"shared_mem": -1}, ValueError, "byte count"),
        ({"shared_mem": 1.0}, TypeError, "shared_mem must be an integer"),
        ({"stream": 0}, TypeError, "Stream.from_handle"),
    ],
)
def test_bad_values_are_refused_at_construction(
    kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    """No device is needed: a configuration is checked before anything reaches HIP."""
    fields: dict[str, Any] = {"grid": 1, "block": 32, **kwargs}
    with pytest.raises(error, match=match):
        LaunchConfig(**fields)


def test_it_is_immutable_and_replace_checks_anew(device: Device) -> None:
    stream = device.create_stream()
    config = LaunchConfig(8, 64, stream=stream)
    with pytest.raises(AttributeError, match="immutable"):
        config.grid = (1, 1, 1)  # type: ignore[misc]
    with pytest.raises(AttributeError, match="immutable"):
        del config.stream
    moved = config.replace(grid=(2, 2), stream=None)
    assert moved.grid == (2, 2, 1) and moved.block == (64, 1, 1) and moved.stream is None
    assert config.grid == (8, 1, 1) and config.stream is stream
    with pytest.raises(ValueError, match="byte count"):
        config.replace(shared_mem=-4)
    with pytest.raises(TypeError, match="no field"):
        config.replace(threads=4)


def test_equality_and_hash_follow_the_fields(device: Device) -> None:
    stream = device.create_stream()
    a, b = LaunchConfig(4, (64,), stream=stream), LaunchConfig((4, 1), 64, 0, stream)
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != a.replace(stream=device.create_stream())
    assert a != a.replace(shared_mem=4)
    assert a != (a.grid, a.block)


def _axpy(device: Device, module: Module, launch: Any) -> np.ndarray:
    """y = 2x + y over 1000 floats through `launch(kernel, x, y, n)`."""
    n = 1000
    host_x, host_y = np.arange(n, dtype=np.float32), np.ones(n, dtype=np.float32)
    x, y = device.allocate(4 * n), device.allocate(4 * n)
    x.copy_from(host_x)
    y.copy_from(host_y)
    launch(module.get_kernel("axpy"), x, y, n)
    device.synchronize()
    out = np.empty(n, dtype=np.float32)
    y.copy_to(out)
    np.testing.assert_array_equal(out, 2 * host_x + host_y)
    return out


def test_launch_takes_a_config_in_place_of_grid_block_and_keywords(
    device: Device, module: Module
) -> None:
    stream = device.create_stream()
    config = LaunchConfig(1, 64, stream=stream)  # (one block: a cooperative grid fits anywhere)
    _axpy(device, module, lambda k, x, y, n: k.launch(config, 2.0, x, y, n))
    _axpy(device, module, lambda k, x, y, n: k(config, 2.0, x, y, n))
    _axpy(device, module, lambda k, x, y, n: k.prepare(config, 2.0, x, y, n)(x.ptr, y.ptr))
    _axpy(device, module, lambda k, x, y, n: k.launch_cooperative(config, 2.0, x, y, n))


def test_the_geometry_and_shared_memory_reach_the_kernel(device: Device, module: Module) -> None:
    out = device.allocate(7 * 4)
    kernel = module.get_kernel("geometry")
    for config in (LaunchConfig((3, 2, 2), (4, 2), 64), LaunchConfig(5, (8, 1, 2), 16)):
        out.fill(0)
        kernel.launch(config, out)
        device.synchronize()
        got = np.empty(7, dtype=np.int32)
        out.copy_to(got)
        assert got.tolist() == [*config.grid, *config.block, 1]


def test_a_config_with_keywords_or_no_block_is_refused(device: Device, module: Module) -> None:
    kernel = module.get_kernel("geometry")
    out = device.allocate(7 * 4)
    out.fill(0)
    config = LaunchConfig(1, 1)
    for launch in (kernel.launch, kernel.prepare, kernel.launch_cooperative):
        with pytest.raises(TypeError, match="takes shared_mem and stream from it"):
            launch(config, out, stream=None)
        with pytest.raises(TypeError, match="takes shared_mem and stream from it"):
            launch(config, out, shared_mem=0)
        with pytest.raises(TypeError, match=r"a grid and a block|takes 1 arguments, got 0"):
            launch(1)  # (launch checks the arguments first: none were given either)
    device.synchronize()
    got = np.empty(7, dtype=np.int32)
    out.copy_to(got)
    assert not got.any()  # nothing was launched


def test_a_closed_stream_is_refused_at_the_launch(device: Device, module: Module) -> None:
    stream = device.create_stream()
    config = LaunchConfig(1, 1, stream=stream)  # made while open; closed before the launch
    stream.close()
    kernel = module.get_kernel("geometry")
    out = device.allocate(7 * 4)
    for launch in (kernel.launch, kernel.prepare, kernel.launch_cooperative):
        with pytest.raises(ClosedError):
            launch(config, out)


def test_the_same_config_object_configures_once(
    device: Device, module: Module, monkeypatch: pytest.MonkeyPatch
) -> None:
    kernel = module.get_kernel("geometry")
    configured: list[Any] = []
    configure = Kernel._configure

    def spy(self: Kernel, *args: Any) -> Any:
        configured.append(args)
        return configure(self, *args)

    monkeypatch.setattr(Kernel, "_configure", spy)
    out = device.allocate(7 * 4)
    config = LaunchConfig((2, 2), 4, 4, Stream.null(device))
    for _ in range(3):
        kernel.launch(config, out)
    assert len(configured) == 1
    kernel.launch(config.replace(grid=3), out)  # another geometry: configured again
    assert len(configured) == 2
    device.synchronize()
