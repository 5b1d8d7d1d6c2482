"""The cpu platform's code objects: ELF shared objects for this machine, sealed with a hash.

Our hiprtc builds every image, so it can prove it whole: `seal` appends a 48-byte trailer
(SHA-256 of the ELF bytes, their length, a magic) after the shared object, where dlopen never
looks. `check` refuses, before anything is dlopen()ed:
- bytes that are not an ELF-64 image, or whose headers, segments or sections run past the
  buffer (truncated): hipErrorInvalidImage;
- an ELF for another machine (an AMD or NVIDIA code object) or of another type, or one without
  a seal (not built by this platform's hiprtc): hipErrorNoBinaryForGpu;
- a sealed image whose bytes no longer match their hash (a flipped bit, a cut or padded end):
  hipErrorInvalidImage.
A flipped bit in a shared object can make dlopen write through a corrupt relocation, so
nothing short of the hash would keep the process alive. (The ABI version is checked after the
load, from the image's `__hipcpu_abi_version`.)
"""

from __future__ import annotations

import hashlib
import platform
import struct

from hip_cpu import elf
from hip_ffi import code_objects
from hip_ffi.code_objects import INVALID_IMAGE, NO_BINARY_FOR_GPU, CodeObjectError, Image

MAGIC = b"HIPCPU\x01\x00"
TRAILER = 32 + 8 + len(MAGIC)  # SHA-256, the ELF's length, the magic
_ET_DYN = 3


def seal(shared_object: bytes) -> bytes:
    """The code object for a shared object the compiler just wrote."""
    digest = hashlib.sha256(shared_object).digest()
    return shared_object + digest + struct.pack("<Q", len(shared_object)) + MAGIC


def check(image: Image) -> None:
    """Raise CodeObjectError unless `image` is a whole sealed code object for this machine."""
    sealed = len(image) > TRAILER and bytes(image[-len(MAGIC) :]) == MAGIC
    body = len(image) - TRAILER if sealed else len(image)
    if sealed:  # first: a corrupt image is reported as corrupt, whatever its bits now say
        (length,) = struct.unpack_from("<Q", image, body + 32)
        if length != body or hashlib.sha256(image[:body]).digest() != bytes(image[body:][:32]):
            raise CodeObjectError(INVALID_IMAGE, "corrupt: the image does not match its seal")
    machine = elf.MACHINES.get(platform.machine(), -1)
    end = code_objects.check_elf(image[:body], machine, f"this host ({platform.machine()})")
    if struct.unpack_from("<H", image, 16)[0] != _ET_DYN:
        raise CodeObjectError(NO_BINARY_FOR_GPU, "an ELF image that is not a shared object")
    if end != body:
        raise CodeObjectError(
            INVALID_IMAGE,
            f"truncated or corrupt: {body - end} bytes after "
            f"the ELF image that are not the {TRAILER}-byte seal",
        )
    if not sealed:
        raise CodeObjectError(
            NO_BINARY_FOR_GPU,
            "a shared object without the cpu platform's seal (not built by its hiprtc, or the "
            "seal was cut off)",
        )


check_code_object = code_objects.as_status(check)
