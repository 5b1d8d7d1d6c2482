"""Where a checkpoint's bytes go on the device, and the reads that take them there.

`Placement` allocates the destination (one 256-byte-aligned arena, or a buffer per tensor, plus
a scratch buffer for quantized tensors' raw blocks) and builds the tensors once the bytes have
arrived. `ChunkPlanner` turns file ranges into staged reads of at most one chunk each, in file
order: neighbouring small tensors share a read, large ones are split (`sharding` plans a load's
reads with it, for one device or several).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from hip_core import Device, DeviceBuffer, Stream
from hip_runtime.libraries.kernel_cache import KernelCache
from hip_runtime.loading.formats import Checkpoint
from hip_runtime.ops.quantized import dequantize_into
from hip_runtime.tensors.tensor import DeviceTensor
from hip_runtime.transfers.staging import Chunk, Piece

ALIGNMENT = 256  # every tensor starts at a multiple of this in the arena
_COALESCE_GAP = 64 << 10  # read across file gaps this small rather than start a new chunk


class Placement:
    """Where each tensor's bytes land: the arena (or its own buffer), or for quantized tensors a
    scratch buffer that `finish` dequantizes into the destination."""

    def __init__(self, device: Device, checkpoint: Checkpoint, *, arena: bool) -> None:
        self.device = device
        self.checkpoint = checkpoint
        self.arena: DeviceBuffer | None = None
        self.scratch: DeviceBuffer | None = None
        self.buffers: list[DeviceBuffer] = []
        self.targets: list[tuple[DeviceBuffer, int]] = []  # (buffer, offset) per tensor
        self.raw_at: list[int] = []  # device address the file bytes go to, per tensor
        self.released = False
        try:
            self._allocate(arena)
        except BaseException:
            self.release()
            raise

    def _allocate(self, arena: bool) -> None:
        tensors = self.checkpoint.tensors
        offsets, total = aligned_offsets(t.device_nbytes for t in tensors)
        quantized = [t for t in tensors if t.encoding != "raw"]
        scratch_offsets, scratch_total = aligned_offsets(t.nbytes for t in quantized)
        if arena:
            self.arena = self.device.allocate(max(total, 1))
            self.targets = [(self.arena, offset) for offset in offsets]
        else:
            for t in tensors:
                self.buffers.append(self.device.allocate(max(t.device_nbytes, 1)))
            self.targets = [(buffer, 0) for buffer in self.buffers]
        if quantized:
            self.scratch = self.device.allocate(scratch_total)
        next_scratch = iter(scratch_offsets)
        for t, (buffer, offset) in zip(tensors, self.targets, strict=True):
            raw = t.encoding == "raw"
            self.raw_at.append(
                buffer.ptr + offset if raw else self.scratch.ptr + next(next_scratch)  # type: ignore[union-attr]
            )

    def finish(self, stream: Stream) -> dict[str, DeviceTensor]:
        """The tensors, after dequantizing the quantized ones (then the scratch is freed)."""
        tensors = {}
        for t, (buffer, offset) in zip(self.checkpoint.tensors, self.targets, strict=True):
            tensors[t.name] = DeviceTensor(buffer, t.shape, t.dtype, offset=offset, stream=stream)
        if self.scratch is not None:
            kernels = KernelCache(self.device)
            for t, source in zip(self.checkpoint.tensors, self.raw_at, strict=True):
                if t.encoding != "raw":
                    dequantize_into(kernels, t.encoding, source, tensors[t.name], stream=stream)
            stream.sync()
            self.scratch.close()
            self.scratch = None
        return tensors

    def release(self) -> None:
        """Free everything allocated (after the copies into it have finished)."""
        for buffer in (self.arena, self.scratch, *self.buffers):
            if buffer is not None:
                buffer.close()
        self.arena = self.scratch = None
        self.buffers = []
        self.released = True


def aligned_offsets(sizes: Iterable[int]) -> tuple[list[int], int]:
    offsets, total = [], 0
    for size in sizes:
        offsets.append(total)
        total += -(-size // ALIGNMENT) * ALIGNMENT
    return offsets, total


class ChunkPlanner:
    """Staged reads of at most `limit` bytes each, built in file order: `span` adds a run of a
    file's bytes bound for one or more (device target, address) destinations; neighbouring
    runs of one file share a read across gaps up to _COALESCE_GAP, long ones are split."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.chunk: Chunk | None = None

    def span(
        self,
        fd: int,
        offset: int,
        nbytes: int,
        destinations: list[tuple[int, int]],
        *,
        key: int,
        key_offset: int = 0,
    ) -> Iterator[Chunk]:
        """The chunks completed by reading `nbytes` at `offset` of `fd` into each
        (target, address) of `destinations` (the same bytes to each: read once)."""
        chunk = self.chunk
        if chunk is not None and (
            chunk.source != fd or offset - (chunk.offset + chunk.nbytes) > _COALESCE_GAP
        ):
            yield chunk
            chunk = None
        done = 0
        while done < nbytes:
            start = offset + done
            if chunk is None:
                chunk = Chunk(fd, start, 0)
            at = start - chunk.offset
            size = min(self.limit - at, nbytes - done)
            if size <= 0:
                yield chunk
                chunk = None
                continue
            for target, address in destinations:
                chunk.pieces.append(Piece(at, address + done, size, key, key_offset + done, target))
            chunk.nbytes = at + size
            done += size
        self.chunk = chunk

    def flush(self) -> Iterator[Chunk]:
        """The chunk being built, if any (call before a chunk of one's own, and at the end)."""
        if self.chunk is not None:
            yield self.chunk
            self.chunk = None


def file_order(checkpoint: Checkpoint) -> list[int]:
    """The checkpoint's tensor indices in the order their bytes lie in its files."""
    return sorted(
        range(len(checkpoint.tensors)),
        key=lambda i: (
            checkpoint.files.index(checkpoint.tensors[i].path),
            checkpoint.tensors[i].offset,
        ),
    )


__all__ = ["ALIGNMENT", "ChunkPlanner", "Placement", "aligned_offsets", "file_order"]
