"""A LlamaDecoder's decode step on device state, run eagerly or replayed as one graph.

A step takes each sequence's newest token (a device int tensor [B], e.g. a sampler's output)
and a small int32 state [3, B] — each sequence's position (its tokens so far), the KV-cache row
its new key and value go to (b · max_tokens + position) and its length after the step — and
returns the next logits [B, vocab]. Everything a step reads that changes from step to step is in
those two tensors, so the same ops replay as a captured ForwardGraph: one launch per step
instead of a few hundred (the host cost of a small batch's step). The host keeps the lengths
(every sequence gains one token per step) and counts the tokens in the cache after each step
(`KVCache.advance`).

The state stays on the device between steps: every entry of it grows by exactly one per step,
so each step ends with one in-place `add` and the next reads it, and nothing is uploaded while
the host's lengths are the ones the device state was made from. An upload from pageable memory
waits for the stream (CUDA's rule for pageable host-to-device copies; the cpu platform's too),
so uploading every step kept the host from queueing a step before the last one had run: the
H200 timed 4.4 ms per eager step of an 8-layer model, against 0.7 ms replayed. The state is
uploaded again only when the lengths moved otherwise (a prefill, another step over the cache,
a step that raised before its increment was queued).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from hip_runtime.runtime.forward_graph import ForwardGraph
from hip_runtime.runtime.kv_cache import KVCache
from hip_runtime.tensors.tensor import DeviceTensor

if TYPE_CHECKING:
    from hip_runtime.backend import HipBackend

#: A model's decode step: (ids int [B], state int32 [3, B]) -> logits [B, vocab], only ops on
#: the backend's stream (so that a graph can capture it).
StepFunction = Callable[[DeviceTensor, DeviceTensor], DeviceTensor]


class DecodeStep:
    """Decode steps `step` (a model's, e.g. a LlamaDecoder's) over the KV cache `cache`, queued
    on `backend`'s stream; `graph`: captured once (a warm-up step that writes nothing, then the
    capture) and replayed. Close it (or let the model) before the cache goes."""

    def __init__(
        self, backend: HipBackend, step: StepFunction, cache: KVCache, *, graph: bool = False
    ) -> None:
        self.backend, self.cache = backend, cache
        self._step = step
        self._graph: ForwardGraph | None = None
        self._state: DeviceTensor | None = None  # the device state, int32 [3, B]
        self._state_held: np.ndarray | None = None  # the lengths it was made from (None: stale)
        if graph:
            batch = cache.batch
            ids = backend.zeros((batch,), np.int64)
            idle = np.stack([np.zeros(batch), -np.ones(batch), np.ones(batch)]).astype(np.int32)
            self._graph = ForwardGraph(backend, step, ids, idle)
            self._state = self._graph.inputs[1]  # replays read it in place: no copy per step

    def state(self) -> np.ndarray:
        """The next step's int32 [3, B]: positions, cache rows, lengths after the step."""
        cache = self.cache
        held = cache.lengths[0]
        if held.max() >= cache.max_tokens:
            raise ValueError(f"a sequence holds {held.max()} tokens: the KV cache "
                             f"(max_tokens={cache.max_tokens}) is full")  # fmt: skip
        rows = np.arange(cache.batch) * cache.max_tokens + held
        return np.stack([held, rows, held + 1]).astype(np.int32)

    def __call__(self, ids: DeviceTensor) -> DeviceTensor:
        """Logits [B, vocab] after the tokens `ids` (device int [B]); queued, returns at once
        (no wait for the device unless the state must be uploaded: module docstring).
        A graph's logits are its own output tensor, overwritten by the next step."""
        state = self._device_state()
        self._state_held = None  # stale until the step and its increment are both queued
        if self._graph is not None:
            logits: DeviceTensor = self._graph(ids, state)
        else:
            logits = self._step(ids, state)
        self.backend.add(state, 1, out=state)  # the next step's positions, rows, lengths
        held = self.cache.lengths[0]
        self.cache.advance(1)
        self._state_held = held + 1
        return logits

    def _device_state(self) -> DeviceTensor:
        """The device state for the cache's lengths now, uploaded only when it is stale."""
        state = self.state()  # (the full-cache check runs every step)
        held = self.cache.lengths[0]
        if self._state is None:
            self._state = self.backend.from_numpy(state)
        elif self._state_held is None or not np.array_equal(self._state_held, held):
            self._state.copy_from_host(state)
        return self._state

    def close(self) -> None:
        """Release the graph (its memory goes once nothing uses its outputs: a step's logits
        may still be in the caller's hands when the cache is replaced)."""
        if self._graph is not None:
            self._graph.close()
            self._graph = None

    def free(self) -> None:
        """`close`, and free the step's device memory now: the state, and a graph's inputs,
        outputs and captured memory (which then raise ClosedError). The model's close; the
        backend's stream must have finished the steps."""
        graph = self._graph
        self.close()
        owned = [] if graph is None else [*graph.inputs, graph.outputs]  # (logits: one tensor)
        for tensor in owned if self._state is None else [*owned, self._state]:
            tensor.buffer.close()
        self._state = self._state_held = None
        if graph is not None:
            for chunk in graph.memory.chunks:
                chunk.close()


__all__ = ["DecodeStep", "StepFunction"]
