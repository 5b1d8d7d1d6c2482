"""Graphs: capture a stream's work once, replay it with one launch.

with capture(stream) as captured:
    kernel.launch(grid, block, x, n, stream=stream)
    ...
graph_exec = captured.graph.instantiate()
graph_exec.launch(stream)          # replays every captured operation, in order
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hip_core._hip import hip
from hip_core._resource import Resource
from hip_core.errors import check
from hip_ffi.constants import CAPTURE_MODE_THREAD_LOCAL

if TYPE_CHECKING:
    from hip_core.stream import Stream


class Graph(Resource):
    """A captured graph of device work (not yet executable)."""

    __slots__ = ("handle",)

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self._own(_destroy_graph, hip(), handle)

    def instantiate(self) -> GraphExec:
        """An executable instance of this graph (hipGraphInstantiate)."""
        self._check_open()
        api = hip()
        out = api.ffi.new("hipGraphExec_t*")
        check(
            api.hipGraphInstantiate(out, self.handle, api.ffi.NULL, api.ffi.NULL, 0),
            "hipGraphInstantiate",
        )
        return GraphExec(out[0], self)


class GraphExec(Resource):
    """An instantiated graph; `launch(stream)` replays it on a stream."""

    __slots__ = ("graph", "handle")

    def __init__(self, handle: Any, graph: Graph) -> None:
        self.handle = handle
        self.graph = graph
        self._own(_destroy_exec, hip(), handle)

    def launch(self, stream: Stream) -> None:
        """Queue one replay of the whole graph on `stream` (returns at once)."""
        self._check_open()
        stream._check_open()
        check(hip().hipGraphLaunch(self.handle, stream.handle), "hipGraphLaunch")


class capture:
    """Record the work queued on `stream` inside the `with` block into `.graph`.

    Nothing captured runs during capture. The stream must not be the null stream. Capture is
    thread-local: other threads may keep using HIP meanwhile.
    """

    def __init__(self, stream: Stream, *, mode: int = CAPTURE_MODE_THREAD_LOCAL) -> None:
        if stream.handle == hip().ffi.NULL:
            raise ValueError("the null stream cannot be captured; use a created stream")
        self.stream = stream
        self.mode = mode
        self.graph: Graph | None = None

    def __enter__(self) -> capture:
        self.stream._check_open()
        check(hip().hipStreamBeginCapture(self.stream.handle, self.mode), "hipStreamBeginCapture")
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        api = hip()
        out = api.ffi.new("hipGraph_t*")
        status = api.hipStreamEndCapture(self.stream.handle, out)
        if exc_type is not None:  # the block failed: end capture, drop the graph, re-raise
            if status == 0 and out[0] != api.ffi.NULL:
                api.hipGraphDestroy(out[0])
            return
        check(status, "hipStreamEndCapture")
        self.graph = Graph(out[0])


def _destroy_graph(api: Any, handle: Any) -> None:
    check(api.hipGraphDestroy(handle), "hipGraphDestroy")


def _destroy_exec(api: Any, handle: Any) -> None:
    check(api.hipGraphExecDestroy(handle), "hipGraphExecDestroy")
