"""Extract a Debian package's shared objects, without their GPU code, reading a fraction of it.

ROCm's math and communication libraries (rocBLAS, rocSOLVER, RCCL) carry their device code
inside the shared object, in the ELF section `.hip_fatbin`: 97-99 % of the file, and of the
.deb (125-630 MB each). A machine without an AMD GPU never reads that section; loading the
library and calling its host code needs everything else (code, symbols, relocations, data).
This module extracts exactly that, over HTTP, without downloading the package:

- A .deb is an `ar` archive whose last member is `data.tar.xz`. Debian's dpkg-deb compresses it
  in parallel, which makes an xz stream of independent blocks (24 MiB of tar each); the
  stream's index, at its end, gives every block's compressed and uncompressed size, so a byte
  range of the tar is read by fetching (HTTP Range) and decompressing only the blocks that
  cover it.
- The tar is walked header by header. dpkg-deb writes its members sorted by path, so the
  shared objects directly in usr/lib/x86_64-linux-gnu/ come before that directory's
  subdirectories (rocBLAS's Tensile kernels) and before usr/share: the walk stops there. A
  package laid out otherwise loses files, and loading the library fails, loudly.
- Of each shared object the ELF header and section headers are read first, then every byte
  except `.hip_fatbin`'s, written at its offset into a sparse file: the section reads as
  zeros and takes no disk space. The soname link (`librocblas.so.4` -> `librocblas.so.4.4`)
  comes from the ELF's DT_SONAME, as ldconfig makes it (the .deb's own links are stored last).

Integrity: every xz block is decoded as a complete one-block stream, so its own check (CRC64
or SHA-256) is verified, and its length must equal the index's. Authenticity is NOT checked:
Debian signs (Release -> Packages) the SHA-256 of whole .deb files, which a partial read
cannot recompute. Whole packages elsewhere (tools/rocm_roots.py) keep apt's hash check.

Sizes in this module are bytes unless a name says otherwise.
"""

from __future__ import annotations

import lzma
import struct
import tarfile
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

MULTIARCH = "usr/lib/x86_64-linux-gnu"
DEVICE_CODE_SECTION = b".hip_fatbin"
TIMEOUT_S = 60.0
ATTEMPTS = 3
_TAR_RECORD = 512
_XZ_MAGIC = b"\xfd7zXZ\x00"
_SHT_DYNAMIC, _SHT_NOBITS, _DT_SONAME = 6, 8, 14
_COPY_CHUNK = 8 << 20  # bytes copied per read: bounds memory to ~2 decoded blocks


class StreamError(RuntimeError):
    """The package could not be read (network, not an xz-compressed .deb, a bad block)."""


def fetch_range(url: str, start: int, end: int) -> bytes:
    """Bytes [start, end) of `url` by one HTTP Range request (retried `ATTEMPTS` times)."""
    request = urllib.request.Request(url, headers={"Range": f"bytes={start}-{end - 1}"})
    for attempt in range(1, ATTEMPTS + 1):
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                if response.status != 206:  # a server ignoring Range would send it all
                    raise StreamError(f"{url}: HTTP {response.status} for a range request")
                data: bytes = response.read()
        except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
            if attempt == ATTEMPTS:
                raise StreamError(f"{url} bytes {start}-{end}: {error}") from error
            time.sleep(2 * attempt)
            continue
        if len(data) != end - start:
            raise StreamError(f"{url}: asked {end - start} bytes at {start}, got {len(data)}")
        return data
    raise AssertionError("unreachable")


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """xz's multibyte integer at `at`: (value, offset after it)."""
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


@dataclass(frozen=True)
class _Block:
    offset: int  # in the .deb, of the block header
    unpadded: int  # block header + compressed data + check (the index's "unpadded size")
    start: int  # in the tar (uncompressed)
    size: int  # uncompressed


@dataclass
class RemoteTar:
    """The data.tar.xz of a .deb at `url`, readable at any offset of the uncompressed tar."""

    url: str
    fetched: int = 0  # compressed bytes downloaded so far
    _header: bytes = b""  # the xz stream header (12 bytes), prepended to every block
    _blocks: list[_Block] = field(default_factory=list)
    _cache: dict[int, bytes] = field(default_factory=dict)

    def __post_init__(self) -> None:
        start, size = self._data_member()
        self._header = self._get(start, start + 12)
        if self._header[:6] != _XZ_MAGIC:
            raise StreamError(f"{self.url}: data.tar.xz is not an xz stream")
        footer = self._get(start + size - 12, start + size)
        if footer[-2:] != b"YZ" or footer[8:10] != self._header[6:8]:
            raise StreamError(f"{self.url}: no xz stream footer at the end of data.tar.xz")
        index_size = (struct.unpack_from("<I", footer, 4)[0] + 1) * 4
        index = self._get(start + size - 12 - index_size, start + size - 12)
        count, at = _varint(index, 1)
        offset, tar_at = start + 12, 0
        for _ in range(count):
            unpadded, at = _varint(index, at)
            uncompressed, at = _varint(index, at)
            self._blocks.append(_Block(offset, unpadded, tar_at, uncompressed))
            offset += (unpadded + 3) & ~3
            tar_at += uncompressed

    @property
    def size(self) -> int:
        """The uncompressed tar's length."""
        return self._blocks[-1].start + self._blocks[-1].size if self._blocks else 0

    def _get(self, start: int, end: int) -> bytes:
        self.fetched += end - start
        return fetch_range(self.url, start, end)

    def _data_member(self) -> tuple[int, int]:
        """Offset and size of the ar member data.tar.xz (the .deb's last)."""
        if self._get(0, 8) != b"!<arch>\n":
            raise StreamError(f"{self.url}: not a .deb (no ar magic)")
        at = 8
        while True:
            header = self._get(at, at + 60)
            name, size = header[:16].decode().strip().rstrip("/"), int(header[48:58])
            at += 60
            if name.startswith("data.tar"):
                if name != "data.tar.xz":  # zstd or gzip would need a whole-stream read
                    raise StreamError(f"{self.url}: {name}, only data.tar.xz can be read in part")
                return at, size
            at += size + (size & 1)

    def _block(self, number: int) -> bytes:
        """Block `number`, decoded as a one-block xz stream so that its check is verified."""
        if number in self._cache:
            return self._cache[number]
        block = self._blocks[number]
        raw = self._get(block.offset, block.offset + ((block.unpadded + 3) & ~3))
        index = b"\0" + _encode_varint(1) + _encode_varint(block.unpadded)
        index += _encode_varint(block.size)
        index += b"\0" * (-len(index) % 4)
        index += struct.pack("<I", zlib.crc32(index))
        tail = struct.pack("<I", len(index) // 4 - 1) + self._header[6:8]
        footer = struct.pack("<I", zlib.crc32(tail)) + tail + b"YZ"
        decoder = lzma.LZMADecompressor(lzma.FORMAT_XZ)
        try:
            data = decoder.decompress(self._header + raw + index + footer)
        except lzma.LZMAError as error:
            raise StreamError(f"{self.url}: xz block {number}: {error}") from error
        if not decoder.eof or len(data) != block.size:
            raise StreamError(f"{self.url}: xz block {number} decoded to {len(data)} bytes")
        if len(self._cache) >= 2:  # two decoded blocks (48 MiB) at most
            self._cache.pop(next(iter(self._cache)))
        self._cache[number] = data
        return data

    def read(self, start: int, length: int) -> bytes:
        """`length` bytes of the uncompressed tar from `start`."""
        end, parts = start + length, []
        for number, block in enumerate(self._blocks):
            if block.start + block.size <= start or block.start >= end:
                continue
            data = self._block(number)
            parts.append(data[max(start - block.start, 0) : end - block.start])
        out = b"".join(parts)
        if len(out) != length:
            raise StreamError(f"{self.url}: the tar ends before byte {end}")
        return out


@dataclass(frozen=True)
class Member:
    """A tar member: its normalized path (no leading ./), type, and data's place in the tar."""

    path: str
    type: bytes
    size: int
    data: int


def members(tar: RemoteTar) -> Iterator[Member]:
    """The tar's members in order (GNU long names and pax paths resolved)."""
    at, long_name = 0, ""
    while at + _TAR_RECORD <= tar.size:
        record = tar.read(at, _TAR_RECORD)
        if record == b"\0" * _TAR_RECORD:
            return
        info = tarfile.TarInfo.frombuf(record, "utf-8", "surrogateescape")
        data, at = at + _TAR_RECORD, at + _TAR_RECORD + -(-info.size // _TAR_RECORD) * _TAR_RECORD
        if info.type == tarfile.GNUTYPE_LONGNAME:
            long_name = tar.read(data, info.size).rstrip(b"\0").decode("utf-8", "surrogateescape")
            continue
        if info.type in (tarfile.XHDTYPE, tarfile.XGLTYPE):
            for line in tar.read(data, info.size).decode("utf-8", "surrogateescape").splitlines():
                key, _, value = line.partition(" ")[2].partition("=")
                if key == "path" and info.type == tarfile.XHDTYPE:
                    long_name = value
            continue
        if info.type == tarfile.GNUTYPE_LONGLINK:
            continue  # link targets are not used: soname links come from the ELF
        path = (long_name or info.name).removeprefix("./").rstrip("/")
        long_name = ""
        yield Member(path, info.type, info.size, data)


def _wanted(path: str, directory: str) -> bool | None:
    """True for a file directly in `directory`, False to pass over, None where the walk ends
    (inside a subdirectory, or sorted after `directory`: dpkg-deb sorts by path)."""
    if path == directory or directory.startswith(path + "/") or path < directory:
        return False
    parent, _, _name = path.rpartition("/")
    if parent == directory:
        return True
    return None


@dataclass
class _Elf:
    holes: list[tuple[int, int]]  # (offset, size) in the file: the device code left out
    soname: str


def _elf_plan(tar: RemoteTar, member: Member) -> _Elf:
    """Where `member`'s .hip_fatbin lies, and its DT_SONAME ("" for neither or not ELF)."""
    header = tar.read(member.data, min(64, member.size))
    if header[:4] != b"\x7fELF" or header[4:6] != b"\x02\x01":  # ELF-64, little-endian
        return _Elf([], "")
    (shoff,) = struct.unpack_from("<Q", header, 40)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", header, 58)
    table = tar.read(member.data + shoff, shentsize * shnum)
    sections = [struct.unpack_from("<IIQQQQII", table, i * shentsize) for i in range(shnum)]

    def contents(index: int) -> bytes:
        offset, size = sections[index][4], sections[index][5]
        return tar.read(member.data + offset, size)

    names = contents(shstrndx)
    holes, soname = [], ""
    for name, kind, _flags, _addr, offset, size, link, _info in sections:
        if kind == _SHT_NOBITS:
            continue
        if names[name : names.index(b"\0", name)] == DEVICE_CODE_SECTION:
            holes.append((offset, size))
        elif kind == _SHT_DYNAMIC:
            dynamic = tar.read(member.data + offset, size)
            for at in range(0, size, 16):
                tag, value = struct.unpack_from("<qQ", dynamic, at)
                if tag == _DT_SONAME:
                    strings = contents(link)
                    soname = strings[value : strings.index(b"\0", value)].decode()
    return _Elf(sorted(holes), soname)


def _copy(tar: RemoteTar, member: Member, holes: list[tuple[int, int]], target: Path) -> int:
    """Write `member` to `target` as a sparse file, `holes` left as zeros; bytes left out."""
    target.unlink(missing_ok=True)
    kept, at = [], 0
    for offset, size in holes:
        kept.append((at, offset))
        at = offset + size
    kept.append((at, member.size))
    with target.open("wb") as out:
        out.truncate(member.size)
        for start, end in kept:
            for chunk in range(start, end, _COPY_CHUNK):
                out.seek(chunk)
                out.write(tar.read(member.data + chunk, min(_COPY_CHUNK, end - chunk)))
    target.chmod(0o644)
    return sum(size for _, size in holes)


@dataclass(frozen=True)
class Extracted:
    """What `extract_shared_objects` took from one package.

    Attributes:
        files: the paths written under the root, soname links included.
        fetched: compressed bytes downloaded.
        left_out: bytes of device code (.hip_fatbin) not extracted, uncompressed.
    """

    files: tuple[str, ...]
    fetched: int
    left_out: int


def extract_shared_objects(url: str, root: Path, directory: str = MULTIARCH) -> Extracted:
    """The regular files directly in `directory` of the .deb at `url`, under `root`, without
    their .hip_fatbin sections, plus a link from each one's soname."""
    tar, files, left_out = RemoteTar(url), [], 0
    (root / directory).mkdir(parents=True, exist_ok=True)
    for member in members(tar):
        wanted = _wanted(member.path, directory)
        if wanted is None:
            break
        if not wanted or member.type not in (tarfile.REGTYPE, tarfile.AREGTYPE):
            continue
        target = root / member.path
        elf = _elf_plan(tar, member)
        left_out += _copy(tar, member, elf.holes, target)
        files.append(member.path)
        if elf.soname and elf.soname != target.name:
            link = target.with_name(elf.soname)
            link.unlink(missing_ok=True)
            link.symlink_to(target.name)
            files.append(f"{directory}/{elf.soname}")
    return Extracted(tuple(files), tar.fetched, left_out)
