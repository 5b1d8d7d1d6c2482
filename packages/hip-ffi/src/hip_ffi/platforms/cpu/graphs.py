"""Stream capture and graphs of the cpu platform.

A capturing stream records what is enqueued on it (launches with their arguments as packed at
the call, asynchronous copies and memsets, host functions, graph launches) instead of running
it; the graph is that sequence, and a launch of its instance enqueues the whole sequence as
one operation on a stream. Limits: one stream per capture (an event recorded or waited on
across streams during capture is hipErrorStreamCaptureUnsupported), the null stream cannot be
captured, and the capture mode is accepted but every mode behaves as relaxed.
"""

from __future__ import annotations

from typing import Any

from hip_ffi._ffi import ffi
from hip_ffi.constants import CAPTURE_STATUS_ACTIVE, CAPTURE_STATUS_NONE
from hip_ffi.platforms.cpu import status
from hip_ffi.platforms.cpu.handles import Registry, address
from hip_ffi.platforms.cpu.streams import ENGINE, Stream, Work, on_stream


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
    with ENGINE.cond:
        if stream.capture is not None:
            return status.ILLEGAL_STATE
        stream.capture = []
    return status.SUCCESS


@on_stream
def hipStreamEndCapture(stream: Stream, graph: Any) -> int:
    if graph == ffi.NULL:
        return status.INVALID_VALUE
    with ENGINE.cond:
        nodes, stream.capture = stream.capture, None
    if nodes is None:
        return status.ILLEGAL_STATE
    graph[0] = GRAPHS.cdata(GRAPHS.add(Graph(nodes)))
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
