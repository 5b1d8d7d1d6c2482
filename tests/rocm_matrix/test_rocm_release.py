"""One ROCm release, checked from inside its own Debian root (`nox -s rocm-matrix`).

The session (noxfile.py) prepares the root with tools/rocm_roots.py and starts this Python
through the root's loader, so the root's glibc, libstdc++ and ROCm are the ones loaded. It
names the release in the environment: HIP_FFI_ROCM_ROOT (the unpacked root),
HIP_FFI_ROCM_RELEASE ("6.4") and HIP_FFI_ROCM_ARCHS (the GPU architectures that release's
hiprtc must compile for, comma-separated). There is no AMD device: the runtime answers
hipErrorNoDevice, which is what a machine without one must get. Anywhere else (the
integration session) every test here is skipped with that reason.
"""

from __future__ import annotations

import os
import re
import struct
from pathlib import Path

import pytest

ROOT = os.environ.get("HIP_FFI_ROCM_ROOT", "")
RELEASE = os.environ.get("HIP_FFI_ROCM_RELEASE", "")
ARCHS = [arch for arch in os.environ.get("HIP_FFI_ROCM_ARCHS", "").split(",") if arch]
LIB = Path(ROOT) / "usr/lib/x86_64-linux-gnu"
EM_AMDGPU = 224
EF_AMDGPU_MACH = 0xFF
#: e_flags & EF_AMDGPU_MACH of each architecture (LLVM's EF_AMDGPU_MACH_AMDGCN_GFX*).
MACH = {"gfx90a": 0x3F, "gfx942": 0x4C, "gfx950": 0x4F, "gfx1030": 0x36, "gfx1100": 0x41,
        "gfx1201": 0x4E}  # fmt: skip

pytestmark = pytest.mark.skipif(
    not ROOT, reason="runs inside a ROCm release's root only: nox -s rocm-matrix"
)


@pytest.fixture(scope="module")
def api():  # type: ignore[no-untyped-def]
    import hip_ffi

    return hip_ffi.load("amd")


def _major_minor() -> tuple[int, int]:
    major, minor = RELEASE.split(".")
    return int(major), int(minor)


def test_the_release_is_selected_and_its_version_read(api) -> None:  # type: ignore[no-untyped-def]
    major, minor = _major_minor()
    assert api.platform == "amd"
    assert api.runtime_version // 10_000_000 == major, api.runtime_version
    assert api.runtime_version // 100_000 % 100 == minor, api.runtime_version
    assert api.platform_version.startswith(f"ROCm {major}.{minor}.")
    assert api.libraries["hip runtime"].startswith(str(LIB)), api.libraries
    assert api.libraries["hiprtc"].startswith(str(LIB)), api.libraries


def test_every_surface_symbol_is_bound_or_unavailable_with_a_reason(api) -> None:  # type: ignore[no-untyped-def]
    from hip_ffi import surface

    missing = api.unavailable()
    for name in surface.ALL:
        assert callable(getattr(api, name)), name
    # The runtime and hiprtc are complete on every release (older ones through shims); only
    # hipBLAS and MIOpen may be missing, and they say why (their rocBLAS is not in the root).
    optional = {
        **dict.fromkeys(surface.HIPBLAS, "hipBLAS"),
        **dict.fromkeys(surface.MIOPEN, "MIOpen"),
    }
    assert not [name for name in missing if name not in optional], missing
    for name, reason in missing.items():
        what = optional[name]
        assert f"no {what} library" in reason, (name, reason)
        assert f"HIP_FFI_{what.upper()}_PATH" in reason, (name, reason)


def test_properties_go_through_the_release_s_entry_point(api) -> None:  # type: ignore[no-untyped-def]
    from hip_ffi import constants

    major, _ = _major_minor()
    assert api.device_prop_type == (
        "hipDeviceProp_tR0600" if major >= 6 else "hipDeviceProp_tR0000"
    )
    count = api.ffi.new("int*")
    assert api.hipGetDeviceCount(count) == constants.ERROR_CODES["hipErrorNoDevice"]
    props = api.ffi.new(api.device_prop_type + "*")
    status = api.hipGetDeviceProperties(props, 0)
    assert status in (constants.ERROR_CODES["hipErrorNoDevice"],
                      constants.ERROR_CODES["hipErrorInvalidDevice"]), status  # fmt: skip


def test_error_names_match_the_library_s_own(api) -> None:  # type: ignore[no-untyped-def]
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


def _dynamic_symbols(path: Path) -> set[str]:
    """The names in an ELF-64 shared object's .dynsym (no loading: its dependencies may be
    missing from the root)."""
    data = path.read_bytes()
    (shoff,) = struct.unpack_from("<Q", data, 40)
    shentsize, shnum = struct.unpack_from("<HH", data, 58)
    sections = [struct.unpack_from("<IIQQQQII", data, shoff + i * shentsize) for i in range(shnum)]
    names = set()
    for _name, kind, _flags, _addr, offset, size, link, _info in sections:
        if kind != 11:  # SHT_DYNSYM
            continue
        strtab = sections[link][4]
        for entry in range(offset, offset + size, 24):
            start = strtab + struct.unpack_from("<I", data, entry)[0]
            names.add(data[start : data.index(b"\0", start)].decode())
    return names


def _library(stem: str) -> Path:
    found = sorted(LIB.glob(f"{stem}.so.[0-9]*"), key=lambda path: len(path.name))
    assert found, f"no {stem} in {LIB}"
    return found[0]


def test_hipblas_has_the_gemm_entry_points(api) -> None:  # type: ignore[no-untyped-def]
    from hip_ffi.platforms.amd.wrappers import hipblas_major

    path = _library("libhipblas")
    major = hipblas_major(str(path), _major_minor()[0])
    names = _dynamic_symbols(path)
    wanted = {"hipblasCreate", "hipblasSetStream", "hipblasSgemm", "hipblasGemmEx",
              "hipblasGemmStridedBatchedEx"}  # fmt: skip
    if major == 2:  # hipDataType arguments live under *_v2 on hipBLAS 2
        wanted |= {"hipblasGemmEx_v2", "hipblasGemmStridedBatchedEx_v2"}
    assert wanted <= names, wanted - names


@pytest.mark.skipif(RELEASE.startswith("5."), reason="Debian packages no MIOpen for ROCm 5.7")
def test_miopen_has_every_entry_point_of_the_dnn_surface() -> None:
    """libMIOpen exports every function of hip_ffi's DNN surface under its own name (the amd
    platform binds them as they are; prototypes and enum values are from this release's
    miopen.h, cdef/miopen.h). A handle needs a GPU: what the calls do stays unproven here."""
    from hip_ffi import surface

    path = _library("libMIOpen")
    assert path.name == "libMIOpen.so.1", path  # the soname the loader's rule tries
    names = _dynamic_symbols(path)
    wanted = set(surface.MIOPEN)
    assert wanted <= names, sorted(wanted - names)


def _corpus() -> list[tuple[str, str]]:
    corpus = Path(__file__).resolve().parents[2] / "packages/hip-ffi/tests/kernels"
    return [(f"corpus/{p.name}", p.read_text()) for p in sorted(corpus.glob("*.hip"))]


def _shipped() -> list[tuple[str, str]]:
    from hip_runtime import kernel_sources

    return [(f"kernels/{n}", s) for n, s in sorted(kernel_sources.sources().items())]


def _compile_for(api, arch: str, sources: list[tuple[str, str]]) -> None:  # type: ignore[no-untyped-def]
    """Each source compiles with this release's hiprtc to an ELF for `arch` (its e_flags)."""
    from hip_ffi import code_objects
    from hip_ffi.rtc import compile_source
    from hip_runtime import kernel_sources

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
        assert e_flags & EF_AMDGPU_MACH == MACH[arch], (name, arch, hex(e_flags))


def test_every_shipped_kernel_compiles_with_this_release(api) -> None:  # type: ignore[no-untyped-def]
    """Every kernels/ source, for the release's first architecture: what the release's hiprtc
    and headers accept does not depend on the target (the per-dtype sources are large: all of
    them for every architecture of three releases would take most of CI's time)."""
    _compile_for(api, (ARCHS or ["none"])[0], _shipped())


@pytest.mark.parametrize("arch", ARCHS or ["none"])
def test_each_architecture_gets_its_own_elf(api, arch: str) -> None:  # type: ignore[no-untyped-def]
    """The test corpus and one shipped source for every architecture the release targets."""
    _compile_for(api, arch, _corpus() + [s for s in _shipped() if s[0] == "kernels/copy.hip"])


def test_the_root_is_the_release_named() -> None:
    header = (Path(ROOT) / "usr/include/hip/hip_version.h").read_text()
    major, minor = _major_minor()
    assert re.search(rf"#define HIP_VERSION_MAJOR {major}\b", header)
    assert re.search(rf"#define HIP_VERSION_MINOR {minor}\b", header)
