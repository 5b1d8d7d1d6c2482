"""Kernels started early (`Kernel.start_early`): where the device can, a launch may begin
before the kernel ahead on its stream finishes, and waits for it inside; elsewhere launches
stay fully ordered. On the H200 (the nvidia cases, marked gpu) this is a real
programmatic dependent launch, and the chain below reads each kernel's output in the next."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from hip_core import ClosedError, Device, Module, Program, capture, hip_api
from hip_ffi.constants import LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION

# Each output element reads another block's element of the input: a kernel started early
# that did not wait for the one ahead would read stale values.
SOURCE = r"""
#include <hip/hip_runtime.h>

extern "C" __global__ void shift(const float* src, float* dst, int n) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;");
#endif
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        dst[i] = src[(i + 4099) % n] + 1.0f;
    }
}
"""


@pytest.fixture
def module(device: Device, cache_dir: Path) -> Module:
    return Program(SOURCE, name="early.hip").load(device)


def test_start_early_says_whether_the_device_can(device: Device, module: Module) -> None:
    kernel = module.get_kernel("shift")
    assert kernel.start_early() is device.properties.early_start
    assert kernel.start_early() is device.properties.early_start  # (again: nothing changes)


@pytest.mark.parametrize("captured", [False, True], ids=["eager", "graph"])
def test_a_chain_of_early_launches_sees_each_kernel_ahead(
    device: Device, module: Module, captured: bool
) -> None:
    kernel = module.get_kernel("shift")
    early = kernel.start_early()
    n, steps = 1 << 16, 40
    start = np.arange(n, dtype=np.float32)
    a, b = device.allocate(4 * n), device.allocate(4 * n)
    a.copy_from(start)
    stream = device.create_stream()

    def chain() -> None:
        for step in range(steps):
            src, dst = (a, b) if step % 2 == 0 else (b, a)
            kernel.launch(64, 256, src, dst, n, stream=stream)

    if captured:  # a captured early launch keeps its attribute: the replay overlaps too
        with capture(stream) as graph:
            chain()
        assert graph.graph is not None
        with graph.graph.instantiate() as graph_exec:
            graph_exec.launch(stream)
            stream.sync()
    else:
        chain()
        stream.sync()
    assert kernel._config.numAttrs == int(early)  # (the H200: the chain did start early)
    got = np.empty(n, dtype=np.float32)
    (a if steps % 2 == 0 else b).copy_to(got)
    expected = start
    for _ in range(steps):
        expected = np.roll(expected, -4099) + 1.0
    np.testing.assert_array_equal(got, expected)


def test_the_launch_configuration_carries_the_attribute_where_the_device_can(
    device: Device, module: Module, monkeypatch: pytest.MonkeyPatch
) -> None:
    able = dataclasses.replace(device.properties, early_start=True)
    monkeypatch.setattr(device, "_properties", able)
    kernel = module.get_kernel("shift")
    plain = kernel.prepare(1, 32, None, None, 0)
    assert plain._config.numAttrs == 0  # prepared before: as it was
    assert kernel.start_early() is True
    early = kernel.prepare(1, 32, None, None, 0)
    assert early._config.numAttrs == 1
    attribute = early._config.attrs
    entry = hip_api().ffi.cast("HIP_LAUNCH_ATTRIBUTE*", attribute)[0]
    assert entry.id == LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    assert entry.value[0] == 1


def test_a_closed_module_refuses(module: Module) -> None:
    kernel = module.get_kernel("shift")
    module.close()
    with pytest.raises(ClosedError):
        kernel.start_early()
