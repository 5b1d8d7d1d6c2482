"""The kernel cache starts early (hip-core's `Kernel.start_early`) exactly the kernels of the
sources whose entry points wait for the kernel ahead (kernel_cache.EARLY_START), where the
device can. On the cpu platform the device cannot: its launches are checked here by making
its properties say it can (the launch configuration then carries CUDA's attribute), and
nothing is launched with it. The H200 runs the early-start kernels for real in the GEMV,
rope, decode attention and Llama suites."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from hip_core import Device
from hip_runtime.libraries.kernel_cache import EARLY_START, KernelCache


def test_the_early_start_sources_are_the_decode_steps_chain() -> None:
    chain = {"gemv.hip", "rope.hip", "attention_decode.hip", "norms.hip", "swiglu_rms.hip"}
    assert chain == EARLY_START


@pytest.mark.parametrize(
    ("source", "name", "early"),
    [("gemv.hip", "gemv_norm_r1_f32", True), ("rope.hip", "rope_and_cache_half_f32", True),
     ("attention_decode.hip", "attention_decode_d64_f32", True),
     ("norms.hip", "rmsnorm_f32", True), ("swiglu_rms.hip", "swiglu_rms_bf16", True),
     ("softmax.hip", "softmax_f32", False)],
)  # fmt: skip
def test_kernels_of_early_start_sources_start_early_where_the_device_can(
    device: Device, program_cache: Path, monkeypatch: pytest.MonkeyPatch, source: str,
    name: str, early: bool,
) -> None:  # fmt: skip
    kernel = KernelCache(device).get(source, name)
    assert (kernel._attributes is not None) is (early and device.properties.early_start)
    # A device that can (the cpu platform made to say so): the shared Kernel object gets the
    # attribute (restored afterwards, so that the cpu platform's launches of it carry none).
    monkeypatch.setattr(kernel, "_attributes", None)
    monkeypatch.setattr(
        device, "_properties", dataclasses.replace(device.properties, early_start=True)
    )
    again = KernelCache(device).get(source, name)
    assert again is kernel
    assert (kernel._attributes is not None) is early
