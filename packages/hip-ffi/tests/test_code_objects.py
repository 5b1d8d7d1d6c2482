"""HipApi.check_code_object: each platform's check of a whole code object, on real images.

The amd and nvidia images in data/code_objects/ were built by ROCm 5.2's hiprtc and CUDA 13's
nvcc (README there); the cpu platform's check is hip-cpu's (its test_cpu_images.py). Every
truncation of each is refused; bit flips never make a check read outside the bytes (it refuses
or passes, never raises anything else).
"""

from __future__ import annotations

import random
import struct
from pathlib import Path
from typing import Any

import pytest

from hip_ffi import code_objects, constants
from hip_ffi.code_objects import CodeObjectError

E = constants.ERROR_CODES
INVALID, NO_BINARY = E["hipErrorInvalidImage"], E["hipErrorNoBinaryForGpu"]
DATA = Path(__file__).with_name("data") / "code_objects"


def image(name: str) -> bytes:
    return (DATA / name).read_bytes()


def bundle(entries: list[tuple[str, bytes]]) -> bytes:
    """A clang offload bundle, laid out as clang-offload-bundler writes it."""
    header = b"__CLANG_OFFLOAD_BUNDLE__" + struct.pack("<Q", len(entries))
    table_size = sum(24 + len(name) for name, _ in entries)
    offset = -(-(len(header) + table_size) // 4096) * 4096
    table, payload = b"", b""
    for name, data in entries:
        table += struct.pack("<QQQ", offset + len(payload), len(data), len(name)) + name.encode()
        payload += data
    return header + table + b"\0" * (offset - len(header) - len(table)) + payload


AMD_CO = "scale.gfx90a.co"
HOST_ENTRY = ("host-x86_64-unknown-linux", b"")
REAL = {
    "amd": [
        image(AMD_CO),
        bundle([HOST_ENTRY, ("hipv4-amdgcn-amd-amdhsa--gfx90a", image(AMD_CO))]),
    ],
    "nvidia": [image(n) for n in ("scale.sm_90.cubin", "scale.sm_90.fatbin", "scale.sm_90.ptx")],
}
CHECKS = {"amd": code_objects.check_amd, "nvidia": code_objects.check_nvidia}


def refusal(check: Any, data: bytes) -> int:
    """The status a check gives `data`: 0 when it passes; anything but CodeObjectError fails."""
    try:
        check(data)
    except CodeObjectError as error:
        assert error.reason and error.status in (INVALID, NO_BINARY)
        return error.status
    return 0


@pytest.mark.parametrize("platform", ["amd", "nvidia"])
def test_real_images_pass_and_every_truncation_is_refused(platform: str) -> None:
    check = CHECKS[platform]
    for data in REAL[platform]:
        assert refusal(check, data) == 0
        if data.startswith(b"//"):  # PTX: text is whole wherever a cut leaves no open function
            continue
        refused = [n for n in range(len(data)) if refusal(check, data[:n])]
        assert len(refused) == len(data), f"{len(data) - len(refused)} truncations passed"


def test_a_ptx_cut_inside_a_function_or_before_its_directives_is_refused() -> None:
    ptx = image("scale.sm_90.ptx")
    body = ptx.index(b"{")
    for n in range(len(ptx)):
        cut = ptx[:n]
        inside = cut.count(b"{") != cut.count(b"}")
        whole = b".target" in cut and not inside
        assert (refusal(code_objects.check_ptx, cut) == 0) == whole, n
    assert refusal(code_objects.check_ptx, ptx[: body + 1]) == INVALID
    assert refusal(code_objects.check_ptx, ptx.replace(b"{", b"{\x01", 1)) == INVALID  # not text
    assert refusal(code_objects.check_ptx, ptx + b"\0garbage after the NUL \xff") == 0


@pytest.mark.parametrize("platform", ["amd", "nvidia"])
def test_bit_flips_never_make_a_check_read_outside_the_image(platform: str) -> None:
    rng = random.Random(13)
    check = CHECKS[platform]
    for data in REAL[platform]:
        statuses = set()
        for _ in range(600):
            flipped = bytearray(data)
            at = (
                rng.randrange(min(len(data), 512))
                if rng.random() < 0.7
                else rng.randrange(len(data))
            )
            flipped[at] ^= 1 << rng.randrange(8)
            statuses.add(refusal(check, bytes(flipped)))  # no struct.error/IndexError escapes
        assert INVALID in statuses  # header and table flips are caught; code bytes are the driver's


def test_an_image_for_another_device_is_no_binary_for_this_one() -> None:
    assert refusal(code_objects.check_amd, image("scale.sm_90.cubin")) == NO_BINARY
    assert refusal(code_objects.check_nvidia, image(AMD_CO)) == NO_BINARY
    assert refusal(code_objects.check_amd, bundle([HOST_ENTRY])) == NO_BINARY
    assert refusal(code_objects.check_amd, b"not a code object" * 8) == INVALID
    assert refusal(code_objects.check_nvidia, b"\x50\xed\x55\xba\x01\x00\x10\x00") == INVALID


def test_offload_bundle_entries_must_lie_inside_it() -> None:
    whole = REAL["amd"][1]
    (count,) = struct.unpack_from("<Q", whole, 24)
    assert count == 2
    moved = bytearray(whole)
    struct.pack_into("<Q", moved, 32 + 24 + len(HOST_ENTRY[0]), len(whole))  # 2nd entry's offset
    assert refusal(code_objects.check_amd, bytes(moved)) == INVALID
    broken = bundle([HOST_ENTRY, ("hipv4-amdgcn-amd-amdhsa--gfx90a", image(AMD_CO)[:-1] + b"")])
    assert refusal(code_objects.check_amd, broken) == INVALID
    compressed = b"CCOB" + struct.pack("<HHIIQ", 2, 1, 4096, 8192, 0) + b"\0" * 100
    assert refusal(code_objects.check_amd, compressed) == INVALID  # declares 4096, has 124
    assert refusal(code_objects.check_amd, compressed[:24] + b"\0" * 4072) == 0


def test_amd_binds_its_check(amd: Any) -> None:
    assert amd.check_code_object(REAL["amd"][0]) == (0, "")
    assert amd.check_code_object(REAL["amd"][0][:100])[0] == INVALID
