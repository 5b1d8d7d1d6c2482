"""Programs: compile for the device's arch, the disk cache and its failure modes."""

from __future__ import annotations

from pathlib import Path

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
