"""The cpu platform's check of a whole code object: it seals the shared objects its hiprtc
builds, so every truncation and every bit flip is refused, and a shared object it did not build
(or another platform's image) is no binary for it."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path
from typing import Any

import pytest

import hip_ffi
from hip_cpu import images, toolchain
from hip_ffi import constants
from hip_ffi.rtc import compile_source

E = constants.ERROR_CODES
INVALID, NO_BINARY = E["hipErrorInvalidImage"], E["hipErrorNoBinaryForGpu"]
KERNEL = b'extern "C" __global__ void scale(float* p, float a, int n) { p[threadIdx.x] *= a; }'
# ROCm 5.2's build of scale.cu, kept with hip-ffi's own code object tests (README there).
AMD_IMAGE = (
    Path(__file__).resolve().parents[2] / "hip-ffi" / "tests" / "data" / "code_objects"
) / "scale.gfx90a.co"


@pytest.fixture(scope="module")
def cpu() -> Any:
    return hip_ffi.load("cpu")


@pytest.fixture(scope="module")
def sealed(cpu: Any) -> bytes:
    result = compile_source(cpu, KERNEL, name="scale.hip", options=(), headers=None)
    assert result.status == 0, result.log
    return bytes(result.code)


def test_cpu_images_are_sealed_and_every_truncation_and_flip_is_refused(
    cpu: Any, sealed: bytes
) -> None:
    assert cpu.check_code_object(sealed) == (0, "")
    assert all(cpu.check_code_object(sealed[:n])[0] for n in range(0, len(sealed), 7))
    assert all(cpu.check_code_object(sealed[:n])[0] for n in range(len(sealed) - 200, len(sealed)))
    rng = random.Random(6)
    for _ in range(300):
        flipped = bytearray(sealed)
        flipped[rng.randrange(len(sealed))] ^= 1 << rng.randrange(8)
        error, reason = cpu.check_code_object(bytes(flipped))
        assert error == INVALID, reason
    assert cpu.check_code_object(sealed + b"\0")[0] == INVALID


def test_cpu_refuses_a_shared_object_it_did_not_build(cpu: Any, tmp_path: Path) -> None:
    source, library = tmp_path / "plain.c", tmp_path / "plain.so"
    source.write_text("int answer(void) { return 42; }\n")
    compiler = toolchain.find_compiler()
    assert compiler is not None
    subprocess.run([compiler.path, "-x", "c", "-shared", "-fPIC", str(source), "-o", str(library)],
                   check=True)  # fmt: skip
    error, reason = cpu.check_code_object(library.read_bytes())
    assert error == NO_BINARY and "seal" in reason
    assert cpu.check_code_object(images.seal(library.read_bytes())) == (0, "")  # ABI: at load
    assert cpu.check_code_object(AMD_IMAGE.read_bytes())[0] == NO_BINARY
