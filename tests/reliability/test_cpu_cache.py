"""Corrupt entries in the cpu platform's compiled-code cache, through the whole stack.

Before the fix a truncated `kernel-*.so` or `runtime-*.so` was dlopen()ed as found and crashed
every later run, and a flipped bit could hang or crash it. Now each entry's size and SHA-256
are recorded when it is written and checked before it is used: a damaged entry is rebuilt,
the run succeeds and the entry is whole again. hip-core's own program cache is off here
(HIP_CORE_CACHE=0) so that every load goes through the cpu platform's cache. Each corruption
runs in a subprocess first (a regression fails the test, not the suite), the kernel entries
then again in this process.

Run as a script (`python test_cpu_cache.py kernels` or `... runtime truncated`) it prints the
outcome as JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

KERNEL = 'extern "C" __global__ void fill(int* p, int v) { p[threadIdx.x] = v + threadIdx.x; }'
CORRUPTIONS: dict[str, Callable[[bytes], bytes]] = {
    "truncated": lambda data: data[: len(data) // 2],
    "emptied": lambda data: b"",
    "flipped": lambda data: data[:3001] + bytes([data[3001] ^ 0x40]) + data[3002:],
    "flipped in the header": lambda data: data[:40] + bytes([data[40] ^ 0x01]) + data[41:],
}


def run_kernel() -> bool:
    """Compile (through the cpu platform's cache), load and run KERNEL; True if it computed."""
    import numpy as np

    import hip_core

    device = hip_core.Device(0)
    with hip_core.Program(KERNEL).load(device) as module:
        out = device.allocate(4 * 16)
        module.get_kernel("fill").launch(1, 16, out, 7)
        device.synchronize()
        host = np.zeros(16, np.int32)
        out.copy_to(host)
        return bool(np.array_equal(host, 7 + np.arange(16)))


def entry(kind: str) -> Path:
    """The one `kind-*.so` entry of this run's cache directory."""
    (found,) = Path(os.environ["HIP_FFI_CPU_CACHE"]).glob(f"{kind}-*.so")
    return found


def kernels(*names: str) -> dict[str, int]:
    """Corrupt the kernel's entry in each way named (all by default), then compile, load and
    run it again each time."""
    counts = {"tried": 0, "clean": 0}
    run_kernel()  # makes the entry if it is not there
    for name in names or CORRUPTIONS:
        path = entry("kernel")
        path.write_bytes(CORRUPTIONS[name](path.read_bytes()))
        counts["tried"] += 1
        counts["clean"] += run_kernel() and path.read_bytes() == whole(path)
    return counts


def whole(path: Path) -> bytes:
    """The entry as its record says it should be (raises when it is not)."""
    from hip_cpu import toolchain

    fetched = toolchain.fetch(path)
    assert fetched is not None, f"{path.name} is not whole"
    return fetched[0]


def runtime(corruption: str) -> dict[str, int]:
    """Corrupt the runtime library's entry (made by an earlier run), then run a kernel."""
    path = entry("runtime")
    path.write_bytes(CORRUPTIONS[corruption](path.read_bytes()))
    return {"clean": int(run_kernel() and path.read_bytes() == whole(path))}


def isolated(cache: Path, *arguments: str) -> Any:
    """Run this file as a script in a fresh interpreter; a crash fails the calling test."""
    environment = {**os.environ, "HIP_PLATFORM": "cpu", "HIP_FFI_CPU_CACHE": str(cache),
                   "HIP_CORE_CACHE": "0"}  # fmt: skip
    done = subprocess.run([sys.executable, __file__, *arguments], env=environment,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, f"the process died ({done.returncode}): {done.stderr[-3000:]}"
    return json.loads(done.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache directory for this file: the runtime library is built once (seconds)."""
    return tmp_path_factory.mktemp("hip-ffi-cpu-cache")


def test_corrupt_kernel_entries_are_rebuilt_in_a_subprocess(cache: Path) -> None:
    assert isolated(cache, "kernels") == {"tried": len(CORRUPTIONS), "clean": len(CORRUPTIONS)}


@pytest.mark.parametrize("corruption", ["truncated", "flipped"])
def test_a_corrupt_runtime_library_is_rebuilt_in_a_subprocess(cache: Path, corruption: str) -> None:
    if not list(cache.glob("runtime-*.so")):  # an earlier test made the entries
        assert isolated(cache, "run_kernel")
    assert isolated(cache, "runtime", corruption) == {"clean": 1}


def test_corrupt_kernel_entries_are_rebuilt_in_process(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hip_core

    monkeypatch.setenv("HIP_FFI_CPU_CACHE", str(cache))
    monkeypatch.setenv("HIP_CORE_CACHE", "0")
    with hip_core.use_platform("cpu"):
        assert kernels("truncated", "flipped") == {"tried": 2, "clean": 2}


if __name__ == "__main__":
    print(json.dumps(globals()[sys.argv[1]](*sys.argv[2:])))
