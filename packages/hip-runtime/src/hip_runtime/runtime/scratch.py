"""ScratchArena: one device allocation handed out as temporary tensors by bumping an offset.

For activations that live for one forward pass: `tensor(shape, dtype)` costs no allocation,
`reset()` makes all of it free again. Reuse is safe in stream order when the work that used the
old tensors is queued on the same stream as the work that reuses their memory (the arena's
stream; a HipBackend's ops all are). Every method of a closed arena raises hip_core.ClosedError.
"""

from __future__ import annotations

import math

from hip_core import Device, DeviceBuffer, Resource, Stream
from hip_runtime.tensors.dtypes import DTypeLike, as_dtype, float32
from hip_runtime.tensors.tensor import DeviceTensor, ShapeLike, as_shape

ALIGNMENT = 256


class ScratchArena(Resource):
    """`nbytes` of device memory for temporary tensors on `stream`; `close()` (or `with`)
    frees it."""

    def __init__(self, device: Device, stream: Stream, nbytes: int) -> None:
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 1:
            raise ValueError(f"a scratch arena needs a positive size in bytes, not {nbytes!r}")
        self.buffer: DeviceBuffer = device.allocate(nbytes)
        self.stream = stream
        self.used = 0
        self.peak = 0
        self._own(self.buffer.close)

    @property
    def nbytes(self) -> int:
        return self.buffer.size

    def tensor(self, shape: ShapeLike, dtype: DTypeLike = float32) -> DeviceTensor:
        """An uninitialized tensor from the arena (MemoryError-like ValueError when full)."""
        self._check_open()
        shape, dtype = as_shape(shape), as_dtype(dtype)
        size = math.prod(shape) * dtype.itemsize
        start = -(-self.used // ALIGNMENT) * ALIGNMENT
        if start + size > self.nbytes:
            raise ValueError(
                f"scratch arena full: {size} bytes requested, "
                f"{self.nbytes - start} of {self.nbytes} free"
            )
        self.used = start + size
        self.peak = max(self.peak, self.used)
        return DeviceTensor(self.buffer, shape, dtype, offset=start, stream=self.stream)

    def reset(self) -> None:
        """Make the whole arena free again (tensors handed out before must no longer be used
        by work queued after this on other streams)."""
        self._check_open()
        self.used = 0


__all__ = ["ScratchArena"]
