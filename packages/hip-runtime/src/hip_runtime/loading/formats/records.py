"""What a checkpoint holds, independent of its file format: tensor records and FormatError.

A reader (safetensors, GGUF) parses and validates a file's header into `TensorRecord`s without
reading tensor data and without touching the device. Everything the loader needs is here: which
bytes of which file, and what device tensor they become.
"""

from __future__ import annotations

import functools
import itertools
import math
import os
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hip_runtime.ops.quantized import BLOCK_ENCODINGS

#: Most dimensions a tensor may have: numpy's own limit (NPY_MAXDIMS), so that every record's
#: shape is also a host array's. The safetensors package sets none, but its numpy reader cannot
#: load such a tensor either, and a bound keeps every check of a hostile shape short.
MAX_DIMS = 64
#: Sizes, offsets and element counts are int64 on the host (numpy's intp) and in HIP's calls.
INT64_LIMIT = 2**63


class FormatError(ValueError):
    """A checkpoint file is malformed. `path` names the file, `tensor` the tensor (or None when
    the fault is in the file as a whole). Raised before any device memory is allocated."""

    def __init__(self, message: str, *, path: str, tensor: str | None = None) -> None:
        where = f"{path}: tensor {tensor!r}: " if tensor is not None else f"{path}: "
        super().__init__(where + message)
        self.path = path
        self.tensor = tensor


@dataclass(frozen=True, slots=True)  # slots: a checkpoint may hold 10^5 or more of them
class TensorRecord:
    """One tensor of a checkpoint.

    Attributes:
        name: the tensor's name in the checkpoint.
        path: the file holding its bytes.
        offset: absolute position of the first byte in that file.
        nbytes: bytes stored in the file.
        shape: the device tensor's shape (row-major, numpy order).
        dtype: the device tensor's dtype (for a quantized record: what it is dequantized to).
        encoding: "raw" (the stored bytes are the tensor) or a key of BLOCK_ENCODINGS (blocks
            dequantized on the device into `dtype`).
    """

    name: str
    path: str
    offset: int
    nbytes: int
    shape: tuple[int, ...]
    dtype: np.dtype
    encoding: str = "raw"

    @property
    def count(self) -> int:
        return math.prod(self.shape)

    @property
    def device_nbytes(self) -> int:
        """Bytes of the tensor on the device."""
        return self.count * self.dtype.itemsize


@dataclass(frozen=True)
class Checkpoint:
    """A validated checkpoint: its files, its tensors in file order, and its metadata."""

    format: str  # "safetensors" or "gguf"
    files: tuple[str, ...]
    tensors: tuple[TensorRecord, ...]
    metadata: Mapping[str, object] = field(default_factory=dict)

    @property
    def file_bytes(self) -> int:
        """Bytes of tensor data read from storage."""
        return sum(t.nbytes for t in self.tensors)

    @property
    def device_bytes(self) -> int:
        """Bytes the tensors take on the device (unpadded)."""
        return sum(t.device_nbytes for t in self.tensors)

    def __getitem__(self, name: str) -> TensorRecord:
        return self._by_name[name]

    @functools.cached_property
    def _by_name(self) -> dict[str, TensorRecord]:
        return {record.name: record for record in self.tensors}


#: What a path that is not a regular file is, by its stat.S_IFMT bits.
_KINDS = {
    stat.S_IFDIR: "a directory", stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
}  # fmt: skip


def open_regular(path: str) -> int:
    """A read-only descriptor of the regular file at `path` (the caller closes it).

    Anything else is a FormatError naming the path: a FIFO would block `open()` until a writer
    came, a device or a directory is no checkpoint. The path is checked with `stat` before it is
    opened, so no device is ever opened, and the open itself is non-blocking and checked again
    with `fstat`, so a FIFO swapped in between cannot block it either. FileNotFoundError (and
    other OSErrors, e.g. permissions) propagate as they are: they name the path.
    """
    _check_regular(path, os.stat(path).st_mode)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        _check_regular(path, os.fstat(fd).st_mode)
        os.set_blocking(fd, True)  # reads of a regular file ignore it; keep the usual flags
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_regular(path: str, mode: int) -> None:
    if not stat.S_ISREG(mode):
        kind = _KINDS.get(stat.S_IFMT(mode), "a special file")
        raise FormatError(f"is {kind}, not a regular file", path=path)


def _is_dim(value: object) -> bool:
    return bool(
        isinstance(value, (int, np.integer))
        and not isinstance(value, (bool, np.bool_))
        and 0 <= value < INT64_LIMIT
    )


def brief(value: object) -> str:
    """`value`'s repr for a message, cut short: a hostile header's shape may hold 80,000
    dimensions of 19 digits, or a field megabytes of JSON."""
    text = repr(value)
    return text if len(text) <= 200 else f"{text[:200]}... ({len(text)} characters)"


def check_shape(shape: Sequence[Any], itemsize: int, *, path: str, name: str) -> int:
    """The bytes a tensor of `shape` takes with items of `itemsize` bytes, once `shape` is
    checked to be a tensor's: at most MAX_DIMS dimensions, each a non-negative int, and the
    product of the non-zero ones times `itemsize` below 2**63. FormatError naming the tensor
    otherwise.

    That product is numpy's rule (it refuses to make an array whose bytes, its zero dimensions
    left out, overflow intp) and is stricter than the safetensors package's, which refuses a
    shape when a product of its leading dimensions overflows u64, so [2**62, 2**62, 0] but not
    [0, 2**62, 2**62]: every shape it refuses is refused here. Linear in the dimensions, and no
    product computed here exceeds 2**126, however hostile the shape (a product of 80,000 huge
    dimensions would take minutes)."""
    if len(shape) > MAX_DIMS:
        raise FormatError(
            f"shape has {len(shape)} dimensions; at most {MAX_DIMS} are allowed",
            path=path, tensor=name,
        )  # fmt: skip
    if not all(map(_is_dim, shape)):
        raise FormatError(f"shape {brief(list(shape))} is not a list of non-negative ints",
                          path=path, tensor=name)  # fmt: skip
    size, empty = itemsize, False
    for dim in shape:
        if dim == 0:
            empty = True
            continue
        size *= int(dim)
        if size >= INT64_LIMIT:
            raise FormatError(
                f"shape {brief(list(shape))} of {itemsize}-byte items overflows: its size "
                f"(zero dimensions left out) is 2**63 bytes or more", path=path, tensor=name,
            )  # fmt: skip
    return 0 if empty else size


def stored_nbytes(
    shape: tuple[int, ...], itemsize: int, encoding: str, *, path: str, name: str
) -> int:
    """Bytes a tensor of `shape` takes in a file with `encoding` (FormatError if a quantized
    tensor's row is not a whole number of blocks)."""
    count = math.prod(shape)
    if encoding == "raw":
        return count * itemsize
    per_block, block_bytes = BLOCK_ENCODINGS[encoding]
    row = shape[-1] if shape else 1
    if row % per_block:
        raise FormatError(
            f"{encoding} rows must be a multiple of {per_block} elements, not {row}",
            path=path,
            tensor=name,
        )
    return count // per_block * block_bytes


def check_layout(
    path: str, data_start: int, file_size: int, records: Iterable[TensorRecord]
) -> None:
    """Every record's bytes lie in [data_start, file_size) and no two overlap; FormatError
    naming the tensor otherwise."""
    spans = []
    for r in records:
        if r.offset < data_start or r.nbytes < 0 or r.offset + r.nbytes > file_size:
            raise FormatError(
                f"bytes [{r.offset}, {r.offset + r.nbytes}) lie outside the data section "
                f"[{data_start}, {file_size})",
                path=path,
                tensor=r.name,
            )
        spans.append((r.offset, r.offset + r.nbytes, r.name))
    spans.sort()
    for (_, end, first), (start, _, second) in itertools.pairwise(spans):
        if start < end:
            message = f"its bytes overlap those of tensor {first!r}"
            raise FormatError(message, path=path, tensor=second)


def check_checkpoint(checkpoint: Checkpoint) -> None:
    """The checks every reader makes, on any Checkpoint (one built by hand too) before the
    loader sizes device memory from it: unique names, known encodings, each record in one of
    the checkpoint's files, stored bytes matching shape and dtype, ranges inside the file and
    not overlapping. FormatError naming the file and tensor otherwise."""
    files = set(checkpoint.files)
    names: set[str] = set()
    by_file: dict[str, list[TensorRecord]] = {path: [] for path in checkpoint.files}
    for r in checkpoint.tensors:
        if r.name in names:
            raise FormatError("appears twice in the checkpoint", path=r.path, tensor=r.name)
        names.add(r.name)
        if r.path not in files:
            raise FormatError("is not one of the checkpoint's files", path=r.path, tensor=r.name)
        if r.encoding != "raw" and r.encoding not in BLOCK_ENCODINGS:
            raise FormatError(f"unknown encoding {r.encoding!r}", path=r.path, tensor=r.name)
        check_shape(r.shape, r.dtype.itemsize, path=r.path, name=r.name)
        expected = stored_nbytes(r.shape, r.dtype.itemsize, r.encoding, path=r.path, name=r.name)
        if r.nbytes != expected:
            raise FormatError(
                f"holds {r.nbytes} bytes; shape {r.shape} of {r.dtype} ({r.encoding}) "
                f"takes {expected}", path=r.path, tensor=r.name,
            )  # fmt: skip
        by_file[r.path].append(r)
    for path, records in by_file.items():
        check_layout(path, 0, os.path.getsize(path), records)
