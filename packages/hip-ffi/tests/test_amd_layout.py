"""The cdef structs and constant tables match real ROCm headers, byte for byte.

A C++ program compiled against the headers prints the size and every field offset of each
struct, and the value of every enum name we table; cffi's view of the cdefs must agree.
CI checks Debian's ROCm 5.2 headers (libamdhip64-dev); point HIP_FFI_EXTRA_HEADERS at more
include roots (os.pathsep-separated, e.g. extracted ROCm 6.4 and 7.x `-dev` packages) to check
those too.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from hip_ffi import constants
from hip_ffi._ffi import ffi

SYSTEM_INCLUDE = Path("/usr/include")


def _header_roots() -> list[Path]:
    roots = [SYSTEM_INCLUDE] if (SYSTEM_INCLUDE / "hip/hip_runtime_api.h").exists() else []
    extra = os.environ.get("HIP_FFI_EXTRA_HEADERS", "")
    roots += [Path(p) for p in extra.split(os.pathsep) if p]
    return roots


def _header_major(root: Path) -> int:
    text = (root / "hip/hip_version.h").read_text()
    match = re.search(r"#define HIP_VERSION_MAJOR (\d+)", text)
    assert match, root
    return int(match.group(1))


def _structs(major: int) -> dict[str, str]:
    """cffi struct name -> the C type to compare it with, for headers of that major release."""
    pairs = {
        "hipUUID": "hipUUID",
        "hipMemLocation": "hipMemLocation",
        "hipMemPoolProps": "hipMemPoolProps",
        "hipMemAccessDesc": "hipMemAccessDesc",
        "hipIpcMemHandle_t": "hipIpcMemHandle_t",
        "hipIpcEventHandle_t": "hipIpcEventHandle_t",
    }
    pairs["hipPointerAttribute_t"] = "hipPointerAttribute_t"
    pairs["hipDeviceArch_t"] = "hipDeviceArch_t"
    if major >= 6:
        pairs["hipDeviceProp_tR0600"] = "hipDeviceProp_tR0600"
        pairs["hipDeviceProp_tR0000"] = "hipDeviceProp_tR0000"
    else:
        pairs["hipDeviceProp_tR0000"] = "hipDeviceProp_t"
    return pairs


def _c_field(c_type: str, field: str, major: int) -> str | None:
    """The header's name for one of our fields; None where that release has no such field."""
    if major < 6 and (c_type, field) == ("hipPointerAttribute_t", "type"):
        return "memoryType"  # renamed in ROCm 6.0, same position
    if major < 6 and (c_type, field) == ("hipMemPoolProps", "maxSize"):
        return "reserved"  # ROCm 6 carved maxSize out of the start of reserved[64]
    if major < 6 and (c_type, field) == ("hipMemPoolProps", "reserved"):
        return None
    return field


def _probe_program(major: int) -> str:
    lines = ["#include <hip/hip_runtime_api.h>", "#include <cstdio>", "#include <cstddef>"]
    if major >= 6:
        lines.append("#include <hip/hip_deprecated.h>")  # where R0000 lives from ROCm 6
    lines.append("int main() {")
    for ours, theirs in _structs(major).items():
        lines.append(f'printf("size {ours} %zu\\n", sizeof({theirs}));')
        for name, field in ffi.typeof(ours).fields:
            if field.bitsize >= 0:  # bitfields have no offsetof
                continue
            c_name = _c_field(theirs, name, major)
            if c_name is None:
                continue
            lines.append(f'printf("offset {ours}.{name} %zu\\n", offsetof({theirs}, {c_name}));')
    lines.append("return 0; }")
    return "\n".join(lines)


def _enum_program(root: Path) -> str:
    text = (root / "hip/hip_runtime_api.h").read_text()
    lines = ["#include <hip/hip_runtime_api.h>", "#include <cstdio>", "int main() {"]
    for name in constants.ERROR_CODES:
        if re.search(rf"\b{name}\b", text):
            lines.append(f'printf("{name} %d\\n", (int){name});')
    for name in constants.DEVICE_ATTRIBUTES:
        if re.search(rf"\bhipDeviceAttribute{name}\b", text):
            lines.append(f'printf("attr.{name} %d\\n", (int)hipDeviceAttribute{name});')
    for name in ("Host", "Device", "Array", "Unified", "Managed"):
        if re.search(rf"\bhipMemoryType{name}\b", text):
            lines.append(f'printf("memory.{name} %d\\n", (int)hipMemoryType{name});')
    lines.append("return 0; }")
    return "\n".join(lines)


def _run(program: str, root: Path, tmp_path: Path) -> dict[str, int]:
    compiler = shutil.which("g++") or shutil.which("clang++")
    if compiler is None:
        pytest.fail("a C++ compiler is needed to read the ROCm headers")
    source, binary = tmp_path / "probe.cpp", tmp_path / "probe"
    source.write_text(program)
    build = subprocess.run(
        [compiler, "-D__HIP_PLATFORM_AMD__", f"-I{root}", str(source), "-o", str(binary)],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    out = subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout
    return {key: int(value) for key, value in (line.rsplit(" ", 1) for line in out.splitlines())}


@pytest.fixture(params=_header_roots() or [None], ids=lambda root: str(root))
def header_root(request: pytest.FixtureRequest) -> Path:
    if request.param is None:
        pytest.skip("no ROCm headers here (apt-get install libamdhip64-dev)")
    root: Path = request.param
    return root


def test_struct_layouts_match_the_headers(header_root: Path, tmp_path: Path) -> None:
    major = _header_major(header_root)
    facts = _run(_probe_program(major), header_root, tmp_path)
    for ours in _structs(major):
        assert facts[f"size {ours}"] == ffi.sizeof(ours), ours
        for name, field in ffi.typeof(ours).fields:
            if field.bitsize < 0 and f"offset {ours}.{name}" in facts:
                assert facts[f"offset {ours}.{name}"] == field.offset, f"{ours}.{name}"


def test_enum_values_match_the_headers(header_root: Path, tmp_path: Path) -> None:
    major = _header_major(header_root)
    facts = _run(_enum_program(header_root), header_root, tmp_path)
    errors = {k: v for k, v in facts.items() if k.startswith("hip")}
    assert len(errors) >= 70
    assert all(constants.ERROR_CODES[name] == value for name, value in errors.items())
    attributes = {k.removeprefix("attr."): v for k, v in facts.items() if k.startswith("attr.")}
    assert len(attributes) >= 90
    assert all(constants.DEVICE_ATTRIBUTES[name] == value for name, value in attributes.items())
    memory = {k.removeprefix("memory."): v for k, v in facts.items() if k.startswith("memory.")}
    if major >= 6:
        assert all(constants.MEMORY_TYPES[name] == value for name, value in memory.items())
    else:
        assert all(constants.MEMORY_TYPES_ROCM5[value] == name for name, value in memory.items())
