"""Graphs: capture a stream's work, instantiate, replay."""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np
import pytest

from hip_core import (
    ClosedError,
    Device,
    HipError,
    Program,
    Resource,
    capture,
    capture_in_progress,
)  # fmt: skip

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


def test_a_capture_forks_to_another_stream_and_joins(device: Device) -> None:
    """An event recorded on the capturing stream and waited on by another stream brings that
    stream into the capture; its work replays in order with the origin's once joined back."""
    stream, side = device.create_stream(), device.create_stream(non_blocking=True)
    a, b, c, d = (device.allocate(64) for _ in range(4))
    fork, join = device.create_event(timing=False), device.create_event(timing=False)
    with capture(stream) as captured:
        a.fill(1, stream=stream)
        fork.record(stream)
        side.wait(fork)  # the side stream joins the capture here
        b.copy_from(a, stream=side)  # after the fill, on the side stream
        c.fill(3, stream=stream)  # meanwhile on the origin
        join.record(side)
        stream.wait(join)
        d.copy_from(b, stream=stream)  # after the side stream's copy
    assert captured.graph is not None
    graph = captured.graph.instantiate()
    for buffer in (a, b, c, d):
        buffer.fill(0)
    for _ in range(2):  # replays are stream-ordered and repeatable
        graph.launch(stream)
        stream.sync()
        out = bytearray(64)
        d.copy_to(out)
        assert out == b"\x01" * 64
        c.copy_to(out)
        assert out == b"\x03" * 64
    b.fill(5, stream=side)
    side.sync()


def test_a_fork_never_joined_fails_the_capture(device: Device) -> None:
    stream, side = device.create_stream(), device.create_stream(non_blocking=True)
    buffer = device.allocate(64)
    fork = device.create_event(timing=False)
    with pytest.raises(HipError, match="Unjoined"), capture(stream):
        fork.record(stream)
        side.wait(fork)
        buffer.fill(1, stream=side)
    buffer.fill(2, stream=side)  # both streams capture no more
    buffer.fill(3, stream=stream)
    stream.sync()
    side.sync()


def test_capturing_is_told_for_the_process_and_for_each_stream(device: Device) -> None:
    """capture_in_progress(): any capture block of this process; Stream.is_capturing: the
    captured stream and a stream that joined it through an event, not a bystander."""
    stream, side = device.create_stream(), device.create_stream(non_blocking=True)
    bystander = device.create_stream(non_blocking=True)
    assert not capture_in_progress()
    assert not (stream.is_capturing or side.is_capturing or bystander.is_capturing)
    fork, join = device.create_event(timing=False), device.create_event(timing=False)
    with capture(stream):
        assert capture_in_progress()
        assert stream.is_capturing and not side.is_capturing and not bystander.is_capturing
        fork.record(stream)
        side.wait(fork)
        assert side.is_capturing and not bystander.is_capturing
        join.record(side)
        stream.wait(join)
    assert not capture_in_progress()
    assert not (stream.is_capturing or side.is_capturing)
    with pytest.raises(RuntimeError), capture(stream):
        raise RuntimeError("a failed block ends the capture too")
    assert not capture_in_progress() and not stream.is_capturing
    bystander.close()
    with pytest.raises(ClosedError):
        _ = bystander.is_capturing


class _Probe(Resource):
    """A resource whose release records whether a capture was in progress at the time."""

    def __init__(self, seen: list[bool]) -> None:
        self.cycle = self  # collected by the cyclic collector only, as in the H200 failure
        self._own(lambda: seen.append(capture_in_progress()))


def test_what_is_collected_inside_a_capture_is_released_after_it(
    device: Device, cache_dir: Path
) -> None:
    """A collection can land inside a capture block (the cyclic collector runs anywhere); a
    release there (hipFree, hipModuleUnload…) would invalidate the capture on CUDA, so it waits
    for the block's end. The capture stays valid and replays; an explicit close still runs."""
    seen: list[bool] = []
    kernel = Program(SOURCE).load(device).get_kernel("add_one")
    x = device.allocate(4 * 256)
    x.copy_from(np.zeros(256, dtype=np.float32))
    stream = device.create_stream()
    _Probe(seen)
    doomed: list[object] = [device.allocate(1 << 20)]  # a real allocation, in a cycle
    doomed.append(doomed)
    del doomed
    with capture(stream) as captured:
        kernel.launch(1, 256, x, 256, stream=stream)
        gc.collect()
        assert seen == []  # not released inside the block
        kernel.launch(1, 256, x, 256, stream=stream)
    assert seen == [False]
    assert captured.graph is not None
    with captured.graph.instantiate() as replay:
        replay.launch(stream)
    stream.sync()
    out = np.empty(256, dtype=np.float32)
    x.copy_to(out)
    assert np.all(out == 2.0)
    with pytest.raises(RuntimeError), capture(stream):  # a failed block releases them too
        _Probe(seen)
        gc.collect()
        raise RuntimeError("inside")
    assert seen == [False, False]
