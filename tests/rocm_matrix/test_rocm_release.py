"""One ROCm release, checked from inside its own Debian root (`nox -s rocm-matrix`): the
runtime and hiprtc. conftest.py says how the session names the release; hipBLAS, MIOpen and
RCCL are test_rocm_libraries.py's. There is no AMD device: the runtime answers
hipErrorNoDevice, which is what a machine without one must get.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path
from typing import Any

import pytest

EM_AMDGPU = 224
EF_AMDGPU_MACH = 0xFF


def test_the_release_is_selected_and_its_version_read(api: Any, release: Any) -> None:
    major, minor = release.version
    assert api.platform == "amd"
    assert api.runtime_version // 10_000_000 == major, api.runtime_version
    assert api.runtime_version // 100_000 % 100 == minor, api.runtime_version
    assert api.platform_version.startswith(f"ROCm {major}.{minor}.")
    assert api.libraries["hip runtime"].startswith(str(release.lib)), api.libraries
    assert api.libraries["hiprtc"].startswith(str(release.lib)), api.libraries


def test_every_surface_symbol_is_bound_or_unavailable_with_a_reason(api: Any, release: Any) -> None:
    from hip_ffi import surface

    missing = api.unavailable()
    for name in surface.ALL:
        assert callable(getattr(api, name)), name
    # The runtime, hiprtc and hipBLAS are complete on every release (older ones through
    # shims), but for hipblasSetWorkspace, which came with hipBLAS 3 (ROCm 7: hip-runtime's
    # Blas goes without it before); only MIOpen may be missing, where the release has none,
    # and it says why.
    from hip_ffi.platforms.amd.wrappers import hipblas_major

    optional = dict.fromkeys(surface.MIOPEN if "MIOpen" in release.not_checked else ())
    if hipblas_major(api.libraries["hipblas"], release.version[0]) < 3:
        assert "hipblasSetWorkspace" in missing, "hipBLAS < 3 has no hipblasSetWorkspace"
        assert "needs a newer ROCm" in missing.pop("hipblasSetWorkspace")
    assert not [name for name in missing if name not in optional], missing
    for name, reason in missing.items():
        assert "no MIOpen library" in reason, (name, reason)
        assert "HIP_FFI_MIOPEN_PATH" in reason, (name, reason)


def test_properties_go_through_the_release_s_entry_point(api: Any, release: Any) -> None:
    from hip_ffi import constants

    major, _ = release.version
    assert api.device_prop_type == (
        "hipDeviceProp_tR0600" if major >= 6 else "hipDeviceProp_tR0000"
    )
    count = api.ffi.new("int*")
    assert api.hipGetDeviceCount(count) == constants.ERROR_CODES["hipErrorNoDevice"]
    props = api.ffi.new(api.device_prop_type + "*")
    status = api.hipGetDeviceProperties(props, 0)
    assert status in (constants.ERROR_CODES["hipErrorNoDevice"],
                      constants.ERROR_CODES["hipErrorInvalidDevice"]), status  # fmt: skip


def test_error_names_match_the_library_s_own(api: Any) -> None:
    from hip_ffi import constants

    ours, unknown = 0, []
    for code, name in constants.ERROR_NAMES.items():
        theirs = api.ffi.string(api.hipGetErrorName(code)).decode()
        text = api.ffi.string(api.hipGetErrorString(code)).decode()
        assert text, code
        if theirs == name:
            ours += 1
        else:  # a code this release does not know yet: it must say so, never another name
            assert theirs in ("hipErrorUnknown", "hipErrorInvalidValue"), (code, name, theirs)
            unknown.append(name)
    assert ours >= 70 and len(unknown) <= 5, unknown


def _corpus() -> list[tuple[str, str]]:
    corpus = Path(__file__).resolve().parents[2] / "packages/hip-cpu/tests/kernels"
    return [(f"corpus/{p.name}", p.read_text()) for p in sorted(corpus.glob("*.hip"))]


def _shipped() -> list[tuple[str, str]]:
    from hip_runtime.libraries import kernel_sources

    return [(f"kernels/{n}", s) for n, s in sorted(kernel_sources.sources().items())]


def _compile_for(api: Any, arch: str, mach: int, sources: list[tuple[str, str]]) -> None:
    """Each source compiles with this release's hiprtc to an ELF for `arch` (its e_flags)."""
    from hip_ffi import code_objects
    from hip_ffi.rtc import compile_source
    from hip_runtime.libraries import kernel_sources

    headers = kernel_sources.headers()
    for name, source in sources:
        result = compile_source(
            api, source, name=name.rsplit("/", 1)[-1], options=[f"--offload-arch={arch}"],
            headers=headers,
        )  # fmt: skip
        assert result.ok, f"{name} for {arch} ({result.step}): {result.log[-2000:]}"
        code = result.code
        assert code_objects.is_elf(code), (name, arch, code[:16])
        code_objects.check_elf(code, EM_AMDGPU, arch)
        (e_flags,) = struct.unpack_from("<I", code, 48)
        assert e_flags & EF_AMDGPU_MACH == mach, (name, arch, hex(e_flags))


def test_every_shipped_kernel_compiles_with_this_release(
    api: Any, release: Any, mach: dict[str, int]
) -> None:
    """Every kernels/ source, for the release's first architecture: what the release's hiprtc
    and headers accept does not depend on the target (the per-dtype sources are large: all of
    them for every architecture of three releases would take most of CI's time)."""
    first = release.archs[0]
    _compile_for(api, first, mach[first], _shipped())


def test_each_architecture_gets_its_own_elf(
    api: Any, release: Any, arch: str, mach: dict[str, int]
) -> None:
    """The test corpus and one shipped source for every architecture the matrix knows (conftest
    MACH). A release that is not asked for one says why (ROCm 5.7's hiprtc aborts the process
    for gfx950 and gfx1201: asking would kill this test run, not fail one test)."""
    if arch in release.not_checked:
        pytest.skip(release.not_checked[arch])
    assert arch in release.archs, f"{arch} is neither compiled for nor excused on this release"
    sources = _corpus() + [s for s in _shipped() if s[0] == "kernels/copy.hip"]
    _compile_for(api, arch, mach[arch], sources)


def test_the_root_is_the_release_named(release: Any) -> None:
    header = (release.root / "usr/include/hip/hip_version.h").read_text()
    major, minor = release.version
    assert re.search(rf"#define HIP_VERSION_MAJOR {major}\b", header)
    assert re.search(rf"#define HIP_VERSION_MINOR {minor}\b", header)
