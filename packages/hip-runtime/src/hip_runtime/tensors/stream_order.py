"""Ordering work on one stream after the work another stream queued on a tensor.

A DeviceTensor carries the stream that orders work on it (`tensor.stream`: the backend's that
made it). When an op of one backend reads or writes a tensor of another (two HipBackends, a
tensor made on a user's stream), nothing orders the two streams by itself: the op could read
the tensor before the other stream has written it. `order_after` makes the op's stream wait,
on the device, for everything queued on the tensor's stream so far (an event), and keeps the
tensor's memory referenced until the op's stream is next synchronized, so that dropping the
tensor cannot hand its memory back to the other stream's pool (which reuses it in that
stream's order) while the op may still be reading it.

Streams that are ordered already cost nothing: the same stream (also through two Stream
objects over one handle), and the null stream beside a blocking stream (HIP's legacy null
stream waits for every blocking stream's earlier work, and they for its).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hip_core import Stream

if TYPE_CHECKING:
    from hip_runtime.tensors.tensor import DeviceTensor


def ordered_with(stream: Stream, other: Stream) -> bool:
    """Whether work queued on `stream` from now on already runs after what `other` has queued
    (without an event): the same stream, or the null stream and a blocking stream."""
    if other is stream or other.handle == stream.handle:
        return True
    if stream.device != other.device:
        return False  # (a tensor of another device is refused by the ops before this)
    null = stream.device.default_stream.handle
    if other.handle == null:
        return not stream.non_blocking
    return stream.handle == null and not other.non_blocking


def order_after(stream: Stream, tensor: DeviceTensor, name: str) -> None:
    """Make later work on `stream` wait for the work queued so far on `tensor.stream`, and keep
    `tensor`'s memory until `stream` is next synchronized (see the module's doc).

    Queues one event record on `tensor.stream` and one wait on `stream`; nothing waits on the
    host. While `stream` is being captured, the wait must join a stream that takes part in the
    same capture; a tensor ordered on a stream outside it is refused with a ValueError (the
    graph cannot wait for work queued outside it: synchronize that stream, or copy the tensor
    onto this one, before the capture)."""
    other = tensor.stream
    if ordered_with(stream, other):
        return
    if stream.is_capturing and not other.is_capturing:
        raise ValueError(
            f"{name} is ordered on another stream ({other!r}), which this capture cannot wait "
            "for: synchronize that stream, or copy the tensor onto this one, before capturing"
        )
    event = stream.device.create_event(timing=False)
    event.record(other)
    stream.wait(event)
    event.close()  # (HIP keeps the recorded state alive for the wait already queued)
    stream.keep_until_sync(tensor.buffer)


__all__ = ["order_after", "ordered_with"]
