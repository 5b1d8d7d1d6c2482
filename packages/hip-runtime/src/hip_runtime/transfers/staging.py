"""Host-to-device copies at storage and memory speed: parallel fills of pinned staging chunks.

HIP copies pageable host memory synchronously, through one small internal bounce buffer, at
about a fifth of what the bus carries. The fast way is the one this module implements: several
threads each fill a pinned chunk (from a file with `preadv`, or from host memory with a numpy
copy; both release the GIL), then queue an asynchronous copy of it on one of several streams and
record an event; the chunk goes back to the pool and is refilled only once its event has
completed. Memory in flight is bounded by the pool, so files larger than RAM stream through.

    copier = StagedCopier.default(device)
    copier.run(chunks)              # returns once every chunk has been read and queued

Several devices: `StagedCopier(device, more_devices=[...])` copies each piece to the device its
`Piece.target` names, on that device's own streams, from the one staged chunk (portable pinned
memory), so a file read once feeds every device (sharded loading). A chunk's `scatter`
(`Interleaved`) lays the file's bytes out in the chunk in another order (one `preadv` over many
buffers), so that what one device takes from strided rows is one contiguous piece.

Stream semantics: copies run on the copier's own non-blocking streams. `run` returns when the
last copy is queued, not done; pass `ordered_with=stream` to order later work on `stream` after
them (on the device, no host wait), or call `synchronize()` to wait on the host.

Interrupts: an exception in the thread that called `run` (Ctrl-C's KeyboardInterrupt) stops
the reader threads at their next chunk; each keeps the copier in use (`close()` refuses) until
it has queued its last copy, so no pinned chunk is freed under a thread or a copy.
"""

from __future__ import annotations

import os
import threading
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from hip_core import ClosedError, Device, Event, PinnedBuffer, Resource, Stream
from hip_ffi.constants import HOST_MALLOC_DEFAULT, HOST_MALLOC_PORTABLE

MiB = 1 << 20
CHUNK_BYTES = 16 * MiB  # big enough that per-chunk Python costs (~30 µs) vanish, small enough
#                         that eight threads' reads overlap the copies of the previous chunks
DEFAULT_THREADS = 8  # eight readers saturate page-cache copies on the H200's host (≈45 GB/s)
DEFAULT_STREAMS = 4
POLL_SECONDS = 0.05  # a thread waiting for others wakes this often (see join_threads)
IOV_MAX = 1024  # buffers one preadv call takes at most (Linux's UIO_MAXIOV)


@dataclass
class Piece:
    """`nbytes` bytes at `chunk_offset` in a staged chunk go to device address `dst` on the
    copier's device `target` (an index into `StagedCopier.devices`); `key` names what they
    belong to (e.g. a tensor index) for checksums."""

    chunk_offset: int
    dst: int
    nbytes: int
    key: int = 0
    key_offset: int = 0
    target: int = 0


class ShortReadError(EOFError):
    """A file ended before a staged read was filled: it shrank under the reader. `source` is
    the file descriptor, `offset` where the read stopped, `missing` the bytes it lacked."""

    def __init__(self, source: int, offset: int, missing: int) -> None:
        super().__init__(f"file ended {missing} bytes early at {offset}")
        self.source, self.offset, self.missing = source, offset, missing


@dataclass(frozen=True)
class Interleaved:
    """A read's layout in its chunk: the source holds `rows` rows, each of `parts` runs of
    `part` bytes; the chunk gets them grouped by run: run k of row j at (k·rows + j)·part, so
    that run k of every row is one contiguous block (e.g. one device's columns of a matrix)."""

    rows: int
    parts: int
    part: int

    def runs(self) -> list[tuple[int, int]]:
        """(chunk offset, nbytes) of each run, in the source's order."""
        rows, part = self.rows, self.part
        return [((k * rows + j) * part, part) for j in range(rows) for k in range(self.parts)]


@dataclass
class Chunk:
    """One staged read: `nbytes` bytes from `source` (an open file descriptor read at `offset`,
    or a 1-D uint8 numpy array read from `offset`) scattered to the device as `pieces`.

    `scatter`, when given: where the consecutive bytes read land in the chunk (covering
    `nbytes`; None: in order from 0)."""

    source: Any
    offset: int
    nbytes: int
    pieces: list[Piece] = field(default_factory=list)
    scatter: Interleaved | None = None


class _Slot:
    """A pinned chunk and, per device, the event recorded after the copies that read it; and
    the read buffers of the last `Interleaved` layout filled into it (successive chunks of a
    tensor share one: made once, not for every chunk, as their Python cost is not small)."""

    __slots__ = ("buffer", "events", "layout", "view", "views")

    def __init__(self, devices: Sequence[Device], size: int) -> None:
        # Portable: pinned for every device's copies, not only the current one's (a no-op
        # where unified addressing already makes it so).
        flags = HOST_MALLOC_PORTABLE if len(devices) > 1 else HOST_MALLOC_DEFAULT
        self.buffer = PinnedBuffer.allocate(size, flags)
        self.view = self.buffer.memoryview()
        self.events = [Event(device, timing=False) for device in devices]
        self.layout: Interleaved | None = None
        self.views: list[memoryview] = []

    def scattered(self, layout: Interleaved) -> list[memoryview]:
        """The chunk's buffers, in the source's order, for a read laid out as `layout`."""
        if layout != self.layout:
            self.views = [self.view[at : at + n] for at, n in layout.runs()]
            self.layout = layout
        return self.views

    def close(self) -> None:
        self.views = []
        self.view.release()
        for event in self.events:
            event.close()
        self.buffer.close()


class StagedCopier(Resource):
    """Threads, pinned chunks and streams of one device for host-to-device copies.

    Args:
        device: the destination device.
        more_devices: further destination devices (a piece's `target` indexes `devices`:
            `device` first, then these), each with `streams` streams of its own.
        threads: reader threads (each fills a chunk, then queues its copy).
        streams: copy streams per device, shared round-robin by the threads.
        chunk_bytes: size of one pinned chunk.
        max_chunks: pinned chunks at most (allocated on demand: in practice about one per
            thread of each run in progress; default 3 per thread).

    Pinned memory stays allocated until `close()`; `default(device)` keeps one per device for
    the process (and makes a new one once that is closed). Several `run`s may proceed at once
    (a large upload during a checkpoint load, or from a load's progress callback): they share
    the chunks and the streams. Once closed, `run` and `synchronize` raise ClosedError naming
    the copier.
    """

    _defaults: ClassVar[dict[tuple[Device, ...], StagedCopier]] = {}
    _defaults_lock = threading.Lock()

    def __init__(
        self,
        device: Device,
        *,
        more_devices: Sequence[Device] = (),
        threads: int = DEFAULT_THREADS,
        streams: int = DEFAULT_STREAMS,
        chunk_bytes: int = CHUNK_BYTES,
        max_chunks: int | None = None,
    ) -> None:
        if threads < 1 or streams < 1 or chunk_bytes < 4096:
            raise ValueError("threads and streams must be >= 1 and chunk_bytes >= 4096")
        self.device = device
        self.devices = [device, *more_devices]
        if len(set(self.devices)) != len(self.devices):
            raise ValueError(f"a copier's devices must differ: {self.devices}")
        self.threads = threads
        self.chunk_bytes = chunk_bytes
        self.max_chunks = max_chunks or 3 * threads
        self.streams: list[Stream] = []  # `streams` per device, in `devices` order
        self._slots: list[_Slot] = []
        self._own(_release, self._slots, self.streams)  # (frees the streams made if one fails)
        for target in self.devices:
            self.streams += [target.create_stream(non_blocking=True) for _ in range(streams)]
        self._per_device = streams
        self._free: list[_Slot] = []  # most recently freed last
        self._available = threading.Condition()
        self._runs = 0  # runs and reader threads in progress (close() refuses while any is)

    @classmethod
    def default(cls, device: Device, more_devices: Sequence[Device] = ()) -> StagedCopier:
        """The process's copier for `device` (and `more_devices`, in that order; created on
        first use, reused after)."""
        # Devices compare equal across threads, not across platforms (tests switch platforms
        # in-process), so this is one copier per device list of each platform.
        key = (device, *more_devices)
        with cls._defaults_lock:
            found = cls._defaults.get(key)
            if found is None or found.closed:
                threads = min(DEFAULT_THREADS, os.cpu_count() or 1)
                found = cls._defaults[key] = cls(device, more_devices=more_devices,
                                                 threads=threads)  # fmt: skip
            return found

    @property
    def pinned_bytes(self) -> int:
        """Pinned host memory held now."""
        return len(self._slots) * self.chunk_bytes

    # --- running chunks ----------------------------------------------------------------------

    def run(
        self,
        chunks: Iterable[Chunk],
        *,
        cancelled: Callable[[], bool] = lambda: False,
        on_chunk: Callable[[Chunk], None] | None = None,
        checksums: dict[tuple[int, int], tuple[int, int]] | None = None,
        ordered_with: Stream | None = None,
    ) -> None:
        """Read every chunk into pinned memory and queue its pieces' copies.

        Returns when all are queued (not done), or raises the first error a thread met (the
        others stop at their next chunk). `cancelled()` is polled before each chunk; once it is
        true no further chunk starts. `on_chunk` is called after each chunk is queued, from a
        reader thread, one call at a time (other threads keep reading meanwhile). With
        `checksums`, each piece's CRC-32 is stored under (key, key_offset) as (crc, nbytes).

        With `ordered_with`, the copies are ordered on the device as if queued on that stream:
        they wait for its earlier work (e.g. the stream-ordered allocation of their
        destination) and its later work waits for them. No host wait either way.
        """
        with self._available:
            self._check_open()
            self._runs += 1
        try:
            if ordered_with is not None:
                mark = ordered_with.record(Event(ordered_with.device, timing=False))
                for stream in self.streams:
                    stream.wait(mark)
            try:
                self._run(chunks, cancelled, on_chunk, checksums)
            finally:
                if ordered_with is not None:
                    self._then(ordered_with)
        finally:
            with self._available:
                self._runs -= 1

    def _run(
        self,
        chunks: Iterable[Chunk],
        cancelled: Callable[[], bool],
        on_chunk: Callable[[Chunk], None] | None,
        checksums: dict[tuple[int, int], tuple[int, int]] | None,
    ) -> None:
        work = iter(chunks)
        lock, callback_lock = threading.Lock(), threading.Lock()
        errors: list[BaseException] = []
        stop = threading.Event()  # the caller was interrupted: no further chunk starts

        def next_chunk() -> Chunk | None:
            with lock:
                if errors or stop.is_set() or cancelled():
                    return None
                return next(work, None)

        def reader(index: int) -> None:
            # This thread's stream of each device: streams[target * per_device + lane].
            lane = index % self._per_device
            streams = self.streams[lane :: self._per_device]
            try:
                with self.device:
                    while (chunk := next_chunk()) is not None:
                        self._stage(chunk, streams, checksums)
                        if on_chunk is not None:
                            with callback_lock:
                                on_chunk(chunk)
            except BaseException as error:  # reported to the caller below
                with lock:
                    errors.append(error)
            finally:
                with self._available:  # counted from before its start (see below)
                    self._runs -= 1

        workers = [
            threading.Thread(target=reader, args=(i,), name=f"hip-staging-{i}", daemon=True)
            for i in range(self.threads)
        ]
        for worker in workers:
            with self._available:
                self._runs += 1  # each reader keeps the copier open until it has finished
            try:
                worker.start()
            except BaseException:
                with self._available:
                    self._runs -= 1
                stop.set()
                raise
        try:
            join_threads(workers)
        except BaseException:  # e.g. KeyboardInterrupt in the calling thread: stop the readers
            stop.set()
            raise
        if errors:
            raise errors[0]

    def _stage(
        self,
        chunk: Chunk,
        streams: list[Stream],
        checksums: dict[tuple[int, int], tuple[int, int]] | None,
    ) -> None:
        """Fill a chunk and queue its pieces' copies, each on `streams[piece.target]`."""
        if chunk.nbytes > self.chunk_bytes:
            raise ValueError(f"a chunk of {chunk.nbytes} bytes exceeds {self.chunk_bytes}")
        slot = self._acquire()
        queued: set[int] = set()
        try:
            staged = slot.view[: chunk.nbytes]
            if chunk.scatter is None:
                _fill(staged, chunk)
            else:
                _fill_scattered(slot.scattered(chunk.scatter), chunk)
            base = slot.buffer.ptr
            for piece in chunk.pieces:
                if checksums is not None:
                    part = staged[piece.chunk_offset : piece.chunk_offset + piece.nbytes]
                    checksums[(piece.key, piece.key_offset)] = (zlib.crc32(part), piece.nbytes)
                streams[piece.target].copy_from_host(
                    piece.dst, base + piece.chunk_offset, piece.nbytes
                )
                queued.add(piece.target)
        finally:
            # Even on a later failure: the chunk is not refilled before every copy read it.
            for target in queued:
                slot.events[target].record(streams[target])
            self._release(slot)

    def _acquire(self) -> _Slot:
        """The most recently freed chunk (waiting for its copy), a new one only when none is
        free and there is room, else wait for one.

        Taking the most recent keeps the set of pinned pages in use small and hot, one or two
        per thread: a thread's read then overlaps the other threads' copies, not its own. On
        the H200 host, in one run, 4 GiB loads ran at 46.7 GB/s this way and at 39.5 GB/s when
        a new chunk was taken whenever the most recent one's copy was still running (which
        grows the pool to max_chunks and cycles through all of it)."""
        with self._available:
            while not self._free and len(self._slots) >= self.max_chunks:
                self._available.wait()
            if self._free:
                slot = self._free.pop()
            else:
                slot = _Slot(self.devices, self.chunk_bytes)
                self._slots.append(slot)
        for event in slot.events:
            event.sync()  # the copies that last read this chunk have finished
        return slot

    def _release(self, slot: _Slot) -> None:
        with self._available:
            self._free.append(slot)
            self._available.notify()

    # --- ordering -------------------------------------------------------------------------------

    def _then(self, stream: Stream) -> None:
        """Make work queued later on `stream` wait for every copy queued so far (device-side)."""
        for copy_stream in self.streams:
            stream.wait(copy_stream.record(Event(copy_stream.device, timing=False)))

    def synchronize(self) -> None:
        """Block until every copy queued so far has finished. ClosedError once closed (close()
        waited for them)."""
        self._check_open()
        for stream in self.streams:
            stream.sync()

    def close(self) -> None:
        """Wait for the copies in flight, then free the pinned chunks, events and streams.
        ValueError while a `run` is in progress (its threads are using the chunks). Closing
        twice is harmless."""
        with self._available:
            if self.closed:
                return
            if self._runs:
                raise ValueError(f"{self!r} is in use by a run; close it after")
            super().close()
        self._free.clear()

    def _check_open(self) -> None:
        if self.closed:
            raise ClosedError(f"{self!r} is closed")

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self.pinned_bytes // MiB} MiB pinned"
        chunk = self.chunk_bytes
        size = f"{chunk // MiB} MiB" if chunk % MiB == 0 else f"{chunk} B"
        return (
            f"<StagedCopier of {self.device!r}: {self.threads} threads, {len(self.streams)} "
            f"streams, {size} chunks, {state}>"
        )


def _release(slots: list[_Slot], streams: list[Stream]) -> None:
    """A copier's release (at close, or when collected): wait for its copies, then free its
    pinned chunks, events and streams."""
    for stream in streams:
        stream.sync()
    for slot in slots:
        slot.close()
    slots.clear()
    for stream in streams:
        stream.close()


def join_threads(threads: Iterable[threading.Thread]) -> None:
    """Join `threads`, waking every POLL_SECONDS. Python runs signal handlers (Ctrl-C's
    KeyboardInterrupt) between waits, and a blocking wait is not cut short by a signal once a
    library has re-installed Python's SIGINT handler with SA_RESTART, as a compile with NVRTC
    does on the nvidia platform: a plain join() would then see Ctrl-C only when the threads end.
    """
    for thread in threads:
        while thread.is_alive():
            thread.join(POLL_SECONDS)


def wait_for(event: threading.Event) -> None:
    """`event.wait()`, waking every POLL_SECONDS (see join_threads)."""
    while not event.wait(POLL_SECONDS):
        pass


def _fill(staged: memoryview, chunk: Chunk) -> None:
    """Fill `staged` from the chunk's source; the copy itself runs without the GIL."""
    if isinstance(chunk.source, int):
        done = 0
        while done < len(staged):
            got = os.preadv(chunk.source, [staged[done:]], chunk.offset + done)
            if got == 0:
                raise ShortReadError(chunk.source, chunk.offset + done, len(staged) - done)
            done += got
    else:
        import numpy as np

        source = chunk.source[chunk.offset : chunk.offset + len(staged)]
        np.copyto(np.frombuffer(staged, np.uint8), source)


def _fill_scattered(buffers: list[memoryview], chunk: Chunk) -> None:
    """Fill `buffers` in order from the chunk's file (IOV_MAX of them a `preadv`)."""
    if not isinstance(chunk.source, int):
        raise TypeError("a scattered read comes from a file descriptor")
    done, first, total = 0, 0, chunk.nbytes  # bytes read so far; the first buffer not yet full
    while first < len(buffers):
        got = os.preadv(chunk.source, buffers[first : first + IOV_MAX], chunk.offset + done)
        if got == 0:
            raise ShortReadError(chunk.source, chunk.offset + done, total - done)
        done += got
        while first < len(buffers) and got >= len(buffers[first]):
            got -= len(buffers[first])
            first += 1
        if got:  # a short read stopped inside a buffer: the rest of it next (on a copy: the
            buffers = [*buffers]  # list is the slot's, kept for its next chunk)
            buffers[first] = buffers[first][got:]


def split_host_copy(host: Any, dst: int, chunk_bytes: int) -> list[Chunk]:
    """Chunks that copy the bytes of the C-contiguous numpy array `host` to device address
    `dst`."""
    flat = host.reshape(-1).view("uint8")
    return [
        Chunk(flat, start, n, [Piece(0, dst + start, n)])
        for start in range(0, flat.nbytes, chunk_bytes)
        for n in (min(chunk_bytes, flat.nbytes - start),)
    ]
