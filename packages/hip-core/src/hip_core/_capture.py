"""What a stream capture keeps: the objects its graph will use on every replay.

A graph names device memory, code and host memory by address, and HIP does not track them, so
hip-core does: each operation recorded while a stream is captured (a launch's kernel and
arguments, a copy's or fill's buffers and host objects, a host function, a graph launched
inside it) is handed to `keep_captured`, and the Graph made at the end of the capture keeps
it. The resources among them are held (`Resource._hold`) at once, so a close later in the
capture block, or after, only retires them until the last graph lets go.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from hip_core._hip import hip
from hip_core._resource import Resource
from hip_ffi.constants import CAPTURE_STATUS_ACTIVE

if TYPE_CHECKING:
    from hip_core.stream import Stream


class Kept:
    """What one capture recorded: objects kept referenced, resources held (each once)."""

    __slots__ = ("held", "objects")

    def __init__(self) -> None:
        self.objects: list[Any] = []
        self.held: dict[int, Resource] = {}

    def keep(self, obj: Any) -> None:
        self.objects.append(obj)
        for resource in _holdable(obj):
            if id(resource) not in self.held:
                resource._hold()
                self.held[id(resource)] = resource


def _holdable(obj: Any) -> Iterator[Resource]:
    """The resources whose release `obj` depends on: a Resource's (a buffer's allocation, a
    module, a graph executable: `_hold_target()`), a tensor's buffer's (anything with a
    Resource at `.buffer`), inside tuples and lists."""
    if isinstance(obj, (tuple, list)):
        for item in obj:
            yield from _holdable(item)
    elif isinstance(obj, Resource):
        yield obj._hold_target()
    elif isinstance(getattr(obj, "buffer", None), Resource):
        yield obj.buffer._hold_target()


def let_go(held: Iterable[Resource]) -> None:
    """Let go of every resource (all of them, even when one's deferred release fails)."""
    failure: Exception | None = None
    for resource in held:
        try:
            resource._let_go()
        except Exception as error:  # reported once the others are released
            failure = failure or error
    if failure is not None:
        raise failure


#: The captures in progress in this process, by the address of the stream that began each.
captures: dict[int, Kept] = {}


def kept_for(stream: Stream | None) -> Kept | None:
    """What the capture `stream` (None: the null stream) takes part in keeps, or None when it
    is not being captured. For a stream that joined a capture through an event (not the one
    that began it), which capture is not known here: the first in progress stands for all.
    Costs nothing when no capture is in progress."""
    if not captures:
        return None
    api = hip()
    handle = api.ffi.NULL if stream is None else stream.handle
    kept = captures.get(int(api.ffi.cast("uintptr_t", handle)))
    if kept is not None:
        return kept
    status = api.ffi.new("hipStreamCaptureStatus*")
    if api.hipStreamIsCapturing(handle, status) or status[0] != CAPTURE_STATUS_ACTIVE:
        return None
    return _JOINED


def keep_captured(stream: Stream | None, obj: Any) -> bool:
    """When `stream` (None: the null stream) is being captured, make its graph keep `obj` and
    hold what it depends on; False (nothing kept) otherwise. Costs nothing when no capture is
    in progress."""
    kept = kept_for(stream)
    if kept is None:
        return False
    if kept is not _JOINED:
        kept.keep(obj)
        return True
    # A stream that joined a capture through an event: which one is not known here, so every
    # capture in progress keeps it (they only hold it longer).
    for each in list(captures.values()):
        each.keep(obj)
    return True


#: What `kept_for` answers for a stream that joined a capture it did not begin.
_JOINED = Kept()
