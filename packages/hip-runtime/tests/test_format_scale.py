"""Hostile but valid checkpoints: headers of many tensors or huge metadata arrays are read in
memory proportional to what the file holds, without per-item Python objects where a numpy array
does. Asserted on memory (tracemalloc) and on what is kept, never on wall time."""

from __future__ import annotations

import struct
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytest

from hip_runtime.loading.formats import strict_json
from hip_runtime.loading.formats.gguf import read_gguf
from hip_runtime.loading.formats.safetensors import read_safetensors, save_safetensors

T = TypeVar("T")


def _traced_peak(function: Callable[..., T], *args: Any) -> tuple[T, int]:
    """`function(*args)` and the peak bytes Python allocated while it ran."""
    tracemalloc.start()
    try:
        result = function(*args)
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _parse_header(path: Path) -> object:
    with open(path, "rb") as f:
        raw = f.read(int.from_bytes(f.read(8), "little"))
    return strict_json.loads(raw)


def test_many_tensors_cost_no_more_memory_than_their_json(tmp_path: Path) -> None:
    # The records replace the parsed header as they are made (and carry no __dict__): reading
    # peaks where parsing the JSON alone does. Records made after the whole tree, with a dict
    # each, took 20% more.
    path = tmp_path / "many.safetensors"
    save_safetensors(path, {f"t{i}": np.zeros(1, np.float32) for i in range(20_000)})
    _, parse_peak = _traced_peak(_parse_header, path)
    checkpoint, read_peak = _traced_peak(read_safetensors, path)
    assert len(checkpoint.tensors) == 20_000
    assert not hasattr(checkpoint.tensors[0], "__dict__")
    assert read_peak < 1.08 * parse_peak, (read_peak, parse_peak)


def _gguf_with_array(path: Path, values: np.ndarray, kind: int) -> None:
    """A GGUF file of one tensor and one metadata array `values` (GGUF value type `kind`)."""
    key = b"big"
    kv = struct.pack("<Q", len(key)) + key + struct.pack("<IIQ", 9, kind, len(values))
    info = struct.pack("<Q", 1) + b"w" + struct.pack("<IqIQ", 1, 8, 0, 0)  # f32 [8] at 0
    header = b"GGUF" + struct.pack("<IQQ", 3, 1, 1) + kv + values.tobytes() + info
    path.write_bytes(header + b"\0" * (-len(header) % 32) + bytes(32))


@pytest.mark.parametrize(
    ("kind", "dtype"), [(5, np.int32), (6, np.float32), (0, np.uint8), (12, np.float64)]
)
def test_a_big_metadata_array_is_one_numpy_array(tmp_path: Path, kind: int, dtype: type) -> None:
    # 2M numbers as a Python list took ~40 bytes each; as an array read straight from the file
    # they take their bytes there, once.
    values = np.arange(2_000_000).astype(dtype)
    path = tmp_path / "big.gguf"
    _gguf_with_array(path, values, kind)
    checkpoint, peak = _traced_peak(read_gguf, path)
    big = checkpoint.metadata["big"]
    assert isinstance(big, np.ndarray) and big.dtype == dtype and not big.flags.writeable
    np.testing.assert_array_equal(big, values)
    assert peak < 1.5 * values.nbytes + 4_000_000, (peak, values.nbytes)
    assert checkpoint.tensors[0].offset % 32 == 0  # read past it


@pytest.mark.parametrize("count", [0, 1, 131_071, 262_144, 262_145])  # around the 1 MiB chunk
def test_metadata_arrays_across_the_read_buffer(tmp_path: Path, count: int) -> None:
    values = np.arange(count, dtype=np.uint32) * np.uint32(2654435761)  # wraps: all bits vary
    path = tmp_path / "edge.gguf"
    _gguf_with_array(path, values, 4)
    checkpoint = read_gguf(path)
    np.testing.assert_array_equal(checkpoint.metadata["big"], values)
    assert [r.shape for r in checkpoint.tensors] == [(8,)]


def test_a_bool_array_is_a_bool_array(tmp_path: Path) -> None:
    path = tmp_path / "bools.gguf"
    _gguf_with_array(path, np.array([0, 1, 2, 0], np.uint8), 7)  # any non-zero byte is true
    big = read_gguf(path).metadata["big"]
    assert isinstance(big, np.ndarray) and not big.flags.writeable
    assert big.tolist() == [False, True, True, False]
