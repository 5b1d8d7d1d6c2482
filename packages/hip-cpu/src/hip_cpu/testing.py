"""Tests of several cpu devices: the device count is read once per process (ordinals.py), so a
test suite that runs with one device checks multi-device behavior in a new process.

    passed, report = rerun_with_devices(2, __file__)   # this test file, HIP_FFI_CPU_DEVICES=2

The tests that need the devices skip when the process has fewer, and the test that reruns the
file skips in the process with more, so each runs exactly once.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path


def rerun_with_devices(count: int, test_file: str, timeout: float = 900) -> tuple[int, str]:
    """Run pytest on `test_file` (its tests not marked `gpu`) in a new process whose cpu
    platform has `count` devices. Returns (tests passed, pytest's output); AssertionError with
    the output when pytest fails, or when anything but the calling rerun test is skipped."""
    path = Path(test_file).resolve()
    projects = [p for p in path.parents if (p / "pyproject.toml").is_file()]
    root = projects[-1] if projects else path.parent  # the repository's, not the package's
    env = {**os.environ, "HIP_FFI_CPU_DEVICES": str(count), "HIP_PLATFORM": "cpu"}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               "--import-mode=importlib", "-m", "not gpu", str(path)]  # fmt: skip
    done = subprocess.run(command, env=env, cwd=root, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip
    report = done.stdout + done.stderr
    lines = done.stdout.strip().splitlines()
    summary = lines[-1] if lines else ""
    passed = re.search(r"(\d+) passed", summary)
    assert done.returncode == 0 and passed, report[-6000:]
    assert re.search(r"\b1 skipped", summary) or "skipped" not in summary, report[-6000:]
    return int(passed.group(1)), report
