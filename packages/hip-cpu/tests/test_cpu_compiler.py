"""hiprtc and modules on the cpu platform: options, headers, logs, the disk cache, loading.

Kernels here are small programs written for one check each; the portable kernels of
kernels/*.hip are exercised by test_cpu_kernels.py.
"""

from __future__ import annotations

import struct
import tempfile
from pathlib import Path
from typing import Any

import hip_ffi_test_kernel_cases as cases  # registered by conftest.py
import numpy as np
import pytest

import hip_ffi
from hip_cpu import device, elf, toolchain
from hip_ffi import constants
from hip_ffi.rtc import compile_source

E = constants.ERROR_CODES
R = constants.HIPRTC_RESULTS
COUNTER = b"""
__device__ int counter;
__constant__ float scale[2] = {2.0f, 3.0f};
extern "C" __global__ void bump(int* out) {
    atomicAdd(&counter, 1);
    __syncthreads();
    out[blockIdx.x * blockDim.x + threadIdx.x] = counter * (int)scale[1];
}
"""


@pytest.fixture(scope="module")
def hip() -> Any:
    return hip_ffi.load("cpu")


def compile_program(
    hip: Any, source: bytes, options: tuple[str, ...] | list[str] = (),
    headers: dict[str, bytes] | None = None,
) -> tuple[int, bytes, str]:  # fmt: skip
    """(hiprtcResult, code, log), with `headers` given to hiprtcCreateProgram."""
    result = compile_source(hip, source, name="test.hip", options=options, headers=headers)
    return result.status, result.code, result.log


def test_a_failed_program_has_no_code_and_destroy_clears_the_handle(hip: Any) -> None:
    ffi = hip.ffi
    program = ffi.new("hiprtcProgram*")
    assert (
        hip.hiprtcCreateProgram(program, b"this is not C++", b"x.hip", 0, ffi.NULL, ffi.NULL) == 0
    )
    assert hip.hiprtcCompileProgram(program[0], 0, ffi.NULL) == R["HIPRTC_ERROR_COMPILATION"]
    size = ffi.new("size_t*")
    assert hip.hiprtcGetCodeSize(program[0], size) == R["HIPRTC_ERROR_INVALID_PROGRAM"]
    assert hip.hiprtcDestroyProgram(program) == 0 and program[0] == ffi.NULL


def load(hip: Any, code: bytes) -> Any:
    module = hip.ffi.new("hipModule_t*")
    assert hip.hipModuleLoadData(module, code) == 0
    return module[0]


def test_version_is_the_host_compilers(hip: Any) -> None:
    major, minor = hip.ffi.new("int*"), hip.ffi.new("int*")
    assert hip.hiprtcVersion(major, minor) == 0
    compiler = toolchain.find_compiler()
    assert compiler is not None and (major[0], minor[0]) == (compiler.major, compiler.minor)


def test_options_headers_and_includes(hip: Any) -> None:
    source = b"""
#include <hip/hip_runtime.h>
#include "lib/helper.h"
extern "C" __global__ void k(int* out) { out[0] = HELPER(VALUE); }
"""
    headers = {"lib/helper.h": b"#define HELPER(x) ((x) * 2)\n"}
    options = ["--offload-arch=gfx90a", "-DVALUE=21", "-O2", "-std=c++20", "--use_fast_math"]
    result, code, log = compile_program(hip, source, options, headers)
    assert result == 0, log
    run = cases.Runner(hip)
    try:
        out = run.output(1, np.int32)
        run._modules["k.hip"] = load(hip, code)
        run.launch("k.hip", "k", (1, 1, 1), (1, 1, 1), cases.ptr(out))
        assert run.download(out, 1, np.int32)[0] == 42
    finally:
        run.close()


def test_unknown_option_and_compile_errors(hip: Any) -> None:
    result, _, log = compile_program(hip, b"", ["--no-such-option"])
    assert result == R["HIPRTC_ERROR_INVALID_OPTION"] and "--no-such-option" in log
    result, _, log = compile_program(hip, b'extern "C" __global__ void k() { int x = ; }\n')
    assert result == R["HIPRTC_ERROR_COMPILATION"]
    assert "test.hip:1:" in log and "error" in log and "/tmp/" not in log, log
    # warpSize is a run-time value on CUDA: not a constant expression here either.
    result, _, log = compile_program(hip, b"__global__ void k() { __shared__ int s[warpSize]; }")
    assert result == R["HIPRTC_ERROR_COMPILATION"] and "warpSize" in log
    # Texture objects are not supported: a use says so (docs/porting.md quotes this message).
    texture = (
        b"__global__ void k(hipTextureObject_t t, float* o) { o[0] = tex1Dfetch<float>(t, 0); }"
    )
    result, _, log = compile_program(hip, texture)
    assert result == R["HIPRTC_ERROR_COMPILATION"]
    assert "hip-ffi cpu: texture objects (tex1Dfetch, tex2D) are not supported" in log, log


def test_warnings_come_back_with_a_successful_compile(hip: Any) -> None:
    result, code, log = compile_program(
        hip, b'extern "C" __global__ void k() { int unused; }\n', ["-Wall"]
    )
    assert result == 0 and code and "unused" in log


def test_second_compile_is_a_cache_hit(
    hip: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HIP_FFI_CPU_CACHE", str(tmp_path))
    include = tmp_path / "include"
    include.mkdir()
    (include / "value.h").write_text("#define VALUE 1\n")
    source = b'#include "value.h"\nextern "C" __global__ void k(int* o) { o[0] = VALUE; }\n'
    options = [f"-I{include}"]
    before = dict(toolchain.stats)
    first = compile_program(hip, source, options)
    assert toolchain.stats["compiles"] > before["compiles"]
    before = dict(toolchain.stats)
    second = compile_program(hip, source, options)
    assert toolchain.stats == {**before, "cache_hits": before["cache_hits"] + 1}
    assert first == second and first[0] == 0
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left
    (include / "value.h").write_text("#define VALUE 2\n")  # a header it read changed
    third = compile_program(hip, source, options)
    assert toolchain.stats["compiles"] > before["compiles"] and third[1] != first[1]


def test_code_object_is_a_host_shared_object(hip: Any) -> None:
    result, code, _ = compile_program(hip, COUNTER)
    assert result == 0 and code[:4] == b"\x7fELF"
    e_type, e_machine = struct.unpack_from("<HH", code, 16)
    assert e_type == 3  # ET_DYN
    assert e_machine == elf.MACHINES[device.host().arch]


def test_modules_globals_and_separate_instances(hip: Any, tmp_path: Path) -> None:
    ffi = hip.ffi
    result, code, log = compile_program(hip, COUNTER)
    assert result == 0, log
    path = tmp_path / "counter.so"
    path.write_bytes(code)
    first, second = ffi.new("hipModule_t*"), ffi.new("hipModule_t*")
    assert hip.hipModuleLoad(first, str(path).encode()) == 0
    assert hip.hipModuleLoadData(second, ffi.from_buffer(code)) == 0  # size from the ELF header
    run = cases.Runner(hip)
    try:
        run._modules.update({"a": first[0], "b": second[0]})
        out = run.output(64, np.int32)
        run.launch("a", "bump", (1, 1, 1), (64, 1, 1), cases.ptr(out))
        np.testing.assert_array_equal(run.download(out, 64, np.int32), 64 * 3)
        pointer, size = ffi.new("void**"), ffi.new("size_t*")
        assert hip.hipModuleGetGlobal(pointer, size, first[0], b"counter") == 0 and size[0] == 4
        value = np.zeros(1, dtype=np.int32)
        assert hip.hipMemcpy(ffi.from_buffer(value), pointer[0], 4, 2) == 0 and value[0] == 64
        assert hip.hipModuleGetGlobal(pointer, size, second[0], b"counter") == 0
        assert hip.hipMemcpy(ffi.from_buffer(value), pointer[0], 4, 2) == 0 and value[0] == 0
        assert hip.hipModuleGetGlobal(pointer, size, first[0], b"scale") == 0 and size[0] == 8
        scale = np.array([5.0, 7.0], dtype=np.float32)  # __constant__: written from the host
        assert hip.hipMemcpy(pointer[0], ffi.from_buffer(scale), 8, 1) == 0
        run.launch("a", "bump", (1, 1, 1), (64, 1, 1), cases.ptr(out))
        np.testing.assert_array_equal(run.download(out, 64, np.int32), 128 * 7)
        assert hip.hipModuleGetGlobal(pointer, size, first[0], b"nothing") == E["hipErrorNotFound"]
        function = ffi.new("hipFunction_t*")
        assert hip.hipModuleGetFunction(function, first[0], b"nothing") == E["hipErrorNotFound"]
        assert hip.hipModuleGetFunction(function, first[0], b"bump") == 0
    finally:
        run.close()  # unloads both modules
    assert hip.hipModuleLaunchKernel(function[0], 1, 1, 1, 1, 1, 1, 0, ffi.NULL, ffi.NULL,
                                     ffi.NULL) == E["hipErrorInvalidHandle"]  # fmt: skip
    assert hip.hipModuleLoad(first, str(tmp_path / "missing.so").encode()) == 301
    hip.hipGetLastError()


def test_foreign_or_broken_code_objects_are_refused(hip: Any) -> None:
    ffi = hip.ffi
    module = ffi.new("hipModule_t*")
    amdgpu = bytearray(64)  # an ELF header for e_machine 224 (an AMD GPU code object)
    amdgpu[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<HH", amdgpu, 16, 3, 224)
    assert hip.hipModuleLoadData(module, bytes(amdgpu)) == E["hipErrorNoBinaryForGpu"]
    assert (
        hip.hipModuleLoadData(module, b"not a code object at all" * 4) == E["hipErrorInvalidImage"]
    )
    _, code, _ = compile_program(hip, COUNTER)
    assert hip.hipModuleLoadData(module, code[: len(code) // 2]) in (
        E["hipErrorInvalidImage"], E["hipErrorNoBinaryForGpu"],
    )  # fmt: skip
    hip.hipGetLastError()


# ---- names and the host's failures -----------------------------------------------------------

TINY = b'extern "C" __global__ void tiny(float* p) { p[0] = 1.0f; }'


@pytest.mark.parametrize("name", ["-v", "--help", "--version", "-", "-o/tmp/out.so", "-fplugin=x"])
def test_a_program_name_is_never_an_option(hip: Any, name: str) -> None:
    result = compile_source(hip, TINY + f"// {name}".encode(), name=name)
    assert result.status == 0, result.log
    module, function = hip.ffi.new("hipModule_t*"), hip.ffi.new("hipFunction_t*")
    assert hip.hipModuleLoadData(module, result.code) == 0
    assert hip.hipModuleGetFunction(function, module[0], b"tiny") == 0  # the program, not stdin
    assert hip.hipModuleUnload(module[0]) == 0
    broken = compile_source(hip, b"this is not C++", name=name)
    assert broken.status == R["HIPRTC_ERROR_COMPILATION"]
    assert f"{Path(name).name}:1:" in broken.log, broken.log


def test_host_failures_are_a_hiprtc_status_with_a_log(
    hip: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fresh = TINY + f"// {tmp_path}".encode()  # a source no cache has seen
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no-such-directory"))
    result = compile_source(hip, fresh)
    assert result.status == R["HIPRTC_ERROR_INTERNAL_ERROR"]
    assert "no-such-directory" in result.log and "could not" in result.log, result.log
    monkeypatch.undo()
    vanished = toolchain.Compiler(str(tmp_path / "g++"), "g++ (gone) 12.2.0", "g++ 12.2.0", 12, 2)
    monkeypatch.setattr(toolchain, "find_compiler", lambda: vanished)
    result = compile_source(hip, fresh)
    assert result.status == R["HIPRTC_ERROR_COMPILATION"] and "could not run" in result.log
    monkeypatch.undo()
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("HIP_FFI_CPU_CACHE", str(tmp_path / "a-file" / "cache"))  # unwritable
    result = compile_source(hip, fresh)
    assert result.status == 0, result.log


@pytest.mark.parametrize("level", ["-O0", "-O1", "-O2", "-Os", "-O3"])
def test_every_optimization_level_builds_and_runs(hip: Any, level: str) -> None:
    # -O0 once failed in the assembler: the fiber switch's top-level asm left the section at
    # .text, where the compiler then put a thread-local variable.
    result, code, log = compile_program(hip, COUNTER, [level])
    assert result == 0, log
    run = cases.Runner(hip)
    module = hip.ffi.new("hipModule_t*")
    assert hip.hipModuleLoadData(module, code) == 0
    run._modules["counter"] = module[0]
    try:
        out = run.output(64, np.int32)
        run.launch("counter", "bump", (1, 1, 1), (64, 1, 1), cases.ptr(out))  # barriers: fibers
        np.testing.assert_array_equal(run.download(out, 64, np.int32), 64 * 3)
    finally:
        run.close()


def test_include_options_as_the_next_option_and_relative_to_the_working_directory(
    hip: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As hiprtc: "-I", "dir" is one option, and a relative directory is the caller's (the
    compiler itself runs in a temporary directory)."""
    from hip_cpu.compiler import OptionError, parse_options

    monkeypatch.chdir(tmp_path)
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "value.h").write_text("#define VALUE 7\n")
    flags = parse_options(["-I", "inc", "-D", "X=1", "--include-path", "/abs", "-Ia/b", "-U", "Y"])
    assert flags[1:] == [f"-I{tmp_path}/inc", "-DX=1", "-I/abs", f"-I{tmp_path}/a/b", "-UY"]
    with pytest.raises(OptionError, match="'-I' needs a value"):
        parse_options(["-O2", "-I"])
    source = b'#include "value.h"\nextern "C" __global__ void k(int* o) { o[0] = VALUE; }\n'
    for options in (["-I", "inc"], ["-Iinc"]):
        status, code, log = compile_program(hip, source, options)
        assert status == 0 and code, log


def test_a_header_that_now_shadows_a_later_one_is_no_cache_hit(
    hip: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HIP_FFI_CPU_CACHE", str(tmp_path / "cache"))
    earlier, later = tmp_path / "earlier", tmp_path / "later"
    earlier.mkdir()
    later.mkdir()
    (later / "value.h").write_text("#define VALUE 1\n")
    source = b'#include "value.h"\nextern "C" __global__ void k(int* o) { o[0] = VALUE; }\n'
    options = [f"-I{earlier}", f"-I{later}"]
    first = compile_program(hip, source, options)
    hits = toolchain.stats["cache_hits"]
    assert compile_program(hip, source, options) == first  # nothing changed: a hit
    assert toolchain.stats["cache_hits"] == hits + 1
    (earlier / "value.h").write_text("#define VALUE 2\n")  # no file it read changed
    second = compile_program(hip, source, options)
    assert second[0] == 0 and second[1] != first[1] and toolchain.stats["cache_hits"] == hits + 1
