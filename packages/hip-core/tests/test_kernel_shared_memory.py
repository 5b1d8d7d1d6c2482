"""Kernel.set_max_dynamic_shared_memory: the dynamic shared memory a launch may take.

On the cpu platform every launch may take 64 KiB already (nothing to raise); on nvidia (gpu)
a launch over 48 KiB fails until the ceiling is raised, then runs and sees all of its memory.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hip_core import Device, HipError, Module, Program

SOURCE = r"""
#include <hip/hip_runtime.h>

// Writes i to every int of the dynamic shared memory, then sums it back (every thread's
// stores must land: each reads what others wrote).
extern "C" __global__ void fill_and_sum(long long* out, int count) {
    extern __shared__ int words[];
    for (int i = threadIdx.x; i < count; i += blockDim.x) words[i] = i;
    __syncthreads();
    if (threadIdx.x == 0) {
        long long total = 0;
        for (int i = 0; i < count; ++i) total += words[i];
        out[0] = total;
    }
}
"""


@pytest.fixture
def module(device: Device, cache_dir: Path) -> Module:
    return Program(SOURCE, name="shared_memory.hip").load(device)


def run(device: Device, module: Module, nbytes: int) -> int:
    kernel = module.get_kernel("fill_and_sum")
    out = device.allocate(8)
    kernel.launch(1, 128, out, nbytes // 4, shared_mem=nbytes)
    device.synchronize()
    got = np.zeros(1, np.int64)
    out.copy_to(got)
    return int(got[0])


def test_up_to_the_opt_in_limit_is_accepted_and_above_it_refused(
    device: Device, module: Module
) -> None:
    kernel = module.get_kernel("fill_and_sum")
    limit = device.attribute("SharedMemPerBlockOptin")
    for nbytes in (0, 1024, 48 * 1024, limit):
        kernel.set_max_dynamic_shared_memory(nbytes)
    with pytest.raises(ValueError, match=r"fill_and_sum.*dynamic shared memory"):
        kernel.set_max_dynamic_shared_memory(limit + 1)
    with pytest.raises(ValueError, match="dynamic shared memory"):
        kernel.set_max_dynamic_shared_memory(-1)
    with pytest.raises(TypeError):
        kernel.set_max_dynamic_shared_memory(1.5)  # type: ignore[arg-type]
    assert kernel.attribute("MAX_DYNAMIC_SHARED_SIZE_BYTES") >= limit


def test_a_launch_takes_what_the_ceiling_allows(device: Device, module: Module) -> None:
    nbytes = min(device.attribute("SharedMemPerBlockOptin"), 96 * 1024)
    module.get_kernel("fill_and_sum").set_max_dynamic_shared_memory(nbytes)
    count = nbytes // 4
    assert run(device, module, nbytes) == count * (count - 1) // 2


@pytest.mark.parametrize("platform", [pytest.param("nvidia", marks=pytest.mark.gpu)], indirect=True)
def test_nvidia_refuses_a_launch_over_48_kib_until_raised(device: Device, module: Module) -> None:
    kernel = module.get_kernel("fill_and_sum")
    nbytes = 64 * 1024
    assert kernel.attribute("MAX_DYNAMIC_SHARED_SIZE_BYTES") < nbytes
    out = device.allocate(8)
    with pytest.raises(HipError):
        kernel.launch(1, 128, out, nbytes // 4, shared_mem=nbytes)
        device.synchronize()
    kernel.set_max_dynamic_shared_memory(nbytes)
    assert kernel.attribute("MAX_DYNAMIC_SHARED_SIZE_BYTES") == nbytes
    count = nbytes // 4
    assert run(device, module, nbytes) == count * (count - 1) // 2


def test_the_hip_call_accepts_settable_attributes_and_refuses_the_rest(
    device: Device, module: Module
) -> None:
    """hipFuncSetAttribute itself, on every platform (cpu: accepted and recorded)."""
    from hip_core import hip_api
    from hip_ffi.constants import FUNC_ATTRIBUTES

    api, handle = hip_api(), module.get_kernel("fill_and_sum").handle
    limit = device.attribute("SharedMemPerBlockOptin")
    dynamic = FUNC_ATTRIBUTES["MAX_DYNAMIC_SHARED_SIZE_BYTES"]
    assert api.hipFuncSetAttribute(handle, dynamic, limit) == 0
    assert api.hipFuncSetAttribute(handle, dynamic, limit + 1) != 0
    assert api.hipFuncSetAttribute(handle, FUNC_ATTRIBUTES["NUM_REGS"], 32) != 0


def test_a_runtime_without_an_opt_in_limit_has_the_per_block_limit(
    device: Device, module: Module, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ROCm 5 answers SharedMemPerBlockOptin ("CUDA only") with an error."""
    from hip_core.errors import error_for

    attribute = Device.attribute

    def no_opt_in(self: Device, name: str) -> int:
        if name == "SharedMemPerBlockOptin":
            raise error_for(1, "hipDeviceGetAttribute")  # hipErrorInvalidValue
        return attribute(self, name)

    monkeypatch.setattr(Device, "attribute", no_opt_in)
    kernel = module.get_kernel("fill_and_sum")
    limit = device.properties.shared_memory_per_block
    kernel.set_max_dynamic_shared_memory(limit)
    with pytest.raises(ValueError, match="dynamic shared memory"):
        kernel.set_max_dynamic_shared_memory(limit + 1)
