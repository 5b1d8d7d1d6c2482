"""Where a checkpoint's bytes go on the device, and the reads that take them there.

`Placement` allocates the destination (one 256-byte-aligned arena, or a buffer per tensor, plus
a scratch buffer for quantized tensors' raw blocks) and builds the tensors once the bytes have
arrived. `plan_chunks` turns the checkpoint's records into staged reads of at most one chunk
each, in file order: neighbouring small tensors share a read, large ones are split.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from hip_core import Device, DeviceBuffer, Stream
from hip_runtime.kernel_cache import KernelCache
from hip_runtime.loading.formats import Checkpoint, TensorRecord
from hip_runtime.ops.quantized import dequantize_into
from hip_runtime.staging import Chunk, Piece, StagedCopier
from hip_runtime.tensor import DeviceTensor

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


def plan_chunks(
    checkpoint: Checkpoint, files: list[int], placement: Placement, copier: StagedCopier
) -> Iterator[Chunk]:
    """Reads in file order, up to one staging chunk each; neighbouring small tensors share a
    read, large ones are split."""
    descriptor = dict(zip(checkpoint.files, files, strict=True))
    order = sorted(
        range(len(checkpoint.tensors)),
        key=lambda i: (
            checkpoint.files.index(checkpoint.tensors[i].path),
            checkpoint.tensors[i].offset,
        ),
    )
    limit = copier.chunk_bytes
    chunk: Chunk | None = None
    for index in order:
        record: TensorRecord = checkpoint.tensors[index]
        fd = descriptor[record.path]
        if chunk is not None and (
            chunk.source != fd or record.offset - (chunk.offset + chunk.nbytes) > _COALESCE_GAP
        ):
            yield chunk
            chunk = None
        done = 0
        while done < record.nbytes:
            start = record.offset + done
            if chunk is None:
                chunk = Chunk(fd, start, 0)
            at = start - chunk.offset
            size = min(limit - at, record.nbytes - done)
            if size <= 0:
                yield chunk
                chunk = None
                continue
            chunk.pieces.append(Piece(at, placement.raw_at[index] + done, size, index, done))
            chunk.nbytes = at + size
            done += size
    if chunk is not None:
        yield chunk


__all__ = ["ALIGNMENT", "Placement", "aligned_offsets", "plan_chunks"]
