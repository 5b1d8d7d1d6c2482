"""safetensors layouts: what the reader finds matches the file, sharded checkpoints, and a
corrupt-file suite in which every fault is a FormatError naming the file (and the tensor)."""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import safetensors.numpy

import hip_runtime
from hip_runtime import FormatError, open_checkpoint
from hip_runtime.loading.formats.gguf import read_gguf
from hip_runtime.loading.formats.safetensors import read_safetensors


def test_layout_matches_the_reference_writer(tmp_path: Path) -> None:
    rng = np.random.default_rng()
    tensors = {
        "b": rng.standard_normal((3, 5)).astype(np.float16),
        "a": rng.integers(0, 9, size=11, dtype=np.int32),
        "c": np.zeros(0, np.float32),
    }
    path = tmp_path / "ref.safetensors"
    safetensors.numpy.save_file(tensors, str(path), metadata={"format": "np"})
    checkpoint = open_checkpoint(path)
    assert checkpoint.format == "safetensors" and checkpoint.files == (str(path),)
    assert checkpoint.metadata == {"format": "np"}
    assert {r.name for r in checkpoint.tensors} == set(tensors)
    data = path.read_bytes()
    for record in checkpoint.tensors:
        array = tensors[record.name]
        assert record.shape == array.shape and record.dtype == array.dtype
        assert data[record.offset : record.offset + record.nbytes] == array.tobytes()
    offsets = [r.offset for r in checkpoint.tensors]
    assert offsets == sorted(offsets)  # file order


def test_our_writer_is_read_by_the_reference_reader(tmp_path: Path) -> None:
    tensors = {"x": np.arange(6, dtype=np.float32).reshape(2, 3), "y": np.ones(4, np.int16),
               "z": np.array([True, False]), "e": np.zeros((0, 3), np.float64)}  # fmt: skip
    path = tmp_path / "t.safetensors"
    size = hip_runtime.save_safetensors(path, tensors, {"who": "us"})
    assert size == path.stat().st_size
    loaded = safetensors.numpy.load_file(str(path))
    assert loaded.keys() == tensors.keys()
    for name, array in tensors.items():
        assert loaded[name].dtype == array.dtype
        np.testing.assert_array_equal(loaded[name], array)
    with safetensors.safe_open(str(path), "np") as f:
        assert f.metadata() == {"who": "us"}
    with pytest.raises(ValueError, match="no dtype for complex64"):
        hip_runtime.save_safetensors(path, {"c": np.ones(2, np.complex64)})


def test_every_dtype(
    tmp_path: Path, save_safetensors: Callable[..., Path], checkpoint_tensors: dict[str, np.ndarray]
) -> None:
    checkpoint = open_checkpoint(save_safetensors(tmp_path / "m.safetensors", checkpoint_tensors))
    for name, array in checkpoint_tensors.items():
        record = checkpoint[name]
        assert (record.shape, record.dtype, record.nbytes) == (
            array.shape,
            array.dtype,
            array.nbytes,
        )
    assert checkpoint.file_bytes == sum(a.nbytes for a in checkpoint_tensors.values())


def test_sharded_checkpoint_from_index_or_directory(
    tmp_path: Path, sharded_checkpoint: Callable[..., dict[str, np.ndarray]]
) -> None:
    tensors = sharded_checkpoint(tmp_path)
    for source in (tmp_path, tmp_path / "model.safetensors.index.json"):
        checkpoint = open_checkpoint(source)
        assert len(checkpoint.files) == 2
        assert [r.name for r in checkpoint.tensors] == ["a", "b", "c"]
        for record in checkpoint.tensors:
            assert Path(record.path).name.startswith("model-0000")
            assert record.shape == tensors[record.name].shape


# --- corrupt files ---------------------------------------------------------------------------


def _length(n: int) -> bytes:
    return n.to_bytes(8, "little")


TWO = {"w": np.ones((2, 4), np.float32), "v": np.ones(4, np.float32)}

#: Files whose header cannot be parsed: (the file's bytes, the error's words).
BAD_BYTES: dict[str, tuple[bytes, str]] = {
    "too short": (b"\x01\x02", "too short"),
    "header longer than file": (_length(10**6) + b"{}", "runs past"),
    "absurd header length": (_length(2**63) + b"{}", "runs past"),
    "not json": (_length(4) + b"{{{{", "not valid JSON"),
    "nested brackets": (_length(200000) + b"[" * 100000 + b"]" * 100000, "not valid JSON"),
}
#: Well-formed JSON that is not a safetensors header: (the header, the error's words).
BAD_HEADERS: dict[str, tuple[Any, str]] = {
    "not an object": ([1, 2], "not a JSON object"),
    "bad metadata": ({"__metadata__": [1]}, "__metadata__"),
    "empty list as metadata": ({"__metadata__": []}, "__metadata__"),
    "metadata not strings": ({"__metadata__": {"n": 3}}, "of strings"),
}
#: TWO's header with entry "w" changed: (what to set in it, the error's words, the tensor named).
BAD_ENTRIES: dict[str, tuple[dict[str, Any], str, str | None]] = {
    "dtype not a string": ({"dtype": ["F32"]}, "unknown dtype", "w"),
    "dimension past int64": ({"shape": [0, 2**63]}, "shape", "w"),
    "unknown dtype": ({"dtype": "F4"}, "unknown dtype", "w"),
    "shape is not a list": ({"shape": "2x4"}, "shape", "w"),
    "negative dimension": ({"shape": [-2, -4]}, "shape", "w"),
    "size mismatch": ({"shape": [2, 5]}, "needs 40 bytes", "w"),
    "65 dimensions": ({"shape": [1] * 65}, "shape has 65 dimensions; at most 64", "w"),
    "size past int64": ({"shape": [2**61]}, "overflows", "w"),  # 2**61 F32 items: 2**63 bytes
    # numpy's rule, stricter than the package's (which multiplies in order, reaching 0 first)
    "size past int64 after a zero": ({"shape": [0, 2**62, 2**62]}, "overflows", "w"),
    "offsets reversed": ({"data_offsets": [32, 0]}, "end before", "w"),
    "offsets past the end": ({"data_offsets": [64, 96]}, "outside the data section", "w"),
    "overlap": ({"data_offsets": [16, 48]}, "overlap", None),
}


def _write_bad(path: Path, case: str, save: Callable[..., Path]) -> tuple[str, str | None]:
    """Write the corrupt file of `case`; (the error's words, the tensor it must name)."""
    if case in BAD_BYTES:
        content, message = BAD_BYTES[case]
        path.write_bytes(content)
        return message, None
    if case in BAD_HEADERS:
        header, message = BAD_HEADERS[case]
        raw = json.dumps(header).encode()
        path.write_bytes(_length(len(raw)) + raw + bytes(64))
        return message, None
    if case == "entry not an object":
        save(path, TWO, header_override=lambda h: h.update(w=3))
        return "not an object", "w"
    entry, message, tensor = BAD_ENTRIES[case]
    save(path, TWO, header_override=lambda h: h["w"].update(entry))
    return message, tensor


@pytest.mark.parametrize(
    "case", [*BAD_BYTES, *BAD_HEADERS, *BAD_ENTRIES, "entry not an object"], ids=str
)
def test_corrupt_files_raise_format_errors(
    tmp_path: Path, save_safetensors: Callable[..., Path], case: str
) -> None:
    path = tmp_path / "bad.safetensors"
    message, tensor = _write_bad(path, case, save_safetensors)
    with pytest.raises(FormatError, match=message) as caught:
        open_checkpoint(path)
    assert caught.value.path == str(path) and str(path) in str(caught.value)
    if tensor is not None:
        assert caught.value.tensor == tensor and repr(tensor) in str(caught.value)


def test_truncated_data_is_out_of_range(
    tmp_path: Path, save_safetensors: Callable[..., Path]
) -> None:
    path = save_safetensors(tmp_path / "cut.safetensors", TWO)
    path.write_bytes(path.read_bytes()[:-5])
    with pytest.raises(FormatError, match="outside the data section") as caught:
        open_checkpoint(path)
    assert caught.value.tensor in TWO


@pytest.mark.parametrize(
    "weight_map, message",
    [
        (
            {
                "a": "model-00001-of-00002.safetensors",
                "b": "model-00002-of-00002.safetensors",
                "c": "model-00002-of-00002.safetensors",
                "d": "model-00002-of-00002.safetensors",
            },
            "missing from",
        ),
        (
            {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"},
            "not listed",
        ),
        ({"a": "model-00001-of-00002.safetensors", "b": "nowhere.safetensors"}, "not a file"),
        ({"a": "../model-00001-of-00002.safetensors"}, "not a file"),
    ],
    ids=["listed but missing", "present but unlisted", "missing shard", "shard outside"],
)
def test_inconsistent_index(
    tmp_path: Path,
    sharded_checkpoint: Callable[..., dict[str, np.ndarray]],
    weight_map: dict[str, str],
    message: str,
) -> None:
    sharded_checkpoint(tmp_path, weight_map)
    with pytest.raises(FormatError, match=message):
        open_checkpoint(tmp_path)


def test_bad_index_and_paths(tmp_path: Path, save_safetensors: Callable[..., Path]) -> None:
    (tmp_path / "model.safetensors.index.json").write_text("{not json")
    with pytest.raises(FormatError, match="not a JSON index"):
        open_checkpoint(tmp_path)
    (tmp_path / "model.safetensors.index.json").write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(FormatError, match="not a JSON index"):
        open_checkpoint(tmp_path)
    (tmp_path / "model.safetensors.index.json").write_text('{"weight_map": [1]}')
    with pytest.raises(FormatError, match="weight_map"):
        open_checkpoint(tmp_path)
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        open_checkpoint(tmp_path / "missing.safetensors")
    two = tmp_path / "two"
    two.mkdir()
    save_safetensors(two / "a.safetensors", TWO)
    save_safetensors(two / "b.safetensors", TWO)
    with pytest.raises(FormatError, match="2 checkpoint files"):
        open_checkpoint(two)
    (two / "b.safetensors").rename(two / "b.gguf")  # one of each is just as ambiguous
    with pytest.raises(FormatError, match=r"a\.safetensors, b\.gguf"):
        open_checkpoint(two)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="holds no"):
        open_checkpoint(empty)


# --- parity with the safetensors package ------------------------------------------------------
# Each header below is refused by the `safetensors` package itself (checked here too, so that
# every rule is the format's, not one of ours), and must be a FormatError from our reader.

_ENTRY = '"dtype": "F32", "shape": [2], "data_offsets": [0, 8]'


def _entry(extra: str = "") -> bytes:
    return ("{" + _ENTRY + extra + "}").encode()


#: name -> (header bytes, data bytes, the words of our error)
REFUSED: dict[str, tuple[bytes, bytes, str]] = {
    "UTF-16 header": (('{"a": {' + _ENTRY + "}}").encode("utf-16"), bytes(8), "not UTF-8"),
    "UTF-8 byte order mark": (b'\xef\xbb\xbf{"a": ' + _entry() + b"}", bytes(8), "not valid JSON"),
    "Latin-1 name": (('{"\xe9": {' + _ENTRY + "}}").encode("latin-1"), bytes(8), "not UTF-8"),
    "NaN": (b'{"a": ' + _entry(', "x": NaN') + b"}", bytes(8), "NaN"),
    "integer over 4300 digits": (
        b'{"a": {"dtype": "F32", "shape": [' + b"9" * 5000 + b'], "data_offsets": [0, 8]}}',
        bytes(8),
        "out of range",
    ),
    "integer past f64": (
        b'{"a": ' + _entry(', "x": ' + "1" * 310) + b"}",
        bytes(8),
        "out of range",
    ),
    "float past f64": (b'{"a": ' + _entry(', "x": -1e400') + b"}", bytes(8), "out of range"),
    "lone surrogate in a name": (b'{"\\udc00": ' + _entry() + b"}", bytes(8), "surrogate"),
    "lone surrogate in metadata": (
        b'{"__metadata__": {"k": "\\ud800"}, "a": ' + _entry() + b"}",
        bytes(8),
        "surrogate",
    ),
    "nested 128 deep": (
        b'{"a": ' + _entry(', "x": ' + "[" * 126 + "]" * 126) + b"}",
        bytes(8),
        "deep",
    ),
    "field twice in an entry": (
        b'{"a": {"shape": [1], ' + _ENTRY.encode() + b"}}",
        bytes(8),
        "'shape' appears twice",
    ),
    "__metadata__ twice": (
        b'{"__metadata__": {}, "__metadata__": {}, "a": ' + _entry() + b"}",
        bytes(8),
        "__metadata__ appears twice",
    ),
    "-0 in a shape": (
        b'{"a": {"dtype": "F32", "shape": [-0], "data_offsets": [0, 0]}}',
        b"",
        "shape",
    ),
    "a product of dimensions past u64 before a zero": (
        b'{"a": {"dtype": "F32", "shape": [%d, %d, 0], "data_offsets": [0, 0]}}' % (2**62, 2**62),
        b"",
        "overflows",
    ),
    "80,000 dimensions of 2**62": (  # refused at once: its product would take minutes
        b'{"a": {"dtype": "F32", "shape": [%s], "data_offsets": [0, 0]}}'
        % b", ".join([b"%d" % 2**62] * 80_000),
        b"",
        "shape has 80000 dimensions; at most 64",
    ),
    "bytes after the last tensor": (b'{"a": ' + _entry() + b"}", bytes(12), "belong to no tensor"),
    "bytes before the first tensor": (
        b'{"a": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}',
        bytes(12),
        "belong to no tensor",
    ),
    "a gap between tensors": (
        b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, '
        b'"b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}}',
        bytes(12),
        "belong to no tensor",
    ),
    "data and no tensor": (b"{}", bytes(2), "belong to no tensor"),
    "a name twice, the last entry leaving a gap": (
        b'{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, '
        b'"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}',
        bytes(8),
        "belong to no tensor",
    ),
    "overlapping tensors": (
        b'{"a": ' + _entry() + b', "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}',
        bytes(12),
        "overlap",
    ),
    "the same bytes twice": (
        b'{"a": ' + _entry() + b', "b": ' + _entry() + b"}",
        bytes(8),
        "overlap",
    ),
}

#: Odd headers the package accepts, and so do we: name -> (header bytes, data bytes).
ACCEPTED: dict[str, tuple[bytes, bytes]] = {
    "a name twice, same entry (the last wins)": (
        b'{"a": ' + _entry() + b', "a": ' + _entry() + b"}", bytes(8)
    ),
    "__metadata__ null": (b'{"__metadata__": null, "a": ' + _entry() + b"}", bytes(8)),
    "a key twice in __metadata__": (b'{"__metadata__": {"k": "1", "k": "2"}}', b""),
    "unknown field, twice": (b'{"a": ' + _entry(', "x": 1, "x": [{}]') + b"}", bytes(8)),
    "whitespace around and tabs after": (b' \n{"a" : ' + _entry() + b"}\t\t", bytes(8)),
    "surrogate pair, NUL and escapes in a name": (
        b'{"\\ud83d\\ude00\\u0000\\u0061": ' + _entry() + b"}", bytes(8)
    ),
    "309-digit integer": (b'{"a": ' + _entry(', "x": ' + "1" * 309) + b"}", bytes(8)),
    "nested 127 deep": (b'{"a": ' + _entry(', "x": ' + "[" * 125 + "]" * 125) + b"}", bytes(8)),
    "no tensors": (b"{}", b""),
}  # fmt: skip


def _write_header(path: Path, header: bytes, data: bytes) -> Path:
    path.write_bytes(_length(len(header)) + header + data)
    return path


@pytest.mark.parametrize("case", sorted(REFUSED), ids=str)
def test_what_the_safetensors_package_refuses_we_refuse(tmp_path: Path, case: str) -> None:
    header, data, message = REFUSED[case]
    path = _write_header(tmp_path / "bad.safetensors", header, data)
    with pytest.raises(safetensors.SafetensorError):
        safetensors.numpy.load_file(str(path))
    with pytest.raises(FormatError, match=re.escape(message)) as caught:
        open_checkpoint(path)
    assert caught.value.path == str(path) and str(path) in str(caught.value)


@pytest.mark.parametrize("case", sorted(ACCEPTED), ids=str)
def test_what_the_safetensors_package_accepts_we_read_alike(tmp_path: Path, case: str) -> None:
    path = _write_header(tmp_path / "odd.safetensors", *ACCEPTED[case])
    theirs = safetensors.numpy.load_file(str(path))
    checkpoint = open_checkpoint(path)
    data = path.read_bytes()
    assert {r.name for r in checkpoint.tensors} == set(theirs)
    for r in checkpoint.tensors:
        assert data[r.offset : r.offset + r.nbytes] == theirs[r.name].tobytes()


# --- files that are not regular files, and files that change -----------------------------------


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "model.safetensors"
    os.mkfifo(fifo)
    for source in (fifo, tmp_path):  # named, or the one checkpoint file of its folder
        errors: list[BaseException] = []
        reader = threading.Thread(target=_catch(open_checkpoint, source, errors), daemon=True)
        reader.start()
        reader.join(10)
        if reader.is_alive():  # blocked in open(): a writer's open releases it
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            pytest.fail(f"open_checkpoint({source}) blocked on a FIFO")
        assert isinstance(errors[0], FormatError) and "FIFO" in str(errors[0])
        assert errors[0].path == str(fifo)


def _catch(
    function: Callable[..., object], argument: object, errors: list[BaseException]
) -> Callable[[], None]:
    def run() -> None:
        try:
            function(argument)
        except BaseException as error:  # handed to the test
            errors.append(error)

    return run


def test_directories_and_devices_named_as_checkpoints_are_format_errors(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    (folder / "model.safetensors").mkdir(parents=True)  # the one "checkpoint file" of its folder
    with pytest.raises(FormatError, match="is a directory") as caught:
        open_checkpoint(folder)
    assert caught.value.path == str(folder / "model.safetensors")
    for read in (read_safetensors, read_gguf):
        with pytest.raises(FormatError, match="is a directory"):
            read(folder / "model.safetensors")
    with pytest.raises(FormatError, match="character device") as caught:
        open_checkpoint("/dev/null")
    assert caught.value.path == "/dev/null"


def test_index_with_an_integer_over_4300_digits(tmp_path: Path) -> None:
    (tmp_path / "model.safetensors.index.json").write_text(
        '{"weight_map": {}, "n": ' + "9" * 5000 + "}"
    )
    with pytest.raises(FormatError, match="not a JSON index"):
        open_checkpoint(tmp_path)
