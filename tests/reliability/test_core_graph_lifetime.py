"""Graph lifetime: a graph and its executable keep everything they captured alive.

Each shape captures work that names a buffer (or a module, host memory, another graph),
retires the Python side of it (close, forget_arguments, del), then replays: the replay must use
live memory and give the captured answer, the retired object must refuse further use
(ClosedError), and its memory must be released once the last graph holding it is closed or
collected. Before the fix, the first shape wrote freed memory (a segfault on the cpu platform).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from hip_core import (
    ClosedError,
    Device,
    HipError,
    Kernel,
    MemoryPool,
    Program,
    Stream,
    capture,
)

SOURCE = """
extern "C" __global__ void fill_index(int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = i + 1;
}
"""
N = 1024  # ints written by one launch


@pytest.fixture
def kernel(device: Device) -> Kernel:
    return Program(SOURCE, name="graph_lifetime.hip").load(device).get_kernel("fill_index")


@pytest.fixture
def pool(device: Device) -> Iterator[MemoryPool]:
    """A caching pool: its `in_use` shows whether a closed buffer's memory was given back."""
    with MemoryPool(device, backend="caching") as made:
        yield made


def _ints(buffer: Any, count: int = N) -> list[int]:
    out = np.empty(count, dtype=np.int32)
    buffer.copy_to(out)
    return out.tolist()


EXPECTED = list(range(1, N + 1))


def _capture_fill(kernel: Kernel, stream: Stream, target: Any, copy_to: Any) -> Any:
    """A graph that fills `target` and copies it into `copy_to` (which stays open to read)."""
    with capture(stream) as captured:
        kernel.launch(N // 256, 256, target, N, stream=stream)
        copy_to.copy_from(target, stream=stream)
    assert captured.graph is not None
    return captured.graph


def test_replay_after_the_captured_buffer_is_closed(
    device: Device, kernel: Kernel, pool: MemoryPool
) -> None:
    """The issue's case: capture, instantiate, forget_arguments, close the buffer, replay."""
    stream = device.create_stream()
    target, seen = pool.allocate(4 * N, stream=stream), device.allocate(4 * N)
    graph = _capture_fill(kernel, stream, target, seen)
    graph_exec = graph.instantiate()
    kernel.forget_arguments()
    target.close()
    assert target.closed
    with pytest.raises(ClosedError):
        target.fill(0)
    assert pool.stats().in_use == 4 * N  # retired, not freed: the graphs still hold it
    for _ in range(3):
        graph_exec.launch(stream)
    stream.sync()
    assert _ints(seen) == EXPECTED
    graph.close()  # the executable still holds it
    assert pool.stats().in_use == 4 * N
    graph_exec.launch(stream)
    stream.sync()
    graph_exec.close()
    assert pool.stats().in_use == 0  # the last holder let go: released


def test_a_dropped_graph_releases_what_it_held(
    device: Device, kernel: Kernel, pool: MemoryPool
) -> None:
    stream = device.create_stream()
    target, seen = pool.allocate(4 * N, stream=stream), device.allocate(4 * N)
    graph_exec = _capture_fill(kernel, stream, target, seen).instantiate()
    kernel.forget_arguments()
    target.close()
    graph_exec.launch(stream)
    stream.sync()
    del graph_exec
    gc.collect()
    assert pool.stats().in_use == 0


def test_a_view_keeps_its_parent_inside_a_graph(
    device: Device, kernel: Kernel, pool: MemoryPool
) -> None:
    stream = device.create_stream()
    parent, seen = pool.allocate(8 * N, stream=stream), device.allocate(4 * N)
    graph = _capture_fill(kernel, stream, parent.view(4 * N, 4 * N), seen)
    with graph, graph.instantiate() as replay:
        kernel.forget_arguments()
        parent.close()
        replay.launch(stream)
        stream.sync()
        assert _ints(seen) == EXPECTED and pool.stats().in_use == 8 * N
    assert pool.stats().in_use == 0


def test_the_fast_launch_path_is_captured_too(
    device: Device, kernel: Kernel, pool: MemoryPool
) -> None:
    """The same launch made just before the capture (so cached for reuse) is still held."""
    stream = device.create_stream()
    target, seen = pool.allocate(4 * N, stream=stream), device.allocate(4 * N)
    kernel.launch(N // 256, 256, target, N, stream=stream)
    stream.sync()
    graph = _capture_fill(kernel, stream, target, seen)
    with graph, graph.instantiate() as replay:
        kernel.forget_arguments()
        target.close()
        replay.launch(stream)
        stream.sync()
        assert _ints(seen) == EXPECTED and pool.stats().in_use == 4 * N
    assert pool.stats().in_use == 0


def test_copies_and_fills_keep_their_memory(device: Device, pool: MemoryPool) -> None:
    stream = device.create_stream()
    source = np.arange(N, dtype=np.int32)
    pinned = device.allocate_pinned(4 * N)
    middle, filled = pool.allocate(4 * N, stream=stream), pool.allocate(64, stream=stream)
    seen = device.allocate(4 * N)
    with capture(stream) as captured:
        middle.copy_from(source, stream=stream)  # host memory: the graph keeps the array
        pinned.memoryview()[:] = b"\0" * (4 * N)
        seen.copy_from(middle, stream=stream)
        seen.copy_to(pinned, stream=stream)
        filled.fill(7, stream=stream)
    assert captured.graph is not None
    with captured.graph, captured.graph.instantiate() as replay:
        del source
        gc.collect()
        middle.close()
        filled.close()
        pinned.close()
        assert pool.stats().in_use == 4 * N + 64
        replay.launch(stream)
        stream.sync()
        assert _ints(seen) == list(range(N))
    assert pool.stats().in_use == 0


def test_a_closed_module_stays_loaded_while_a_graph_launches_its_kernel(device: Device) -> None:
    module = Program(SOURCE, name="graph_lifetime.hip").load(device)
    kernel = module.get_kernel("fill_index")
    stream = device.create_stream()
    target, seen = device.allocate(4 * N), device.allocate(4 * N)
    graph = _capture_fill(kernel, stream, target, seen)
    with graph, graph.instantiate() as replay:
        module.close()
        assert module.closed
        with pytest.raises(ClosedError):
            module.get_kernel("fill_index")
        with pytest.raises(ClosedError):
            kernel.launch(1, 1, target, N)
        replay.launch(stream)
        stream.sync()
        assert _ints(seen) == EXPECTED


def test_a_graph_launched_inside_a_capture_is_kept_by_the_outer_graph(
    device: Device, kernel: Kernel, pool: MemoryPool
) -> None:
    """Where the platform cannot record a graph launch (CUDA: hipErrorStreamCaptureUnsupported),
    the failed capture must hold nothing; where it can (the cpu platform), the outer graph
    keeps the inner one and what it holds."""
    stream = device.create_stream()
    target, seen = pool.allocate(4 * N, stream=stream), device.allocate(4 * N)
    inner_graph = _capture_fill(kernel, stream, target, seen)
    inner = inner_graph.instantiate()
    try:
        with capture(stream) as captured:
            inner.launch(stream)
    except HipError as error:
        assert error.name == "hipErrorStreamCaptureUnsupported"
        for closed in (inner, inner_graph, target):
            closed.close()
        kernel.forget_arguments()
        assert pool.stats().in_use == 0  # the failed capture let go of the inner graph
        return
    assert captured.graph is not None
    with captured.graph, captured.graph.instantiate() as outer:
        kernel.forget_arguments()
        target.close()
        inner.close()
        inner_graph.close()
        assert pool.stats().in_use == 4 * N
        seen.fill(0)
        outer.launch(stream)
        stream.sync()
        assert _ints(seen) == EXPECTED
    assert pool.stats().in_use == 0


def test_host_functions_run_on_every_replay(device: Device) -> None:
    stream = device.create_stream()
    calls: list[int] = []
    with capture(stream) as captured:
        stream.launch_host_func(lambda: calls.append(1))
    assert captured.graph is not None
    with captured.graph, captured.graph.instantiate() as replay:
        for _ in range(3):
            replay.launch(stream)
            stream.sync()
    assert calls == [1, 1, 1]


def test_nothing_is_held_after_a_failed_capture_or_once_graphs_are_closed(
    device: Device, kernel: Kernel, pool: MemoryPool
) -> None:
    stream = device.create_stream()
    target = pool.allocate(4 * N, stream=stream)
    with pytest.raises(RuntimeError, match="inside"), capture(stream):
        kernel.launch(N // 256, 256, target, N, stream=stream)
        raise RuntimeError("inside")
    kernel.forget_arguments()
    target.close()
    assert pool.stats().in_use == 0  # a failed capture made no graph and holds nothing
    other, seen = pool.allocate(4 * N, stream=stream), device.allocate(4 * N)
    with _capture_fill(kernel, stream, other, seen) as graph:
        graph.instantiate().close()
    kernel.forget_arguments()
    other.close()
    assert pool.stats().in_use == 0  # closed graphs hold nothing: closing frees at once
