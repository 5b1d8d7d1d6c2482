"""GGUF (llama.cpp's checkpoint format, versions 2 and 3) read into validated TensorRecords.

Our own parser rather than `gguf.GGUFReader`: that one numpy-memmaps the whole file and
allocates from its counts and lengths as it goes, while this one validates every count and
length against the file's size before allocating anything for it (a hostile header cannot make
it allocate more than a small multiple of what the file holds: arrays of numbers are numpy
arrays read straight from the file, the bytes they take there; only arrays of strings or of
arrays are lists), reads only the header, with ordinary buffered reads, and turns every fault
into a FormatError naming the file and the tensor. No tensor data is read and nothing touches
the device.

Layout (little-endian): magic "GGUF", u32 version, u64 tensor count, u64 KV count; the KVs
(string key, u32 value type, value); the tensor infos (string name, u32 n_dims, n_dims × u64
ne — ggml order, fastest dimension first —, u32 ggml type, u64 offset); padding to
`general.alignment` (default 32); the data section. A tensor's bytes start at data section +
offset, which must be a multiple of the alignment. Strings are a u64 length and UTF-8 bytes.

Supported ggml types: F32, F16, BF16 (raw records of that dtype) and Q8_0, Q4_0 (records with
encoding "q8_0"/"q4_0", dequantized on the device into `dequantize_to`; hip_runtime.ops.quantized).
"""

from __future__ import annotations

import io
import os
import struct
from typing import Any

import numpy as np

from hip_runtime.loading.formats.records import (
    Checkpoint,
    FormatError,
    TensorRecord,
    check_layout,
    check_shape,
    open_regular,
    stored_nbytes,
)
from hip_runtime.tensors.dtypes import DTypeLike, bfloat16, float16, float32, float_type

MAGIC = b"GGUF"
VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4  # GGML_MAX_DIMS

_FIXED = struct.Struct("<4sIQQ")  # magic, version, tensor count, KV count
_U32, _U64 = struct.Struct("<I"), struct.Struct("<Q")
_DIMS = {n: struct.Struct(f"<{n}q") for n in range(1, MAX_DIMS + 1)}  # ne, read as signed
_CHUNK = 1 << 20  # header bytes read at a time
_MAX_NESTING = 8  # arrays of arrays deeper than this are refused (bounded recursion)
# Smallest encodings, for bounding counts by the bytes left: a KV is a key length, a value
# type and at least one byte of value; a tensor info a name length, n_dims, one dimension, a
# type and an offset.
_MIN_KV_BYTES = 8 + 4 + 1
_MIN_TENSOR_INFO_BYTES = 8 + 4 + 8 + 4 + 8

# GGUF metadata value types: scalars as (numpy dtype, struct); 8 is a string, 9 an array.
_STRING, _ARRAY = 8, 9
_SCALARS: dict[int, tuple[str, struct.Struct]] = {
    code: (dtype, struct.Struct("<" + fmt))
    for code, dtype, fmt in (
        (0, "<u1", "B"), (1, "<i1", "b"), (2, "<u2", "H"), (3, "<i2", "h"), (4, "<u4", "I"),
        (5, "<i4", "i"), (6, "<f4", "f"), (7, "<u1", "B"), (10, "<u8", "Q"), (11, "<i8", "q"),
        (12, "<f8", "d"),
    )
}  # fmt: skip
_BOOL = 7

# ggml types this reader takes: number -> (name, stored dtype or None if quantized, encoding).
# The numbers are ggml's (gguf.GGMLQuantizationType).
GGML_TYPES: dict[int, tuple[str, np.dtype[Any] | None, str]] = {
    0: ("F32", float32, "raw"),
    1: ("F16", float16, "raw"),
    2: ("Q4_0", None, "q4_0"),
    8: ("Q8_0", None, "q8_0"),
    30: ("BF16", bfloat16, "raw"),
}
# Every ggml type's name by number (0, 1, 2…), for error messages.
_GGML_TYPE_NAMES = (
    "F32 F16 Q4_0 Q4_1 Q4_2 Q4_3 Q5_0 Q5_1 Q8_0 Q8_1 Q2_K Q3_K Q4_K Q5_K Q6_K Q8_K IQ2_XXS IQ2_XS "
    "IQ3_XXS IQ1_S IQ4_NL IQ3_S IQ2_S IQ4_XS I8 I16 I32 I64 F64 IQ1_M BF16 Q4_0_4_4 Q4_0_4_8 "
    "Q4_0_8_8 TQ1_0 TQ2_0 IQ4_NL_4_4 IQ4_NL_4_8 IQ4_NL_8_8 MXFP4 NVFP4 Q1_0"
)
_OTHER_GGML_TYPES = dict(enumerate(_GGML_TYPE_NAMES.split()))


class _Reader:
    """Little-endian reads from the header of an open file, in chunks; every read is checked
    against the bytes the file has left first. Errors name `tensor` when it is set."""

    def __init__(self, file: io.RawIOBase, path: str, size: int) -> None:
        self._file, self.path, self.size = file, path, size
        self._buffer = b""
        self._start = 0  # file offset of _buffer[0]
        self._pos = 0  # read position in _buffer
        self.tensor: str | None = None

    @property
    def offset(self) -> int:
        return self._start + self._pos

    @property
    def left(self) -> int:
        return self.size - self.offset

    def error(self, message: str) -> FormatError:
        return FormatError(message, path=self.path, tensor=self.tensor)

    def _need(self, n: int, what: str) -> None:
        if self._pos + n <= len(self._buffer):
            return
        if n > self.left:
            raise self.error(
                f"truncated: {what} needs {n} bytes at offset {self.offset}, "
                f"the file ends at {self.size}"
            )
        tail = self._buffer[self._pos :]
        self._start = self.offset
        self._buffer = tail + self._file.read(max(n - len(tail), _CHUNK))
        self._pos = 0
        if len(self._buffer) < n:  # the file shrank while we read it
            raise self.error(f"truncated: {what} at offset {self.offset}")

    def take(self, n: int, what: str) -> bytes:
        self._need(n, what)
        data = self._buffer[self._pos : self._pos + n]
        self._pos += n
        return data

    def array(self, n: int, dtype: np.dtype[Any], what: str) -> np.ndarray[Any, Any]:
        """The next `n` items of `dtype` as a read-only array. A large one is read from the
        file straight into the array, so it is held once (a Python list of 5M numbers would
        take ~40 bytes an item, and reading through the buffer would copy it twice)."""
        nbytes = n * dtype.itemsize
        if nbytes <= _CHUNK or self._pos + nbytes <= len(self._buffer):
            return np.frombuffer(self.take(nbytes, what), dtype)  # read-only: over bytes
        if nbytes > self.left:
            self._need(nbytes, what)  # raises the truncation error
        out = np.empty(nbytes, np.uint8)
        done = len(self._buffer) - self._pos  # what the buffer holds of it: all it has left
        out[:done] = np.frombuffer(self._buffer, np.uint8, offset=self._pos)
        view = out.data
        while done < nbytes:
            got = self._file.readinto(view[done:])
            if not got:  # the file shrank while we read it
                raise self.error(f"truncated: {what} at offset {self.offset + done}")
            done += got
        self._start, self._buffer, self._pos = self.offset + nbytes, b"", 0
        out.flags.writeable = False
        return out.view(dtype)

    def unpack(self, layout: struct.Struct, what: str) -> Any:
        self._need(layout.size, what)
        values = layout.unpack_from(self._buffer, self._pos)
        self._pos += layout.size
        return values[0] if len(values) == 1 else values

    def count(self, what: str, item_bytes: int) -> int:
        """The u64 length of `what`, in items of at least `item_bytes` each, bounded by the
        bytes the file has left (so nothing is allocated for what the file cannot hold)."""
        n: int = self.unpack(_U64, f"the length of {what}")
        if n * item_bytes > self.left:
            raise self.error(
                f"the length of {what}, {n}, needs at least {n * item_bytes} bytes; only "
                f"{self.left} are left at offset {self.offset}"
            )
        return n

    def string(self, what: str) -> str:
        n = self.count(what, 1)
        raw = self.take(n, what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise self.error(f"{what} is not UTF-8: {error}") from None


def _value(reader: _Reader, kind: int, what: str, depth: int = 0) -> object:
    """One metadata value of GGUF value type `kind`: a Python scalar or string, a read-only
    1-D numpy array for an array of numbers or bools, a list for an array of strings or of
    arrays."""
    scalar = _SCALARS.get(kind)
    if scalar is not None:
        value = reader.unpack(scalar[1], what)
        return bool(value) if kind == _BOOL else value
    if kind == _STRING:
        return reader.string(what)
    if kind != _ARRAY:
        raise reader.error(f"{what} has unknown value type {kind}")
    if depth >= _MAX_NESTING:
        raise reader.error(f"{what} nests arrays more than {_MAX_NESTING} deep")
    item = reader.unpack(_U32, f"the item type of {what}")
    scalar = _SCALARS.get(item)
    if scalar is not None:
        dtype, layout = scalar
        n = reader.count(what, layout.size)
        values = reader.array(n, np.dtype(dtype), what)
        if item == _BOOL:
            values = values != 0
            values.flags.writeable = False
        return values
    if item == _STRING:
        n = reader.count(what, 8)
        return [reader.string(f"{what}[{i}]") for i in range(n)]
    if item == _ARRAY:
        n = reader.count(what, 4 + 8)
        return [_value(reader, _ARRAY, f"{what}[{i}]", depth + 1) for i in range(n)]
    raise reader.error(f"{what} is an array of unknown value type {item}")


def _metadata(reader: _Reader, kv_count: int) -> dict[str, object]:
    metadata: dict[str, object] = {}
    for i in range(kv_count):
        key = reader.string(f"key {i}")
        if key in metadata:
            raise reader.error(f"metadata key {key!r} appears twice")
        kind = reader.unpack(_U32, f"the value type of metadata {key!r}")
        metadata[key] = _value(reader, kind, f"metadata {key!r}")
    return metadata


def _alignment(metadata: dict[str, object], path: str) -> int:
    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if (
        isinstance(alignment, bool)
        or not isinstance(alignment, int)
        or alignment <= 0
        or alignment & (alignment - 1)
    ):
        raise FormatError(f"general.alignment must be a power of two, not {alignment!r}", path=path)
    return alignment


def _type_name(ggml_type: int) -> str:
    name = _OTHER_GGML_TYPES.get(ggml_type)
    return f"{name} ({ggml_type})" if name else f"unknown ({ggml_type})"


def _tensor_info(reader: _Reader, index: int) -> tuple[str, tuple[int, ...], int, int]:
    """(name, shape in numpy order, ggml type, offset) of the next tensor info."""
    reader.tensor = None
    name = reader.string(f"the name of tensor info {index}")
    reader.tensor = name
    n_dims = reader.unpack(_U32, "n_dims")
    if not 1 <= n_dims <= MAX_DIMS:
        raise reader.error(f"n_dims is {n_dims}; GGUF tensors have 1 to {MAX_DIMS}")
    ne = reader.unpack(_DIMS[n_dims], "dimensions")
    ne = (ne,) if n_dims == 1 else ne
    if min(ne) <= 0:
        raise reader.error(f"dimensions {list(ne)} must all be positive")
    ggml_type = reader.unpack(_U32, "ggml type")
    offset = reader.unpack(_U64, "offset")
    return name, tuple(reversed(ne)), ggml_type, offset


def read_gguf(path: str | os.PathLike[str], *, dequantize_to: DTypeLike = float32) -> Checkpoint:
    """The validated Checkpoint of GGUF file `path` (versions 2 and 3, little-endian).

    F32/F16/BF16 tensors become "raw" records of float32/float16/bfloat16; Q8_0/Q4_0 tensors
    records with encoding "q8_0"/"q4_0" and dtype `dequantize_to` (float32, float16 or
    bfloat16; ValueError otherwise). Shapes are numpy order (ggml's `ne` reversed), records
    keep the file's order, metadata holds every KV as a Python value, arrays of numbers or bools
    as read-only 1-D numpy arrays of the file's type (arrays of strings or arrays as lists).

    Raises FormatError (naming the file, and the tensor where one is at fault) for a file
    that is not GGUF or is truncated, an unsupported version, counts or lengths the file cannot
    hold, an unknown value type, an unsupported ggml type, bad dimensions (not positive, or a
    size on the device of 2**63 bytes or more), duplicate names, misaligned offsets, byte
    ranges outside the data section or overlapping, and quantized rows that are not whole
    blocks. Reads only the header; synchronous; no device work.
    """
    quantized_dtype = float_type(dequantize_to, "dequantize_to").dtype
    name = os.fspath(path)
    with os.fdopen(open_regular(name), "rb", buffering=0) as file:
        size = os.fstat(file.fileno()).st_size
        if size < _FIXED.size:
            raise FormatError(
                f"{size} bytes is shorter than the {_FIXED.size}-byte GGUF header", path=name
            )
        reader = _Reader(file, name, size)
        magic, version, tensor_count, kv_count = reader.unpack(_FIXED, "header")
        if magic != MAGIC:
            raise FormatError(f"not a GGUF file (magic {magic!r}, expected {MAGIC!r})", path=name)
        if version not in VERSIONS:
            swapped = version & 0xFFFF == 0 and version >> 16 in VERSIONS
            what = "big-endian GGUF" if swapped else f"GGUF version {version}"
            raise FormatError(f"{what} is not supported (versions 2 and 3)", path=name)
        least = tensor_count * _MIN_TENSOR_INFO_BYTES + kv_count * _MIN_KV_BYTES
        if least > reader.left:
            raise FormatError(
                f"{tensor_count} tensors and {kv_count} metadata entries need at least {least} "
                f"header bytes; the file has {reader.left} after the fixed header",
                path=name,
            )
        metadata = _metadata(reader, kv_count)
        infos = [_tensor_info(reader, i) for i in range(tensor_count)]
        header_end = reader.offset
    alignment = _alignment(metadata, name)
    data_start = -(-header_end // alignment) * alignment
    records, seen = [], set()
    for tensor, shape, ggml_type, offset in infos:
        if tensor in seen:
            raise FormatError("appears twice", path=name, tensor=tensor)
        seen.add(tensor)
        supported = GGML_TYPES.get(ggml_type)
        if supported is None:
            supported_names = ", ".join(n for n, _, _ in GGML_TYPES.values())
            raise FormatError(
                f"ggml type {_type_name(ggml_type)} is not supported ({supported_names})",
                path=name, tensor=tensor,
            )  # fmt: skip
        stored, encoding = supported[1], supported[2]
        if offset % alignment:
            raise FormatError(
                f"offset {offset} is not a multiple of the alignment {alignment}",
                path=name, tensor=tensor,
            )  # fmt: skip
        dtype = stored if stored is not None else quantized_dtype
        # Its bytes on the device fit int64 (so its element count does, as ggml requires).
        check_shape(shape, dtype.itemsize, path=name, name=tensor)
        nbytes = stored_nbytes(shape, dtype.itemsize, encoding, path=name, name=tensor)
        records.append(
            TensorRecord(tensor, name, data_start + offset, nbytes, shape, dtype, encoding)
        )
    check_layout(name, data_start, size, records)
    return Checkpoint("gguf", (name,), tuple(records), metadata)


__all__ = ["DEFAULT_ALIGNMENT", "GGML_TYPES", "MAGIC", "VERSIONS", "read_gguf"]
