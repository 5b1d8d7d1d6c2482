"""Programs: compile for the device's arch, the disk cache and its failure modes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hip_core import Device, HipCompileError, Program
from hip_core import program as program_module

SOURCE = """
extern "C" __global__ void fill_index(int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = i * SCALE;
}
"""


def _counting_compiles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    compiled: list[str] = []
    real = Program._compile

    def counting(self: Program, arch: str) -> bytes:
        compiled.append(arch)
        return real(self, arch)

    monkeypatch.setattr(Program, "_compile", counting)
    return compiled


def test_second_compile_comes_from_the_disk_cache(
    device: Device, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compiled = _counting_compiles(monkeypatch)
    first = Program(SOURCE, options=["-DSCALE=3"]).compile(device)
    second = Program(SOURCE, options=["-DSCALE=3"]).compile(device)
    assert first == second and compiled == [device.arch]
    assert len(list(cache_dir.glob("*.bin"))) == 1
    Program(SOURCE, options=["-DSCALE=4"]).compile(device)  # other options: another entry
    Program(SOURCE.replace("i * SCALE", "i + SCALE"), options=["-DSCALE=4"]).compile(device)
    assert len(compiled) == 3 and len(list(cache_dir.glob("*.bin"))) == 3


def test_corrupt_entries_are_detected_and_rebuilt(
    device: Device, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compiled = _counting_compiles(monkeypatch)
    good = Program(SOURCE, options=["-DSCALE=2"]).compile(device)
    (entry,) = cache_dir.glob("*.bin")
    blob = bytearray(entry.read_bytes())
    blob[-1] ^= 0xFF  # flip bits in the payload
    entry.write_bytes(bytes(blob))
    assert Program(SOURCE, options=["-DSCALE=2"]).compile(device) == good
    entry.write_bytes(entry.read_bytes()[:10])  # truncated
    assert Program(SOURCE, options=["-DSCALE=2"]).compile(device) == good
    assert len(compiled) == 3


def test_cache_can_be_switched_off(
    device: Device, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HIP_CORE_CACHE_DIR", str(tmp_path / "off"))
    monkeypatch.setenv("HIP_CORE_CACHE", "0")
    assert program_module.cache_dir() is None
    Program(SOURCE, options=["-DSCALE=1"]).compile(device)
    assert not (tmp_path / "off").exists()


def test_headers_are_part_of_the_program_and_the_key(device: Device, cache_dir: Path) -> None:
    source = '#include "scale.h"\n' + SOURCE
    one = Program(source, headers={"scale.h": "#define SCALE 1\n"})
    two = Program(source, headers={"scale.h": "#define SCALE 2\n"})
    assert one.cache_key(device.arch) != two.cache_key(device.arch)
    assert one.compile(device) != two.compile(device)


def test_compile_error_raises_with_the_full_log(device: Device, cache_dir: Path) -> None:
    broken = 'extern "C" __global__ void k(int* p) { p[0] = not_declared_anywhere; }'
    with pytest.raises(HipCompileError) as caught:
        Program(broken, name="broken.hip").compile(device)
    assert "not_declared_anywhere" in caught.value.log
    assert caught.value.api == "hiprtcCompileProgram"
    assert list(cache_dir.glob("*.bin")) == []


def _with_include_dir(tmp_path: Path, scale: int) -> Path:
    """An include dir: scale.h includes nested/inner.h (found through the same -I dir), which
    defines SCALE."""
    include = tmp_path / "include"
    (include / "nested").mkdir(parents=True, exist_ok=True)
    (include / "scale.h").write_text('#pragma once\n#include "nested/inner.h"\n')
    (include / "nested" / "inner.h").write_text(f"#define SCALE {scale}\n")
    return include


@pytest.mark.parametrize(
    ("form", "quote"),
    [("-I{}", '"'), ("--include-path={}", '"'), ("-I{}", "<")],
    ids=["-Idir", "--include-path", "angle"],
)
def test_an_edited_header_in_an_include_dir_compiles_again(
    device: Device,
    cache_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    form: str,
    quote: str,
) -> None:
    compiled = _counting_compiles(monkeypatch)
    include = _with_include_dir(tmp_path, 1)
    close = '"' if quote == '"' else ">"
    source = f"#include {quote}scale.h{close}\n" + SOURCE
    options = [form.format(include)]
    first = Program(source, options=options).compile(device)
    assert Program(source, options=options).compile(device) == first and len(compiled) == 1
    (include / "nested" / "inner.h").write_text("#define SCALE 2\n")  # an include of an include
    second = Program(source, options=options).compile(device)
    assert second != first and len(compiled) == 2
    (include / "nested" / "inner.h").write_text("#define SCALE 1\n")  # back: the first entry
    assert Program(source, options=options).compile(device) == first and len(compiled) == 2


def test_a_header_that_appears_earlier_in_the_search_path_compiles_again(
    device: Device, cache_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compiled = _counting_compiles(monkeypatch)
    later = _with_include_dir(tmp_path, 1)
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    source = '#include "scale.h"\n' + SOURCE
    options = [f"-I{earlier}", f"-I{later}"]
    Program(source, options=options).compile(device)
    (earlier / "scale.h").write_text("#define SCALE 5\n")  # now shadows the later one
    Program(source, options=options).compile(device)
    assert len(compiled) == 2


def test_included_files_follow_includes_of_includes_and_headers(tmp_path: Path) -> None:
    from hip_core.includes import scan_includes

    include = _with_include_dir(tmp_path, 3)
    (include / "loop.h").write_text('#include "loop.h"\n#include MACRO_NAME\n')  # no recursion
    scan = scan_includes(
        '#include "from_headers.h"\n  #  include <loop.h>\n',
        ["-I", str(include)],
        {"from_headers.h": '#include "scale.h"\n'},
        name="program.hip",
    )
    found = scan.files
    assert sorted(Path(path).name for path, _ in found) == ["inner.h", "loop.h", "scale.h"]
    assert dict(found)[str(include / "nested" / "inner.h")] == b"#define SCALE 3\n"
    assert scan.unfollowed == (f"'#include MACRO_NAME' in {include / 'loop.h'}",)


def test_code_that_fails_to_load_is_never_cached(
    device: Device, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hip_core import HipError, Module

    real = Module.from_bytes
    failures = [1]

    def fail_once(code: bytes, dev: Device, **given: Any) -> Module:
        if failures:
            failures.pop()
            raise HipError(200, "hipErrorInvalidImage", "hipModuleLoadData", True)
        return real(code, dev, **given)

    monkeypatch.setattr(Module, "from_bytes", staticmethod(fail_once))
    program = Program(SOURCE, options=["-DSCALE=7"])
    with pytest.raises(HipError, match="hipErrorInvalidImage"):
        program.load(device)
    assert list(cache_dir.glob("*.bin")) == []  # nothing cached for a load that failed
    program.load(device)  # compiled again, loaded, then cached
    assert len(list(cache_dir.glob("*.bin"))) == 1


def test_a_cached_entry_that_fails_to_load_is_rebuilt(
    device: Device, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compiled = _counting_compiles(monkeypatch)
    program = Program(SOURCE, options=["-DSCALE=8"])
    entry = cache_dir / f"{program.cache_key(device.arch)}.bin"
    program_module._write_entry(entry, b"\x7fELF not a code object")  # a valid checksum
    module = program.load(device)  # the entry does not load: removed, rebuilt, loaded
    assert module.get_kernel("fill_index") is not None and len(compiled) == 1
    assert program_module._read_entry(entry) == program.compile(device)


@pytest.mark.parametrize("name", ["-o/tmp/pwned", "--version", "-", "", "a\0b", "two\nlines"])
def test_program_names_are_never_options(name: str) -> None:
    with pytest.raises(ValueError, match="program name"):
        Program(SOURCE, name=name)


def test_program_names_must_be_strings() -> None:
    with pytest.raises(TypeError, match="program name"):
        Program(SOURCE, name=b"bytes.hip")  # type: ignore[arg-type]


def test_a_failed_cache_write_leaves_no_temporary_file(
    device: Device, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*_: object) -> None:
        raise OSError("rename refused")

    monkeypatch.setattr(program_module.os, "replace", refuse)
    code = Program(SOURCE, options=["-DSCALE=9"]).compile(device)  # compiles; caching fails
    assert code and list(cache_dir.iterdir()) == []
