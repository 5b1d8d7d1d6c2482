"""ForwardGraph: a whole forward of HipBackend ops captured once, replayed with new inputs.

    def forward(x):                                   # HipBackend ops on fixed shapes
        h = backend.layernorm(backend.matmul(x, w), gamma, beta)
        return backend.softmax(h)

    graph = ForwardGraph(backend, forward, example)   # example: a numpy array or DeviceTensor
    y = graph(new_input)                              # copies it in, queues one replay
    host = y.to_numpy()                               # waits for backend.stream

Construction runs `forward` once eagerly (a warm-up: kernels compile, hipBLAS initializes),
then captures it on the backend's stream: nothing runs during the capture, every operation is
recorded into one graph. Each replay copies the new inputs into the graph's input tensors
(`graph.inputs`) and launches the whole graph, all queued on `backend.stream` and returning at
once. Bad inputs (count, shape, dtype, device) raise ValueError before anything is queued.

Memory: what `forward` allocates while it is captured (op outputs, temporaries) comes from
memory the graph owns, not from the backend's pool, so every replay finds the same addresses
and nothing else is ever handed that memory while the graph lives; none of it is reused
within one forward (a temporary keeps its bytes), which is the price of replays that cannot
race. The graph keeps everything it captured alive: input tensors, weights, outputs.

Outputs: `graph.outputs` is what `forward` returned during the capture (a DeviceTensor, or a
tuple, list or dict of them); every replay returns those same tensors and overwrites them in
stream order. To keep one replay's result past the next replay, copy it: `y.to_numpy()`, or
`keep = backend.empty(y.shape, y.dtype); keep.copy_(y)` (device to device, stream-ordered).

What can be captured: any HipBackend ops and hip-core launches, copies, fills, hipBLAS calls
and event records on the backend's stream, and work forked to other streams through events
(record on `backend.stream`, `other.wait(event)`, work on `other`, record there, and
`backend.stream.wait(...)` before the forward returns). Not: anything that waits on the host
(`to_numpy()`, `synchronize()`), nor Python control flow that depends on tensor values, since
the graph replays what the capture recorded. The forward must not be captured while other
threads use the backend.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from hip_core import Device, DeviceBuffer, GraphExec, Resource, Stream, capture
from hip_core.pool import allocations_served_by
from hip_ffi.constants import CAPTURE_MODE_RELAXED
from hip_runtime.backend import HipBackend
from hip_runtime.tensors.tensor import DeviceTensor

_ALIGNMENT = 256  # bytes between two allocations of the graph, as a device allocator aligns
_FIRST_CHUNK = 4 << 20  # the graph's memory grows in chunks, each twice the last...
_LARGEST_CHUNK = 256 << 20  # ...up to this (a larger allocation gets a chunk of its own size)


class GraphMemory:
    """The device memory a captured forward allocates: bump allocation in chunks of device
    memory (hipMalloc), never freed or reused while any tensor or graph uses it.

    `reserve(sizes)` before the capture makes one chunk that holds them all (the warm-up's
    allocations, recorded by `record`), so that a capture allocating what its warm-up did
    calls no allocator at all; beyond that, chunks are allocated during the capture (it runs
    in relaxed mode, which allows that)."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.chunks: list[DeviceBuffer] = []
        self.used = 0  # bytes handed out of the last chunk
        self.allocated = 0  # bytes handed out in all
        self.recorded: list[int] = []  # sizes `record` saw
        self._next_chunk = _FIRST_CHUNK

    def record(self, size: int, stream: Stream) -> None:
        """Note a pool allocation's size and let the pool serve it (the warm-up run)."""
        self.recorded.append(size)

    def reserve(self) -> None:
        """One chunk for every size recorded, each aligned (nothing when none was)."""
        total = sum(-(-max(size, 1) // _ALIGNMENT) * _ALIGNMENT for size in self.recorded)
        if total:
            self.chunks.append(self.device.allocate(total))
            self.used = 0

    def allocate(self, size: int, stream: Stream) -> DeviceBuffer:
        """`size` bytes (a view of a chunk), usable on any stream at once."""
        aligned = -(-max(size, 1) // _ALIGNMENT) * _ALIGNMENT
        if not self.chunks or self.used + aligned > self.chunks[-1].size:
            self.chunks.append(self.device.allocate(max(aligned, self._next_chunk)))
            self._next_chunk = min(self._next_chunk * 2, _LARGEST_CHUNK)
            self.used = 0
        view = self.chunks[-1].view(self.used, size)
        self.used += aligned
        self.allocated += aligned
        return view


class ForwardGraph(Resource):
    """`forward(*inputs)` of HipBackend ops, captured once at the examples' shapes and dtypes,
    replayed on `backend.stream` with new input data (see the module doc).

    Args:
        backend: the HipBackend whose stream the forward is captured on and replayed on.
        forward: a function of DeviceTensors returning a DeviceTensor, or a tuple, list or
            dict of them.
        *examples: one per input of `forward`: a host array (anything numpy takes) or a
            DeviceTensor; it fixes the input's shape and dtype and is its first data.
        warmup: run `forward` once eagerly before the capture (default), so that compiling
            kernels and initializing hipBLAS never happen inside it, and the graph's memory is
            allocated in one piece before it.

    A hip_core.Resource: `close()` releases the graph (and, once no tensor uses it, its
    memory); replaying a closed graph raises hip_core.ClosedError.
    """

    def __init__(
        self,
        backend: HipBackend,
        forward: Callable[..., Any],
        *examples: Any,
        warmup: bool = True,
    ) -> None:
        backend._check_open()
        if not callable(forward):
            raise TypeError(f"forward must be callable, not {type(forward).__name__}")
        self.backend = backend
        self.inputs = tuple(self._input(backend, example, i) for i, example in enumerate(examples))
        self.memory = GraphMemory(backend.device)
        stream = backend.stream
        if warmup:
            with allocations_served_by(stream, self.memory.record):
                forward(*self.inputs)
            self.memory.reserve()
        enabled = gc.isenabled()
        gc.collect()  # no finalizer of unrelated garbage (a free, a sync) runs in the capture
        gc.disable()
        try:
            with (
                allocations_served_by(stream, self.memory.allocate),
                capture(stream, mode=CAPTURE_MODE_RELAXED) as captured,
            ):
                outputs = forward(*self.inputs)
        finally:
            if enabled:
                gc.enable()
        self.outputs = outputs
        _check_outputs(outputs)
        assert captured.graph is not None  # the capture ended without an exception
        self.graph = captured.graph
        self._exec: GraphExec = self.graph.instantiate()
        self._own(_release, self._exec, self.graph)

    @staticmethod
    def _input(backend: HipBackend, example: Any, index: int) -> DeviceTensor:
        """The graph's own tensor for input `index`, holding the example's data."""
        tensor = backend.empty(*_shape_dtype(example, index))
        _copy_in(tensor, example)
        return tensor

    def replay(self, *inputs: Any) -> Any:
        """Copy `inputs` (host arrays or DeviceTensors, one per input, of the captured shapes
        and dtypes) into the graph's inputs and queue one replay on `backend.stream`; returns
        `outputs`, overwritten in stream order. With no arguments, replays on what the input
        tensors hold now. Returns at once."""
        self._check_open()
        self.backend._check_open()
        if inputs:
            if len(inputs) != len(self.inputs):
                raise ValueError(
                    f"ForwardGraph.replay takes {len(self.inputs)} inputs, got {len(inputs)}"
                )
            for index, (new, mine) in enumerate(zip(inputs, self.inputs, strict=True)):
                shape, dtype = _shape_dtype(new, index)
                if shape != mine.shape or dtype != mine.dtype:
                    raise ValueError(
                        f"ForwardGraph.replay: input {index} is {shape} {dtype}; the graph was "
                        f"captured for {mine.shape} {mine.dtype}"
                    )
                if isinstance(new, DeviceTensor) and new.device != mine.device:
                    raise ValueError(f"ForwardGraph.replay: input {index} is on another device")
            for new, mine in zip(inputs, self.inputs, strict=True):
                if new is not mine:
                    _copy_in(mine, new)
        self._exec.launch(self.backend.stream)
        return self.outputs

    __call__ = replay

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self.memory.allocated} bytes of its own"
        shapes = ", ".join(str(t.shape) for t in self.inputs)
        return f"<ForwardGraph ({shapes}) {state}>"


def _shape_dtype(value: Any, index: int) -> tuple[tuple[int, ...], np.dtype[Any]]:
    if isinstance(value, DeviceTensor):
        if value.closed:
            raise ValueError(f"ForwardGraph: input {index}'s memory is closed")
        return value.shape, value.dtype
    try:
        array = np.asarray(value)
    except Exception as error:
        raise ValueError(f"ForwardGraph: input {index} is not an array: {error}") from None
    if array.dtype.hasobject:
        raise ValueError(f"ForwardGraph: input {index} holds Python objects")
    return array.shape, array.dtype


def _copy_in(tensor: DeviceTensor, value: Any) -> None:
    """value's data into `tensor`, queued on its stream (a host array: once it has been read)."""
    if isinstance(value, DeviceTensor):
        tensor.copy_(value)
    else:
        tensor.copy_from_host(value)


def _check_outputs(outputs: Any) -> None:
    values: Sequence[Any] | Any
    if isinstance(outputs, Mapping):
        values = list(outputs.values())
    elif isinstance(outputs, (tuple, list)):
        values = outputs
    else:
        values = [outputs]
    for value in values:
        if not isinstance(value, DeviceTensor):
            raise TypeError(
                "ForwardGraph: forward must return a DeviceTensor or a tuple, list or dict of "
                f"them, not {type(value).__name__}"
            )


def _release(executable: GraphExec, graph: Any) -> None:
    executable.close()
    graph.close()


__all__ = ["ForwardGraph", "GraphMemory"]
