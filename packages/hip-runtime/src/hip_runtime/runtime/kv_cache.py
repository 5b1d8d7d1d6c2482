"""KVCache: attention keys and values of every layer for a batch of sequences, preallocated once.

Layout: one device buffer of shape (layers, 2, batch, max_tokens, kv_heads, head_dim) — for each
layer the keys, then the values, each sequence's tokens row-major after the previous sequence's.
Sequences of a batch hold different numbers of tokens: sequence b's tokens sit in slots
0..length-1 of its rows, whatever padding its prompt had (`append` skips the padded tokens a
mask names), so attention reads keys 0..kv_lengths[b]-1 of each sequence (`attention_decode`'s
contract). Every slot at or past a sequence's length holds zeros: the buffer is zeroed when
made and by `reset`, and `append` adds new tokens into those zeros (`index_add`: one launch
per tensor for the whole batch, each sequence at its own length, run by the HipBackend whose
stream the cache has: a ModelRuntime's cache has its backend's); when every sequence gains
every token at one slot (no padding, equal lengths) it is one strided copy instead.

`view(layer)` gives the keys and values as [batch, kv_heads, max_tokens, head_dim] strided views
(the head dimension contiguous) without copying; `kv_lengths(layer)` the lengths as a device
int32 [batch]. The lengths are known on the host too (`lengths`): appends are counted there.
A model that stores keys and values itself (HipBackend.rope_and_cache: rotated and stored in
one launch) asks `reserve` for the rows of its new tokens, counted like an append, and writes
them into `tables(layer)`.

Stream semantics: appends, resets and length uploads are queued on the cache's stream; views
carry that stream. Nothing synchronizes. Every method of a closed cache raises
hip_core.ClosedError.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hip_core import Device, DeviceBuffer, Resource, Stream
from hip_runtime.tensors.dtypes import DTypeLike, as_dtype, float16
from hip_runtime.tensors.operators import backend_of
from hip_runtime.tensors.tensor import DeviceTensor


class KVCache(Resource):
    """Keys and values for `layers` layers of `batch` sequences of up to `max_tokens` tokens.

    Args:
        device: where the cache lives.
        stream: the stream its work is ordered on (and its views carry).
        layers: transformer layers, each with its own keys and values.
        max_tokens: tokens each sequence can hold in each layer.
        kv_heads: key/value heads per token.
        head_dim: elements per head.
        dtype: element type (float16 by default).
        batch: sequences (1 by default).

    `close()` (or `with`) frees the memory; views made from the cache must not be used after.
    """

    def __init__(
        self,
        device: Device,
        stream: Stream,
        *,
        layers: int,
        max_tokens: int,
        kv_heads: int,
        head_dim: int,
        dtype: DTypeLike = float16,
        batch: int = 1,
    ) -> None:
        dims = {
            "layers": layers,
            "batch": batch,
            "max_tokens": max_tokens,
            "kv_heads": kv_heads,
            "head_dim": head_dim,
        }
        for name, value in dims.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, not {value!r}")
        self.layers, self.batch, self.max_tokens = layers, batch, max_tokens
        self.kv_heads, self.head_dim = kv_heads, head_dim
        self.dtype = as_dtype(dtype)
        self.stream = stream
        self.buffer: DeviceBuffer = device.allocate(self.nbytes)
        self._own(self.buffer.close)
        self._lengths = np.zeros((layers, batch), np.int64)
        self._slots: tuple[Any, DeviceTensor] | None = None  # (key, device slot ids), last used
        self._counts: tuple[Any, DeviceTensor] | None = None  # (lengths, device int32 lengths)
        self._views: dict[tuple[str, int], tuple[DeviceTensor, DeviceTensor]] = {}  # view, tables
        self.buffer.fill(0, stream=stream)

    @property
    def token_bytes(self) -> int:
        """Bytes of one token's keys (or values) in one layer."""
        return self.kv_heads * self.head_dim * self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.layers * 2 * self.batch * self.max_tokens * self.token_bytes

    @property
    def lengths(self) -> np.ndarray:
        """Tokens held, int64 [layers, batch] (a copy; host bookkeeping, no device work)."""
        lengths: np.ndarray = self._lengths.copy()
        return lengths

    def _part(self, layer: int, which: int) -> DeviceTensor:
        """Keys (0) or values (1) of a layer: [batch, max_tokens, kv_heads, head_dim]."""
        offset = (layer * 2 + which) * self.batch * self.max_tokens * self.token_bytes
        shape = (self.batch, self.max_tokens, self.kv_heads, self.head_dim)
        return DeviceTensor(self.buffer, shape, self.dtype, offset=offset, stream=self.stream)

    def _check_layer(self, layer: int) -> None:
        self._check_open()
        if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < self.layers:
            raise ValueError(f"layer must be in [0, {self.layers}), not {layer!r}")

    def append(
        self, layer: int, keys: DeviceTensor, values: DeviceTensor, mask: Any = None
    ) -> np.ndarray:
        """Write new tokens of every sequence after the tokens the layer holds for it, on the
        cache's stream; returns the layer's new lengths (int64 [batch], host).

        keys, values: [batch, tokens, kv_heads, head_dim] of the cache's dtype, any layout
        ([tokens, kv_heads, head_dim] when batch is 1). mask: None (every token is new) or a
        host array [batch, tokens] of 0/1 (or bool): only the tokens marked 1 are written, in
        order, so a left-padded prompt's pads take no slot. ValueError (nothing queued) on a
        shape or dtype mismatch or when a sequence's tokens do not fit.
        """
        self._check_layer(layer)
        keys, values = self._checked(keys, "keys"), self._checked(values, "values")
        if keys.stream is not self.stream:
            raise ValueError("keys must carry the cache's stream (made by its backend's ops)")
        if keys.shape != values.shape:
            raise ValueError(f"keys {keys.shape} and values {values.shape} differ")
        tokens = keys.shape[1]
        real, start, new = self._new_tokens(layer, tokens, mask)
        if real.all() and (start == start[0]).all():
            # Every sequence gains every token at one slot (no padding, equal lengths: a
            # prefill without pads, decode steps of equal prompts): one strided copy each.
            at = int(start[0])
            for which, tensor in ((0, keys), (1, values)):
                self._part(layer, which)[:, at : at + tokens].copy_(tensor)
            self._lengths[layer] = new
            return new.copy()  # type: ignore[no-any-return]
        self._scatter(layer, keys, values, self._slot_ids(start, real))
        self._lengths[layer] = new
        return new.copy()  # type: ignore[no-any-return]

    def reserve(self, layer: int, tokens: int, mask: Any = None) -> DeviceTensor:
        """Count `tokens` new tokens of every sequence in the layer (only those `mask` marks,
        as `append` takes it) and return the rows they go to in `tables(layer)`: a device
        int32 [batch * tokens], b · max_tokens + slot, -1 for a masked token. For a caller
        that stores them itself (`HipBackend.rope_and_cache`, or `write`); calls in a row
        with the same (lengths, mask) share one upload on the cache's stream: every layer of a
        prefill does. ValueError (nothing counted) when they do not fit."""
        self._check_layer(layer)
        real, start, new = self._new_tokens(layer, tokens, mask)
        rows = self._slot_ids(start, real)
        self._lengths[layer] = new
        return rows

    def write(
        self, layer: int, keys: DeviceTensor, values: DeviceTensor, rows: DeviceTensor
    ) -> None:
        """Write keys and values [batch, tokens, kv_heads, head_dim] at device row ids `rows`
        (int32 [batch * tokens]: b * max_tokens + slot, -1 to skip a token), on the cache's
        stream, without host bookkeeping: for decode steps whose slots live on the device (a
        captured step replays with new rows); `advance` then counts the tokens. The slots
        written must hold zeros (past every sequence's length they do)."""
        self._check_layer(layer)
        keys, values = self._checked(keys, "keys"), self._checked(values, "values")
        if keys.shape != values.shape or keys.stream is not self.stream:
            raise ValueError(f"keys {keys.shape} and values {values.shape} must match and carry "
                             "the cache's stream")  # fmt: skip
        if not isinstance(rows, DeviceTensor) or rows.shape != (keys.shape[0] * keys.shape[1],):
            raise ValueError(f"rows must be a device int32 [{keys.shape[0] * keys.shape[1]}]")
        self._scatter(layer, keys, values, rows)

    def advance(self, tokens: int = 1) -> None:
        """Count `tokens` more tokens in every sequence of every layer (host bookkeeping for
        `write`; nothing is queued). ValueError when a sequence would exceed max_tokens."""
        self._check_open()
        if int(self._lengths.max()) + tokens > self.max_tokens:
            raise ValueError(f"a sequence holds {int(self._lengths.max())} of {self.max_tokens} "
                             f"tokens; {tokens} more do not fit")  # fmt: skip
        self._lengths += tokens

    def view(self, layer: int) -> tuple[DeviceTensor, DeviceTensor]:
        """(keys, values) of the layer, each [batch, kv_heads, max_tokens, head_dim] (strided
        views of the whole capacity, the head dimension contiguous), sharing the cache's
        memory. Sequence b's tokens are slots 0..lengths[layer, b]-1; the rest are zeros.
        Made once per layer: every call returns the same two views."""
        self._check_layer(layer)
        views = self._views.get(("view", layer))
        if views is None:
            keys, values = (self._part(layer, which).permute(0, 2, 1, 3) for which in (0, 1))
            views = (keys, values)
            self._views[("view", layer)] = views
        return views

    def tables(self, layer: int) -> tuple[DeviceTensor, DeviceTensor]:
        """(keys, values) of the layer, each [batch * max_tokens, kv_heads, head_dim]
        (C-contiguous, sharing the cache's memory): row b · max_tokens + slot is sequence b's
        slot, the rows `reserve` and a decode step's state name. Made once per layer."""
        self._check_layer(layer)
        tables = self._views.get(("table", layer))
        if tables is None:
            flat = (-1, self.kv_heads, self.head_dim)
            keys, values = (self._part(layer, which).reshape(flat) for which in (0, 1))
            tables = (keys, values)
            self._views[("table", layer)] = tables
        return tables

    def kv_lengths(self, layer: int) -> DeviceTensor:
        """The layer's lengths as a device int32 [batch] (uploaded on the cache's stream once
        per change of lengths: every layer of a decode step shares one upload)."""
        self._check_layer(layer)
        key = self._lengths[layer].tobytes()
        if self._counts is None or self._counts[0] != key:
            counts = self._lengths[layer].astype(np.int32)
            self._counts = (key, DeviceTensor.from_numpy(counts, stream=self.stream))
        return self._counts[1]

    def reset(self) -> None:
        """Forget every token of every sequence: lengths 0 and the memory zeroed (a fill queued
        on the cache's stream)."""
        self._check_open()
        self._lengths[:] = 0
        self.buffer.fill(0, stream=self.stream)

    # --- private ------------------------------------------------------------------------------

    def _new_tokens(
        self, layer: int, tokens: int, mask: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(which of the [batch, tokens] new tokens are real, the layer's lengths before, and
        after): ValueError when a sequence's tokens do not fit."""
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
            raise ValueError(f"tokens must be an int >= 0, not {tokens!r}")
        shape = (self.batch, tokens)
        real = np.ones(shape, bool) if mask is None else _mask(mask, shape)
        start = self._lengths[layer]
        new = start + real.sum(axis=1)
        if (new > self.max_tokens).any():
            b = int(np.argmax(new > self.max_tokens))
            raise ValueError(
                f"layer {layer}, sequence {b} holds {start[b]} of {self.max_tokens} tokens; "
                f"{new[b] - start[b]} more do not fit"
            )
        return real, start, new

    def _checked(self, given: Any, name: str) -> DeviceTensor:
        if not isinstance(given, DeviceTensor):
            raise ValueError(f"{name} must be a DeviceTensor, not {type(given).__name__}")
        tensor: DeviceTensor = given.unsqueeze(0) if given.ndim == 3 and self.batch == 1 else given
        expected = (self.kv_heads, self.head_dim)
        if tensor.ndim != 4 or tensor.shape[0] != self.batch or tensor.shape[2:] != expected:
            raise ValueError(
                f"{name} is {tensor.shape} {tensor.dtype}; expected ({self.batch}, tokens, "
                f"{self.kv_heads}, {self.head_dim}) {self.dtype}"
            )
        if tensor.dtype != self.dtype:
            raise ValueError(f"{name} has dtype {tensor.dtype}; expected {self.dtype}")
        return tensor

    def _scatter(
        self, layer: int, keys: DeviceTensor, values: DeviceTensor, rows: DeviceTensor
    ) -> None:
        """index_add keys and values [B, T, ...] into the layer's rows `rows` (into zeros)."""
        backend = backend_of(keys)  # the ops of the backend whose stream the cache has
        flat = (keys.shape[0] * keys.shape[1], self.kv_heads, self.head_dim)
        for which, tensor in ((0, keys), (1, values)):
            table = self._part(layer, which).reshape(-1, self.kv_heads, self.head_dim)
            source = tensor.reshape(flat) if _merges(tensor) else tensor.contiguous().reshape(flat)
            backend.index_add(table, 0, rows, source, out=table)

    def _slot_ids(self, start: np.ndarray, real: np.ndarray) -> DeviceTensor:
        """Device int32 ids of the rows each new token goes to in the layer's table seen as
        [batch * max_tokens, ...]; -1 (index_add skips it) for a masked token. The last ids
        are kept: every layer of a step asks for the same ones."""
        key = (start.tobytes(), real.shape, real.tobytes())
        if self._slots is None or self._slots[0] != key:
            rank = np.cumsum(real, axis=1) - 1
            base = np.arange(self.batch)[:, None] * self.max_tokens + start[:, None]
            ids = np.where(real, base + rank, -1).astype(np.int32).reshape(-1)
            self._slots = (key, DeviceTensor.from_numpy(ids, stream=self.stream))
        return self._slots[1]

    def __repr__(self) -> str:
        shape = (self.layers, 2, self.batch, self.max_tokens, self.kv_heads, self.head_dim)
        return f"<KVCache {shape} {self.dtype}, {int(self._lengths.sum())} tokens held>"


def _mask(mask: Any, shape: tuple[int, ...]) -> np.ndarray:
    real = np.asarray(mask)
    if real.shape != shape[:2] or not (real.dtype == bool or real.dtype.kind in "iu"):
        raise ValueError(f"mask is {real.shape} {real.dtype}; expected 0/1 or bool {shape[:2]}")
    if real.dtype != bool and ((real != 0) & (real != 1)).any():
        raise ValueError("mask holds values other than 0 and 1")
    return real.astype(bool)


def _merges(tensor: DeviceTensor) -> bool:
    """Whether [batch, tokens, ...] merges its first two axes without a copy."""
    b, t = tensor.shape[:2]
    return b == 1 or t == 1 or tensor.strides[0] == t * tensor.strides[1]


__all__ = ["KVCache"]
