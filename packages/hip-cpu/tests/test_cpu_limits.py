"""The cpu platform's device memory is bounded: physical memory or the cgroup limit.

The cgroup hierarchies here are fake directories (v2, v1, hybrid), read through the same code
as /sys/fs/cgroup; the allocations are real hipMalloc/hipHostMalloc/hipMallocAsync calls
against a small bound.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import hip_ffi
from hip_cpu import limits
from hip_ffi import constants

E = constants.ERROR_CODES
MIB = 1 << 20


def hierarchy(root: Path, files: dict[str, str], proc: str) -> Path:
    """A fake cgroup mount at `root` with `files`; returns the fake /proc/self/cgroup."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "proc-self-cgroup").write_text(proc)
    return root / "proc-self-cgroup"


V2 = {"cgroup.controllers": "cpu memory", "memory.max": "max",
      "user/memory.max": str(96 * MIB), "user/app/memory.max": "max"}  # fmt: skip
V1 = {"memory/memory.limit_in_bytes": "9223372036854771712",
      "memory/docker/abc/memory.limit_in_bytes": str(200 * MIB)}  # fmt: skip


@pytest.mark.parametrize(
    ("files", "proc", "expected"),
    [
        (V2, "0::/user/app\n", 96 * MIB),  # the lowest limit on the way up
        (V2, "0::/elsewhere\n", None),  # not visible under the mount: the mount's root
        ({**V2, "memory.max": str(64 * MIB)}, "0::/user/app\n", 64 * MIB),
        (V1, "4:memory:/docker/abc\n3:cpu:/\n0::/\n", 200 * MIB),
        (V1, "4:cpuacct,memory:/gone\n", None),  # v1's "no limit" value
        ({**V1, **{f"unified/{k}": v for k, v in V2.items()}}, "4:memory:/docker/abc\n0::/user\n",
         96 * MIB),  # hybrid: v1 and v2 side by side, the lower wins
        ({}, "0::/\n", None),  # no cgroup filesystem
    ],
)  # fmt: skip
def test_cgroup_limits_v1_v2_and_hybrid(
    tmp_path: Path, files: dict[str, str], proc: str, expected: int | None
) -> None:
    assert limits.cgroup_limit(tmp_path, hierarchy(tmp_path, files, proc)) == expected


@pytest.fixture
def bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The cpu platform with a 64 MiB cgroup (a fake v2 mount at HIP_FFI_CPU_CGROUP)."""
    hierarchy(tmp_path, {"cgroup.controllers": "memory", "memory.max": str(64 * MIB)}, "0::/\n")
    monkeypatch.setenv("HIP_FFI_CPU_CGROUP", str(tmp_path))
    hip = hip_ffi.load("cpu")
    limits.reload()
    try:
        yield hip
    finally:
        monkeypatch.undo()
        limits.reload()


def mem_info(hip: Any) -> tuple[int, int]:
    free, total = hip.ffi.new("size_t*"), hip.ffi.new("size_t*")
    assert hip.hipMemGetInfo(free, total) == 0
    return int(free[0]), int(total[0])


def test_allocations_past_the_bound_are_out_of_memory(bounded: Any) -> None:
    hip, ffi = bounded, bounded.ffi
    free, total = mem_info(hip)
    assert total == 64 * MIB and free <= total
    first, second, third = (ffi.new("void**") for _ in range(3))
    assert hip.hipMalloc(first, 24 * MIB) == 0
    assert hip.hipHostMalloc(second, 24 * MIB, 0) == 0  # pinned memory is host memory too
    assert mem_info(hip) == (free - 48 * MIB, total)
    assert hip.hipMalloc(third, 24 * MIB) == E["hipErrorOutOfMemory"]
    assert hip.hipMallocAsync(third, 24 * MIB, ffi.NULL) == E["hipErrorOutOfMemory"]
    ffi.memmove(first[0], b"\xab" * 4096, 4096)  # the memory handed out is real
    assert hip.hipFree(first[0]) == 0
    assert mem_info(hip) == (free - 24 * MIB, total)
    assert hip.hipMallocAsync(third, 24 * MIB, ffi.NULL) == 0
    assert hip.hipFreeAsync(third[0], ffi.NULL) == 0 and hip.hipDeviceSynchronize() == 0
    assert hip.hipHostFree(second[0]) == 0
    assert mem_info(hip) == (free, total)
    assert hip.hipMalloc(first, 65 * MIB) == E["hipErrorOutOfMemory"]
    size = ffi.new("size_t*")
    assert hip.hipDeviceTotalMem(size, 0) == 0 and size[0] == 64 * MIB
    hip.hipGetLastError()


def test_the_host_bound_stops_overcommit() -> None:
    hip = hip_ffi.load("cpu")
    limits.reload()
    free, total = mem_info(hip)
    assert 0 < free <= total <= limits.physical_memory()
    pointers = [hip.ffi.new("void**") for _ in range(10)]
    share = free * 3 // 5  # never touched: only the count stops the second
    results = [hip.hipMalloc(pointer, share) for pointer in pointers]
    try:
        assert results.count(0) == 1, results
        assert set(results) == {0, E["hipErrorOutOfMemory"]}
    finally:
        for pointer, result in zip(pointers, results, strict=True):
            if result == 0:
                assert hip.hipFree(pointer[0]) == 0
    hip.hipGetLastError()
