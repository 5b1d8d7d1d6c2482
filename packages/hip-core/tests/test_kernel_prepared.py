"""Prepared launches (`Kernel.prepare`): packed once, called with addresses, and every case
where they must leave the launch to `Kernel.launch` (captures, a busy buffer, closed things)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hip_core import Device, Module, Program, capture

SOURCE = r"""
#include <hip/hip_runtime.h>

extern "C" __global__ void axpy(float a, const float* __restrict__ x, float* y, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        y[i] = a * x[i] + y[i];
    }
}

extern "C" __global__ void split(const float* x, int n, float* y) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        y[i] = 2.0f * x[i];
    }
}
"""


@pytest.fixture
def module(device: Device, cache_dir: Path) -> Module:
    return Program(SOURCE, name="prepared.hip").load(device)


def _upload(device: Device, values: np.ndarray) -> object:
    buffer = device.allocate(values.nbytes)
    buffer.copy_from(values)
    return buffer


def _download(buffer: object, count: int) -> np.ndarray:
    out = np.empty(count, dtype=np.float32)
    buffer.copy_to(out)  # type: ignore[attr-defined]
    return out


def test_a_prepared_launch_writes_only_its_addresses(device: Device, module: Module) -> None:
    n = 1000
    x = np.arange(n, dtype=np.float32)
    dx, dy, dz = _upload(device, x), _upload(device, np.ones(n, np.float32)), _upload(
        device, np.zeros(n, np.float32)
    )  # fmt: skip
    stream = device.create_stream()
    kernel = module.get_kernel("axpy")
    prepared = kernel.prepare(4, 64, 3.0, dx, dy, n, stream=stream)  # launches nothing
    stream.sync()
    np.testing.assert_array_equal(_download(dy, n), np.ones(n))
    assert prepared(dx.ptr, dy.ptr)  # type: ignore[attr-defined]
    assert prepared(dx.ptr, dz.ptr)  # type: ignore[attr-defined]
    assert prepared(dx.ptr, dz.ptr)  # (the same addresses: nothing rewritten)
    stream.sync()
    np.testing.assert_array_equal(_download(dy, n), 1 + 3 * x)
    np.testing.assert_array_equal(_download(dz, n), 6 * x)


def test_pointer_parameters_apart_are_written_one_by_one(device: Device, module: Module) -> None:
    n = 64
    x = np.arange(n, dtype=np.float32)
    dx, dy = _upload(device, x), _upload(device, np.zeros(n, np.float32))
    prepared = module.get_kernel("split").prepare(1, 64, dx, n, dy)
    assert prepared(dx.ptr, dy.ptr)  # type: ignore[attr-defined]
    device.synchronize()
    np.testing.assert_array_equal(_download(dy, n), 2 * x)


def test_prepare_checks_as_launch_does(device: Device, module: Module) -> None:
    y = device.allocate(8)
    kernel = module.get_kernel("axpy")
    with pytest.raises(TypeError, match="takes 4 arguments, got 3"):
        kernel.prepare(1, 2, 2.0, y, y)
    with pytest.raises(TypeError, match=r"parameter 3 \(int n\): expects an integer"):
        kernel.prepare(1, 2, 2.0, y, y, 1.5)
    with pytest.raises(ValueError, match="block"):
        kernel.prepare(1, 100_000, 2.0, y, y, 1)


def test_closed_stream_or_module_and_a_busy_buffer_leave_it_to_launch(
    device: Device, module: Module
) -> None:
    y = device.allocate(8)
    stream = device.create_stream()
    kernel = module.get_kernel("axpy")
    prepared = kernel.prepare(1, 2, 1.0, y, y, 2, stream=stream)
    token = prepared._lock.pop()  # another thread inside it: the caller takes the checked path
    assert not prepared(y.ptr, y.ptr)  # type: ignore[attr-defined]
    prepared._lock.append(token)
    assert prepared(y.ptr, y.ptr)  # type: ignore[attr-defined]
    assert prepared._lock == [True]  # (given back after the launch)
    stream.sync()
    stream.close()
    assert not prepared(y.ptr, y.ptr)  # type: ignore[attr-defined]
    other = kernel.prepare(1, 2, 1.0, y, y, 2)
    assert other(y.ptr, y.ptr)  # type: ignore[attr-defined]
    device.synchronize()
    module.close()
    assert not other(y.ptr, y.ptr)  # type: ignore[attr-defined]


def test_a_capture_leaves_it_to_launch(device: Device, module: Module) -> None:
    """While a stream is captured the graph must keep what a launch names: a prepared launch
    refuses, and Kernel.launch (which records it) is the caller's path."""
    n = 8
    dx, dy = _upload(device, np.ones(n, np.float32)), _upload(device, np.zeros(n, np.float32))
    stream = device.create_stream()
    kernel = module.get_kernel("axpy")
    prepared = kernel.prepare(1, 64, 1.0, dx, dy, n, stream=stream)
    with capture(stream) as captured:
        assert not prepared(dx.ptr, dy.ptr)  # type: ignore[attr-defined]
        kernel.launch(1, 64, 1.0, dx, dy, n, stream=stream)
    stream.sync()
    np.testing.assert_array_equal(_download(dy, n), np.zeros(n))  # captured, not run
    assert captured.graph is not None
    with captured.graph.instantiate() as graph_exec:
        graph_exec.launch(stream)
        stream.sync()
    np.testing.assert_array_equal(_download(dy, n), np.ones(n))
    assert prepared(dx.ptr, dy.ptr)  # type: ignore[attr-defined]
    stream.sync()
    np.testing.assert_array_equal(_download(dy, n), 2 * np.ones(n))
