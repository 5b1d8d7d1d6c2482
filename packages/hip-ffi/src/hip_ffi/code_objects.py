"""What a whole code object looks like on each platform, checked before a loader reads it.

hipModuleLoadData takes a bare pointer: the runtime learns the image's size from the image
itself (ELF headers, bundle and fatbin headers, PTX's NUL), so a truncated or corrupt image
makes it read past the buffer. `HipApi.check_code_object(image)` runs the platform's check on
the bytes first: every table and payload an image declares must lie inside them.

- **amd**: an AMDGPU ELF (e_machine 224), or a clang offload bundle (`__CLANG_OFFLOAD_BUNDLE__`,
  whose non-empty device entries are checked as AMDGPU ELFs), or a compressed bundle (`CCOB`,
  whose declared size is checked).
- **nvidia**: a cubin (an ELF, e_machine 190), a fatbin (magic 0xBA55ED50: the container and
  every entry inside it), or PTX text (printable, with `.version` and `.target`, braces
  balanced: a PTX cut short ends inside a function). The driver reads PTX up to its NUL: pass
  `bytes` (CPython keeps a NUL after every bytes object) or end it with one.
- **cpu**: hip_cpu/images.py (an ELF shared object for this machine, sealed with a hash).

The checks are structural: they guarantee that the loader stays inside the buffer, not that
the machine code is sound (only the cpu platform, which builds its own images, can check that).
A refusal is `CodeObjectError` with hipErrorInvalidImage (truncated, corrupt, not a code object)
or hipErrorNoBinaryForGpu (a whole image for another kind of device).
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from hip_ffi.constants import ERROR_CODES

INVALID_IMAGE = ERROR_CODES["hipErrorInvalidImage"]
NO_BINARY_FOR_GPU = ERROR_CODES["hipErrorNoBinaryForGpu"]

ELF_MAGIC = b"\x7fELF"
ELF_HEADER = 64  # bytes of an ELF-64 header
EM_AMDGPU, EM_CUDA = 224, 190
_PHDR, _SHDR = 56, 64  # bytes of an ELF-64 program / section header
_SHT_NOBITS = 8
_BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
_COMPRESSED_MAGIC = b"CCOB"
_FATBIN_MAGIC = 0xBA55ED50

Image = bytes | bytearray | memoryview


class CodeObjectError(ValueError):
    """An image its platform would not load safely: `status` (a hipError_t) and `reason`."""

    def __init__(self, status: int, reason: str) -> None:
        self.status = status
        self.reason = reason
        super().__init__(reason)


def _invalid(reason: str) -> CodeObjectError:
    return CodeObjectError(INVALID_IMAGE, reason)


def _unpack(layout: str, image: Image, offset: int, what: str) -> tuple[int, ...]:
    """struct.unpack_from that names what was cut off instead of raising struct.error."""
    if offset < 0 or offset + struct.calcsize(layout) > len(image):
        raise _invalid(f"truncated: the {what} at byte {offset} runs past the {len(image)} bytes")
    return struct.unpack_from(layout, image, offset)


def _within(image: Image, offset: int, size: int, what: str) -> int:
    """The end of [offset, offset+size), which must lie inside the image."""
    end = offset + size
    if end > len(image):
        raise _invalid(f"truncated: the {what} ends at byte {end}, past the {len(image)} bytes")
    return end


# ---- ELF ---------------------------------------------------------------------------------


def is_elf(image: Image) -> bool:
    return bytes(image[:4]) == ELF_MAGIC


def elf_machine(image: Image) -> int:
    """e_machine of an ELF-64 image (call elf_extent first)."""
    return int(_unpack("<H", image, 18, "ELF header")[0])


def elf_extent(image: Image) -> int:
    """The bytes an ELF-64 little-endian image declares (header, both header tables, every
    segment and section with file contents); CodeObjectError unless all lie inside `image`."""
    if len(image) < ELF_HEADER:
        raise _invalid(f"truncated: {len(image)} bytes is less than an ELF header")
    if bytes(image[:4]) != ELF_MAGIC:
        raise _invalid("not an ELF image (bad magic)")
    if image[4] != 2 or image[5] != 1:
        raise _invalid("not a 64-bit little-endian ELF image")
    phoff, shoff = _unpack("<QQ", image, 32, "ELF header")
    phentsize, phnum, shentsize, shnum, shstrndx = _unpack("<HHHHH", image, 54, "ELF header")
    if (phnum and phentsize < _PHDR) or (shnum and shentsize < _SHDR):
        raise _invalid("corrupt ELF header (table entry sizes)")
    end = ELF_HEADER
    if phnum:
        end = max(end, _within(image, phoff, phnum * phentsize, "program header table"))
    for i in range(phnum):
        offset, _vaddr, _paddr, filesz, memsz = _unpack(
            "<QQQQQ", image, phoff + i * phentsize + 8, "program header"
        )
        kind = _unpack("<I", image, phoff + i * phentsize, "program header")[0]
        if kind == 1 and filesz > memsz:  # PT_LOAD
            raise _invalid(f"corrupt ELF: segment {i} has more file bytes than memory bytes")
        end = max(end, _within(image, offset, filesz, f"segment {i}"))
    if shoff and shnum:
        end = max(end, _within(image, shoff, shnum * shentsize, "section header table"))
        if shstrndx >= shnum and shstrndx != 0xFFFF:
            raise _invalid("corrupt ELF: the section-name table index is out of range")
    for i in range(shnum if shoff else 0):
        kind, _flags, _addr, offset, size = _unpack(
            "<IQQQQ", image, shoff + i * shentsize + 4, "section header"
        )
        if kind not in (0, _SHT_NOBITS):
            end = max(end, _within(image, offset, size, f"section {i}"))
    return end


def check_elf(image: Image, machine: int, device: str) -> int:
    """A whole ELF image for `machine` (`device` names it in the message); returns its extent."""
    end = elf_extent(image)
    found = elf_machine(image)
    if found != machine:
        raise CodeObjectError(
            NO_BINARY_FOR_GPU, f"an ELF for machine {found}, not for {device} (machine {machine})"
        )
    return end


# ---- amd -----------------------------------------------------------------------------------


def check_offload_bundle(image: Image) -> None:
    """A clang offload bundle: every entry inside the image, device entries AMDGPU ELFs."""
    (count,) = _unpack("<Q", image, len(_BUNDLE_MAGIC), "bundle header")
    if count == 0 or count > len(image) // 24:
        raise _invalid(f"corrupt offload bundle: {count} entries")
    at, devices = len(_BUNDLE_MAGIC) + 8, 0
    for i in range(count):
        offset, size, id_size = _unpack("<QQQ", image, at, f"bundle entry {i}")
        at = _within(image, at + 24, id_size, f"bundle entry {i}'s name")
        name = bytes(image[at - id_size : at]).decode("ascii", errors="replace")
        _within(image, offset, size, f"bundle entry {i} ({name})")
        if size and "amdgcn" in name:
            check_elf(image[offset : offset + size], EM_AMDGPU, "an AMD GPU")
            devices += 1
    if not devices:
        raise CodeObjectError(NO_BINARY_FOR_GPU, "the offload bundle has no AMD GPU code object")


def check_compressed_bundle(image: Image) -> None:
    """A compressed offload bundle (ROCm 6.2+): the size its header declares must be there."""
    (version,) = _unpack("<H", image, 4, "compressed bundle header")
    if version == 1:
        _unpack("<HIQ", image, 6, "compressed bundle header")
        return  # version 1 does not record its total size
    layout = "<HII" if version == 2 else "<HQQ"
    _method, total, _uncompressed = _unpack(layout, image, 6, "compressed bundle header")
    if version not in (2, 3) or total > len(image):
        raise _invalid(f"truncated compressed bundle: declares {total} bytes, has {len(image)}")


def check_amd(image: Image) -> None:
    """What ROCm's hipModuleLoadData reads: an AMDGPU ELF or an (optionally compressed) bundle."""
    head = bytes(image[: len(_BUNDLE_MAGIC)])
    if head == _BUNDLE_MAGIC:
        check_offload_bundle(image)
    elif head.startswith(_COMPRESSED_MAGIC):
        check_compressed_bundle(image)
    else:
        check_elf(image, EM_AMDGPU, "an AMD GPU")


# ---- nvidia ------------------------------------------------------------------------------


def check_fatbin(image: Image) -> None:
    """A fatbin: its header, and every entry's header and payload inside the declared size."""
    _magic, version, header_size, fat_size = _unpack("<IHHQ", image, 0, "fatbin header")
    if version != 1 or header_size < 16:
        raise _invalid(f"corrupt fatbin header (version {version}, header {header_size} bytes)")
    end = _within(image, header_size, fat_size, "fatbin payload")
    at, entries = header_size, 0
    while at < end:
        kind, _version, entry_header, payload = _unpack(
            "<HHIQ", image, at, f"fatbin entry {entries}"
        )
        if kind == 0 or entry_header < 16:  # kinds: 1 PTX, 2 ELF, others the driver skips
            raise _invalid(f"corrupt fatbin entry {entries} (kind {kind})")
        at += entry_header + payload
        if at > end:
            raise _invalid(f"truncated: fatbin entry {entries} runs past the fatbin")
        entries += 1
    if not entries:
        raise _invalid("empty fatbin")


def check_ptx(image: Image) -> None:
    """PTX text, read up to its NUL: printable, with its directives, braces balanced."""
    data = bytes(image)
    text = data.split(b"\0", 1)[0]
    if any(byte < 9 or 13 < byte < 32 or byte > 126 for byte in text):
        raise _invalid("corrupt PTX: it holds bytes that are not text")
    if b".version" not in text or b".target" not in text:
        raise _invalid("not PTX: no .version/.target directive")
    depth = 0
    for byte in text:
        depth += (byte == 0x7B) - (byte == 0x7D)  # { and }
        if depth < 0:
            break
    if depth:
        raise _invalid("truncated or corrupt PTX: its braces do not balance")


def check_nvidia(image: Image) -> None:
    """What cuModuleLoadData reads: a cubin (ELF), a fatbin or PTX text."""
    if is_elf(image):
        check_elf(image, EM_CUDA, "an NVIDIA GPU")
    elif len(image) >= 4 and struct.unpack_from("<I", image, 0)[0] == _FATBIN_MAGIC:
        check_fatbin(image)
    else:
        check_ptx(image)


def as_status(check: Callable[[Image], object]) -> Callable[[Image], tuple[int, str]]:
    """`check` as HipApi.check_code_object: (hipSuccess, "") or (hipError_t, reason)."""

    def checked(image: Image) -> tuple[int, str]:
        try:
            check(image)
        except CodeObjectError as error:
            return error.status, error.reason
        return 0, ""

    checked.__doc__ = check.__doc__
    return checked
