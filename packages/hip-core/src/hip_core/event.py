"""Events: points in a stream to wait on and to time between."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hip_core import _hip
from hip_core._current import _thread
from hip_core._hip import hip
from hip_core._resource import Resource
from hip_core.errors import check, check_done
from hip_core.stream import checked_handle
from hip_ffi.constants import EVENT_DEFAULT, EVENT_DISABLE_TIMING, EVENT_INTERPROCESS

if TYPE_CHECKING:
    from hip_core.device import Device
    from hip_core.ipc import IpcEventHandle
    from hip_core.stream import Stream


class Event(Resource):
    """A HIP event. `timing=False` makes record/wait cheaper but `elapsed_ms` impossible.

    `interprocess=True` (with `timing=False`, as HIP requires) makes an event another process
    can open from `ipc_handle()` (hip_core.ipc): a record in either process completes waits in
    both.
    """

    __slots__ = ("device", "handle", "interprocess", "timing")
    _named_by_launches = False  # never a kernel's argument: closing one keeps launch caches

    def __init__(self, device: Device, *, timing: bool = True, interprocess: bool = False) -> None:
        # The hot path of issue 15 (cuda.core's cost or below): one cell, one call, and the
        # device switch only when this thread is not on the device already (what `with
        # device:` would decide too, at 1.3 µs).
        # The create and destroy are the platform's native entries where it has them
        # (`HipApi.fast`: nvidia's cudart calls, without the Python translating wrapper); a
        # failure there has no effect, so the surface call is made again for HIP's status.
        api = _hip._api or hip()  # (the loaded api without a call)
        found = _last
        if found[0] is not api:
            found = _entries(api)
        spare = found[4]  # (a handle cell made once and reused: ffi.new costs ~2k instructions)
        try:
            out = spare.pop()
        except IndexError:  # none free (another thread's creation holds it): a new one
            out = api.ffi.new(found[1])
        flags = EVENT_DEFAULT if timing else EVENT_DISABLE_TIMING
        if interprocess:
            if timing:
                raise ValueError("an interprocess event cannot time: create it with timing=False")
            flags |= EVENT_INTERPROCESS
        if _thread.ordinal == device.ordinal:  # (current_ordinal(), inline)
            status = found[2](out, flags)
            if status:
                status = api.hipEventCreateWithFlags(out, flags)
        else:
            with device:
                status = api.hipEventCreateWithFlags(out, flags)
        if status:
            check(status, "hipEventCreateWithFlags")
        self.handle = handle = out[0]
        spare.append(out)
        self.device = device
        self.timing = timing
        self.interprocess = interprocess
        # (Resource._own's four slots, set inline: one call fewer per event)
        self._releaser_args = (api, found[3], handle)
        self._releaser = _destroy_event
        self._holders = 0
        self._deferred = None

    @classmethod
    def adopt(
        cls, handle: Any, device: Device, *, timing: bool = False, interprocess: bool = False
    ) -> Event:
        """An Event that owns a hipEvent_t made elsewhere (`IpcEventHandle.open`'s, from
        hipIpcOpenEventHandle): closing or collecting it destroys the handle (hipEventDestroy),
        as for an event made here. `timing` and `interprocess`: the flags it was made with
        (not read back from HIP). Synchronous; no HIP call."""
        api = _hip._api or hip()
        found = _last if _last[0] is api else _entries(api)
        event = cls.__new__(cls)
        event.handle, event.device = handle, device
        event.timing, event.interprocess = timing, interprocess
        event._own(_destroy_event, api, found[3], handle)
        return event

    def close(self) -> None:
        """Destroy the event now (or, while a graph holds it, once the last one lets go).
        Closing twice is harmless. (Resource.close's steps, without the generic parts an
        event never needs: an event is in no launch cache; issue 15 times create + close.)"""
        if self._releaser is None:
            return
        self._releaser = None
        if self._holders:
            self._deferred = _destroy_event
            return
        api, destroy, handle = self._releaser_args  # (_destroy_event, inline)
        if destroy(handle):
            status = api.hipEventDestroy(handle)
            if status:
                check(status, "hipEventDestroy")

    def record(self, stream: Stream | None = None) -> None:
        """Capture the work queued on `stream` (None: the null stream) so far; the event
        completes when it has run. Recorded on a stream being captured, it is a point of the
        graph that other captured streams may wait on (fork and join)."""
        if self._releaser is None:
            self._check_open()
        check(hip().hipEventRecord(self.handle, checked_handle(stream)), "hipEventRecord")

    def sync(self) -> None:
        """Block the calling thread until the event has completed."""
        self._check_open()
        check(hip().hipEventSynchronize(self.handle), "hipEventSynchronize")

    @property
    def done(self) -> bool:
        """True once the recorded work has completed (does not block)."""
        self._check_open()
        return check_done(hip().hipEventQuery(self.handle), "hipEventQuery")

    def elapsed_ms(self, end: Event) -> float:
        """Milliseconds of device time from this event to `end`; both must have completed."""
        self._check_open()
        end._check_open()
        if not (self.timing and end.timing):
            raise ValueError("elapsed time needs two events created with timing=True")
        api = hip()
        ms = api.ffi.new("float*")
        check(api.hipEventElapsedTime(ms, self.handle, end.handle), "hipEventElapsedTime")
        return float(ms[0])

    def ipc_handle(self) -> IpcEventHandle:
        """A handle another process opens to use this event (an `IpcEventHandle`, which
        pickles); the event must be `interprocess=True`, else ValueError. Keep it open while
        other processes use it. ClosedError for a closed event."""
        from hip_core.ipc import export_event

        self._check_open()
        return export_event(self)

    def __sub__(self, start: Event) -> float:
        """`end - start`: elapsed milliseconds."""
        return start.elapsed_ms(self)


def _destroy_event(api: Any, destroy: Any, handle: Any) -> None:
    """`destroy`: `api.fast("hipEventDestroy")`; on a failure, the surface call's status."""
    if destroy(handle):
        status = api.hipEventDestroy(handle)
        if status:
            check(status, "hipEventDestroy")


#: What events of the last api used need, looked up once (`_entries`): the api, the cffi type
#: `hipEvent_t*` (ffi.new parses a type string through a cache of its own at each call), the
#: fast create and destroy entries, and the spare `hipEvent_t*` cells creations reuse.
_last: tuple[Any, Any, Any, Any, list[Any]] = (None, None, None, None, [])


def _entries(api: Any) -> tuple[Any, Any, Any, Any, list[Any]]:
    """`_last` for `api` (a process may switch platforms: hip_core.use_platform)."""
    global _last
    _last = (
        api,
        api.ffi.typeof("hipEvent_t*"),
        api.fast("hipEventCreateWithFlags"),
        api.fast("hipEventDestroy"),
        [],
    )
    return _last
