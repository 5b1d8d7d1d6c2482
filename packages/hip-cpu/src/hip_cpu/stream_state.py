"""What the cpu platform's stream engine (streams.py) orders: a stream's queue of operations,
an operation, the point of a stream an event records, and when dependencies are met.

Plain state, no behaviour: the engine reads and changes it under its one lock.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from hip_cpu import status
from hip_ffi.constants import STREAM_NON_BLOCKING

if TYPE_CHECKING:
    from hip_cpu.graphs import Capture
    from hip_cpu.shared_events import Shared

Work = Callable[[], int]  # runs one operation; returns a hipError_t
Dependency = tuple["Stream", int]  # (stream, ticket): done once stream.completed >= ticket


class Stream:
    """One queue. Tickets number its operations 1, 2, ...; `completed` is the last finished."""

    def __init__(self, flags: int, priority: int, *, null: bool = False, device: int = 0) -> None:
        self.handle = 0
        self.device = device  # the ordinal it belongs to
        self.flags = flags
        self.priority = priority
        self.null = null
        self.blocking = not null and not (flags & STREAM_NON_BLOCKING)
        self.queue: deque[Operation] = deque()
        self.enqueued = 0
        self.completed = 0
        self.error = status.SUCCESS
        self.error_detail = ""  # what the failing operation said about its error
        self.thread: threading.Thread | None = None
        self.capture: Capture | None = None  # the stream capture this stream takes part in
        self.destroyed = False
        self.running = False  # its head operation is being executed (by its worker or a helper)


class Operation:
    __slots__ = ("deps", "detail", "result", "sticky", "ticket", "work")

    def __init__(self, ticket: int, deps: Sequence[Dependency], work: Work, sticky: bool) -> None:
        self.ticket = ticket
        self.deps = deps
        self.work = work
        self.sticky = sticky  # an error of asynchronous work is kept for the next synchronize
        self.result = status.SUCCESS
        self.detail = ""  # what the work noted about its failure (status.note_failure)


class Record:
    __slots__ = ("stream", "ticket", "time_ns")

    def __init__(self, stream: Stream, ticket: int) -> None:
        self.stream = stream
        self.ticket = ticket
        self.time_ns: int | None = None


class Event:
    def __init__(self, flags: int) -> None:
        self.flags = flags
        self.record: Record | None = None  # the latest hipEventRecord
        # The latest record, when it was made on a capturing stream: (capture, point).
        self.captured: tuple[Capture, dict[Stream, int]] | None = None
        # An interprocess event's state, which other processes see (shared_events.py).
        self.shared: Shared | None = None


def all_done(deps: Sequence[Dependency]) -> bool:
    """Whether every (stream, ticket) of `deps` has finished."""
    return all(stream.completed >= ticket for stream, ticket in deps)


__all__ = ["Dependency", "Event", "Operation", "Record", "Stream", "Work", "all_done"]
