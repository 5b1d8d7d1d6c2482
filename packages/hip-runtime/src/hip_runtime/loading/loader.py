"""AsyncLoader: checkpoints (safetensors, GGUF) into device memory at storage speed.

    loader = AsyncLoader(device)
    job = loader.start("model/")          # validates and allocates now, reads in the background
    job.progress                          # (bytes_done, bytes_total, tensors_done, tensors_total)
    loaded = job.result()                 # waits; LoadResult with .tensors, .report
    loader.load("model.gguf")             # start(...).result() in one call
    AsyncLoader(devices=[0, 1]).load("model/", shard={"*.up_proj.weight": "column"})

The checkpoint's layout is validated before anything is allocated (a FormatError names the file
and tensor). The destination is one 256-byte-aligned arena per checkpoint (or one buffer per
tensor); reader threads fill pinned chunks with `preadv` and queue their copies on several
streams (`hip_runtime.transfers.staging`). Quantized GGUF tensors land raw in a scratch buffer and
are dequantized on the device at the end; the scratch is freed before `result()` returns. A loader
of several devices places each tensor whole on some of them or splits it (`shard=`, see
`hip_runtime.loading.sharding`), reading the file once; `LoadResult.shards[k]` is device k's.

Stream semantics: `result()` returns once every copy and dequantization has finished (it waits
for the loader's streams, not the device), so the tensors are ready for any stream. If the
load fails or is cancelled, `result()` waits for the copies in flight, frees every byte of device
memory the load allocated, and raises. (The pinned staging chunks belong to the copier, not the
load: the device's shared copier keeps them for the next load until it is closed.)

Interrupts: an exception in the thread waiting in `result()` (Ctrl-C's KeyboardInterrupt, a
signal handler's SystemExit) cancels the load: the readers stop at their next chunk (well
under a second), the copies in flight finish, the device memory is freed and the files are
closed, and then the exception propagates. Later `result()` calls raise LoadCancelledError. A
second Ctrl-C during that wait propagates at once; the freeing still happens, in the
background.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hip_core import ClosedError, Device, DeviceBuffer, Stream
from hip_runtime._device_arg import as_device
from hip_runtime.loading.checksum import combine_parts
from hip_runtime.loading.formats import Checkpoint, FormatError, open_checkpoint
from hip_runtime.loading.formats.records import check_checkpoint, open_regular
from hip_runtime.loading.sharding import (
    ShardedPlacement,
    ShardRule,
    TensorLayout,
    resolve_devices,
    resolve_layouts,
)
from hip_runtime.tensors.tensor import DeviceTensor
from hip_runtime.transfers.staging import (
    Chunk,
    ShortReadError,
    StagedCopier,
    join_threads,
    wait_for,
)

ProgressCallback = Callable[[int, int, int, int], None]


class LoadCancelledError(RuntimeError):
    """The load was cancelled; its device memory has been freed."""


class ChecksumError(ValueError):
    """A tensor's bytes do not match the expected CRC-32; its device memory has been freed."""


@dataclass(frozen=True)
class LoadReport:
    """What a load moved and how fast: `file_bytes` read in `seconds` (wall clock, from start
    to ready), `gb_per_s` = file_bytes / seconds / 1e9."""

    files: int
    tensors: int
    file_bytes: int
    device_bytes: int  # on all the load's devices together
    seconds: float

    @property
    def gb_per_s(self) -> float:
        return self.file_bytes / self.seconds / 1e9 if self.seconds > 0 else 0.0


@dataclass
class LoadResult:
    """The loaded tensors by name (views of `arena` when there is one) and the report.

    With several devices, `shards[k]` / `arenas[k]` are device k's (the tensors and parts it
    holds); `tensors` and `arena` are device 0's. With one, shards == [tensors]. `layouts`:
    where each tensor went (which devices, split along which axis)."""

    tensors: dict[str, DeviceTensor]
    report: LoadReport
    arena: DeviceBuffer | None
    checksums: dict[str, int] = field(default_factory=dict)
    shards: list[dict[str, DeviceTensor]] = field(default_factory=list)
    arenas: list[DeviceBuffer | None] = field(default_factory=list)
    layouts: dict[str, TensorLayout] = field(default_factory=dict)

    def free(self) -> None:
        """Free the tensors' device memory on every device (each arena, else each tensor's
        buffer) once nothing uses them: the caller has waited for the streams that read them."""
        for arena, tensors in zip(self.arenas, self.shards, strict=True):
            if arena is not None:
                arena.close()
            else:
                for tensor in tensors.values():
                    tensor.buffer.close()


class AsyncLoader:
    """Loads checkpoints onto one device, or several (`devices=`: ordinals or Devices), through
    a StagedCopier: the one given (made for the same devices, in order), else the devices'
    shared one (`StagedCopier.default`, replaced by a new one if it is ever closed). Reusing a
    loader reuses its pinned memory. ValueError for devices that do not exist or repeat."""

    def __init__(
        self,
        device: Device | int | None = None,
        *,
        copier: StagedCopier | None = None,
        devices: Sequence[Device | int] | None = None,
    ) -> None:
        if devices is not None and device is not None:
            raise ValueError("give device= or devices=, not both")
        self.devices = resolve_devices(devices) if devices is not None else [as_device(device)]
        self.device = self.devices[0]
        if copier is not None and copier.devices != self.devices:
            raise ValueError(f"{copier!r} copies to {copier.devices}, not to {self.devices}")
        self._copier = copier

    @property
    def copier(self) -> StagedCopier:
        """The copier the next load goes through."""
        if self._copier is not None:
            return self._copier
        return StagedCopier.default(self.device, self.devices[1:])

    def start(
        self,
        source: str | os.PathLike[str] | Checkpoint,
        *,
        arena: bool = True,
        shard: Mapping[str, ShardRule] | None = None,
        stream: Stream | Sequence[Stream] | None = None,
        progress: ProgressCallback | None = None,
        progress_bar: bool = False,
        checksum: bool = False,
        expected_checksums: Mapping[str, int] | None = None,
        dequantize_to: Any = "float32",
    ) -> LoadJob:
        """Validate `source`, allocate its device memory and start reading in the background.

        Args:
            source: a path (see `open_checkpoint`) or an already opened Checkpoint.
            arena: one allocation per device for all its tensors (True) or one per tensor.
            shard: with several devices, name pattern -> rule: where each tensor goes, whole
                or split (`hip_runtime.loading.sharding`); None replicates every tensor.
            stream: the stream the tensors will carry (the device's null stream if None);
                with several devices, one stream per device, in order.
            progress: called as progress(bytes_done, bytes_total, tensors_done, tensors_total)
                from the loader's threads (one call at a time) as data is read and queued.
            progress_bar: show a tqdm bar on stderr.
            checksum: compute each tensor's CRC-32 (zlib) of its file bytes into
                `LoadResult.checksums`.
            expected_checksums: name -> CRC-32; a mismatch fails the load with ChecksumError.
                Neither is offered when a tensor is split (ValueError).
            dequantize_to: dtype of dequantized GGUF tensors (float32, float16 or bfloat16).

        Raises FileNotFoundError / FormatError / ClosedError (the copier given to this loader
        was closed) / ValueError (a bad shard rule or stream) with nothing allocated, or
        HipOutOfMemoryError (after freeing what it had allocated on every device).
        """
        copier = self.copier
        if copier.closed:
            raise ClosedError(f"{copier!r} given to this AsyncLoader is closed")
        if isinstance(source, Checkpoint):
            checkpoint = source
            check_checkpoint(checkpoint)  # one made by hand gets the checks the readers make
        else:
            checkpoint = open_checkpoint(source, dequantize_to=dequantize_to)
        layouts = resolve_layouts(checkpoint, self.devices, shard)
        checksum = checksum or expected_checksums is not None
        if checksum and any(layout.axis is not None for layout in layouts):
            raise ValueError("checksums are not offered for loads that split tensors")
        return LoadJob(
            self, checkpoint, copier=copier,
            placement=lambda: ShardedPlacement(self.devices, checkpoint, layouts, arena=arena),
            streams=self._streams(stream),
            progress=progress, progress_bar=progress_bar,
            checksum=checksum, expected_checksums=expected_checksums,
        )  # fmt: skip

    def _streams(self, stream: Stream | Sequence[Stream] | None) -> list[Stream]:
        """One stream per device: `stream` checked, or the devices' null streams."""
        if stream is None:
            return [device.default_stream for device in self.devices]
        streams = [stream] if isinstance(stream, Stream) else list(stream)
        found = [s.device for s in streams if isinstance(s, Stream)]
        if found != self.devices:
            raise ValueError(f"stream= must give one Stream of each of {self.devices}, in order")
        return streams

    def load(self, source: str | os.PathLike[str] | Checkpoint, **options: Any) -> LoadResult:
        """`start(source, **options).result()`."""
        return self.start(source, **options).result()


class LoadJob:
    """One load in progress. `result()` waits for it; `cancel()` stops it at the next chunk."""

    def __init__(
        self,
        loader: AsyncLoader,
        checkpoint: Checkpoint,
        *,
        copier: StagedCopier,
        placement: Callable[[], ShardedPlacement],
        streams: list[Stream],
        progress: ProgressCallback | None,
        progress_bar: bool,
        checksum: bool,
        expected_checksums: Mapping[str, int] | None,
    ) -> None:
        self.checkpoint = checkpoint
        self.loader = loader
        self.copier = copier
        self._streams = streams
        self._started = time.perf_counter()
        self._cancel = threading.Event()
        self._checksums: dict[tuple[int, int], tuple[int, int]] | None = {} if checksum else None
        self._expected = expected_checksums
        self._error: BaseException | None = None
        self._finished: LoadResult | None = None
        self._remaining = [t.nbytes for t in checkpoint.tensors]
        self._bytes_done = 0
        self._tensors_done = sum(1 for n in self._remaining if n == 0)
        self._callback = progress
        self._files: list[int] = []
        # Who frees the memory of a failed load: result(), once the reader thread has ended,
        # or the reader thread itself when result() was interrupted before that (see _fail).
        self._lock = threading.Lock()
        self._read_over = False
        self._abandoned = False
        self._released = threading.Event()
        self._finishing = False
        self._placement = placement()  # may raise OOM (having freed what it allocated)
        # Progress counts a replicated tensor's bytes once: those bound for its first device.
        self._counted = [
            None if layout.axis is not None else layout.targets[0]
            for layout in self._placement.layouts
        ]
        try:
            for path in checkpoint.files:  # regular files only: one swapped for a FIFO since
                self._files.append(open_regular(path))  # validation must not block here
        except BaseException:
            self._cleanup()
            raise
        self._bar = _progress_bar(checkpoint) if progress_bar else None
        self._thread = threading.Thread(target=self._read, name="hip-loader", daemon=True)
        self._thread.start()

    @property
    def _name(self) -> str:
        return self.checkpoint.files[0] if self.checkpoint.files else "an empty checkpoint"

    @property
    def progress(self) -> tuple[int, int, int, int]:
        """(bytes_done, bytes_total, tensors_done, tensors_total), read and queued so far."""
        c = self.checkpoint
        return self._bytes_done, c.file_bytes, self._tensors_done, len(c.tensors)

    def done(self) -> bool:
        """True once every chunk has been read and queued (or the load has failed)."""
        return not self._thread.is_alive()

    def cancel(self) -> None:
        """Stop reading at the next chunk; `result()` then frees everything and raises
        LoadCancelledError."""
        self._cancel.set()

    def result(self) -> LoadResult:
        """Wait for the load; return its tensors, or free its memory and raise its error (the
        same error again on every later call; LoadCancelledError after an interrupt)."""
        if self._finished is not None:
            return self._finished
        if self._abandoned:
            wait_for(self._released)
            assert self._error is not None
            raise self._error  # an earlier result() already failed and freed everything
        try:
            join_threads([self._thread])  # in slices: Ctrl-C is seen at once (see join_threads)
            self._wait_for_copies()  # copies read the staging chunks and write the arena
            if self._error is not None:
                raise self._error
            if self._cancel.is_set():
                raise LoadCancelledError(f"loading {self._name} was cancelled")
            checksums = self._verify_checksums()
            self._finishing = True  # dequantizations may be queued on the stream from here
            shards = self._placement.finish(self._streams)
        except BaseException as error:
            self._fail(error)
            raise
        c = self.checkpoint
        report = LoadReport(
            len(c.files),
            len(c.tensors),
            c.file_bytes,
            sum(p.checkpoint.device_bytes for p in self._placement.placements),
            time.perf_counter() - self._started,
        )
        arenas = self._placement.arenas
        layouts = dict(zip((t.name for t in c.tensors), self._placement.layouts, strict=True))
        self._finished = LoadResult(shards[0], report, arenas[0], checksums,
                                    shards=shards, arenas=arenas, layouts=layouts)  # fmt: skip
        return self._finished

    # --- background reading ------------------------------------------------------------------

    def _read(self) -> None:
        try:
            self.copier.run(
                self._placement.chunks(self._files, self.copier.chunk_bytes),
                cancelled=self._cancel.is_set, on_chunk=self._chunk_done,
                checksums=self._checksums,
            )  # fmt: skip
        except ShortReadError as error:  # the file shrank since it was validated
            path = self.checkpoint.files[self._files.index(error.source)]
            message = f"the file ended {error.missing} bytes early at byte {error.offset}"
            self._error = FormatError(f"{message}: it shrank during the load", path=path)
        except BaseException as error:  # handed to result()
            self._error = error
        finally:
            self._close_files()  # reading is over, whether or not result() is ever called
            if self._bar is not None:
                self._bar.close()
            with self._lock:
                self._read_over = True
                abandoned = self._abandoned
            if abandoned:  # result() was interrupted while this thread read: free here
                self._release_after_copies()

    def _fail(self, error: BaseException) -> None:
        """Stop the load, free its memory once no copy can touch it, and record what later
        result() calls raise. Returns once everything is freed (the caller then re-raises)."""
        self._cancel.set()
        if not isinstance(error, Exception):  # KeyboardInterrupt, SystemExit: not the load's
            interrupted = LoadCancelledError(
                f"loading {self._name} was cancelled by {type(error).__name__}"
            )
            interrupted.__cause__ = error
            error = interrupted
        self._error = error
        with self._lock:
            self._abandoned = True
            read_over = self._read_over
        if read_over:  # in a thread of its own, so that a second interrupt cannot cut it short
            threading.Thread(
                target=self._release_after_copies, name="hip-loader-release", daemon=True
            ).start()
        wait_for(self._released)

    def _wait_for_copies(self) -> None:
        if not self.copier.closed:  # close() waited for every copy it had queued
            self.copier.synchronize()

    def _release_after_copies(self) -> None:
        """Wait for the copies (and dequantizations) in flight, then free the device memory."""
        try:
            # The load has failed already: its error is the one raised, not one from here.
            with contextlib.suppress(Exception):
                self._wait_for_copies()
                if self._finishing:
                    for stream in self._streams:
                        stream.sync()
        finally:
            self._cleanup()
            self._released.set()

    def _chunk_done(self, chunk: Chunk) -> None:
        queued = 0
        for piece in chunk.pieces:
            if self._counted[piece.key] not in (None, piece.target):
                continue  # a replicated tensor's bytes, counted for its first device
            self._remaining[piece.key] -= piece.nbytes
            self._tensors_done += self._remaining[piece.key] == 0
            queued += piece.nbytes
        self._bytes_done += queued
        if self._bar is not None:
            self._bar.update(queued)
        if self._callback is not None:
            self._callback(*self.progress)

    def _verify_checksums(self) -> dict[str, int]:
        if self._checksums is None:
            return {}
        parts: dict[int, list[tuple[int, int, int]]] = {}
        for (key, offset), (crc, length) in self._checksums.items():
            parts.setdefault(key, []).append((offset, crc, length))
        found = {
            t.name: combine_parts(parts.get(i, [])) for i, t in enumerate(self.checkpoint.tensors)
        }
        for name, expected in (self._expected or {}).items():
            if name not in found:
                raise ChecksumError(f"no tensor {name!r} to check in this checkpoint")
            if found[name] != expected:
                raise ChecksumError(
                    f"tensor {name!r}: CRC-32 {found[name]:08x}, expected {expected:08x}"
                )
        return found

    def _cleanup(self) -> None:
        self._placement.release()
        self._close_files()

    def _close_files(self) -> None:
        for fd in self._files:
            os.close(fd)
        self._files = []


def _progress_bar(checkpoint: Checkpoint) -> Any:
    from tqdm.auto import tqdm

    name = os.path.basename(checkpoint.files[0]) if checkpoint.files else "checkpoint"
    return tqdm(
        total=checkpoint.file_bytes,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        desc=f"loading {name}",
        dynamic_ncols=True,
    )


__all__ = [
    "AsyncLoader",
    "ChecksumError",
    "LoadCancelledError",
    "LoadJob",
    "LoadReport",
    "LoadResult",
]
