"""safetensors layouts: what the reader finds matches the file, sharded checkpoints, and a
corrupt-file suite in which every fault is a FormatError naming the file (and the tensor)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import safetensors.numpy

import hip_runtime
from hip_runtime import FormatError, open_checkpoint


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


def write_shards(
    folder: Path, save: Callable[..., Path], weight_map: dict[str, str] | None = None
) -> dict[str, np.ndarray]:
    rng = np.random.default_rng()
    shards = {
        "model-00001-of-00002.safetensors": {"a": rng.standard_normal((4, 9)).astype(np.float32)},
        "model-00002-of-00002.safetensors": {
            "b": rng.standard_normal(7).astype(np.float16),
            "c": np.arange(3, dtype=np.int64),
        },
    }
    for file, tensors in shards.items():
        save(folder / file, tensors)
    if weight_map is None:
        weight_map = {name: file for file, tensors in shards.items() for name in tensors}
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map})
    )
    return {name: array for tensors in shards.values() for name, array in tensors.items()}


def test_sharded_checkpoint_from_index_or_directory(
    tmp_path: Path, save_safetensors: Callable[..., Path]
) -> None:
    tensors = write_shards(tmp_path, save_safetensors)
    for source in (tmp_path, tmp_path / "model.safetensors.index.json"):
        checkpoint = open_checkpoint(source)
        assert len(checkpoint.files) == 2
        assert [r.name for r in checkpoint.tensors] == ["a", "b", "c"]
        for record in checkpoint.tensors:
            assert Path(record.path).name.startswith("model-0000")
            assert record.shape == tensors[record.name].shape


# --- corrupt files ---------------------------------------------------------------------------


def _header(path: Path, header: dict[str, Any]) -> Path:
    raw = json.dumps(header).encode()
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + bytes(64))
    return path


def _override(**entry: Any) -> Callable[[dict[str, Any]], None]:
    return lambda header: header["w"].update(entry)


TWO = {"w": np.ones((2, 4), np.float32), "v": np.ones(4, np.float32)}

CORRUPT: dict[str, tuple[Callable[[Path, Callable[..., Path]], Path], str, str | None]] = {
    "too short": (lambda p, s: (p.write_bytes(b"\x01\x02"), p)[1], "too short", None),
    "header longer than file": (
        lambda p, s: (p.write_bytes((10**6).to_bytes(8, "little") + b"{}"), p)[1],
        "runs past",
        None,
    ),
    "absurd header length": (
        lambda p, s: (p.write_bytes((2**63).to_bytes(8, "little") + b"{}"), p)[1],
        "runs past",
        None,
    ),
    "not json": (
        lambda p, s: (p.write_bytes((4).to_bytes(8, "little") + b"{{{{"), p)[1],
        "not valid JSON",
        None,
    ),
    "not an object": (lambda p, s: _header(p, [1, 2]), "not a JSON object", None),  # type: ignore[arg-type]
    "bad metadata": (lambda p, s: _header(p, {"__metadata__": [1]}), "__metadata__", None),
    "empty list as metadata": (
        lambda p, s: _header(p, {"__metadata__": []}),
        "__metadata__",
        None,
    ),
    "metadata not strings": (
        lambda p, s: _header(p, {"__metadata__": {"n": 3}}),
        "of strings",
        None,
    ),
    "nested brackets": (
        lambda p, s: (
            p.write_bytes((200000).to_bytes(8, "little") + b"[" * 100000 + b"]" * 100000),
            p,
        )[1],
        "not valid JSON",
        None,
    ),
    "dtype not a string": (
        lambda p, s: s(p, TWO, header_override=_override(dtype=["F32"])),
        "unknown dtype",
        "w",
    ),
    "dimension past int64": (
        lambda p, s: s(p, TWO, header_override=_override(shape=[0, 2**63])),
        "shape",
        "w",
    ),
    "unknown dtype": (
        lambda p, s: s(p, TWO, header_override=_override(dtype="F4")),
        "unknown dtype",
        "w",
    ),
    "shape is not a list": (
        lambda p, s: s(p, TWO, header_override=_override(shape="2x4")),
        "shape",
        "w",
    ),
    "negative dimension": (
        lambda p, s: s(p, TWO, header_override=_override(shape=[-2, -4])),
        "shape",
        "w",
    ),
    "size mismatch": (
        lambda p, s: s(p, TWO, header_override=_override(shape=[2, 5])),
        "needs 40 bytes",
        "w",
    ),
    "offsets reversed": (
        lambda p, s: s(p, TWO, header_override=_override(data_offsets=[32, 0])),
        "end before",
        "w",
    ),
    "offsets past the end": (
        lambda p, s: s(p, TWO, header_override=_override(data_offsets=[64, 96])),
        "outside the data section",
        "w",
    ),
    "overlap": (
        lambda p, s: s(p, TWO, header_override=_override(data_offsets=[16, 48])),
        "overlap",
        None,
    ),
    "entry not an object": (
        lambda p, s: s(p, TWO, header_override=lambda h: h.update(w=3)),
        "not an object",
        "w",
    ),
}


@pytest.mark.parametrize("case", CORRUPT, ids=str)
def test_corrupt_files_raise_format_errors(
    tmp_path: Path, save_safetensors: Callable[..., Path], case: str
) -> None:
    make, message, tensor = CORRUPT[case]
    path = make(tmp_path / "bad.safetensors", save_safetensors)
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
    tmp_path: Path, save_safetensors: Callable[..., Path], weight_map: dict[str, str], message: str
) -> None:
    write_shards(tmp_path, save_safetensors, weight_map)
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
