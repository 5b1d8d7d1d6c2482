"""Just enough ELF-64 (little-endian) reading for code objects: size, machine and symbols.

hipModuleLoadData gets a bare pointer, so the image's size comes from its own header: GNU ld
writes the section header table last, and the program headers bound the loadable part.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

MAGIC = b"\x7fELF"
HEADER_SIZE = 64
MACHINES = {"x86_64": 62, "aarch64": 183, "ppc64le": 21, "riscv64": 243, "s390x": 22}
_SYMTAB, _NOBITS = 2, 8


@dataclass(frozen=True)
class Symbol:
    value: int  # offset from the load base
    size: int  # bytes
    kind: int  # STT_OBJECT 1, STT_FUNC 2, STT_TLS 6


def is_elf64(header: bytes) -> bool:
    return len(header) >= HEADER_SIZE and header[:4] == MAGIC and header[4] == 2 and header[5] == 1


def machine(header: bytes) -> int:
    return int(struct.unpack_from("<H", header, 18)[0])


def image_size(header: bytes, read: Callable[[int, int], bytes]) -> int:
    """The file size of the image whose first 64 bytes are `header`; `read(offset, n)` reads
    more of it."""
    (phoff, shoff) = struct.unpack_from("<QQ", header, 32)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", header, 54)
    end = max(HEADER_SIZE, shoff + shnum * shentsize)
    table = read(phoff, phnum * phentsize) if phnum else b""
    for i in range(phnum):
        offset, _vaddr, _paddr, filesz = struct.unpack_from("<QQQQ", table, i * phentsize + 8)
        end = max(end, offset + filesz)
    return int(end)


def symbols(image: bytes) -> dict[str, Symbol]:
    """The static symbol table (.symtab): every defined symbol, hidden ones included."""
    shoff = struct.unpack_from("<Q", image, 40)[0]
    shentsize, shnum = struct.unpack_from("<HH", image, 58)
    sections = [
        struct.unpack_from("<IIQQQQIIQQ", image, shoff + i * shentsize) for i in range(shnum)
    ]
    found: dict[str, Symbol] = {}
    for _name, kind, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
        if kind != _SYMTAB or not entsize:
            continue
        strings_offset = sections[link][4]
        for at in range(offset, offset + size, entsize):
            name_at, info, _other, shndx, value, length = struct.unpack_from("<IBBHQQ", image, at)
            if shndx == 0 or name_at == 0:  # undefined, or unnamed
                continue
            start = strings_offset + name_at
            name = image[start : image.index(b"\0", start)].decode(errors="replace")
            found[name] = Symbol(value, length, info & 0xF)
    return found
