"""The command line on a GPU (marked gpu: run on the H200 through the nvidia platform):
`info` sees the device, `selftest` passes every check, `load` moves a checkpoint."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hip_runtime import save_safetensors

pytestmark = pytest.mark.gpu


def hip_backend(*args: str) -> subprocess.CompletedProcess[str]:
    # `python -m hip_backend`: on the device machine the wheels sit in a --target folder whose
    # console scripts are not next to python.
    command = [sys.executable, "-m", "hip_backend", "--platform", "nvidia", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=600)


def test_info_sees_the_gpu() -> None:
    done = hip_backend("info", "--json")
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    assert info["platform"] == "nvidia" and info["device_count"] >= 1
    assert info["devices"] and info["devices"][0]["name"]


def test_selftest_passes_on_the_gpu() -> None:
    done = hip_backend("selftest")
    assert done.returncode == 0, done.stdout + done.stderr
    assert " 0 failed" in done.stdout.splitlines()[-1]


def test_load_reports_rate_and_memory(tmp_path: Path) -> None:
    tensors = {f"w{i}": np.full((256, 1024), i, np.float32) for i in range(8)}  # 8 MiB
    path = tmp_path / "model.safetensors"
    save_safetensors(path, tensors)
    done = hip_backend("load", str(path))
    assert done.returncode == 0, done.stderr
    assert "8 tensors" in done.stdout and "GB/s" in done.stdout
