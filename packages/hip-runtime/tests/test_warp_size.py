"""The warp size the kernels run with on the cpu platform is the session's: 32 by default, 64
under HIP_FFI_CPU_WARP_SIZE=64 (nox's `wave64` session, the AMD CDNA wavefront), so that
session really runs every kernel's wave64 path."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from hip_core import Device, Module, Program


def test_kernels_see_the_sessions_warp_size(
    platform: str, device: Device, program_cache: Path
) -> None:
    if platform != "cpu":
        pytest.skip("the host's warp size is the cpu platform's setting")
    expected = int(os.environ.get("HIP_FFI_CPU_WARP_SIZE", "32"))
    assert device.properties.warp_size == expected
    source = 'extern "C" __global__ void warp(int* out) { out[threadIdx.x] = warpSize; }'
    module: Module = Program(source, name="warp.hip").load(device)
    out = device.allocate(4 * 64)
    module.get_kernel("warp").launch(1, 64, out, stream=None)
    seen = np.zeros(64, np.int32)
    out.copy_to(seen)
    assert set(seen.tolist()) == {expected}
