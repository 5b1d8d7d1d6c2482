"""Device memory on the cpu platform is bounded, through the whole stack (hip_core.Device).

Before the fix the platform overcommitted: ten 20 GiB allocations succeeded on a 24 GiB
machine, and filling two 1.5 GiB buffers in a 2 GiB cgroup got the process killed. Now the
device's size is physical memory or the cgroup limit (read at load; here a fake cgroup v2 mount
named by HIP_FFI_CPU_CGROUP, 256 MiB), an allocation past what is left raises
HipOutOfMemoryError, and `mem_info()` reports (bound - handed out, bound). The buffers that fit
are filled for real. Runs in a subprocess first, then in this process.

Run as a script (`python test_cpu_memory.py bounded`) it prints what it saw as JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

MIB = 1 << 20
LIMIT = 256 * MIB


def bounded() -> dict[str, int]:
    """Fill what fits of a 256 MiB device, then ask for more; and overcommit the host."""
    import numpy as np

    import hip_core

    device = hip_core.Device(0)
    seen = {"total": device.mem_info()[1], "free_before": device.mem_info()[0]}
    buffers = [device.allocate(100 * MIB) for _ in range(2)]
    for buffer in buffers:  # the memory is really there: fill it
        buffer.copy_from(np.full(100 * MIB // 4, 7, dtype=np.int32))
    seen["free_after_two"] = device.mem_info()[0]
    try:
        device.allocate(100 * MIB)
        seen["third_refused"] = 0
    except hip_core.HipOutOfMemoryError:
        seen["third_refused"] = 1
    for buffer in buffers:
        buffer.close()
    seen["free_after_close"] = device.mem_info()[0]
    return seen


def check(seen: dict[str, int]) -> None:
    assert seen["total"] == LIMIT
    assert seen["free_before"] - seen["free_after_two"] == 200 * MIB
    assert seen["third_refused"] == 1
    assert seen["free_after_close"] == seen["free_before"]


def fake_cgroup(root: Path) -> Path:
    """A cgroup v2 mount whose root group is limited to LIMIT bytes."""
    (root / "cgroup.controllers").write_text("cpu memory\n")
    (root / "memory.max").write_text(f"{LIMIT}\n")
    return root


def test_allocations_past_the_cgroup_limit_in_a_subprocess(tmp_path: Path) -> None:
    environment = {**os.environ, "HIP_PLATFORM": "cpu",
                   "HIP_FFI_CPU_CGROUP": str(fake_cgroup(tmp_path))}  # fmt: skip
    done = subprocess.run([sys.executable, __file__, "bounded"], env=environment,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, f"the process died ({done.returncode}): {done.stderr[-3000:]}"
    check(json.loads(done.stdout.splitlines()[-1]))


@pytest.fixture
def limited(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    import hip_core
    from hip_cpu import limits

    monkeypatch.setenv("HIP_FFI_CPU_CGROUP", str(fake_cgroup(tmp_path)))
    with hip_core.use_platform("cpu"):
        limits.reload()
        try:
            yield
        finally:
            monkeypatch.undo()
            limits.reload()


def test_allocations_past_the_cgroup_limit_in_process(limited: None) -> None:
    check(bounded())


def test_the_host_is_not_overcommitted() -> None:
    import hip_core

    with hip_core.use_platform("cpu"):
        device = hip_core.Device(0)
        free, total = device.mem_info()
        held, refused = [], 0
        for _ in range(10):  # each 3/5 of what is free (never touched, so nothing is used)
            try:
                held.append(device.allocate(free * 3 // 5))
            except hip_core.HipOutOfMemoryError:
                refused += 1
        for buffer in held:
            buffer.close()
        assert (len(held), refused) == (1, 9) and device.mem_info() == (free, total)


if __name__ == "__main__":
    print(json.dumps(globals()[sys.argv[1]]()))
