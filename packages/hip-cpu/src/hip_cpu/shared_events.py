"""Interprocess events of the cpu platform: event state in memory that other processes map.

An event created with hipEventInterprocess (and hipEventDisableTiming, which HIP requires with
it) keeps its state in a 32-byte slot of the process's arena header (arena.py), which
hipIpcOpenEventHandle maps into another process (ipc.py): four uint64 words, (serial, records,
completed records, 0). In every process that holds the event:
- hipEventRecord(stream): `records += 1`, and an operation queued on `stream` raises
  `completed` to that count when the stream gets there;
- hipEventQuery: complete when `completed >= records`;
- hipEventSynchronize and hipStreamWaitEvent: wait until `completed` reaches the `records`
  read at the call. The host polls, sleeping from 10 µs up to 1 ms between looks; a stream that
  waits holds its worker thread meanwhile.
So a record made in either process completes the waits of both. Two processes recording one
event at the same moment race on `records`, as two host threads would on HIP, which orders
neither. A record or wait on a capturing stream is hipErrorStreamCaptureUnsupported.

Destroying the event marks it closed before its memory goes (a wait polling it returns, a
queued record writes nothing), so no host thread ever reads an unmapped slot; operations on
an imported event after its exporter destroyed it are undefined on HIP, and read a stale slot
here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from hip_cpu import arena, faults, status
from hip_cpu.stream_state import Stream
from hip_cpu.streams import ENGINE
from hip_ffi._ffi import ffi

_RECORDS, _COMPLETED = 1, 2  # word indices
_FIRST_SLEEP, _LONGEST_SLEEP = 1e-5, 1e-3  # seconds


@dataclass
class Shared:
    """Where an interprocess event's slot is in this process, and how it got there."""

    address: int
    slot: int = -1  # its index in this process's event table (the exporting process only)
    mapping: tuple[int, int] | None = None  # an opened handle's own mapping (start, length)
    handle: bytes = b""  # the 64 handle bytes an opened event was opened from
    closed: bool = False

    @property
    def words(self) -> Any:
        return ffi.cast("uint64_t*", self.address)


def new() -> Shared | int | None:
    """The slot of a new interprocess event of this process: None where there is no arena (the
    event is then a local one, which hipIpcGetEventHandle refuses), hipErrorOutOfMemory when
    the event table is full."""
    memory = arena.get()
    if memory is None:
        return None
    taken = memory.event_slot()
    if taken is None:
        return status.OUT_OF_MEMORY
    index, _serial, address = taken
    return Shared(address, slot=index)


def close(shared: Shared) -> None:
    """hipEventDestroy: mark it closed, then let its slot or its mapping go."""
    shared.closed = True
    if shared.mapping is not None:
        faults.unmap(*shared.mapping)
    elif shared.slot >= 0 and (memory := arena.get()) is not None:
        memory.release_event_slot(shared.slot)


def record(shared: Shared, stream: Stream) -> int:
    if stream.capture is not None:
        return status.CAPTURE_UNSUPPORTED
    words = shared.words
    target = int(words[_RECORDS]) + 1
    words[_RECORDS] = target

    def complete() -> int:
        if not shared.closed and words[_COMPLETED] < target:
            words[_COMPLETED] = target
        return status.SUCCESS

    return ENGINE.submit(stream, complete)


def done(shared: Shared) -> bool:
    words = shared.words
    return shared.closed or words[_COMPLETED] >= words[_RECORDS]


def _until(shared: Shared, target: int) -> None:
    """Poll until the event's completed records reach `target` (or it is destroyed)."""
    words, delay = shared.words, _FIRST_SLEEP
    while not shared.closed and words[_COMPLETED] < target:
        time.sleep(delay)
        delay = min(2 * delay, _LONGEST_SLEEP)


def synchronize(shared: Shared) -> None:
    """hipEventSynchronize: return once the records made so far (in any process) completed."""
    _until(shared, int(shared.words[_RECORDS]))


def wait(stream: Stream, shared: Shared) -> int:
    """hipStreamWaitEvent: later work on `stream` waits for the records made so far."""
    if stream.capture is not None:
        return status.CAPTURE_UNSUPPORTED
    target = int(shared.words[_RECORDS])
    if done(shared):
        return status.SUCCESS

    def waited() -> int:
        _until(shared, target)
        return status.SUCCESS

    return ENGINE.submit(stream, waited)
