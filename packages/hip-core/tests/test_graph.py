"""Graphs: capture a stream's work, instantiate, replay."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hip_core import Device, Program, capture

SOURCE = """
extern "C" __global__ void add_one(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
}
"""


def test_capture_instantiate_replay(device: Device, cache_dir: Path) -> None:
    kernel = Program(SOURCE).load(device).get_kernel("add_one")
    n = 10_000
    x = device.allocate(4 * n)
    x.copy_from(np.zeros(n, dtype=np.float32))
    stream = device.create_stream()
    with capture(stream) as captured:
        for _ in range(3):
            kernel.launch((n + 255) // 256, 256, x, n, stream=stream)
    stream.sync()
    out = np.empty(n, dtype=np.float32)
    x.copy_to(out)
    assert not out.any()  # nothing runs while capturing
    assert captured.graph is not None
    with captured.graph.instantiate() as graph_exec:
        for _ in range(5):
            graph_exec.launch(stream)
        stream.sync()
    x.copy_to(out)
    assert np.all(out == 15.0)


def test_null_stream_cannot_be_captured(device: Device) -> None:
    with pytest.raises(ValueError, match="null stream"):
        capture(device.default_stream)


def test_a_failing_capture_block_leaves_the_stream_usable(device: Device) -> None:
    stream = device.create_stream()
    with pytest.raises(RuntimeError, match="inside"), capture(stream):
        raise RuntimeError("inside")
    buffer = device.allocate(16)
    buffer.fill(1, stream=stream)
    stream.sync()
