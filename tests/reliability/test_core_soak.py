"""Soak: many create/use/close cycles of every hip-core resource leave memory and descriptors flat.

Sized for CI (a few seconds on the cpu platform). Each cycle allocates and frees device and
pinned memory, makes a stream and an event, a pool allocation, a launch, a capture and replay,
and one refused call of each kind (the error paths must not leak either). The process's
resident memory and open file descriptors are read after a warm-up round and after the soak;
they may grow only by a small tolerance (allocator caches, the platform's worker threads).
"""

from __future__ import annotations

import gc
from collections.abc import Callable

import numpy as np
import pytest

from hip_core import ClosedError, Device, MemoryPool, Program, capture

SOURCE = """
extern "C" __global__ void bump(int* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1;
}
"""
CYCLES = 1500
RSS_TOLERANCE = 24 << 20  # bytes
FD_TOLERANCE = 4


def _cycle(device: Device, pool: MemoryPool, kernel: object, host: np.ndarray) -> None:
    stream = device.create_stream()
    event = device.create_event()
    buffer = device.allocate(host.nbytes)
    pinned = device.allocate_pinned(host.nbytes)
    pooled = pool.allocate(host.nbytes, stream=stream)
    buffer.copy_from(host, stream=stream)
    kernel.launch(1, 256, buffer, host.size, stream=stream)  # type: ignore[attr-defined]
    with capture(stream) as captured:
        kernel.launch(1, 256, pooled, host.size, stream=stream)  # type: ignore[attr-defined]
    assert captured.graph is not None
    with captured.graph, captured.graph.instantiate() as replay:
        replay.launch(stream)
    buffer.copy_to(pinned, stream=stream)
    event.record(stream)
    event.sync()
    assert pinned.numpy(np.int32)[0] == host[0] + 1
    for closed in (event, stream, pinned, buffer, pooled):
        closed.close()
    with pytest.raises(ClosedError):
        buffer.fill(0)
    with pytest.raises(TypeError):
        kernel.launch(1, 256, buffer, host.size)  # type: ignore[attr-defined]
    with pytest.raises(ValueError):
        device.allocate(-1)


def test_resources_cycle_without_growing_memory_or_descriptors(
    device: Device, rss: Callable[[], int], open_fds: Callable[[], dict[int, str]]
) -> None:
    kernel = Program(SOURCE, name="soak.hip").load(device).get_kernel("bump")
    host = np.arange(256, dtype=np.int32)
    with MemoryPool(device) as pool:
        for _ in range(CYCLES // 4):  # warm-up: caches, worker threads and pools fill up
            _cycle(device, pool, kernel, host)
        gc.collect()
        memory, fds = rss(), open_fds()
        for _ in range(CYCLES):
            _cycle(device, pool, kernel, host)
        gc.collect()
        grown_rss, new_fds = rss() - memory, set(open_fds()) - set(fds)
        assert pool.stats().in_use == 0
    print(f"soak: {CYCLES} cycles, RSS {grown_rss:+} bytes, {len(new_fds)} new descriptors")
    assert grown_rss < RSS_TOLERANCE, f"resident memory grew by {grown_rss} bytes"
    assert len(new_fds) <= FD_TOLERANCE, f"new open descriptors: {open_fds()}"
