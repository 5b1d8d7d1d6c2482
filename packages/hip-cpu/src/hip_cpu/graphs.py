"""Stream capture and graphs of the cpu platform.

A capturing stream records what is enqueued on it (launches with their arguments as packed at
the call, asynchronous copies and memsets, host functions, graph launches) instead of running
it; the graph is that sequence, and a launch of its instance enqueues the whole sequence as
one operation on a stream. A capture may fork and join as HIP's does: an event recorded on a
capturing stream and waited on by another stream brings that stream into the capture, and
the capture ends (on the stream that began it) only once that stream's work is waited for
again (hipErrorStreamCaptureUnjoined otherwise). Limits: the null stream cannot be captured
nor join one, an event recorded outside the capture may only be waited on by the stream it
was recorded on, and the capture mode is accepted but every mode behaves as relaxed.
"""

from __future__ import annotations

from typing import Any

from hip_cpu import status
from hip_cpu.stream_state import Stream, Work
from hip_cpu.streams import ENGINE, on_stream
from hip_ffi._ffi import ffi
from hip_ffi.constants import CAPTURE_STATUS_ACTIVE, CAPTURE_STATUS_NONE, ERROR_CODES
from hip_ffi.handles import Registry, address

CAPTURE_UNJOINED = ERROR_CODES["hipErrorStreamCaptureUnjoined"]


class Capture:
    """One stream capture: what every stream taking part enqueued, in the order it was
    enqueued, and what each of those streams has been made to wait for.

    The stream that began it (`origin`) may fork: an event recorded on a capturing stream and
    waited on by another stream makes that stream join the capture, and its work is recorded
    too. Replaying the operations in enqueue order respects every dependency (each one was
    enqueued after what it waits for), so a graph stays one sequence. `clocks[s][t]` is how
    many of t's operations s has waited for (itself: all of its own); the capture may end only
    once the origin has waited for every operation of every stream that joined (HIP's rule:
    hipErrorStreamCaptureUnjoined otherwise).
    """

    def __init__(self, origin: Stream) -> None:
        self.origin = origin
        self.nodes: list[Work] = []
        self.clocks: dict[Stream, dict[Stream, int]] = {origin: {origin: 0}}
        self.active = True

    def append(self, stream: Stream, work: Work) -> None:
        self.nodes.append(work)
        clock = self.clocks[stream]
        clock[stream] = clock.get(stream, 0) + 1

    def point(self, stream: Stream) -> dict[Stream, int]:
        """What an event recorded on `stream` now stands for."""
        return dict(self.clocks[stream])

    def wait(self, stream: Stream, point: dict[Stream, int]) -> None:
        """`stream` (joining now if it was not part of the capture) waits for `point`."""
        clock = self.clocks.setdefault(stream, {stream: 0})
        for other, count in point.items():
            if clock.get(other, 0) < count:
                clock[other] = count

    def unjoined(self) -> bool:
        """Whether a stream's operations are not all waited for by the origin."""
        seen = self.clocks[self.origin]
        return any(
            clock.get(stream, 0) > seen.get(stream, 0) for stream, clock in self.clocks.items()
        )

    def end(self) -> None:
        """Every stream taking part stops capturing (the origin's end capture, or a failure)."""
        self.active = False
        for stream in self.clocks:
            stream.capture = None


class Graph:
    def __init__(self, nodes: list[Work]) -> None:
        self.nodes = nodes

    def run(self) -> int:
        error = status.SUCCESS
        for node in self.nodes:
            error = node() or error
        return error


GRAPHS: Registry[Graph] = Registry("hipGraph_t")
EXECUTABLES: Registry[Graph] = Registry("hipGraphExec_t")


@on_stream
def hipStreamBeginCapture(stream: Stream, mode: int) -> int:
    if mode not in (0, 1, 2):
        return status.INVALID_VALUE
    if stream.null:
        return status.CAPTURE_UNSUPPORTED
    with ENGINE.held:
        if stream.capture is not None:
            return status.ILLEGAL_STATE
        stream.capture = Capture(stream)
    return status.SUCCESS


@on_stream
def hipStreamEndCapture(stream: Stream, graph: Any) -> int:
    if graph == ffi.NULL:
        return status.INVALID_VALUE
    with ENGINE.held:
        capture = stream.capture
        if capture is None:
            return status.ILLEGAL_STATE
        if capture.origin is not stream:  # a stream that joined: only the origin ends it
            return status.CAPTURE_UNMATCHED
        capture.end()
        if capture.unjoined():
            return CAPTURE_UNJOINED
    graph[0] = GRAPHS.cdata(GRAPHS.add(Graph(capture.nodes)))
    return status.SUCCESS


@on_stream
def hipStreamIsCapturing(stream: Stream, capture_status: Any) -> int:
    if capture_status == ffi.NULL:
        return status.INVALID_VALUE
    active = stream.capture is not None
    capture_status[0] = CAPTURE_STATUS_ACTIVE if active else CAPTURE_STATUS_NONE
    return status.SUCCESS


def _instantiate(executable: Any, graph: Any) -> int:
    found = GRAPHS.get(graph)
    if found is None:
        return status.INVALID_VALUE
    if executable == ffi.NULL:
        return status.INVALID_VALUE
    executable[0] = EXECUTABLES.cdata(EXECUTABLES.add(Graph(list(found.nodes))))
    return status.SUCCESS


def hipGraphInstantiate(
    executable: Any, graph: Any, error_node: Any, log: Any, log_size: int
) -> int:
    result = _instantiate(executable, graph)
    if error_node != ffi.NULL:
        error_node[0] = ffi.NULL
    if address(log) and log_size > 0:
        log[0] = b"\0"
    return result


def hipGraphInstantiateWithFlags(executable: Any, graph: Any, flags: int) -> int:
    return _instantiate(executable, graph)


def hipGraphLaunch(executable: Any, stream: Any) -> int:
    """Enqueue every operation of the graph, in capture order, as one operation on `stream`."""
    found = EXECUTABLES.get(executable)
    resolved = ENGINE.resolve(stream)
    if found is None or resolved is None:
        return status.INVALID_HANDLE
    return ENGINE.submit(resolved, found.run)


def hipGraphExecDestroy(executable: Any) -> int:
    return status.SUCCESS if EXECUTABLES.remove(executable) is not None else status.INVALID_VALUE


def hipGraphDestroy(graph: Any) -> int:
    return status.SUCCESS if GRAPHS.remove(graph) is not None else status.INVALID_VALUE
