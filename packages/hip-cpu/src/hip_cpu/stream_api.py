"""hipStream*, hipEvent*, hipLaunchHostFunc and hipDeviceSynchronize over streams.ENGINE.

Stream semantics are described in hip_cpu.streams. Priorities are accepted and
reported back but do not change scheduling (the priority range is [0, 0]). Interprocess events
(hipEventInterprocess) keep their state where other processes see it: shared_events.py.
"""

from __future__ import annotations

from typing import Any

from hip_cpu import shared_events, status
from hip_cpu.stream_state import Event, Stream
from hip_cpu.streams import ENGINE, on_stream
from hip_ffi._ffi import ffi
from hip_ffi.constants import (
    EVENT_BLOCKING_SYNC,
    EVENT_DISABLE_TIMING,
    EVENT_INTERPROCESS,
    STREAM_NON_BLOCKING,
)
from hip_ffi.handles import Registry, takes_handle

EVENTS: Registry[Event] = Registry("hipEvent_t")
_EVENT_FLAGS = EVENT_BLOCKING_SYNC | EVENT_DISABLE_TIMING | EVENT_INTERPROCESS
on_event = takes_handle(EVENTS.get, status.INVALID_HANDLE)


def hipStreamCreateWithFlags(stream: Any, flags: int) -> int:
    return hipStreamCreateWithPriority(stream, flags, 0)


def hipStreamCreateWithPriority(stream: Any, flags: int, priority: int) -> int:
    if stream == ffi.NULL or flags & ~STREAM_NON_BLOCKING:
        return status.INVALID_VALUE
    created = ENGINE.create(flags, 0)  # priorities clamp to the range [0, 0]
    stream[0] = ENGINE.handles.cdata(created.handle)
    return status.SUCCESS


@on_stream
def hipStreamGetFlags(stream: Stream, flags: Any) -> int:
    return _write(flags, stream.flags)


@on_stream
def hipStreamGetPriority(stream: Stream, priority: Any) -> int:
    return _write(priority, stream.priority)


def _write(out: Any, value: int) -> int:
    """`*out = value`, hipErrorInvalidValue for a NULL `out`."""
    if out == ffi.NULL:
        return status.INVALID_VALUE
    out[0] = value
    return status.SUCCESS


def hipStreamDestroy(stream: Any) -> int:
    """Returns at once; work already queued still runs, then the stream is released."""
    resolved = ENGINE.handles.get(stream)  # the null and per-thread streams cannot be destroyed
    if resolved is None:
        return status.INVALID_HANDLE
    ENGINE.destroy(resolved)
    return status.SUCCESS


@on_stream
def hipStreamSynchronize(stream: Stream) -> int:
    return ENGINE.synchronize(stream)


@on_stream
def hipStreamQuery(stream: Stream) -> int:
    """hipSuccess when all work enqueued on the stream has finished, else hipErrorNotReady."""
    return ENGINE.query(stream)


def hipStreamWaitEvent(stream: Any, event: Any, flags: int) -> int:
    """Work enqueued on `stream` after this call waits for `event`'s latest record."""
    resolved = ENGINE.resolve(stream)
    waited = EVENTS.get(event)
    if resolved is None or waited is None:
        return status.INVALID_HANDLE
    if flags != 0:
        return status.INVALID_VALUE
    if waited.shared is not None:
        return shared_events.wait(resolved, waited.shared)
    return ENGINE.wait_event(resolved, waited)


@on_stream
def hipLaunchHostFunc(stream: Stream, function: Any, user_data: Any) -> int:
    """Enqueue a call of `function(user_data)` (a C function pointer, e.g. a cffi callback) on
    `stream`; it runs on the stream's worker thread and must not call the HIP API."""
    if function == ffi.NULL:
        return status.INVALID_VALUE

    def call() -> int:
        function(user_data)
        return status.SUCCESS

    return ENGINE.submit(stream, call)


def hipDeviceSynchronize() -> int:
    """Wait for all work on every stream (blocking or not); returns the first async error."""
    return ENGINE.synchronize_device()


def hipEventCreateWithFlags(event: Any, flags: int) -> int:
    """An event; with hipEventInterprocess (which needs hipEventDisableTiming too, as in HIP)
    one that other processes can open (ipc.py)."""
    if event == ffi.NULL or flags & ~_EVENT_FLAGS:
        return status.INVALID_VALUE
    created = Event(flags)
    if flags & EVENT_INTERPROCESS:
        if not flags & EVENT_DISABLE_TIMING:
            return status.INVALID_VALUE
        shared = shared_events.new()
        if isinstance(shared, int):
            return shared
        created.shared = shared
    event[0] = EVENTS.cdata(EVENTS.add(created))
    return status.SUCCESS


def hipEventRecord(event: Any, stream: Any) -> int:
    """Mark the current end of `stream`; the event completes when the stream gets there."""
    recorded = EVENTS.get(event)
    resolved = ENGINE.resolve(stream)
    if recorded is None or resolved is None:
        return status.INVALID_HANDLE
    if recorded.shared is not None:
        return shared_events.record(recorded.shared, resolved)
    return ENGINE.record(recorded, resolved)


@on_event
def hipEventSynchronize(event: Event) -> int:
    if event.shared is not None:
        shared_events.synchronize(event.shared)
        return status.SUCCESS
    return ENGINE.event_synchronize(event)


@on_event
def hipEventQuery(event: Event) -> int:
    """hipSuccess once the stream reached the event (or it was never recorded)."""
    if event.shared is not None:
        done = shared_events.done(event.shared)
    else:
        done = ENGINE.event_done(event)
    return status.SUCCESS if done else status.NOT_READY


def hipEventElapsedTime(ms: Any, start: Any, stop: Any) -> int:
    """Milliseconds between the two events' timestamps (host monotonic clock, ns resolution).

    hipErrorInvalidHandle when either was never recorded or has timing disabled,
    hipErrorNotReady when either has not completed yet.
    """
    first, second = EVENTS.get(start), EVENTS.get(stop)
    if first is None or second is None:
        return status.INVALID_HANDLE
    if ms == ffi.NULL:
        return status.INVALID_VALUE
    if (first.flags | second.flags) & EVENT_DISABLE_TIMING:
        return status.INVALID_HANDLE
    if first.record is None or second.record is None:
        return status.INVALID_HANDLE
    if not (ENGINE.event_done(first) and ENGINE.event_done(second)):
        return status.NOT_READY
    begin, end = first.record.time_ns, second.record.time_ns
    if begin is None or end is None:  # completed, but its stamp not yet stored
        return status.NOT_READY
    ms[0] = (end - begin) / 1e6
    return status.SUCCESS


def hipEventDestroy(event: Any) -> int:
    removed = EVENTS.remove(event)
    if removed is None:
        return status.INVALID_HANDLE
    if removed.shared is not None:
        shared_events.close(removed.shared)
    return status.SUCCESS
