"""Library search: candidates, environment overrides, and failures that list every path tried."""

from __future__ import annotations

from pathlib import Path

import pytest

from hip_ffi._ffi import ffi
from hip_ffi.errors import LibraryNotFoundError
from hip_ffi.libraries import LibrarySpec, env_dirs, open_library, resolved_path

SPEC = LibrarySpec(
    role="test library",
    env="HIP_FFI_TEST_LIBRARY_PATH",
    names=("libdoesnotexist.so.9", "libdoesnotexist.so"),
)


def test_failure_lists_every_candidate_and_the_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SPEC.env, raising=False)
    with pytest.raises(LibraryNotFoundError) as caught:
        open_library(ffi, SPEC)
    assert [path for path, _ in caught.value.tried] == list(SPEC.names)
    message = str(caught.value)
    assert "could not load the test library" in message
    assert "libdoesnotexist.so.9:" in message and "libdoesnotexist.so:" in message
    assert SPEC.env in message


def test_directories_are_searched_before_the_linker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(SPEC.env, raising=False)
    (tmp_path / "libdoesnotexist.so").write_bytes(b"not an ELF file")
    spec = LibrarySpec(SPEC.role, SPEC.env, SPEC.names, dirs=(str(tmp_path),))
    assert spec.candidates()[0] == str(tmp_path / "libdoesnotexist.so")
    with pytest.raises(LibraryNotFoundError) as caught:
        open_library(ffi, spec)
    assert caught.value.tried[0][0] == str(tmp_path / "libdoesnotexist.so")
    assert len(caught.value.tried) == 3


def test_override_is_the_only_candidate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    forced = tmp_path / "libforced.so"
    monkeypatch.setenv(SPEC.env, str(forced))
    assert SPEC.candidates() == [str(forced)]
    with pytest.raises(LibraryNotFoundError) as caught:
        open_library(ffi, SPEC)
    assert caught.value.tried == [(str(forced), caught.value.tried[0][1])]


def test_env_dirs_expand_root_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROCM_PATH", "/opt/rocm-6.4.0")
    monkeypatch.delenv("HIP_PATH", raising=False)
    assert env_dirs("ROCM_PATH", "HIP_PATH") == ["/opt/rocm-6.4.0/lib", "/opt/rocm-6.4.0/lib64"]


def test_a_library_opened_by_soname_is_reported_by_its_file(tmp_path: Path) -> None:
    maps = tmp_path / "maps"
    maps.write_text(
        "7f00-7f01 r-xp 00000000 08:01 1 /usr/lib/libcudart.so.13\n"
        "7f01-7f02 r-xp 00000000 08:01 2 /usr/local/nvidia/lib64/libcuda.so.580.159.04\n"
    )
    # libcuda.so.1 is a link to libcuda.so.<driver version>
    found = resolved_path("libcuda.so.1", maps_file=str(maps))
    assert found == "/usr/local/nvidia/lib64/libcuda.so.580.159.04"
    assert resolved_path("libcudart.so.13", maps_file=str(maps)) == "/usr/lib/libcudart.so.13"
    assert resolved_path("/x/libcuda.so.1") == "/x/libcuda.so.1"
