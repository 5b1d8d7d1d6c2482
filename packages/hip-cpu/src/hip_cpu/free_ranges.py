"""Best-fit allocation of ranges of units inside [0, total), with free neighbours merged.

The arena (arena.py) hands out device memory in 256-byte units from one shared mapping; this is
its bookkeeping. A free range is found in O(log n) (the smallest one that fits, the lowest
address among equals), and a freed range joins the free ranges on either side at once, so the
space never crumbles into pieces that fit nothing.

Critical sections create no object that the garbage collector tracks (free ranges are keyed by
one int, never a tuple), so no collection, and no finalizer that frees memory, can run inside
one; a free that arrives re-entrantly anyway (a finalizer on the same thread) is put aside and
applied by the next call.
"""

from __future__ import annotations

import bisect
import threading

_START_BITS = 40  # starts below 2**40 units: 256 TiB of 256-byte units
_START_MASK = (1 << _START_BITS) - 1


class FreeRanges:
    """Ranges of `total` units: `take(n)` a free one, `give(start, n)` it back."""

    def __init__(self, total: int) -> None:
        if not 0 < total <= _START_MASK:
            raise ValueError(f"a range allocator holds 1 to 2**40 units, not {total}")
        self.total = total
        self._by_size: list[int] = []  # length << 40 | start, sorted: best fit is a bisect
        self._length_at: dict[int, int] = {}  # start -> length, for every free range
        self._start_before: dict[int, int] = {}  # end -> start, for every free range
        self._lock = threading.Lock()
        self._local = threading.local()  # .inside: this thread is in a critical section
        self._deferred: list[int] = []  # gives that arrived re-entrantly: start << 40 | length
        self._add(0, total)

    def _add(self, start: int, length: int) -> None:
        bisect.insort(self._by_size, length << _START_BITS | start)
        self._length_at[start] = length
        self._start_before[start + length] = start

    def _remove(self, start: int, length: int) -> None:
        key = length << _START_BITS | start
        del self._by_size[bisect.bisect_left(self._by_size, key)]
        del self._length_at[start]
        del self._start_before[start + length]

    def take(self, length: int) -> int | None:
        """The start of `length` (> 0) free units, now taken; None when no free range fits."""
        local = self._local
        local.inside = True  # (before the lock: a finalizer from here on puts its give aside)
        try:
            with self._lock:
                self._settle()
                i = bisect.bisect_left(self._by_size, length << _START_BITS)
                if i == len(self._by_size):
                    return None
                key = self._by_size[i]
                found, start = key >> _START_BITS, key & _START_MASK
                self._remove(start, found)
                if found > length:
                    self._add(start + length, found - length)
                return start
        finally:
            local.inside = False

    def give(self, start: int, length: int) -> tuple[int, int] | None:
        """Free `length` units at `start` (taken before); returns the free range they are now
        part of, (start, length), merged with its free neighbours, or None when the give was
        put aside (re-entered on this thread: the next call applies it)."""
        local = self._local
        if getattr(local, "inside", False):
            self._deferred.append(start << _START_BITS | length)
            return None
        local.inside = True
        try:
            with self._lock:
                self._settle()
                return self._give(start, length)
        finally:
            local.inside = False

    def _give(self, start: int, length: int) -> tuple[int, int]:
        end = start + length
        before = self._start_before.get(start)
        if before is not None:  # a free range ends where this one starts
            self._remove(before, start - before)
            start = before
        after = self._length_at.get(end)
        if after is not None:  # a free range starts where this one ends
            self._remove(end, after)
            end += after
        self._add(start, end - start)
        return start, end - start

    def _settle(self) -> None:
        while self._deferred:
            key = self._deferred.pop()
            self._give(key >> _START_BITS, key & _START_MASK)

    def after_fork(self) -> None:
        """In a fork() child: a fresh lock (a thread of the parent may have held this one)."""
        self._lock = threading.Lock()
        self._local = threading.local()

    def free_ranges(self) -> list[tuple[int, int]]:
        """Every free range, (start, length), in address order."""
        with self._lock:
            return sorted(self._length_at.items())

    def free_units(self) -> int:
        with self._lock:
            return sum(self._length_at.values())
