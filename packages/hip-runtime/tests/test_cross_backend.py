"""Tensors of one HipBackend used by another (issue 39, item 1): every op orders its stream
after the stream each of its tensors carries, and keeps their memory until it has read it.

Each test holds the other stream back with a host function that sleeps before its writes, so
an op that did not wait would read the tensor before it is written (the failure the issue
saw: 4 of 4 runs wrong through the methods, 8 of 8 through the operators).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from hip_core import Device, Stream, capture
from hip_runtime import DeviceTensor, HipBackend
from hip_runtime.tensors.stream_order import ordered_with

_HOLD_S = 0.3  # how long the writing stream is held back: far longer than any launch here


@pytest.fixture(scope="module")
def pair(device: Device, program_cache: Path) -> Iterator[tuple[HipBackend, HipBackend]]:
    with HipBackend(device) as reader, HipBackend(device) as writer:
        yield reader, writer


def _held(stream: Stream) -> None:
    """Hold `stream`'s later work back by _HOLD_S (a host function that sleeps)."""
    stream.launch_host_func(lambda: time.sleep(_HOLD_S))


def _written_late(writer: HipBackend, values: np.ndarray) -> DeviceTensor:
    """A tensor of `writer` whose values land only after the hold: zeros, then `values`."""
    tensor, source = writer.from_numpy(np.zeros_like(values)), writer.from_numpy(values)
    writer.synchronize()
    _held(writer.stream)  # (an upload from pageable memory would wait out the hold itself)
    tensor.copy_(source)
    return tensor


def test_a_method_waits_for_the_other_backends_writes(pair: tuple[HipBackend, HipBackend]) -> None:
    reader, writer = pair
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, 64, 64), dtype=np.float32)
    x = reader.from_numpy(np.ones((64, 64), np.float32))
    a_t, b_t = writer.from_numpy(a), writer.from_numpy(b)
    writer.synchronize()
    _held(writer.stream)
    w = writer.matmul(a_t, b_t)  # queued behind the hold
    y = reader.add(x, w)
    np.testing.assert_allclose(y.to_numpy(), 1 + a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("calls", [1, 3], ids=["checked", "planned"])
def test_operators_and_repeated_calls_wait(pair: tuple[HipBackend, HipBackend], calls: int) -> None:
    """The operator form, and repeated calls (the second takes the op's launch plan)."""
    reader, writer = pair
    x = reader.from_numpy(np.full(1000, 2.0, np.float32))
    for k in range(calls):
        values = np.arange(1000, dtype=np.float32) + k
        w = _written_late(writer, values)
        np.testing.assert_array_equal((x * w).to_numpy(), 2 * values)
        np.testing.assert_array_equal(reader.add(x, w).to_numpy(), 2 + values)


def test_out_of_another_backend_is_written_after_its_pending_writes(
    pair: tuple[HipBackend, HipBackend],
) -> None:
    reader, writer = pair
    x = reader.from_numpy(np.full(4096, 3.0, np.float32))
    out = _written_late(writer, np.full(4096, -1.0, np.float32))  # a write still pending
    reader.add(x, x, out=out)
    reader.synchronize()
    writer.synchronize()
    np.testing.assert_array_equal(out.to_numpy(), np.full(4096, 6.0, np.float32))


def test_copy_waits_for_the_source_stream(pair: tuple[HipBackend, HipBackend]) -> None:
    reader, writer = pair
    values = np.arange(4096, dtype=np.float32)
    dst = reader.from_numpy(np.zeros(4096, np.float32))
    dst.copy_(_written_late(writer, values))
    np.testing.assert_array_equal(dst.to_numpy(), values)


def test_memory_dropped_by_its_stream_is_not_reused_under_a_pending_read(
    pair: tuple[HipBackend, HipBackend],
) -> None:
    """The reader's op is held back; meanwhile the writer drops the tensor and writes a new
    one of the same size, which its pool would place in the same memory."""
    reader, writer = pair
    values = np.arange(1 << 16, dtype=np.float32)
    w = writer.from_numpy(values)
    writer.synchronize()
    _held(reader.stream)
    y = reader.scale(w, 2.0)  # reads w after the hold
    del w
    overwrite = writer.full((1 << 16,), -7.0, dtype=np.float32)
    writer.synchronize()
    np.testing.assert_array_equal(y.to_numpy(), 2 * values)
    assert overwrite.to_numpy()[0] == -7.0


def test_ordered_streams_need_no_event(device: Device) -> None:
    null = device.default_stream
    blocking, loose = Stream(device), Stream(device, non_blocking=True)
    try:
        assert ordered_with(blocking, blocking)
        assert ordered_with(blocking, Stream.from_handle(blocking.address, device))
        assert ordered_with(blocking, null) and ordered_with(null, blocking)
        assert not ordered_with(loose, null) and not ordered_with(null, loose)
        assert not ordered_with(blocking, loose) and not ordered_with(blocking, Stream(device))
    finally:
        blocking.close()
        loose.close()


def test_a_capture_refuses_a_tensor_of_a_stream_outside_it(
    pair: tuple[HipBackend, HipBackend],
) -> None:
    """A graph cannot wait for work queued outside its capture: a clear ValueError, and the
    capture ends cleanly (the backend stays usable)."""
    reader, writer = pair
    x = reader.from_numpy(np.ones(256, np.float32))
    w = writer.from_numpy(np.ones(256, np.float32))
    reader.add(x, x)  # (the kernel compiled before the capture)
    with pytest.raises(ValueError, match="b is ordered on another stream"), capture(reader.stream):
        reader.add(x, w)
    np.testing.assert_array_equal(reader.add(x, w).to_numpy(), np.full(256, 2.0, np.float32))
