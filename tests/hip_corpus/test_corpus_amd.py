"""Every corpus kernel compiles, unmodified, with the real ROCm hiprtc for gfx90a (64-lane
wavefronts) and gfx1100 (32-lane), and every name hip-core registers (the template
instantiations and the C++ kernels' qualified names) lowers to a kernel of the code object.

There is no AMD device: hiprtc compiles for named architectures without one. In the
integration session this is Debian's ROCm 5.2 (CI installs it), whose hiprtc does not know
gfx1100 (it crashes the process), so there only gfx90a is compiled; the rocm-matrix session
runs this file inside each release's root (5.7, 6.4, 7.2), for both architectures.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import hip_ffi
from hip_core import Program
from hip_ffi import code_objects
from hip_ffi.errors import LibraryNotFoundError
from hip_ffi.rtc import compile_source

KERNELS = sorted(p.name for p in (Path(__file__).resolve().parent / "kernels").glob("*.hip"))
ARCHS = ("gfx90a", "gfx1100")
EM_AMDGPU = 224
#: Options a source needs beyond the target (what test_corpus_run.py compiles it with).
#: ROCm 6 declares a tile's ballot/any/all only under HIP_ENABLE_WARP_SYNC_BUILTINS (7 by
#: default): the option a ROCm 6 user passes for tile votes, harmless on 7.
OPTIONS = {"matmul.hip": ["-DTILE=16"], "tiled_partition.hip": ["-DHIP_ENABLE_WARP_SYNC_BUILTINS"]}
#: Sources an old hiprtc cannot compile: the oldest release (of those tested) that can, and why.
OLDEST = {
    "grid_sync.hip": ((5, 7), "ROCm 5.2's hiprtc cannot compile hip_cooperative_groups.h"),
    "tiled_partition.hip": ((6, 4), "ROCm 5's cooperative-groups tiles have no ballot/any/all"),
}


@pytest.fixture(scope="module")
def amd() -> Any:
    """The amd platform over the real ROCm libraries; skipped with the reason where ROCm is
    not installed, unless HIP_FFI_REQUIRE_ROCM=1 (CI), where that fails."""
    try:
        return hip_ffi.load("amd")
    except LibraryNotFoundError as error:
        if os.environ.get("HIP_FFI_REQUIRE_ROCM") == "1":
            pytest.fail(f"ROCm is required here: {error}")
        pytest.skip(f"ROCm runtime not installed: {error}")


def _release(api: Any) -> tuple[int, int]:
    major = api.runtime_version // 10_000_000
    return major, api.runtime_version // 100_000 % 100


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("source", KERNELS)
def test_hiprtc_compiles_the_corpus(
    amd: Any, corpus_programs: Callable[..., Program], source: str, arch: str
) -> None:
    matrix = [a for a in os.environ.get("HIP_FFI_ROCM_ARCHS", "").split(",") if a]
    if matrix and arch not in matrix:
        pytest.skip(f"this ROCm release's hiprtc does not target {arch}")
    if not matrix and arch == "gfx1100" and _release(amd) < (5, 7):
        pytest.skip("ROCm 5.2's hiprtc crashes on gfx1100; the rocm-matrix session covers it")
    oldest, why = OLDEST.get(source, ((0, 0), ""))
    if _release(amd) < oldest:
        pytest.skip(why)
    program = corpus_programs(source)
    result = compile_source(
        amd,
        program.source,
        name=source,
        options=[f"--offload-arch={arch}", *OPTIONS.get(source, [])],
        name_expressions=program.lookup_names,
    )
    assert result.ok, f"{source} for {arch} ({result.step}): {result.log[-3000:]}"
    code = result.code
    assert code_objects.is_elf(code), code[:16]
    code_objects.check_elf(code, EM_AMDGPU, arch)
    assert set(result.lowered) == set(program.lookup_names)
    for expression, lowered in result.lowered.items():
        # Each lowered name is a kernel: its descriptor `<name>.kd` is a symbol of the object.
        assert lowered.encode() + b".kd\0" in code, (expression, lowered)
