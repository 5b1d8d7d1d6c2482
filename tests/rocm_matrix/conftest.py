"""What every test of tests/rocm_matrix knows about the release it runs in.

The rocm-matrix session (noxfile.py) prepares the release's root with tools/rocm_roots.py and
starts this Python through the root's loader, so the root's glibc, libstdc++ and ROCm are the
ones loaded. It names the release in the environment:

- HIP_FFI_ROCM_ROOT: the unpacked root;
- HIP_FFI_ROCM_RELEASE: "6.4";
- HIP_FFI_ROCM_ARCHS: the GPU architectures that release's hiprtc must compile for;
- HIP_FFI_ROCM_NOT_CHECKED: a JSON object, what is not checked on that release ("MIOpen",
  "RCCL", an architecture) and why; those tests are reported skipped with that reason.

Anywhere else (the integration session leaves this directory out) every test here is skipped.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = os.environ.get("HIP_FFI_ROCM_ROOT", "")
#: e_flags & EF_AMDGPU_MACH of each architecture the matrix knows (LLVM's
#: EF_AMDGPU_MACH_AMDGCN_GFX*): every release is asked for each, or says why not.
MACH = {"gfx90a": 0x3F, "gfx942": 0x4C, "gfx950": 0x4F, "gfx1030": 0x36, "gfx1100": 0x41,
        "gfx1201": 0x4E}  # fmt: skip


@dataclass(frozen=True)
class Release:
    """The release under test, from the environment the session sets."""

    root: Path
    version: tuple[int, int]  # (major, minor)
    archs: tuple[str, ...]
    not_checked: dict[str, str]

    @property
    def lib(self) -> Path:
        return self.root / "usr/lib/x86_64-linux-gnu"

    def skip_unless_packaged(self, what: str) -> None:
        """Skip with the release's own reason where it does not ship `what` ("RCCL")."""
        if what in self.not_checked:
            pytest.skip(self.not_checked[what])


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if ROOT:
        return
    skip = pytest.mark.skip(reason="runs inside a ROCm release's root only: nox -s rocm-matrix")
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.path)).parents:
            item.add_marker(skip)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "arch" in metafunc.fixturenames:
        metafunc.parametrize("arch", list(MACH))


@pytest.fixture(scope="session")
def release() -> Release:
    major, minor = os.environ.get("HIP_FFI_ROCM_RELEASE", "0.0").split(".")
    return Release(
        root=Path(ROOT),
        version=(int(major), int(minor)),
        archs=tuple(a for a in os.environ.get("HIP_FFI_ROCM_ARCHS", "").split(",") if a),
        not_checked=json.loads(os.environ.get("HIP_FFI_ROCM_NOT_CHECKED", "{}")),
    )


@pytest.fixture(scope="session")
def mach() -> dict[str, int]:
    return MACH


@pytest.fixture(scope="module")
def api() -> Any:
    import hip_ffi

    return hip_ffi.load("amd")
