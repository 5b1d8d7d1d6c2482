"""KVCache: attention keys and values of every layer, preallocated once.

Layout: one device buffer of shape (layers, 2, max_tokens, kv_heads, head_dim) — for each layer
the keys, then the values, each row-major by token. `append` writes new tokens after the ones
already there; `view` gives tensors over the filled part without copying; `reset` forgets every
token without touching memory.

Stream semantics: appends are device-to-device copies queued on the cache's stream; views carry
that stream. Nothing synchronizes. Every method of a closed cache raises hip_core.ClosedError.
"""

from __future__ import annotations

from hip_core import Device, DeviceBuffer, Resource, Stream
from hip_runtime.dtypes import DTypeLike, as_dtype, float16
from hip_runtime.tensor import DeviceTensor


class KVCache(Resource):
    """Keys and values for `layers` layers of up to `max_tokens` tokens each.

    Args:
        device: where the cache lives.
        stream: the stream its copies are ordered on (and its views carry).
        layers: transformer layers, each with its own keys and values.
        max_tokens: tokens each layer can hold.
        kv_heads: key/value heads per token.
        head_dim: elements per head.
        dtype: element type (float16 by default).

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
    ) -> None:
        dims = {
            "layers": layers,
            "max_tokens": max_tokens,
            "kv_heads": kv_heads,
            "head_dim": head_dim,
        }
        for name, value in dims.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, not {value!r}")
        self.layers, self.max_tokens = layers, max_tokens
        self.kv_heads, self.head_dim = kv_heads, head_dim
        self.dtype = as_dtype(dtype)
        self.stream = stream
        self.buffer: DeviceBuffer = device.allocate(self.nbytes)
        self.lengths = [0] * layers
        self._own(self.buffer.close)

    @property
    def token_bytes(self) -> int:
        """Bytes of one token's keys (or values) in one layer."""
        return self.kv_heads * self.head_dim * self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.layers * 2 * self.max_tokens * self.token_bytes

    def _part(self, layer: int, which: int, start: int, tokens: int) -> DeviceTensor:
        offset = ((layer * 2 + which) * self.max_tokens + start) * self.token_bytes
        shape = (tokens, self.kv_heads, self.head_dim)
        return DeviceTensor(self.buffer, shape, self.dtype, offset=offset, stream=self.stream)

    def _check_layer(self, layer: int) -> None:
        self._check_open()
        if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < self.layers:
            raise ValueError(f"layer must be in [0, {self.layers}), not {layer!r}")

    def append(self, layer: int, keys: DeviceTensor, values: DeviceTensor) -> int:
        """Copy `keys` and `values` (tokens, kv_heads, head_dim) after the layer's tokens, on
        the cache's stream; returns the layer's new length. ValueError (nothing queued) on a
        shape or dtype mismatch or when the tokens do not fit."""
        self._check_layer(layer)
        expected = (self.kv_heads, self.head_dim)
        for name, tensor in (("keys", keys), ("values", values)):
            if not isinstance(tensor, DeviceTensor):
                raise ValueError(f"{name} must be a DeviceTensor, not {type(tensor).__name__}")
            if tensor.ndim != 3 or tensor.shape[1:] != expected or tensor.dtype != self.dtype:
                raise ValueError(
                    f"{name} is {tensor.shape} {tensor.dtype}; expected "
                    f"(tokens, {self.kv_heads}, {self.head_dim}) {self.dtype}"
                )
        if keys.shape != values.shape:
            raise ValueError(f"keys {keys.shape} and values {values.shape} differ")
        tokens, start = keys.shape[0], self.lengths[layer]
        if start + tokens > self.max_tokens:
            raise ValueError(
                f"layer {layer} holds {start} of {self.max_tokens} tokens; {tokens} more do not fit"
            )
        self._part(layer, 0, start, tokens).copy_from(keys)
        self._part(layer, 1, start, tokens).copy_from(values)
        self.lengths[layer] = start + tokens
        return self.lengths[layer]

    def view(self, layer: int) -> tuple[DeviceTensor, DeviceTensor]:
        """(keys, values) of the layer's tokens so far, each (length, kv_heads, head_dim),
        sharing the cache's memory."""
        self._check_layer(layer)
        length = self.lengths[layer]
        return self._part(layer, 0, 0, length), self._part(layer, 1, 0, length)

    def reset(self) -> None:
        """Forget every token of every layer (memory is kept and not cleared)."""
        self._check_open()
        self.lengths = [0] * self.layers

    def __repr__(self) -> str:
        shape = (self.layers, 2, self.max_tokens, self.kv_heads, self.head_dim)
        return f"<KVCache {shape} {self.dtype}, {sum(self.lengths)} tokens held>"


__all__ = ["KVCache"]
