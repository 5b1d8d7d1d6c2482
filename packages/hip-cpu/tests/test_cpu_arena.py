"""The cpu platform's shareable arena of device memory: the range allocator against a model,
pages given back to the host, and a fork() child that never writes its parent's memory.
"""

from __future__ import annotations

import itertools
import os
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hip_ffi
from hip_cpu import arena, faults, ipc
from hip_cpu.free_ranges import FreeRanges

MIB = 1 << 20


@pytest.fixture(scope="module")
def hip() -> Any:
    api = hip_ffi.load("cpu")
    if arena.get() is None:
        pytest.fail("this Linux should give the cpu platform a memfd arena")
    return api


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(1, 40), st.integers(0, 1000)), max_size=80))
def test_free_ranges_never_overlap_and_merge_neighbours(ops: list[tuple[bool, int, int]]) -> None:
    total = 200
    ranges = FreeRanges(total)
    taken: dict[int, int] = {}  # start -> length
    for take, length, pick in ops:
        if take or not taken:
            start = ranges.take(length)
            biggest = max((n for _, n in ranges.free_ranges()), default=0)
            if start is None:
                assert biggest < length  # refused only when nothing fits
                continue
            assert all(start + length <= s or s + n <= start for s, n in taken.items())
            assert start >= 0 and start + length <= total
            taken[start] = length
        else:
            start = sorted(taken)[pick % len(taken)]
            assert ranges.give(start, taken.pop(start)) is not None
        free = ranges.free_ranges()
        assert ranges.free_units() + sum(taken.values()) == total
        assert all(a + n < b for (a, n), (b, _) in itertools.pairwise(free))  # merged
    for start, length in list(taken.items()):
        ranges.give(start, length)
    assert ranges.free_ranges() == [(0, total)]


def test_best_fit_takes_the_smallest_range_that_fits() -> None:
    ranges = FreeRanges(100)
    a, b, c, d = (ranges.take(n) for n in (10, 5, 20, 3))
    assert (a, b, c, d) == (0, 10, 15, 35)
    assert ranges.give(b, 5) == (10, 5) and ranges.give(d, 3) == (35, 65)
    assert ranges.take(4) == 10  # the 5-unit hole, not the 65-unit tail
    assert ranges.give(a, 10) == (0, 10) and ranges.give(10, 4) == (0, 15)  # merged both ways


def test_device_memory_is_in_the_arena_and_large_frees_give_pages_back(hip: Any) -> None:
    ffi, shared = hip.ffi, arena.get()
    assert shared is not None and not faults.CHECKED
    out = ffi.new("void**")
    assert hip.hipMalloc(out, 4 * MIB) == 0
    base = int(ffi.cast("uintptr_t", out[0]))
    assert shared.contains(base) and base % 256 == 0
    assert hip.hipMemset(out[0], 0xAB, 4 * MIB) == 0
    assert hip.hipFree(out[0]) == 0
    # The pages of a freed range this large are punched out of the memfd: they read zeros.
    inner = -(-base // arena.PAGE) * arena.PAGE
    view = ffi.buffer(ffi.cast("char*", inner), 2 * MIB)
    assert bytes(view) == bytes(2 * MIB)
    pinned = ffi.new("void**")  # pinned host memory is not device memory: not in the arena
    assert hip.hipHostMalloc(pinned, 4096, 0) == 0
    assert not shared.contains(int(ffi.cast("uintptr_t", pinned[0])))
    assert hip.hipHostFree(pinned[0]) == 0


def test_a_forked_child_has_device_memory_of_its_own(hip: Any) -> None:
    ffi = hip.ffi
    out = ffi.new("void**")
    assert hip.hipMalloc(out, 1 << 16) == 0
    ffi.memmove(out[0], b"parent", 6)
    exported = ffi.new("hipIpcMemHandle_t*")
    assert hip.hipIpcGetMemHandle(exported, out[0]) == 0
    before = ipc.unpack(bytes(ffi.buffer(exported.reserved)))
    assert before is not None
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no HIP call that waits for streams (their threads are gone)
        code = 1
        try:
            os.close(read)
            seen = bytes(ffi.buffer(ffi.cast("char*", out[0]), 6))  # the copy of its parent's
            ffi.memmove(out[0], b"child!", 6)
            more = ffi.new("void**")
            assert hip.hipMalloc(more, 1 << 16) == 0
            # Exported again from here, an inherited allocation names this process's memfd:
            assert hip.hipIpcGetMemHandle(exported, out[0]) == 0
            after = ipc.unpack(bytes(ffi.buffer(exported.reserved)))
            assert after is not None and after.pid == os.getpid() != before.pid
            assert after.serial > before.serial and after.token != before.token
            ffi.memmove(more[0], b"\x5a" * (1 << 16), 1 << 16)
            os.write(write, seen + int(ffi.cast("uintptr_t", more[0])).to_bytes(8, "little"))
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        seen = pipe.read()
    _, code = os.waitpid(pid, 0)
    assert code == 0 and seen[:6] == b"parent"
    assert bytes(ffi.buffer(ffi.cast("char*", out[0]), 6)) == b"parent"  # never the child's
    other = ffi.new("void**")  # the same address as the child's allocation, not its bytes
    assert hip.hipMalloc(other, 1 << 16) == 0
    assert int(ffi.cast("uintptr_t", other[0])) == int.from_bytes(seen[6:], "little")
    assert bytes(ffi.buffer(ffi.cast("char*", other[0]), 16)) != b"\x5a" * 16
    assert hip.hipFree(other[0]) == 0 and hip.hipFree(out[0]) == 0
