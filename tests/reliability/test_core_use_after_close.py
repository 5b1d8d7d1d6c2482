"""Use after close: what packages/hip-core/tests/test_resource.py does not already cover.

That file checks every public method of every closed resource class, a closed stream or event
handed to an open object (Event.record, Stream.wait, fill), and a kernel of a closed module
(launch, attribute, max_active_blocks). Left: the text forms of closed objects, which must
answer without reaching HIP (a closed pool's repr used to read its destroyed pool's
statistics), and a closed object handed to each call that takes one.
"""

from __future__ import annotations

import pytest

from hip_core import ClosedError, Device, MemoryPool, capture


@pytest.mark.parametrize("backend", ["caching", None], ids=["caching", "auto"])
def test_the_repr_of_a_closed_pool_touches_nothing(device: Device, backend: str | None) -> None:
    pool = MemoryPool(device, backend=backend)
    pool.close()
    text = repr(pool)
    assert "closed" in text and "in_use" not in text
    with pytest.raises(ClosedError):
        pool.stats()


def test_the_repr_of_closed_buffers_and_streams(device: Device) -> None:
    buffer, pinned, stream = device.allocate(8), device.allocate_pinned(8), device.create_stream()
    for closed in (buffer, pinned, stream):
        closed.close()
        assert repr(closed)  # answers, from what the object remembers
    assert "closed" in repr(buffer) and "closed" in repr(pinned)


def test_closed_arguments_of_every_call_that_takes_one(device: Device) -> None:
    stream, event, buffer = device.create_stream(), device.create_event(), device.allocate(64)
    closed_stream, closed_event, closed_buffer = (
        device.create_stream(),
        device.create_event(),
        device.allocate(64),
    )
    for closed in (closed_stream, closed_event, closed_buffer):
        closed.close()
    calls = [
        lambda: buffer.copy_from(closed_buffer),
        lambda: buffer.copy_to(closed_buffer),
        lambda: buffer.copy_from(b"\0" * 8, stream=closed_stream),
        lambda: buffer.copy_to(bytearray(8), stream=closed_stream),
        lambda: event.elapsed_ms(closed_event),
        lambda: closed_stream.record(event),
        lambda: stream.record(closed_event),
        lambda: MemoryPool(device, backend="caching").allocate(8, stream=closed_stream),
        lambda: capture(closed_stream).__enter__(),
    ]
    for call in calls:
        with pytest.raises(ClosedError):
            call()
    stream.sync()  # the open ones still work
    buffer.fill(1, stream=stream)
    stream.sync()
