"""Graphs: capture a stream's work once, replay it with one launch.

with capture(stream) as captured:
    kernel.launch(grid, block, x, n, stream=stream)
    ...
graph_exec = captured.graph.instantiate()
graph_exec.launch(stream)          # replays every captured operation, in order

While a block runs, `capture_in_progress()` is True (any stream, any thread) and
`stream.is_capturing` is True for its stream and for streams that joined it through an event.

A Graph, and each GraphExec made from it, keeps what the capture recorded until it is closed
or collected: the kernels and their arguments, the buffers and host objects of copies and
fills, host functions, graphs launched inside the capture. A buffer or module closed
meanwhile is retired at once (ClosedError from then on) and released when the last graph
holding it lets go, so a replay never reaches freed memory or unloaded code. Raw addresses
(`DevicePointer`, `Stream.copy_from_host`) are not tracked: whoever owns that memory keeps it
valid as long as a graph may replay them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hip_core import _resource
from hip_core._capture import Kept, captures, keep_captured, let_go
from hip_core._hip import hip
from hip_core._resource import Resource
from hip_core.errors import check
from hip_ffi.constants import CAPTURE_MODE_THREAD_LOCAL

if TYPE_CHECKING:
    from hip_core.stream import Stream


class Graph(Resource):
    """A captured graph of device work (not yet executable); keeps what the capture used."""

    __slots__ = ("_kept", "handle")

    def __init__(self, handle: Any, kept: Kept | None = None) -> None:
        self.handle = handle
        self._kept = kept or Kept()  # the capture's holds are this graph's from now on
        self._own(_destroy_graph, hip(), handle, tuple(self._kept.held.values()))

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
    """An instantiated graph; `launch(stream)` replays it on a stream. It holds what its graph
    captured by itself, so the Graph may be closed first."""

    __slots__ = ("graph", "handle")

    def __init__(self, handle: Any, graph: Graph) -> None:
        self.handle = handle
        self.graph = graph  # keeps the captured objects referenced
        held = tuple(graph._kept.held.values())
        for resource in held:
            resource._hold()
        self._own(_destroy_exec, hip(), handle, held)

    def launch(self, stream: Stream | None = None) -> None:
        """Queue one replay of the whole graph on `stream` (None: the null stream); returns at
        once. Launched on a stream being captured, the outer graph keeps this one."""
        from hip_core.stream import checked_handle

        self._check_open()
        handle = checked_handle(stream)
        keep_captured(stream, self)
        check(hip().hipGraphLaunch(self.handle, handle), "hipGraphLaunch")


def capture_in_progress() -> bool:
    """Whether a `capture` block is in progress anywhere in this process (any thread, any
    stream): what work that must not become part of a graph (a one-time zeroing, memory kept
    from one call for the next) asks before it runs. Reads a dictionary, no HIP call, so hot
    paths may ask at every call. Captures begun outside hip-core (another library's
    hipStreamBeginCapture) are not seen; `Stream.is_capturing` answers for one stream."""
    return bool(captures)


class capture:
    """Record the work queued on `stream` inside the `with` block into `.graph`.

    Nothing captured runs during capture. The stream must not be the null stream. Capture is
    thread-local: other threads may keep using HIP meanwhile.
    """

    def __init__(self, stream: Stream, *, mode: int = CAPTURE_MODE_THREAD_LOCAL) -> None:
        from hip_core.stream import checked_handle

        api = hip()
        if stream is None or checked_handle(stream, check_open=False) == api.ffi.NULL:
            raise ValueError("the null stream cannot be captured; use a created stream")
        self.stream = stream
        self.mode = mode
        self.graph: Graph | None = None
        self._address = int(api.ffi.cast("uintptr_t", stream.handle))

    def __enter__(self) -> capture:
        self.stream._check_open()
        check(hip().hipStreamBeginCapture(self.stream.handle, self.mode), "hipStreamBeginCapture")
        captures[self._address] = Kept()
        _resource.capture_began()  # collections from here on release after the capture
        _resource._bump_generation()  # kernels' cached launches pass through keep_captured
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        try:
            self._end(exc_type)
        finally:
            _resource.capture_ended()

    def _end(self, exc_type: object) -> None:
        kept = captures.pop(self._address, None) or Kept()
        if self.stream.closed:  # closed inside the block: its handle must not reach HIP
            let_go(kept.held.values())
            if exc_type is None:
                self.stream._check_open()
            return
        api = hip()
        out = api.ffi.new("hipGraph_t*")
        status = api.hipStreamEndCapture(self.stream.handle, out)
        if exc_type is not None or status:  # end capture, drop the graph and what it held
            if status == 0 and out[0] != api.ffi.NULL:
                api.hipGraphDestroy(out[0])
            let_go(kept.held.values())
            if exc_type is not None:
                return  # the block's exception goes on
        check(status, "hipStreamEndCapture")
        self.graph = Graph(out[0], kept)


def _destroy_graph(api: Any, handle: Any, held: tuple[Resource, ...]) -> None:
    try:
        check(api.hipGraphDestroy(handle), "hipGraphDestroy")
    finally:
        let_go(held)


def _destroy_exec(api: Any, handle: Any, held: tuple[Resource, ...]) -> None:
    try:
        check(api.hipGraphExecDestroy(handle), "hipGraphExecDestroy")
    finally:
        let_go(held)
