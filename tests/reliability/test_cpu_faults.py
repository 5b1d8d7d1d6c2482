"""Kernel bad accesses through the whole stack on the cpu platform: an error, not a dead process.

Before the fix each of these killed the interpreter (SIGSEGV): an out-of-range rope-like table
read, a null pointer argument, a write far past a buffer, a kernel that overruns its dynamic
shared memory (checked mode). Now the stream's next synchronize raises HipError
(hipErrorIllegalAddress), `hip_core.hip_api().error_detail(code)` names the kernel, block and
thread, and the same stream and device go on working. Every case runs in a subprocess first
(a regression fails the test, not the suite), then in this process.

Traps too: a kernel's __builtin_trap() killed the interpreter (SIGILL), abort() did (SIGABRT);
now both raise HipLaunchError (hipErrorLaunchFailure, as a GPU's trap) that says where.

Run as a script (`python test_cpu_faults.py cases 0|1`, 1: checked mode) it prints what each
case gave as JSON.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

SOURCE = """
extern "C" __global__ void rope_like(const float* table, const int* positions, float* out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = table[(long long)positions[i] * 64];
}
extern "C" __global__ void store(float* p, long long at) {
    if (blockIdx.x == 1 && threadIdx.x == 9) p[at] = 1.0f;
}
extern "C" __global__ void shared_overrun(float* out, int at) {
    extern __shared__ float scratch[];
    scratch[at] = 1.0f;
    out[0] = scratch[at];
}
extern "C" __global__ void fill(float* p, float v) { p[blockIdx.x * blockDim.x + threadIdx.x] = v; }
extern "C" __global__ void trap(float* p, int aborts) {
    if (blockIdx.x == 3 && threadIdx.x == 2) {
        if (aborts) abort();
        __builtin_trap();
    }
    p[threadIdx.x] = 1.0f;
}
"""
WHERE = r"in block \[{}\], thread \[{}\]"
CASES = {  # name: (pattern of the detail, checked mode only); all hipErrorIllegalAddress
    "rope-like read": ("kernel rope_like: illegal address .* " + WHERE.format("1,0,0", "6,0,0"),
                       False),
    "null pointer": (r"kernel store: illegal address 0x0 \(write, SIGSEGV\) "
                     + WHERE.format("1,0,0", "9,0,0"), False),
    "far past a buffer": ("kernel store: illegal address .* " + WHERE.format("1,0,0", "9,0,0"),
                          False),
    "shared memory overrun": ("kernel shared_overrun: illegal address 0x[0-9a-f]+ "
                              r"\(write, SIGSEGV\) " + WHERE.format("0,0,0", "0,0,0"), True),
}  # fmt: skip
TRAPS = {  # name: pattern of the detail; hipErrorLaunchFailure
    "__builtin_trap": r"kernel trap: trap: illegal instruction \(SIGILL.*\) "
                      + WHERE.format("3,0,0", "2,0,0"),
    "abort": r"kernel trap: abort\(\) was called " + WHERE.format("3,0,0", "2,0,0"),
}  # fmt: skip


def cases(checked: str) -> dict[str, list[Any]]:
    """Each case: [the error's name or None, its detail, the stream works after]."""
    import numpy as np

    import hip_core
    from hip_cpu import faults

    faults.CHECKED = checked == "1"
    device = hip_core.Device(0)
    stream = device.create_stream()
    module = hip_core.Program(SOURCE).load(device)
    table = device.allocate(4 * 1024)
    positions = np.arange(64, dtype=np.int32) % 16
    positions[38] = 2**31 - 1  # block 1, thread 6: rope's position past its table
    on_device = device.allocate(positions.nbytes)
    on_device.copy_from(positions)
    out = device.allocate(4 * 64)
    launches = {
        "rope-like read": lambda: module.get_kernel("rope_like").launch(
            2, 32, table, on_device, out, stream=stream),
        "null pointer": lambda: module.get_kernel("store").launch(
            4, 16, hip_core.DevicePointer(0), 0, stream=stream),
        "far past a buffer": lambda: module.get_kernel("store").launch(
            4, 16, out, 1 << 40, stream=stream),
        "shared memory overrun": lambda: module.get_kernel("shared_overrun").launch(
            1, 1, out, 1024 + 2048, shared_mem=4096, stream=stream),
        "__builtin_trap": lambda: module.get_kernel("trap").launch(4, 8, out, 0, stream=stream),
        "abort": lambda: module.get_kernel("trap").launch(4, 8, out, 1, stream=stream),
    }  # fmt: skip
    seen: dict[str, list[Any]] = {}
    for name, launch in launches.items():
        if name in CASES and CASES[name][1] and not faults.CHECKED:
            continue
        launch()
        try:
            stream.sync()
            seen[name] = [None, "", False]
        except hip_core.HipLaunchError as error:
            detail = hip_core.hip_api().error_detail(error.code)
            assert detail and detail in str(error), (name, str(error))  # the message says where
            seen[name] = [error.name, detail, False]
        module.get_kernel("fill").launch(4, 256, table, 5.0, stream=stream)  # the stream goes on
        stream.sync()
        host = np.zeros(1024, np.float32)
        table.copy_to(host)
        seen[name][2] = bool(np.all(host == 5.0))
    return seen


def check(seen: dict[str, list[Any]], checked: bool) -> None:
    expected = [name for name, (_, only_checked) in CASES.items() if checked or not only_checked]
    assert sorted(seen) == sorted(expected + list(TRAPS))
    for name, (error, detail, works_after) in seen.items():
        wanted = "hipErrorLaunchFailure" if name in TRAPS else "hipErrorIllegalAddress"
        assert error == wanted, (name, error)
        assert re.search(TRAPS[name] if name in TRAPS else CASES[name][0], detail), (name, detail)
        assert works_after, name


@pytest.mark.parametrize("checked", [False, True], ids=["default", "checked"])
def test_bad_accesses_in_a_subprocess(checked: bool) -> None:
    environment = {**os.environ, "HIP_PLATFORM": "cpu"}
    done = subprocess.run([sys.executable, __file__, "cases", str(int(checked))],
                          env=environment, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, f"the process died ({done.returncode}): {done.stderr[-3000:]}"
    check(json.loads(done.stdout.splitlines()[-1]), checked)


@pytest.fixture
def cpu() -> Iterator[None]:
    import hip_core
    from hip_cpu import faults

    mode = faults.CHECKED
    with hip_core.use_platform("cpu"):
        yield
    faults.CHECKED = mode


@pytest.mark.parametrize("checked", [False, True], ids=["default", "checked"])
def test_bad_accesses_in_process(cpu: None, checked: bool) -> None:
    check(cases(str(int(checked))), checked)


if __name__ == "__main__":
    print(json.dumps(globals()[sys.argv[1]](*sys.argv[2:])))
