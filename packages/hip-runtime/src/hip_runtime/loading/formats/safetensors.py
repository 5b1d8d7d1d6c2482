"""safetensors checkpoints: one file, or shards listed by `model.safetensors.index.json`.

Only the header is read (8-byte little-endian length, then JSON); tensor bytes stay on disk
until the loader streams them. Everything is validated before anything is allocated: header
length within the file and under 100 MB (safetensors' own limit), JSON as the `safetensors`
package reads it (`strict_json`: UTF-8, no NaN, numbers within f64, no lone surrogates, no
struct field twice), known dtypes, shapes of at most 64 dimensions whose size in bytes fits
int64 (`check_shape`: the package refuses a size that overflows, numpy one past int64),
shape × itemsize equal to the byte length, and byte ranges that tile the data section exactly:
inside it, no overlaps, and no byte that belongs to no tensor (the package refuses such files,
so a file loads here only if it loads there). Time and memory are linear in the header: each
entry becomes a record as the parsed JSON is dropped.

`save_safetensors` writes the format (every dtype here, bf16 and f8 included), for tests,
benchmarks and users with numpy arrays in hand.

Read by hand rather than with the `safetensors` package: its readers either load tensors
(into numpy or torch memory) or memory-map them one at a time; the loader needs only the
layout, validated up front, so that it can read every byte once straight into pinned staging.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from typing import Any

import ml_dtypes
import numpy as np

from hip_runtime.loading.formats import strict_json
from hip_runtime.loading.formats.records import (
    Checkpoint,
    FormatError,
    TensorRecord,
    brief,
    check_layout,
    check_shape,
    open_regular,
)

MAX_HEADER_BYTES = 100_000_000
INDEX_NAME = "model.safetensors.index.json"
_FIELDS = frozenset({"dtype", "shape", "data_offsets"})  # a tensor entry's (serde's struct)

DTYPES: dict[str, np.dtype[Any]] = {
    "BOOL": np.dtype(np.bool_),
    "U8": np.dtype(np.uint8), "I8": np.dtype(np.int8),
    "U16": np.dtype(np.uint16), "I16": np.dtype(np.int16),
    "U32": np.dtype(np.uint32), "I32": np.dtype(np.int32),
    "U64": np.dtype(np.uint64), "I64": np.dtype(np.int64),
    "F16": np.dtype(np.float16), "BF16": np.dtype(ml_dtypes.bfloat16),
    "F32": np.dtype(np.float32), "F64": np.dtype(np.float64),
    "F8_E4M3": np.dtype(ml_dtypes.float8_e4m3fn), "F8_E5M2": np.dtype(ml_dtypes.float8_e5m2),
}  # fmt: skip


def read_safetensors(path: str | os.PathLike[str]) -> Checkpoint:
    """The validated layout of one .safetensors file (FormatError if it is malformed)."""
    path = os.fspath(path)
    records, metadata = _read_file(path)
    return Checkpoint("safetensors", (path,), tuple(records), metadata)


def read_safetensors_index(index_path: str | os.PathLike[str]) -> Checkpoint:
    """The validated layout of a sharded checkpoint from its index JSON: every shard is read
    and checked, and every name in `weight_map` must be in the shard it names."""
    index_path = os.fspath(index_path)
    try:
        with os.fdopen(open_regular(index_path), "rb") as f:
            index = json.loads(f.read())
    except (ValueError, RecursionError) as error:  # ValueError: JSONDecodeError, UTF-8, digits
        if isinstance(error, FormatError):
            raise
        raise FormatError(f"not a JSON index ({type(error).__name__})", path=index_path) from None
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in weight_map.items()
    ):
        raise FormatError("no 'weight_map' of tensor name -> shard file", path=index_path)
    folder = os.path.dirname(index_path)
    shards = list(dict.fromkeys(weight_map.values()))  # first-seen order
    records: list[TensorRecord] = []
    files = []
    for shard in shards:
        shard_path = os.path.join(folder, shard)
        if os.path.basename(shard) != shard or not os.path.isfile(shard_path):
            raise FormatError(f"shard {shard!r} is not a file next to the index", path=index_path)
        shard_records, _ = _read_file(shard_path)
        listed = {name for name, file in weight_map.items() if file == shard}
        present = {r.name for r in shard_records}
        for name in sorted(listed - present):
            raise FormatError(
                f"listed in the index but missing from {shard}", path=index_path, tensor=name
            )
        for name in sorted(present - listed):
            raise FormatError(
                f"in {shard} but not listed in the index", path=index_path, tensor=name
            )
        records.extend(shard_records)
        files.append(shard_path)
    metadata = index.get("metadata") if isinstance(index.get("metadata"), dict) else {}
    return Checkpoint("safetensors", tuple(files), tuple(records), metadata)


def _read_file(path: str) -> tuple[list[TensorRecord], dict[str, object]]:
    with os.fdopen(open_regular(path), "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < 8:
            raise FormatError(f"{size} bytes: too short for a safetensors header", path=path)
        header_bytes = int.from_bytes(f.read(8), "little")
        if header_bytes > min(size - 8, MAX_HEADER_BYTES):
            raise FormatError(
                f"header length {header_bytes} runs past the file ({size} bytes) "
                f"or over {MAX_HEADER_BYTES}", path=path,
            )  # fmt: skip
        raw = f.read(header_bytes)
    if len(raw) < header_bytes:
        raise FormatError(f"the file shrank to {8 + len(raw)} bytes while read", path=path)
    try:
        header = strict_json.loads(raw)
    except strict_json.JsonError as error:
        words = "is not" if str(error).startswith("not UTF-8") else "is not valid JSON:"
        raise FormatError(f"header {words} {error}", path=path) from None
    if not isinstance(header, dict):
        raise FormatError("header is not a JSON object", path=path)
    if "__metadata__" in getattr(header, "repeated", ()):
        raise FormatError("__metadata__ appears twice in the header", path=path)
    metadata = header.pop("__metadata__", None)
    metadata = {} if metadata is None else metadata  # null is no metadata, as for the package
    if not isinstance(metadata, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise FormatError("__metadata__ is not an object of strings", path=path)
    del raw  # not needed past here: free it before the records are made
    data_start = 8 + header_bytes
    # Each entry is dropped from the parsed header once its record is made, so that a header of
    # 10^5 tensors never holds both its JSON tree and its records at once.
    records = [_record(path, name, header.pop(name), data_start) for name in list(header)]
    records.sort(key=_offset_and_size)
    check_layout(path, data_start, size, records)
    _check_tiled(path, data_start, size, records)
    return records, dict(metadata)


def _check_tiled(path: str, data_start: int, size: int, records: list[TensorRecord]) -> None:
    """Every byte of the data section belongs to a tensor (`records` in file order, already
    inside it and not overlapping), as the package requires."""
    at = data_start
    for r in [*records, None]:
        end = size if r is None else r.offset
        if end != at:
            raise FormatError(f"bytes [{at}, {end}) of the data section belong to no tensor",
                              path=path)  # fmt: skip
        if r is not None:
            at = r.offset + r.nbytes


def _offset_and_size(record: TensorRecord) -> tuple[int, int]:
    return record.offset, record.nbytes


def _record(path: str, name: str, entry: Any, data_start: int) -> TensorRecord:
    def fail(message: str) -> FormatError:
        return FormatError(message, path=path, tensor=name)

    # An entry of the three fields only (what every writer makes) is a plain dict with no field
    # twice and nothing else to check; only odd ones take the slow path.
    if type(entry) is not dict or len(entry) != len(_FIELDS) or not _FIELDS.issuperset(entry):
        _check_odd_entry(entry, fail)
    name_of_dtype = entry.get("dtype")
    dtype = DTYPES.get(name_of_dtype) if isinstance(name_of_dtype, str) else None
    if dtype is None:
        raise fail(f"unknown dtype {brief(entry.get('dtype'))}")
    shape, offsets = entry.get("shape"), entry.get("data_offsets")
    if not isinstance(shape, list):
        raise fail(f"shape {brief(shape)} is not a list of non-negative ints")
    expected = check_shape(shape, dtype.itemsize, path=path, name=name)
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(map(_is_count, offsets)):
        raise fail(f"data_offsets {brief(offsets)} is not [begin, end]")
    begin, end = offsets
    if end < begin:
        raise fail(f"data_offsets {offsets} end before they begin")
    if end - begin != expected:
        raise fail(
            f"shape {shape} of {name_of_dtype} needs {expected} bytes, "
            f"data_offsets span {end - begin}"
        )
    return TensorRecord(name, path, data_start + begin, end - begin, tuple(shape), dtype)


def _check_odd_entry(entry: Any, fail: Callable[[str], FormatError]) -> None:
    """The checks of an entry that is not exactly the three fields: it is an object, no field
    appears twice, and any other field is valid JSON as serde reads it (it is ignored, as by the
    package, but parsed as strictly)."""
    if not isinstance(entry, dict):
        raise fail("entry is not an object")
    twice = sorted(_FIELDS & getattr(entry, "repeated", frozenset()))
    if twice:
        raise fail(f"field {twice[0]!r} appears twice in its entry")
    for field_name, value in entry.items():
        if field_name not in _FIELDS:
            try:
                strict_json.check_tree(value, strict_json.MAX_DEPTH - 2)
            except strict_json.JsonError as error:
                raise fail(f"header is not valid JSON: {error}") from None


def safetensors_header(
    tensors: Mapping[str, np.ndarray[Any, Any]], metadata: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The JSON header that `save_safetensors` writes for `tensors` (in their order)."""
    codes = {dtype: code for code, dtype in DTYPES.items()}
    header: dict[str, Any] = {"__metadata__": dict(metadata)} if metadata else {}
    offset = 0
    for name, array in tensors.items():
        code = codes.get(array.dtype)
        if code is None:
            raise ValueError(f"{name}: safetensors has no dtype for {array.dtype}")
        header[name] = {"dtype": code, "shape": list(array.shape),
                        "data_offsets": [offset, offset + array.nbytes]}  # fmt: skip
        offset += array.nbytes
    return header


def save_safetensors(
    path: str | os.PathLike[str],
    tensors: Mapping[str, Any],
    metadata: Mapping[str, str] | None = None,
    *,
    header: Mapping[str, Any] | None = None,
) -> int:
    """Write host arrays as a .safetensors file (every dtype of DTYPES, bf16 and f8 included);
    returns the file's size in bytes.

    The format as specified: an 8-byte little-endian header length, the JSON header padded
    with spaces to a multiple of 8, then each array's bytes in order. `header` replaces the
    computed header (tests use it to write malformed files)."""
    arrays = {name: np.ascontiguousarray(value) for name, value in tensors.items()}
    raw = json.dumps(header if header is not None else safetensors_header(arrays, metadata))
    encoded = raw.encode()
    encoded += b" " * (-len(encoded) % 8)
    with open(path, "wb") as f:
        f.write(len(encoded).to_bytes(8, "little") + encoded)
        for array in arrays.values():
            f.write(array.tobytes())
    return 8 + len(encoded) + sum(a.nbytes for a in arrays.values())


def _is_count(value: object) -> bool:
    """A non-negative int that fits the int64 sizes and offsets numpy and HIP use."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63


__all__ = [
    "DTYPES",
    "INDEX_NAME",
    "read_safetensors",
    "read_safetensors_index",
    "safetensors_header",
    "save_safetensors",
]
