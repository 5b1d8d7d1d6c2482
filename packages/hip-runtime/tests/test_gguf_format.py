"""read_gguf against the gguf package's own writer and reader, and a corrupt-file suite.

Good files are written with gguf.GGUFWriter (tensors of odd shapes in every supported type,
metadata of every value type) and read back with both readers. Bad files are built byte by
byte (`gguf_bytes`) or cut from good ones; each must raise FormatError naming the file, and
the tensor where one is at fault.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gguf
import ml_dtypes
import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q

from hip_runtime.loading.formats.gguf import GGML_TYPES, read_gguf
from hip_runtime.loading.formats.records import FormatError

# (name, numpy shape, type): 1-D to 3-D, rows that are odd (raw) or odd multiples of 32.
SPECS = [
    ("tok_embd.weight", (3, 5, 7), Q.F32),
    ("norm.weight", (11,), Q.F16),
    ("proj.bias", (2, 3), Q.BF16),
    ("blk.0.q8", (3, 96), Q.Q8_0),
    ("blk.0.q4", (2, 3, 160), Q.Q4_0),
    ("blk.1.q8", (32,), Q.Q8_0),
    ("blk.1.q4", (5, 32), Q.Q4_0),
]
EXPECTED_TYPE = {
    Q.F32: (np.dtype(np.float32), "raw"),
    Q.F16: (np.dtype(np.float16), "raw"),
    Q.BF16: (np.dtype(ml_dtypes.bfloat16), "raw"),
    Q.Q8_0: (None, "q8_0"),
    Q.Q4_0: (None, "q4_0"),
}


def stored(values: np.ndarray, qtype: Q) -> np.ndarray:
    """`values` as the writer takes them for `qtype`."""
    if qtype == Q.F32:
        return values.astype(np.float32)
    if qtype == Q.F16:
        return values.astype(np.float16)
    return np.asarray(gguf.quants.quantize(values.astype(np.float32), qtype))


def write_gguf(
    path: Path, specs: Sequence[tuple[str, tuple[int, ...], Q]], *, alignment: int | None = None
) -> None:
    rng = np.random.default_rng(7)
    writer = gguf.GGUFWriter(str(path), "llama")
    if alignment is not None:
        writer.add_custom_alignment(alignment)
    writer.add_uint8("t.u8", 200)
    writer.add_int8("t.i8", -100)
    writer.add_uint16("t.u16", 60000)
    writer.add_int16("t.i16", -30000)
    writer.add_uint32("t.u32", 4_000_000_000)
    writer.add_int32("t.i32", -2_000_000_000)
    writer.add_float32("t.f32", 0.1)
    writer.add_uint64("t.u64", 2**63 + 5)
    writer.add_int64("t.i64", -(2**62))
    writer.add_float64("t.f64", 1e300)
    writer.add_bool("t.bool", True)
    writer.add_string("t.str", "héllo, wörld")
    writer.add_array("t.ints", [1, -2, 3])
    writer.add_array("t.floats", [0.5, -1.25])
    writer.add_array("t.strs", ["a", "", "ünïcode"])
    writer.add_array("t.bools", [True, False, True])
    writer.add_array("t.empty", [])
    for name, shape, qtype in specs:
        values = rng.standard_normal(shape).astype(np.float32)
        raw_dtype = None if qtype in (Q.F32, Q.F16) else qtype
        writer.add_tensor(name, stored(values, qtype), raw_dtype=raw_dtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("gguf") / "model.gguf"
    write_gguf(path, SPECS)
    return path


def test_ggml_type_numbers_are_ggmls() -> None:
    assert {number: name for number, (name, _, _) in GGML_TYPES.items()} == {
        Q[name].value: name for name in ("F32", "F16", "Q4_0", "Q8_0", "BF16")
    }
    assert (Q.F32, Q.F16, Q.Q4_0, Q.Q8_0, Q.BF16) == (0, 1, 2, 8, 30)


@pytest.mark.parametrize("target", ["float32", "float16", "bfloat16"])
def test_records_match_gguf_reader(good: Path, target: str) -> None:
    dequantize_to = np.dtype(ml_dtypes.bfloat16) if target == "bfloat16" else np.dtype(target)
    checkpoint = read_gguf(good, dequantize_to=dequantize_to)
    reference = gguf.GGUFReader(good)
    assert checkpoint.format == "gguf" and checkpoint.files == (str(good),)
    assert [r.name for r in checkpoint.tensors] == [name for name, _, _ in SPECS]
    assert len(reference.tensors) == len(checkpoint.tensors)
    for record, theirs, (_, shape, qtype) in zip(
        checkpoint.tensors, reference.tensors, SPECS, strict=True
    ):
        assert record.name == theirs.name and record.path == str(good)
        assert record.shape == tuple(reversed(theirs.shape.tolist())) == shape
        assert theirs.tensor_type == qtype
        assert record.offset == theirs.data_offset
        assert record.offset % reference.alignment == 0
        assert record.nbytes == theirs.n_bytes == theirs.data.nbytes
        dtype, encoding = EXPECTED_TYPE[qtype]
        assert record.encoding == encoding
        assert record.dtype == (dtype if dtype is not None else dequantize_to)
        with open(good, "rb") as file:  # the record's bytes are the tensor's stored bytes
            file.seek(record.offset)
            assert file.read(record.nbytes) == theirs.data.tobytes()
    assert checkpoint.file_bytes == sum(t.n_bytes for t in reference.tensors)


def test_metadata_matches_gguf_reader(good: Path) -> None:
    metadata = read_gguf(good).metadata
    fields = {k: f for k, f in gguf.GGUFReader(good).fields.items() if not k.startswith("GGUF.")}
    assert list(metadata) == list(fields)
    for key, field in fields.items():
        theirs = field.contents()
        theirs = theirs.tolist() if isinstance(theirs, np.ndarray) else theirs
        ours = metadata[key]
        if isinstance(ours, np.ndarray):  # arrays of numbers and bools: read-only, 1-D
            assert ours.ndim == 1 and not ours.flags.writeable, key
            ours = ours.tolist()
        assert ours == theirs, key
        assert type(ours) in (int, float, bool, str, list), key
    assert metadata["t.u64"] == 2**63 + 5 and metadata["t.i8"] == -100
    assert metadata["t.f32"] == float(np.float32(0.1)) and metadata["t.bool"] is True
    assert metadata["t.strs"] == ["a", "", "ünïcode"]
    for key, dtype in (("t.ints", np.int32), ("t.floats", np.float32), ("t.bools", np.bool_)):
        assert isinstance(metadata[key], np.ndarray) and metadata[key].dtype == dtype, key
    assert metadata["t.bools"].tolist() == [True, False, True]


def test_custom_alignment_and_version_2(tmp_path: Path) -> None:
    path = tmp_path / "aligned.gguf"
    write_gguf(path, SPECS[:4], alignment=64)
    reference = gguf.GGUFReader(path)
    records = read_gguf(path).tensors
    assert [r.offset for r in records] == [t.data_offset for t in reference.tensors]
    assert all(r.offset % 64 == 0 for r in records)
    data = bytearray(path.read_bytes())
    data[4:8] = struct.pack("<I", 2)  # v2 has v3's layout (v3 added big-endian files)
    path.write_bytes(bytes(data))
    assert read_gguf(path).tensors == records


def test_many_tensors_keep_file_order(tmp_path: Path) -> None:
    path = tmp_path / "many.gguf"
    specs = [(f"blk.{i}.w", (1 + i % 3, 32), (Q.F32, Q.Q8_0, Q.Q4_0)[i % 3]) for i in range(3000)]
    write_gguf(path, specs)
    checkpoint = read_gguf(path)
    assert [r.name for r in checkpoint.tensors] == [name for name, _, _ in specs]
    assert checkpoint["blk.2999.w"].encoding == "q4_0"
    assert checkpoint["blk.2997.w"].encoding == "raw"


def test_dequantize_to_must_be_a_float_type(good: Path) -> None:
    with pytest.raises(ValueError, match="dequantize_to has dtype int32"):
        read_gguf(good, dequantize_to=np.int32)


# --- corrupt files ---------------------------------------------------------------------------


def gstr(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(raw)) + raw


def kv(key: str, kind: int, payload: bytes) -> bytes:
    return gstr(key) + struct.pack("<I", kind) + payload


def info(name: str | bytes, ne: Sequence[int], ggml_type: int, offset: int) -> bytes:
    dims = struct.pack(f"<I{len(ne)}Q", len(ne), *(d % 2**64 for d in ne))
    return gstr(name) + dims + struct.pack("<IQ", ggml_type, offset)


def gguf_bytes(
    tensors: Sequence[bytes] = (),
    kvs: Sequence[bytes] = (),
    *,
    data: int = 256,
    magic: bytes = b"GGUF",
    version: int = 3,
    counts: tuple[int, int] | None = None,
) -> bytes:
    """A GGUF file from encoded tensor infos and KVs, `data` bytes of data after the header
    (padded to 32)."""
    n_tensors, n_kvs = counts if counts is not None else (len(tensors), len(kvs))
    header = magic + struct.pack("<IQQ", version, n_tensors, n_kvs) + b"".join(kvs)
    header += b"".join(tensors)
    header += b"\0" * (-len(header) % 32)
    return header + bytes(range(256)) * (data // 256) + b"\7" * (data % 256)


F32, Q8_0, Q4_0 = 0, 8, 2
ALIGN = kv("general.alignment", 4, struct.pack("<I", 32))
CORRUPT: dict[str, tuple[bytes, str, str | None]] = {
    "empty": (b"", "0 bytes is shorter than the 24-byte GGUF header", None),
    "short": (b"GGUF\3\0\0\0", "8 bytes is shorter", None),
    "bad magic": (gguf_bytes(magic=b"GGML"), r"not a GGUF file \(magic b'GGML'", None),
    "version 1": (gguf_bytes(version=1), r"GGUF version 1 is not supported \(versions", None),
    "version 4": (gguf_bytes(version=4), "GGUF version 4 is not supported", None),
    "big-endian": (gguf_bytes(version=3 << 16), "big-endian GGUF is not supported", None),
    "hostile tensor count": (gguf_bytes(counts=(2**40, 0)), "1099511627776 tensors and 0", None),
    "hostile kv count": (gguf_bytes(counts=(0, 2**63)), "need at least", None),
    "hostile key length": (
        gguf_bytes([], [struct.pack("<Q", 2**62) + b"x" * 20]),
        "the length of key 0, 4611686018427387904, needs at least 4611686018427387904 bytes; "
        r"only \d+ are left at offset 32",
        None,
    ),
    "hostile string length": (
        gguf_bytes([], [kv("s", 8, struct.pack("<Q", 2**60))]),
        "the length of metadata 's', 1152921504606846976, needs",
        None,
    ),
    "hostile array length": (
        gguf_bytes([], [kv("a", 9, struct.pack("<IQ", 10, 2**61))]),
        "the length of metadata 'a', 2305843009213693952, needs at least 18446744073709551616",
        None,
    ),
    "hostile string array": (
        gguf_bytes([], [kv("a", 9, struct.pack("<IQ", 8, 2**40))]),
        "the length of metadata 'a', 1099511627776, needs at least 8796093022208 bytes",
        None,
    ),
    "hostile name length": (
        gguf_bytes([struct.pack("<Q", 2**50) + b"\0" * 40]),
        "the length of the name of tensor info 0, 1125899906842624, needs",
        None,
    ),
    "unknown value type": (
        gguf_bytes([], [kv("k", 13, b"\0" * 8)]),
        "metadata 'k' has unknown value type 13",
        None,
    ),
    "unknown array type": (
        gguf_bytes([], [kv("k", 9, struct.pack("<IQ", 99, 1))]),
        "metadata 'k' is an array of unknown value type 99",
        None,
    ),
    "nested too deep": (
        gguf_bytes([], [kv("k", 9, struct.pack("<IQ", 9, 1) * 9 + struct.pack("<IQ", 4, 0))]),
        "nests arrays more than 8 deep",
        None,
    ),
    "duplicate key": (gguf_bytes([], [ALIGN, ALIGN]), "'general.alignment' appears twice", None),
    "bad alignment": (
        gguf_bytes([], [kv("general.alignment", 4, struct.pack("<I", 48))]),
        "general.alignment must be a power of two, not 48",
        None,
    ),
    "key not utf-8": (
        gguf_bytes([], [gstr(b"\xff\xfe") + struct.pack("<II", 4, 0)]),
        "key 0 is not UTF-8",
        None,
    ),
    "unknown ggml type": (
        gguf_bytes([info("w", [4], 99, 0)]),
        r"ggml type unknown \(99\) is not",
        "w",
    ),
    "unsupported ggml type": (
        gguf_bytes([info("w", [256], 12, 0)]),
        r"ggml type Q4_K \(12\) is not supported \(F32, F16, Q4_0, Q8_0, BF16\)",
        "w",
    ),
    "n_dims 0": (gguf_bytes([info("w", [], F32, 0)]), "n_dims is 0; GGUF tensors have 1 to 4", "w"),
    "n_dims 5": (gguf_bytes([info("w", [1] * 5, F32, 0)]), "n_dims is 5", "w"),
    "zero dim": (gguf_bytes([info("w", [4, 0], F32, 0)]), r"dimensions \[4, 0\] must all be", "w"),
    "negative dim": (gguf_bytes([info("w", [-4], F32, 0)]), r"dimensions \[-4\]", "w"),
    "element count past int64": (
        gguf_bytes([info("w", [2**32, 2**31], F32, 0)]),
        r"shape \[2147483648, 4294967296\] of 4-byte items overflows",
        "w",
    ),
    "dequantized size past int64": (  # 2**61 elements fit int64; as f32 on the device they don't
        gguf_bytes([info("w", [2**58, 8], Q8_0, 0)]),
        "of 4-byte items overflows",
        "w",
    ),
    "duplicate names": (
        gguf_bytes([info("w", [4], F32, 0), info("w", [4], F32, 32)]),
        "appears twice",
        "w",
    ),
    "misaligned offset": (
        gguf_bytes([info("w", [4], F32, 0), info("v", [4], F32, 40)]),
        "offset 40 is not a multiple of the alignment 32",
        "v",
    ),
    "offset out of range": (
        gguf_bytes([info("w", [4], F32, 0), info("v", [8], F32, 256)]),
        r"bytes \[\d+, \d+\) lie outside the data section",
        "v",
    ),
    "size out of range": (
        gguf_bytes([info("w", [65], F32, 0)]),
        "lie outside the data section",
        "w",
    ),
    "overlap": (
        gguf_bytes([info("w", [16], F32, 0), info("v", [32, 4], Q8_0, 32)]),
        "its bytes overlap those of tensor 'w'",
        "v",
    ),
    "q4_0 row": (
        gguf_bytes([info("w", [48, 2], Q4_0, 0)]),
        "q4_0 rows must be a multiple of 32 elements, not 48",
        "w",
    ),
    "q8_0 row": (gguf_bytes([info("w", [33], Q8_0, 0)]), "q8_0 rows must be a multiple", "w"),
    "truncated tensor info": (
        gguf_bytes([info("w" * 40, [4], F32, 0)])[: 24 + 8 + 40 + 4 + 4],
        "truncated: dimensions needs 8 bytes at offset 76, the file ends at 80",
        "w" * 40,
    ),
}


@pytest.mark.parametrize("case", sorted(CORRUPT))
def test_corrupt_file(tmp_path: Path, case: str) -> None:
    data, message, tensor = CORRUPT[case]
    path = tmp_path / "bad.gguf"
    path.write_bytes(data)
    with pytest.raises(FormatError, match=message) as caught:
        read_gguf(path)
    assert caught.value.path == str(path) and caught.value.tensor == tensor
    prefix = f"{path}: tensor {tensor!r}: " if tensor else f"{path}: "
    assert str(caught.value).startswith(prefix)


def test_the_builder_makes_valid_files(tmp_path: Path) -> None:
    """The corrupt cases differ from a good file only in their fault."""
    path = tmp_path / "ok.gguf"
    path.write_bytes(gguf_bytes([info("w", [16], F32, 0), info("v", [32, 2], Q4_0, 64)], [ALIGN]))
    records = read_gguf(path).tensors
    assert [(r.name, r.shape, r.encoding, r.nbytes) for r in records] == [
        ("w", (16,), "raw", 64), ("v", (2, 32), "q4_0", 36)
    ]  # fmt: skip
    assert records[1].offset - records[0].offset == 64
    reference = gguf.GGUFReader(path)
    assert [t.data_offset for t in reference.tensors] == [r.offset for r in records]


def cut_points(path: Path) -> dict[str, int]:
    """Where to cut a good file: inside the fixed header, a KV, the tensor infos, the padding
    before the data, and the data."""
    reader = gguf.GGUFReader(path)
    kv_field = reader.fields["t.str"]
    first_info = reader.tensors[0].field.offset
    last = reader.tensors[-1]
    return {
        "fixed header": 23,
        "kv key": kv_field.offset + 5,
        "kv value": kv_field.offset + 8 + len("t.str") + 4 + 9,
        "tensor name": first_info + 10,
        "tensor dims": first_info + 8 + len(reader.tensors[0].name) + 6,
        "data start": reader.data_offset,
        "data": last.data_offset + last.n_bytes - 1,
    }


@pytest.mark.parametrize(
    "where", ["fixed header", "kv key", "kv value", "tensor name", "tensor dims", "data start",
              "data"],
)  # fmt: skip
def test_truncated_file(good: Path, tmp_path: Path, where: str) -> None:
    at = cut_points(good)[where]
    path = tmp_path / "cut.gguf"
    path.write_bytes(good.read_bytes()[:at])
    with pytest.raises(FormatError) as caught:
        read_gguf(path)
    error: Any = caught.value
    assert error.path == str(path)
    if where == "fixed header":
        assert "shorter than the 24-byte GGUF header" in str(error)
    elif where in ("data start", "data"):  # the header is whole: a tensor runs past the end
        assert re.search("lie outside the data section", str(error)), error
        assert error.tensor is not None
    else:
        assert "truncated" in str(error) or "only" in str(error), error
        assert (error.tensor is not None) == (where == "tensor dims")  # named once it is read
