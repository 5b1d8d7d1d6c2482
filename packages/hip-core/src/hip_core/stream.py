"""Streams: ordered queues of device work.

Every `stream=` parameter of hip-core takes a Stream or None. None is the null stream of the
current device (for copies and fills, None is their synchronous form, ordered like the null
stream and waited for). Anything else (a raw handle such as 0, a torch or CuPy stream) is a
TypeError: wrap a foreign hipStream_t with `Stream.from_handle(handle, device)`.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hip_core._capture import keep_captured, kept_for
from hip_core._hip import hip
from hip_core._resource import Resource, nothing
from hip_core.errors import check, check_done
from hip_ffi.constants import MEMCPY_HOST_TO_DEVICE, STREAM_DEFAULT, STREAM_NON_BLOCKING

if TYPE_CHECKING:
    from hip_core.device import Device
    from hip_core.event import Event


class Stream(Resource):
    """A HIP stream on one device.

    Work queued on a stream runs in order. A blocking stream (the default) also orders with the
    null stream; `non_blocking=True` does not. `priority`: lower numbers are higher priority,
    clamped by HIP to `Stream.priority_range()`.

    Host objects handed to asynchronous operations on this stream are kept referenced until
    the next `sync()` of this stream, so they cannot be freed while the device reads them.
    """

    __slots__ = ("_host_funcs", "_keep", "device", "handle", "non_blocking", "priority")

    def __init__(self, device: Device, *, non_blocking: bool = False, priority: int = 0) -> None:
        api = hip()
        out = api.ffi.new("hipStream_t*")
        flags = STREAM_NON_BLOCKING if non_blocking else STREAM_DEFAULT
        with device:
            check(
                api.hipStreamCreateWithPriority(out, flags, priority), "hipStreamCreateWithPriority"
            )
        self.handle = out[0]
        self.device = device
        self.non_blocking = non_blocking
        self.priority = priority
        self._keep: list[Any] = []
        self._host_funcs: dict[int, Any] = {}
        self._own(_destroy_stream, api, self.handle)

    @classmethod
    def null(cls, device: Device) -> Stream:
        """The device's null stream: synchronizes with every blocking stream; never destroyed."""
        # Built without __init__: no stream is created, and closing it releases nothing.
        stream = cls.__new__(cls)
        stream.handle = hip().ffi.NULL
        stream.device = device
        stream.non_blocking = False
        stream.priority = 0
        stream._keep = []
        stream._host_funcs = {}
        stream._own(nothing)
        return stream

    @classmethod
    def from_handle(cls, handle: int | Any, device: Device) -> Stream:
        """A Stream that is not owned, over a hipStream_t made elsewhere (an int, as DLPack's
        `stream=` passes it, or a cffi pointer): closing it releases nothing, and its owner
        must keep it alive while it is used."""
        stream = cls.null(device)
        api = hip()
        stream.handle = api.ffi.cast(
            "hipStream_t", handle if isinstance(handle, int) else api.ffi.cast("uintptr_t", handle)
        )
        return stream

    @staticmethod
    def priority_range() -> tuple[int, int]:
        """(least, greatest) priority; greatest is the numerically lowest."""
        api = hip()
        least, greatest = api.ffi.new("int*"), api.ffi.new("int*")
        check(
            api.hipDeviceGetStreamPriorityRange(least, greatest), "hipDeviceGetStreamPriorityRange"
        )
        return int(least[0]), int(greatest[0])

    def sync(self) -> None:
        """Block the calling thread until all work queued so far on this stream is done."""
        self._check_open()
        self._release_kept_after(
            lambda: check(hip().hipStreamSynchronize(self.handle), "hipStreamSynchronize")
        )

    def _release_kept_after(self, wait: Callable[[], None]) -> None:
        """Run `wait`, a host wait that covers the work queued on this stream so far, then let
        go of what `keep_until_sync` held for that work. Only what was kept before the wait is
        dropped: another thread may queue (and keep) more meanwhile."""
        kept = len(self._keep)
        wait()
        del self._keep[:kept]

    @property
    def done(self) -> bool:
        """True when all work queued so far has finished (hipStreamQuery; does not block)."""
        self._check_open()
        return check_done(hip().hipStreamQuery(self.handle), "hipStreamQuery")

    def wait(self, event: Event) -> None:
        """Make later work on this stream wait for `event` (on the device, not the host)."""
        self._check_open()
        event._check_open()
        check(hip().hipStreamWaitEvent(self.handle, event.handle, 0), "hipStreamWaitEvent")

    def record(self, event: Event | None = None) -> Event:
        """Record `event` (a new timing event when None) at this point of the stream."""
        from hip_core.event import Event

        self._check_open()
        event = event or Event(self.device)
        event.record(self)
        return event

    def launch_host_func(self, function: Callable[[], Any]) -> None:
        """Queue `function()` to run on a runtime thread once prior work on the stream is done.

        It must not call HIP stream or event functions (HIP forbids that in host callbacks);
        exceptions it raises are printed by cffi and otherwise ignored.
        """
        self._check_open()
        api = hip()
        token = next(_tokens)
        handle = api.ffi.new_handle((self, token, function))
        if not keep_captured(self, handle):  # a graph runs it on each replay: it keeps it
            self._host_funcs[token] = handle
        check(
            api.hipLaunchHostFunc(self.handle, _host_func_trampoline(), handle), "hipLaunchHostFunc"
        )

    def copy_from_host(self, dst: int, src: int, nbytes: int) -> None:
        """Queue a copy of `nbytes` bytes from host address `src` to device address `dst`.

        The raw form of `DeviceBuffer.copy_from(..., stream=)` for hot paths that hold
        addresses (pinned staging chunks): nothing is checked but this stream, and nothing is
        kept referenced, so the caller keeps both ranges valid until the copy has run (record
        an event after it). From pinned memory the call returns at once; from pageable memory
        HIP returns once it has read the host side.
        """
        self._check_open()
        api = hip()
        cast = api.ffi.cast
        status = api.hipMemcpyAsync(
            cast("void*", dst), cast("void*", src), nbytes, MEMCPY_HOST_TO_DEVICE, self.handle
        )
        check(status, "hipMemcpyAsync")

    def keep_until_sync(self, obj: Any) -> None:
        """Hold a reference to `obj` until the next `sync()` (host memory in flight), or until
        a query finds the stream idle: one is made each time the list doubles from 64, so a
        stream that is never synchronized (the default stream) keeps only what is in flight.
        While the stream is captured, the graph keeps `obj` instead, as long as it exists."""
        self._check_open()
        if keep_captured(self, obj):
            return
        keep = self._keep
        keep.append(obj)
        kept = len(keep)
        if kept >= 64 and not kept & (kept - 1) and hip().hipStreamQuery(self.handle) == 0:
            del keep[:kept]  # all queued before the query: done (a capture answers an error)

    @property
    def is_capturing(self) -> bool:
        """Whether this stream takes part now in the capture of a `hip_core.capture` block:
        the stream the block captures, or one that joined it by waiting on an event recorded
        on a captured stream (hipStreamIsCapturing). Work queued on it then is recorded into
        the graph, not run. False without a HIP call while no capture is in progress in this
        process (`hip_core.capture_in_progress()`); a capture begun outside hip-core is not
        seen. ClosedError for a closed stream."""
        self._check_open()
        return kept_for(self) is not None

    @property
    def address(self) -> int:
        """The hipStream_t as an integer (0 for the null stream), as stream-taking protocols
        pass it (DLPack's `stream=`, the CUDA Array Interface's `stream`)."""
        self._check_open()
        return int(hip().ffi.cast("uintptr_t", self.handle))

    def __repr__(self) -> str:
        kind = (
            "null"
            if self.handle == hip().ffi.NULL
            else ("non-blocking" if self.non_blocking else "blocking")
        )
        return f"<Stream {kind} on device {self.device.ordinal}>"


def checked_handle(stream: Stream | None, *, check_open: bool = True) -> Any:
    """The hipStream_t of a `stream=` argument: NULL for None; TypeError for anything but a
    Stream, ClosedError for a closed one (before any HIP call)."""
    if stream is None:
        return hip().ffi.NULL
    if not isinstance(stream, Stream):
        raise TypeError(
            f"stream must be a hip_core.Stream or None (the null stream), not "
            f"{type(stream).__name__}; wrap a raw handle with Stream.from_handle"
        )
    if check_open:
        stream._check_open()
    return stream.handle


def _destroy_stream(api: Any, handle: Any) -> None:
    check(api.hipStreamDestroy(handle), "hipStreamDestroy")


_tokens = itertools.count()
_trampoline_lock = threading.Lock()
_trampoline: Any = None


def _host_func_trampoline() -> Any:
    """One C callback for all host functions; unpacks (stream, token, function) from userData."""
    global _trampoline
    with _trampoline_lock:
        if _trampoline is None:
            ffi = hip().ffi

            @ffi.callback("void(void*)")
            def trampoline(user_data: Any) -> None:
                stream, token, function = ffi.from_handle(user_data)
                try:
                    function()
                finally:
                    stream._host_funcs.pop(token, None)

            _trampoline = trampoline
    return _trampoline
