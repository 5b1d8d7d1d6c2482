"""kernel_cache.extra_options: inside it a source compiles with the options added (a kernel
variant beside the shipped one in one process, as `bench_roofline.py --variant` runs them);
outside, and for every other source, the shipped build comes back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hip_core import Device, Program
from hip_runtime.libraries import kernel_cache, kernel_sources
from hip_runtime.libraries.kernel_cache import KernelCache, extra_options


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple[str, ...]]]:
    """(source, options) of every program the cache builds from here on."""
    seen: list[tuple[str, tuple[str, ...]]] = []
    shipped = kernel_sources.program

    def program(name: str, *, options: Any = ()) -> Program:
        seen.append((name, tuple(options)))
        return shipped(name, options=options)

    monkeypatch.setattr(kernel_sources, "program", program)
    return seen


def test_a_variant_compiles_with_its_options_and_the_shipped_build_returns_after(
    device: Device, program_cache: Path, built: list[tuple[str, tuple[str, ...]]]
) -> None:
    cache = KernelCache(device)
    shipped = cache.module("fill.hip")
    with extra_options("fill.hip", ["-DHIPK_VARIANT_ONE=1"]):
        with extra_options("fill.hip", ["-DHIPK_VARIANT_TWO=2"]):  # nested: both
            both = KernelCache(device).module("fill.hip")
        one = KernelCache(device).module("fill.hip")
        assert KernelCache(device).module("fill.hip") is one  # loaded once a process
        assert KernelCache(device).module("copy.hip") is cache.module("copy.hip")
    assert len({id(shipped), id(both), id(one)}) == 3
    assert KernelCache(device).module("fill.hip") is shipped
    variants = [options for name, options in built if name == "fill.hip" and options]
    assert ("-DHIPK_VARIANT_ONE=1", "-DHIPK_VARIANT_TWO=2") in variants
    assert ("-DHIPK_VARIANT_ONE=1",) in variants
    assert kernel_cache._options == {}


def test_a_variant_is_undone_when_its_block_raises(device: Device) -> None:
    with pytest.raises(RuntimeError, match="inside"), extra_options("fill.hip", ["-DX=1"]):
        raise RuntimeError("inside")
    assert kernel_cache._options == {}
