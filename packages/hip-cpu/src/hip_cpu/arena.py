"""Device memory that another process can map: the cpu platform's shareable arena.

hipIpcGetMemHandle may export any allocation hipMalloc returned, at any time after, and the
process that opens the handle must map the very same bytes (zero-copy). Memory from
aligned_alloc cannot be shared after the fact, so device memory (hipMalloc, hipMallocAsync)
comes from one shared mapping per process: a memfd (anonymous and never on disk), sized at
twice the host's memory, which costs address space only (a page costs memory once touched),
mapped MAP_SHARED once; free_ranges.py hands out 256-byte-aligned ranges of it. Another process
opens the memfd through /proc/<pid>/fd/<fd> (same user) and maps the pages of one allocation
(ipc.py). The memfd's name carries the pid and a random token, checked before and after the
open, so a reused pid or descriptor number is never mistaken for it.

The file starts with a 1 MiB header:
- the export table (first half): 16384 slots of 32 bytes (serial, file offset, size, 0), one
  per exported allocation, written by hipIpcGetMemHandle and cleared by hipFree, so that a
  process opening a handle can tell a live allocation from a freed one;
- the event slots (second half): 16384 slots of 32 bytes, the state of interprocess events
  (shared_events.py).
A handle names a slot and its serial (serials count up from 1 in each process), so a slot
reused by another allocation is never taken for the one the handle named.

A freed range of 1 MiB or more gives its pages back to the host at once (MADV_REMOVE punches
them out of the memfd); smaller ones keep theirs for the next allocation. Memory handed out
holds zeros or earlier contents (hipMalloc's memory is uninitialized either way).

fork(): a child gets a memfd of its own, with a copy of the ranges in use mapped at the same
addresses (os.register_at_fork), so parent and child never write each other's device memory;
the child's export table starts empty. Without memfd or the address space for the mapping,
device memory comes from aligned_alloc and hipIpcGetMemHandle answers hipErrorNotSupported.
"""

from __future__ import annotations

import itertools
import os
import threading

from hip_cpu import limits
from hip_cpu.free_ranges import FreeRanges
from hip_cpu.shared_objects import libc
from hip_ffi._ffi import ffi

UNIT = 256  # bytes: the alignment and granule of every allocation
HEADER_BYTES = 1 << 20
SLOT_BYTES = 32
TABLE_SLOTS = HEADER_BYTES // 2 // SLOT_BYTES  # in each of the two tables
EVENT_TABLE = HEADER_BYTES // 2  # file offset of the event slots
PAGE = os.sysconf("SC_PAGE_SIZE")
_GIVE_BACK_MIN = 1 << 20  # bytes: freed ranges this large return their pages to the host
_PROT_READ_WRITE = 0x1 | 0x2
_MAP_SHARED, _MAP_PRIVATE, _MAP_FIXED, _MAP_NORESERVE = 0x01, 0x02, 0x10, 0x4000
_MAP_FAILED = (1 << 64) - 1
_MADV_REMOVE = 9


def memfd_name(pid: int, token: int) -> str:
    return f"hip-ffi-cpu-{pid}-{token:016x}"


def map_file(fd: int, offset: int, length: int, *, at: int = 0, private: bool = False) -> int:
    """Map `length` bytes of `fd` from `offset` (both page multiples) read-write, shared unless
    `private`, at `at` when non-zero (MAP_FIXED); the address, or 0 on failure."""
    flags = (_MAP_PRIVATE if private else _MAP_SHARED) | _MAP_NORESERVE | (_MAP_FIXED if at else 0)
    address = int(libc.mmap(at, length, _PROT_READ_WRITE, flags, fd, offset))
    return 0 if address == _MAP_FAILED else address


class _Slots:
    """The indices of one table of the header, handed out and taken back, with serials (which
    go on counting across a fork: a slot of before never has the serial of one of after)."""

    def __init__(self, serials: itertools.count[int] | None = None) -> None:
        self._free = list(range(TABLE_SLOTS - 1, -1, -1))
        self._taken: set[int] = set()
        self.serials = serials or itertools.count(1)

    def take(self) -> tuple[int, int] | None:
        """(index, serial), or None when all are taken."""
        try:
            index = self._free.pop()
        except IndexError:
            return None
        self._taken.add(index)
        return index, next(self.serials)

    def give(self, index: int) -> None:
        if index in self._taken:  # (a slot of before a fork is not this table's)
            self._taken.discard(index)
            self._free.append(index)


class Arena:
    """This process's memfd, its mapping, and what is handed out of it."""

    def __init__(self, fd: int, token: int, base: int, length: int) -> None:
        self.fd, self.token = fd, token
        self.pid = os.getpid()
        self.base = base  # the mapping of the whole file; allocations start past the header
        self.length = length
        self.data = base + HEADER_BYTES
        self.ranges = FreeRanges((length - HEADER_BYTES) // UNIT)
        self.exports = _Slots()
        self.events = _Slots()
        # Re-entrant: a finalizer that frees an exported allocation may run inside (a
        # collection at any allocation), and the tables' operations do not interleave badly.
        self.lock = threading.RLock()

    @classmethod
    def create(cls) -> Arena | None:
        """A fresh arena, or None when this host cannot make one (no memfd, no address space)."""
        size = 2 * limits.physical_memory()
        length = HEADER_BYTES + -(-size // (2 << 20)) * (2 << 20)
        token = int.from_bytes(os.urandom(8), "little")
        try:
            fd = os.memfd_create(memfd_name(os.getpid(), token), os.MFD_CLOEXEC)
        except (AttributeError, OSError):
            return None
        try:
            os.ftruncate(fd, length)
            base = map_file(fd, 0, length)
        except OSError:
            base = 0
        if not base:
            os.close(fd)
            return None
        return cls(fd, token, base, length)

    def contains(self, address: int) -> bool:
        return self.data <= address < self.base + self.length

    def allocate(self, size: int) -> int:
        """The address of `size` bytes (a multiple of UNIT), or 0 when no free range fits."""
        start = self.ranges.take(size // UNIT)
        return 0 if start is None else self.data + start * UNIT

    def free(self, address: int, size: int) -> None:
        """Give back what `allocate` returned, and its pages to the host when it is large."""
        merged = self.ranges.give((address - self.data) // UNIT, size // UNIT)
        if merged is None or size < _GIVE_BACK_MIN:
            return
        # The pages inside the free range the freed one is now part of, and touching it.
        begin, end = self.data + merged[0] * UNIT, self.data + (merged[0] + merged[1]) * UNIT
        low = max(-(-begin // PAGE) * PAGE, address // PAGE * PAGE)
        high = min(end // PAGE * PAGE, -(-(address + size) // PAGE) * PAGE)
        if high > low:
            libc.madvise(low, high - low, _MADV_REMOVE)

    # ---- the header's tables ----------------------------------------------------------------
    def export(self, address: int, size: int) -> tuple[int, int] | None:
        """Publish the allocation at `address` in the export table: (slot, serial), or None
        when the table is full."""
        with self.lock:
            taken = self.exports.take()
        if taken is None:
            return None
        index, serial = taken
        entry = ffi.cast("uint64_t*", self.base + index * SLOT_BYTES)
        entry[1], entry[2], entry[3] = address - self.base, size, 0
        entry[0] = serial  # last: an importer reading the slot sees a whole entry or none
        return taken

    def exported(self, index: int, serial: int) -> bool:
        """Whether slot `index` of the export table still holds the export `serial`."""
        return bool(ffi.cast("uint64_t*", self.base + index * SLOT_BYTES)[0] == serial)

    def unexport(self, index: int, serial: int) -> None:
        """Withdraw an exported allocation (hipFree): handles of it no longer open."""
        with self.lock:
            if self.exported(index, serial):
                ffi.cast("uint64_t*", self.base + index * SLOT_BYTES)[0] = 0
                self.exports.give(index)

    def event_slot(self) -> tuple[int, int, int] | None:
        """(slot, serial, address) of a zeroed event slot, serial written; None when full."""
        with self.lock:
            taken = self.events.take()
        if taken is None:
            return None
        index, serial = taken
        address = self.base + EVENT_TABLE + index * SLOT_BYTES
        entry = ffi.cast("uint64_t*", address)
        entry[1] = entry[2] = entry[3] = 0
        entry[0] = serial
        return index, serial, address

    def release_event_slot(self, index: int) -> None:
        ffi.cast("uint64_t*", self.base + EVENT_TABLE + index * SLOT_BYTES)[0] = 0
        with self.lock:
            self.events.give(index)

    # ---- fork -----------------------------------------------------------------------------
    def renew_in_child(self) -> None:
        """In a fork() child: the same addresses over a memfd of the child's own, holding a
        copy of the event slots and of every range in use. Should that fail, the mapping
        becomes a private copy-on-write one (no export from this child then)."""
        self.lock = threading.RLock()  # (another thread of the parent may have held it)
        self.ranges.after_fork()
        old_fd, token = self.fd, int.from_bytes(os.urandom(8), "little")
        fd = -1
        try:
            fd = os.memfd_create(memfd_name(os.getpid(), token), os.MFD_CLOEXEC)
            os.ftruncate(fd, self.length)
            _copy_out(fd, self.base + EVENT_TABLE, EVENT_TABLE, HEADER_BYTES - EVENT_TABLE)
            used = 0
            for start, length in [*self.ranges.free_ranges(), (self.ranges.total, 0)]:
                if start > used:
                    offset = HEADER_BYTES + used * UNIT
                    _copy_out(fd, self.base + offset, offset, (start - used) * UNIT)
                used = start + length
            renewed = map_file(fd, 0, self.length, at=self.base) != 0
        except OSError:
            renewed = False
        if not renewed:
            if fd >= 0:
                os.close(fd)
            map_file(old_fd, 0, self.length, at=self.base, private=True)
            self.pid = -1  # exports refused (ipc.py): nothing here is shareable any more
            return
        os.close(old_fd)
        self.fd, self.token, self.pid = fd, token, os.getpid()
        self.exports = _Slots(self.exports.serials)


def _copy_out(fd: int, address: int, offset: int, length: int) -> None:
    view = memoryview(ffi.buffer(ffi.cast("char*", address), length))
    while view:  # os.pwrite may write less than asked
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


_arena: Arena | None = None
_tried = False
_lock = threading.Lock()


def get() -> Arena | None:
    """This process's arena, made on first use; None where it cannot exist."""
    global _arena, _tried
    if not _tried:
        with _lock:
            if not _tried:
                _arena = Arena.create()
                _tried = True
    return _arena


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.Lock()
    if _arena is not None:
        _arena.renew_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)
