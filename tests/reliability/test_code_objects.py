"""Truncated and bit-flipped code objects through the whole stack (hip_core.Module.from_bytes).

On the cpu platform a code object is a shared object that dlopen would map and relocate: before
the fix a truncated image made hipModuleLoadData read past the buffer and a flipped bit made
dlopen write through a corrupt relocation (SIGSEGV either way). Now every one is a HipError
(hipErrorInvalidImage, or hipErrorNoBinaryForGpu when exactly the seal was cut off) saying why,
and the intact image still loads and runs. The sweep runs in a subprocess first, so a
regression fails this test instead of killing the suite, then in this process.

Run as a script (`python test_code_objects.py sweep`) it prints the sweep's counts as JSON.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections.abc import Iterator

import pytest

KERNEL = 'extern "C" __global__ void fill(float* p, float v) { p[threadIdx.x] = v; }'
FLIPS = 400
INVALID_IMAGE, NO_BINARY_FOR_GPU = 200, 209


def sweep() -> dict[str, int]:
    """Load every truncation and FLIPS single-bit flips of a compiled kernel; count outcomes."""
    import numpy as np

    import hip_core

    device = hip_core.Device(0)
    code = hip_core.Program(KERNEL).compile(device)
    rng = random.Random(2024)
    cases = [code[:n] for n in range(len(code))]
    for _ in range(FLIPS):
        flipped = bytearray(code)
        flipped[rng.randrange(len(code))] ^= 1 << rng.randrange(8)
        cases.append(bytes(flipped))
    counts = {"tried": len(cases), "refused": 0, "loaded": 0, "unclear": 0}
    for case in cases:
        try:
            hip_core.Module.from_bytes(case, device).close()
            counts["loaded"] += 1
        except hip_core.HipError as error:
            clear = error.code in (INVALID_IMAGE, NO_BINARY_FOR_GPU) and ": " in str(error)
            counts["refused" if clear else "unclear"] += 1
    with hip_core.Module.from_bytes(code, device) as module:  # the intact image still works
        out = device.allocate(4 * 8)
        module.get_kernel("fill", ["float*", "float"]).launch(1, 8, out, 2.5)
        device.synchronize()
        host = np.zeros(8, np.float32)
        out.copy_to(host)
        counts["intact_runs"] = int(np.all(host == 2.5))
    return counts


def check(counts: dict[str, int]) -> None:
    assert counts["tried"] > FLIPS + 1000
    assert counts["refused"] == counts["tried"], counts
    assert counts["intact_runs"] == 1


@pytest.fixture
def cpu() -> Iterator[None]:
    import hip_core

    with hip_core.use_platform("cpu"):
        yield


def test_truncated_and_flipped_code_objects_in_a_subprocess() -> None:
    environment = {**os.environ, "HIP_PLATFORM": "cpu"}
    done = subprocess.run([sys.executable, __file__, "sweep"], env=environment,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, f"the process died ({done.returncode}): {done.stderr[-3000:]}"
    check(json.loads(done.stdout.splitlines()[-1]))


def test_truncated_and_flipped_code_objects_in_process(cpu: None) -> None:
    check(sweep())


def test_the_error_says_why(cpu: None) -> None:
    import hip_core

    device = hip_core.Device(0)
    code = hip_core.Program(KERNEL).compile(device)
    with pytest.raises(hip_core.HipError, match=r"hipErrorInvalidImage.*truncated") as raised:
        hip_core.Module.from_bytes(code[:1000], device)
    assert raised.value.api == "hipModuleLoadData"
    with pytest.raises(hip_core.HipError, match="does not match its seal"):
        hip_core.Module.from_bytes(code[:2000] + bytes([code[2000] ^ 4]) + code[2001:], device)


if __name__ == "__main__":
    print(json.dumps(globals()[sys.argv[1]]()))
