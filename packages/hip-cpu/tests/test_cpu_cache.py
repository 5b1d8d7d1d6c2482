"""The cpu platform's disk cache of compiled code: every entry is checked before it is used.

An entry (a kernel's code object or the runtime library) is written atomically with its size
and SHA-256 beside it (`<entry>.json`), and verified on every hit: a truncated, emptied,
flipped or padded entry, or a missing or garbled record, is rebuilt instead of loaded.
Whole-stack runs with corrupt entries are in tests/reliability/test_cpu_cache.py.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import hip_ffi
from hip_cpu import toolchain
from hip_ffi.rtc import compile_source


def _truncate(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _flip(data: bytes) -> bytes:
    return data[:999] + bytes([data[999] ^ 0x10]) + data[1000:]


CORRUPTIONS: dict[str, Callable[[bytes], bytes]] = {
    "truncated": _truncate,
    "emptied": lambda data: b"",
    "flipped": _flip,
    "padded": lambda data: data + b"\0" * 64,
}


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HIP_FFI_CPU_CACHE", str(tmp_path))
    return tmp_path


@pytest.fixture(scope="module")
def hip() -> Any:
    return hip_ffi.load("cpu")


def compiles() -> int:
    return toolchain.stats["compiles"]


def test_entries_record_their_size_and_hash(cache: Path) -> None:
    toolchain.store(cache / "kernel-x.so", b"code object", {"log": "fine"})
    record = json.loads((cache / "kernel-x.json").read_text())
    assert record["size"] == 11 and record["log"] == "fine"
    assert record["sha256"] == hashlib.sha256(b"code object").hexdigest()
    assert toolchain.fetch(cache / "kernel-x.so") == (b"code object", record)
    (cache / "kernel-x.so").write_bytes(b"code objecT")
    assert toolchain.fetch(cache / "kernel-x.so") is None
    assert not list(cache.glob(".*"))  # no temporary file is left behind


@pytest.mark.parametrize("corruption", [*CORRUPTIONS, "record garbled", "record missing"])
def test_a_corrupt_kernel_entry_is_rebuilt(hip: Any, cache: Path, corruption: str) -> None:
    source = f'extern "C" __global__ void k(int* p) {{ p[0] = {len(corruption)}; }}'
    first = compile_source(hip, source)
    assert first.status == 0, first.log
    (entry,) = cache.glob("kernel-*.so")
    record = entry.with_suffix(".json")
    if corruption == "record garbled":
        record.write_text("{not json")
    elif corruption == "record missing":
        record.unlink()
    else:
        entry.write_bytes(CORRUPTIONS[corruption](entry.read_bytes()))
    before = compiles()
    again = compile_source(hip, source)
    assert again.status == 0 and compiles() > before  # rebuilt, not loaded
    assert hip.check_code_object(again.code) == (0, "")
    assert toolchain.fetch(entry) is not None  # and whole on disk again
    before = compiles()
    assert compile_source(hip, source).code == again.code and compiles() == before  # a hit


def test_a_corrupt_runtime_library_is_rebuilt(cache: Path) -> None:
    library = toolchain.build_runtime()
    whole = library.read_bytes()
    for corruption in ("truncated", "flipped"):  # (each rebuild takes seconds)
        library.write_bytes(CORRUPTIONS[corruption](whole))
        before = compiles()
        assert toolchain.build_runtime() == library and compiles() > before, corruption
        assert toolchain.fetch(library) is not None and len(library.read_bytes()) == len(whole)
    before = compiles()
    assert toolchain.build_runtime() == library and compiles() == before  # whole: a hit


def test_a_failed_write_leaves_no_temporary_file(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError):
        toolchain.store(cache / "kernel-y.so", b"data", {})
    assert not list(cache.iterdir())
