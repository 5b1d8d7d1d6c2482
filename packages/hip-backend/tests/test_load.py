"""`hip-backend load PATH` against hip-runtime's ModelRuntime, and its error paths."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import gguf
import numpy as np
import pytest
from safetensors.numpy import save_file

import hip_runtime
from hip_backend.cli import OK, UNAVAILABLE, USAGE, main

if TYPE_CHECKING:
    from conftest import Cli

TENSORS = {
    "embed.weight": np.arange(33 * 17, dtype=np.float32).reshape(33, 17),
    "layers.0.norm": np.ones(17, np.float16),
    "ids": np.arange(5, dtype=np.int32),
}


def test_load_reports_tensors_bytes_rate_and_memory(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    save_file(TENSORS, str(path))  # the reference writer
    done = cli("load", str(path), "--json")
    assert done.returncode == OK, done.stderr
    report = json.loads(done.stdout)
    assert (report["files"], report["tensors"]) == (1, len(TENSORS))
    data = sum(t.nbytes for t in TENSORS.values())
    assert report["file_bytes"] == data < path.stat().st_size  # tensor data, not the header
    assert report["device_bytes"] == data
    assert report["seconds"] > 0 and report["gb_per_s"] > 0
    assert report["memory"]["weights"] >= report["device_bytes"]


def test_load_text_shows_progress_and_summary(cli: Cli, tmp_path: Path) -> None:
    save_file(TENSORS, str(tmp_path / "model.safetensors"))
    done = cli("load", str(tmp_path))  # a directory holding the file
    assert done.returncode == OK, done.stderr
    assert f"{len(TENSORS)} tensors from 1 file(s)" in done.stdout and "GB/s" in done.stdout
    assert "weights:" in done.stdout
    assert "100%" in done.stderr  # the progress bar


def _gguf(path: Path) -> None:
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tensor("w", np.arange(12, dtype=np.float32).reshape(3, 4))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.mark.parametrize("layout", ["gguf folder", "index", "any name"])
def test_loads_what_open_checkpoint_opens(cli: Cli, tmp_path: Path, layout: str) -> None:
    # One rule of what a checkpoint is (hip_runtime.open_checkpoint's), here as in the library.
    if layout == "gguf folder":
        _gguf(tmp_path / "model.gguf")
        path, tensors = tmp_path, 1
    elif layout == "index":
        save_file(TENSORS, str(tmp_path / "part.safetensors"))
        path = tmp_path / "model.safetensors.index.json"
        path.write_text(json.dumps({"weight_map": dict.fromkeys(TENSORS, "part.safetensors")}))
        tensors = len(TENSORS)
    else:
        path, tensors = tmp_path / "weights.bin", len(TENSORS)
        save_file(TENSORS, str(path))
    assert hip_runtime.open_checkpoint(path).tensors  # the library takes it
    done = cli("load", str(path), "--json")
    assert done.returncode == OK, done.stderr
    assert json.loads(done.stdout)["tensors"] == tensors


def test_a_fifo_exits_2_without_blocking(cli: Cli, tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "model.safetensors")
    done = cli("load", str(tmp_path), timeout=60)
    assert done.returncode == USAGE and "FIFO" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("missing.safetensors", None, "no such file or directory"),
        ("notes.txt", b"hello", "too short for a safetensors header"),
        ("corrupt.safetensors", b"\xff" * 16, "cannot load"),
    ],
)
def test_bad_paths_exit_2_with_a_message(
    cli: Cli, tmp_path: Path, name: str, content: bytes | None, message: str
) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    done = cli("load", str(path))
    assert done.returncode == USAGE
    assert message in done.stderr and "Traceback" not in done.stderr


def test_empty_directory_exits_2(cli: Cli, tmp_path: Path) -> None:
    done = cli("load", str(tmp_path))
    assert done.returncode == USAGE and "holds no" in done.stderr


def test_without_model_runtime_exits_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    save_file(TENSORS, str(tmp_path / "model.safetensors"))
    # An install without ModelRuntime: the name is neither bound nor found by the package's
    # lazy __getattr__ (which would import it again on the next read).
    monkeypatch.delattr(hip_runtime, "ModelRuntime", raising=False)
    lazy = hip_runtime.__getattr__

    def without_runtime(name: str) -> object:
        if name == "ModelRuntime":
            raise AttributeError(name)
        return lazy(name)

    monkeypatch.setattr(hip_runtime, "__getattr__", without_runtime)
    monkeypatch.setenv("HIP_PLATFORM", "cpu")
    assert main(["load", str(tmp_path / "model.safetensors")]) == UNAVAILABLE
    assert "has no ModelRuntime" in capsys.readouterr().err
